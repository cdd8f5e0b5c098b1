"""Every subcommand that takes --model, found from the CLI's own parser, and the least argv that runs each on a tiny
model of any family (issue 46: "every subcommand that takes --model runs on both tiny models").

    names = commands_taking_model()                  # from build_parser(): a new subcommand is picked up at once
    extra = forms("explain")                         # [("--method", "ig"), ...]: one run per method
    inputs = make_inputs(folder, model_dir, run_dir) # the files the argv refer to
    argv = argv_for("neuron", inputs)                # ["neuron", "--model", model_dir, "--text", ...]

A command whose --model is a classification run (explain, ablate, bias, ...) gets `run_dir`: a run fine-tuned from
the tiny model first (`finetune_argv`). Data the commands would read from the shared folder (MRPC pairs,
SemEval-14 aspects) and the reproduce study are replaced by `stub_data(monkeypatch)`: the family's model is under
test here, not the data loaders. Nothing here names a family.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

SENTENCES = ["the cat sat on the mat .", "a dog ran in the park .", "the man sat on the mat .",
             "she ran to the house .", "he sat in the park .", "the woman ran to the tree ."]
TREEBANK = "".join(f"1\t{det}\t{det}\tDET\tDT\t_\t2\tdet\t_\t_\n2\t{noun}\t{noun}\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
                   f"3\t{verb}\t{verb}\tVERB\tVBD\t_\t0\troot\t_\t_\n4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n"
                   for det, noun, verb in (("the", "cat", "sat"), ("a", "dog", "ran"), ("the", "girl", "sat"),
                                           ("a", "boy", "ran"), ("the", "man", "sat"), ("a", "woman", "ran")))
MASKED = "the cat sat on the [MASK] ."

# {m} the tiny model (with its MLM head), {run} a classification run fine-tuned from it, {c} a file of sentences,
# {t} a CoNLL-U treebank, {task} a labelled JSON Lines file, {labels} hand-labelled attention maps, {out} a folder
# for what a command writes, {sae} a sparse autoencoder trained by sae-train first.
ARGV = {
    "finetune": ["--model", "{m}", "--task", "{task}", "--run", "every-command-run", "--epochs", "1",
                 "--max-length", "16", "--threads", "1", "--timelapse", "3", "--keep-checkpoints", "1",
                 "--timelapse-corpus", "{c}"],
    "contrastive": ["--model", "{m}", "--task", "{task}", "--run", "every-command-simcse", "--train-limit", "16",
                    "--eval-limit", "8", "--max-length", "16", "--threads", "1"],
    "anisotropy": ["--model", "{m}", "--corpus", "{c}", "--pairs", "10", "--min-contexts", "2"],
    "compare": ["--model", "{m}", "--model", "{run}", "--corpus", "{c}"],
    "probe": ["--model", "{m}", "--corpus", "{t}", "--rank", "2", "--epochs", "1", "--no-cache"],
    "probe-labels": ["--model", "{m}", "--task", "upos", "--corpus", "{t}", "--eval-corpus", "{t}", "--control",
                     "--mdl"],
    "erase": ["--model", "{m}", "--task", "upos", "--corpus", "{t}", "--eval-corpus", "{t}", "--layer", "1",
              "--out", "every-command-eraser"],
    "pca": ["--model", "{m}", "--text", "the cat sat .", "--text", "a dog ran ."],
    "fill-mask": ["--model", "{m}", "--text", MASKED, "--top-k", "2"],
    "fit-mlm-head": ["--model", "{run}", "--corpus", "builtin", "--limit", "60", "--steps", "2", "--out",
                     "every-command-head"],
    "neuron": ["--model", "{m}", "--text", "the cat sat .", "--layer", "1", "--head", "0", "--query", "1"],
    "attention-norms": ["--model", "{m}", "--text", "the cat sat ."],
    "model-view": ["--model", "{m}", "--text", "the cat sat .", "--pixels", "4"],
    "head-view": ["--model", "{m}", "--text", "the cat sat .", "--text-b", "a dog ran .", "--pair-filter", "a-b"],
    "attention-norm-shares": ["--model", "{m}", "--corpus", "{c}"],
    "heads": ["--model", "{m}", "--corpus", "{c}"],
    "attention-change": ["--model", "{m}", "--model", "{run}", "--corpus", "{c}"],
    "syntax-heads": ["--model", "{m}", "--corpus", "{t}"],
    "pair-attention": ["--model", "{m}", "--corpus", "mrpc"],
    "head-features": ["--model", "{m}", "--corpus", "{t}"],
    "cls-attention": ["--model", "{m}", "--model", "{run}", "--corpus", "{c}"],
    "aspect-heads": ["--model", "{m}"],
    "head-map": ["--model", "{m}", "--corpus", "{c}"],
    "pattern-shares": ["--model", "{m}", "--corpus", "{c}", "--labels", "{labels}"],
    "explain": ["--model", "{run}", "--text", "the cat sat ."],  # every method (the default)
    "explain-faithfulness": ["--model", "{run}", "--corpus", "{c}", "--steps", "2"],
    "ablate": ["--model", "{run}", "--limit", "8"],
    "project": ["--model", "{run}", "--corpus", "{c}"],
    "neighbours": ["--model", "{m}", "--text", "the cat sat .", "--word", "cat", "--corpus", "{c}", "--k", "2"],
    "neurons": ["--model", "{m}", "--layer", "1", "--corpus", "{c}", "--top", "3", "--neurons", "2", "--text",
                "the cat sat ."],
    "neurons-diff": ["--model", "{m}", "--model", "{run}", "--layer", "2", "--corpus", "{c}", "--top", "3"],
    "bias": ["--corpus", "{c}", "--model", "{run}"],
    "bias-heads": ["--model", "{run}", "--corpus", "{c}", "--top-k", "2"],
    "patch": ["--model", "{m}", "--clean", "the man sat on the [MASK] .", "--corrupt", "the woman sat on the [MASK] .",
              "--target", "mat", "--over", "heads"],
    "reproduce": ["fake", "--model", "{m}", "--limit", "2"],
    "lens": ["--model", "{m}", "--text", "the cat sat .", "--top-k", "2"],
    "fit-tuned-lens": ["--model", "{m}", "--corpus", "{c}", "--steps", "2", "--out", "every-command-lens"],
    "sae-train": ["--model", "{m}", "--corpus", "{c}", "--layer", "1", "--features", "16", "--k", "2", "--out", "{sae}",
                  "--steps", "3"],
    "sae-features": ["--model", "{m}", "--sae", "{sae}", "--text", "the cat sat ."],
    "encode": ["--model", "{m}", "--text", "the cat sat .", "--out", "{out}/encoded.npz"],
}
# Commands that read what another one made: run that one first, in the same cache.
NEEDS = {"sae-features": "sae-train"}


def commands_taking_model() -> list[str]:
    """The subcommands whose parser has a --model option, in the parser's order."""
    from core.__main__ import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [name for name, sub in action.choices.items() if "--model" in sub._option_string_actions]


def make_inputs(folder: Path, model_dir: Path | str, run_dir: Path | str | None = None) -> dict[str, str]:
    """The files ARGV's placeholders name, written into `folder`; {run} is `run_dir` (a finished run's folder)."""
    from core.analyses.pattern_labels import MapLabel, downsample, write_labels

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "sentences.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    treebank = folder / "tiny.conllu"
    treebank.write_text(TREEBANK)
    rng = random.Random(1)
    task = folder / "words.jsonl"
    filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
    task.write_text("".join(json.dumps({"text": " ".join(rng.sample(filler, 4) + [label]), "label": label}) + "\n"
                            for label in ["cat", "dog"] * 30))
    labels = folder / "labels.json"  # one hand label per type: pattern-shares trains on them
    write_labels(labels, [MapLabel("m", p, None, 0, 0, p, tuple(downsample(a)))
                          for p, a in (("vertical", [[1, 0], [1, 0]]), ("diagonal", [[1, 0], [0, 1]]))])
    out = folder / "out"
    out.mkdir(exist_ok=True)
    return {"m": str(model_dir), "run": str(run_dir or ""), "c": str(corpus), "t": str(treebank), "task": str(task),
            "labels": str(labels), "out": str(out), "sae": "every-command-sae"}


def stub_data(monkeypatch) -> None:
    """MRPC's pairs, SemEval-14's aspects and the reproduce study without the shared data folder."""
    from core.analyses import aspect_heads, heads
    from core.analyses.aspect_heads import build_pairs
    from tests import fake_study

    pairs = [(SENTENCES[0], SENTENCES[2]), (SENTENCES[1], SENTENCES[3]), (SENTENCES[4], SENTENCES[5]),
             (SENTENCES[0], SENTENCES[0])]
    monkeypatch.setattr(heads, "mrpc_pairs", lambda spec, seed, limit: (
        pairs, ["equivalent", "not equivalent", "not equivalent", "equivalent"], spec))
    rows = [{"text": "the cat sat on the mat .", "aspect_terms": [{"term": "mat", "start": 19, "end": 22}],
             "aspect_categories": [{"category": "ambience", "polarity": "positive"}]}]
    monkeypatch.setattr(aspect_heads, "semeval_pairs", lambda split, limit: build_pairs(rows))
    fake_study.install(monkeypatch)


def forms(name: str) -> list[tuple[str, ...]]:
    """The extra arguments of each form `name` is run in: () alone, or one form per choice of its --method (every
    explain method, exact and attribution patching), read from the parser."""
    from core.__main__ import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    method = action.choices[name]._option_string_actions.get("--method")
    # a declared setting's choices are checked by its type and listed in its metavar, "{a,b,c}"
    choices = (method.choices or (method.metavar or "").strip("{}").split(",")) if method is not None else []
    return [("--method", str(choice)) for choice in choices if choice] or [()]


def argv_for(name: str, inputs: dict[str, str], json_out: bool = True) -> list[str]:
    """The least argv that runs `name` on inputs' model (KeyError: a subcommand ARGV does not know yet)."""
    template = ARGV[name]
    argv = [name, *(re.sub(r"\{(\w+)\}", lambda m: inputs[m[1]], arg) for arg in template)]
    return argv + (["--json", "--quiet"] if json_out and name != "encode" else [])


def finetune_argv(inputs: dict[str, str], run: str) -> list[str]:
    """finetune's argv with the run named `run` (the classifier the run-reading commands take)."""
    argv = argv_for("finetune", inputs)
    argv[argv.index("every-command-run")] = run
    return argv
