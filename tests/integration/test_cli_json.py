"""One CLI dialect (issue 38): every subcommand with --json, found from the parser itself, also takes --quiet, and
run on a tiny random model and a tiny corpus with `--json --quiet` prints exactly one JSON object on stdout and no
progress on stderr. A new subcommand with --json fails test_every_json_subcommand_is_run until it is added below."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from core.__main__ import build_parser, main
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

SENTENCES = ["the cat sat on the mat .", "a dog ran in the park .", "the man sat on the mat .",
             "she ran to the house .", "he sat in the park .", "the woman ran to the tree ."]
TREEBANK = "".join(f"1\t{det}\t{det}\tDET\tDT\t_\t2\tdet\t_\t_\n2\t{noun}\t{noun}\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
                   f"3\t{verb}\t{verb}\tVERB\tVBD\t_\t0\troot\t_\t_\n4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n"
                   for det, noun, verb in (("the", "cat", "sat"), ("a", "dog", "ran"), ("the", "girl", "sat"),
                                           ("a", "boy", "ran"), ("the", "man", "sat"), ("a", "woman", "ran")))
# Progress as core.commands.stderr_progress, anisotropy, compare / probe and finetune draw it: "3/10"; not
# transformers' own tqdm bars ("Loading weights: 100%|██| 39/39"), which are not ours to silence.
PROGRESS = re.compile(r"\b\d+/\d+\b")


def _our_progress(err: str) -> list[str]:
    return [part for part in re.split(r"[\r\n]", err) if PROGRESS.search(part) and "%|" not in part
            and not part.startswith(("warning:", "note:"))]

# {m} tiny BERT, {m2} a second one, {mlm} a tiny masked LM, {run} a classification run fine-tuned first, {c} a
# file of sentences, {t} a CoNLL-U treebank, {task} a labelled JSON Lines file.
COMMANDS = {
    "finetune": ["--model", "{m}", "--task", "{task}", "--run", "walk-run", "--epochs", "1", "--max-length", "16",
                 "--threads", "1"],
    "contrastive": ["--model", "{m}", "--task", "{task}", "--run", "walk-simcse", "--train-limit", "16",
                    "--eval-limit", "8", "--max-length", "16", "--threads", "1"],
    "runs": [],
    "views": [],
    "models": [],
    "anisotropy": ["--model", "{m}", "--corpus", "{c}", "--pairs", "10", "--min-contexts", "2"],
    "compare": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "probe": ["--model", "{m}", "--corpus", "{t}", "--rank", "2", "--epochs", "1", "--no-cache"],
    "pca": ["--model", "{m}", "--text", "the cat sat .", "--text", "a dog ran ."],
    "fill-mask": ["--model", "{mlm}", "--text", "the [MASK] sat .", "--top-k", "2"],
    "fit-mlm-head": ["--model", "{m}", "--corpus", "builtin", "--limit", "60", "--steps", "2", "--out", "walk-head"],
    "neuron": ["--model", "{m}", "--text", "the cat sat .", "--layer", "1", "--head", "0", "--query", "1"],
    "attention-norms": ["--model", "{m}", "--text", "the cat sat ."],
    "model-view": ["--model", "{m}", "--text", "the cat sat .", "--pixels", "4"],
    "head-view": ["--model", "{m}", "--text", "the cat sat .", "--text-b", "a dog ran .", "--pair-filter", "a-b"],
    "attention-norm-shares": ["--model", "{m}", "--corpus", "{c}"],
    "heads": ["--model", "{m}", "--corpus", "{c}"],
    "attention-change": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "syntax-heads": ["--model", "{m}", "--corpus", "{t}"],
    "pair-attention": ["--model", "{m}", "--corpus", "mrpc"],
    "head-features": ["--model", "{m}", "--corpus", "{t}"],
    "cls-attention": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "aspect-heads": ["--model", "{m}"],
    "head-map": ["--model", "{m}", "--corpus", "{c}"],
    "pattern-shares": ["--model", "{m}", "--corpus", "{c}", "--labels", "{labels}"],
    "explain": ["--model", "{run}", "--text", "the cat sat .", "--method", "attention"],
    "explain-faithfulness": ["--model", "{run}", "--corpus", "{c}", "--methods", "attention", "--steps", "2"],
    "ablate": ["--model", "{run}", "--limit", "8", "--no-layers"],
    "project": ["--model", "{run}", "--corpus", "{c}"],
    "neighbours": ["--model", "{m}", "--text", "the cat sat .", "--word", "cat", "--corpus", "{c}", "--k", "2"],
    "neurons": ["--model", "{m}", "--layer", "1", "--corpus", "{c}", "--top", "3", "--neurons", "2", "--text",
                "the cat sat ."],
    "neurons-diff": ["--model", "{m}", "--model", "{m2}", "--layer", "2", "--corpus", "{c}", "--top", "3"],
    "bias": ["--corpus", "{c}", "--model", "{run}"],
    "bias-heads": ["--model", "{run}", "--corpus", "{c}", "--top-k", "2"],
    "patch": ["--model", "{mlm}", "--clean", "the man sat on the [MASK] .", "--corrupt", "the woman sat on the [MASK] .",
              "--target", "mat", "--over", "heads"],
    "reproduce": ["fake", "--limit", "2"],
    "lens": ["--model", "{mlm}", "--text", "the cat sat .", "--top-k", "2"],
    "fit-tuned-lens": ["--model", "{mlm}", "--corpus", "{c}", "--steps", "2", "--out", "walk-lens"],
    "sae-train": ["--model", "{m}", "--corpus", "{c}", "--layer", "1", "--features", "16", "--k", "2", "--out", "walk-sae",
                  "--steps", "3"],
    "sae-features": ["--sae", "walk-sae", "--text", "the cat sat ."],
}
# Second forms of a subcommand whose JSON comes from another branch of its code.
VARIANTS = [("finetune", ["--model", "{m}", "--task", "{task}", "--run", "walk-queued", "--epochs", "1", "--threads", "1",
                          "--background"]),
            ("reproduce", ["--list"]),
            ("reproduce", ["fake", "--limit", "2", "--seeds", "0,1"]),
            ("cls-attention", ["--by", "feature", "--model", "{m}", "--corpus", "{t}"])]


def _json_subcommands() -> set[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, sub in action.choices.items() if "--json" in sub._option_string_actions}


def test_every_json_subcommand_takes_quiet_and_is_run():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    without_quiet = [name for name, sub in action.choices.items()
                     if "--json" in sub._option_string_actions and "--quiet" not in sub._option_string_actions]
    assert without_quiet == []
    assert _json_subcommands() == set(COMMANDS)


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    import random

    from core.analyses import heads
    from core.analyses import aspect_heads
    from core.analyses.aspect_heads import build_pairs
    from tests import fake_study

    corpus = tmp_path / "sentences.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    treebank = tmp_path / "tiny.conllu"
    treebank.write_text(TREEBANK)
    rng = random.Random(1)
    task = tmp_path / "words.jsonl"
    filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
    task.write_text("".join(json.dumps({"text": " ".join(rng.sample(filler, 4) + [label]), "label": label}) + "\n"
                            for label in ["cat", "dog"] * 30))
    # The real data (MRPC, SemEval-14) stays out: the JSON contract is under test, not the data loaders.
    pairs = [(SENTENCES[0], SENTENCES[2]), (SENTENCES[1], SENTENCES[3]), (SENTENCES[4], SENTENCES[5]),
             (SENTENCES[0], SENTENCES[0])]
    monkeypatch.setattr(heads, "mrpc_pairs", lambda spec, seed, limit: (
        pairs, ["equivalent", "not equivalent", "not equivalent", "equivalent"], spec))
    rows = [{"text": "the cat sat on the mat .", "aspect_terms": [{"term": "mat", "start": 19, "end": 22}],
             "aspect_categories": [{"category": "ambience", "polarity": "positive"}]}]
    # core.analyses.head_studies.study_inputs reads the pairs for the CLI and core.lens alike
    monkeypatch.setattr(aspect_heads, "semeval_pairs", lambda split, limit: build_pairs(rows))
    fake_study.install(monkeypatch)
    from core.analyses.pattern_labels import MapLabel, downsample, write_labels

    labels = tmp_path / "labels.json"  # one hand label per type: pattern-shares trains on them
    write_labels(labels, [MapLabel("m", p, None, 0, 0, p, tuple(downsample(a)))
                          for p, a in (("vertical", [[1, 0], [1, 0]]), ("diagonal", [[1, 0], [0, 1]]))])
    return {"labels": str(labels), "m": str(make_tiny_bert(tmp_path / "m")), "m2": str(make_tiny_bert(tmp_path / "m2", seed=1)),
            "mlm": str(make_tiny_mlm(tmp_path / "mlm")), "run": "walk-run", "c": str(corpus), "t": str(treebank),
            "task": str(task)}


def test_each_json_subcommand_prints_one_object_and_no_progress(inputs, capsys):
    """finetune runs first: its run is the classifier that explain, ablate, project and bias read."""
    for name, template in [*COMMANDS.items(), *VARIANTS]:
        argv = [name, *(re.sub(r"\{(\w+)\}", lambda m: inputs[m[1]], arg) for arg in template), "--json", "--quiet"]
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        captured = capsys.readouterr()
        lines = captured.out.splitlines()
        assert len(lines) == 1, (name, captured.out[:300])
        assert isinstance(json.loads(lines[0]), dict), name
        assert _our_progress(captured.err) == [], name
    assert main(["cancel", "walk-queued"]) in (0, 1)  # the queued run stops (1: it had finished already)


def test_anisotropy_and_compare_honour_quiet_in_their_tables(inputs, capsys):
    """Both drew their progress whatever --quiet said (compare took --json for quiet)."""
    for name in ("anisotropy", "compare", "probe"):
        argv = [name, *(re.sub(r"\{(\w+)\}", lambda m: inputs[m[1]], arg) for arg in COMMANDS[name])]
        for quiet in (False, True):
            assert main(argv + (["--quiet"] if quiet else [])) == 0
            err = capsys.readouterr().err
            assert bool(_our_progress(err)) is not quiet, (name, quiet, err[-300:])
