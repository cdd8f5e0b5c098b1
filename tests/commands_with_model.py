"""Every `python -m core` subcommand that takes --model, found from the parser itself, and the smallest argv that
runs each on a model family's tiny test models (issue 46: "every subcommand that takes --model runs on both tiny
models"). Family-agnostic: a test builds its family's models and files with `Inputs` and runs `argv(name, inputs)`.

A subcommand that takes --model and has no entry in ARGV fails `missing_argv()`'s check, so a new one is covered
or named here, never skipped silently."""

from __future__ import annotations

import argparse
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

# A few short sentences; a byte-level, WordPiece or SentencePiece vocabulary reads them all.
SENTENCES = ["the cat sat on the mat .", "a dog ran in the park .", "the man sat on the mat .",
             "she ran to the house .", "he sat in the park .", "the woman ran to the tree ."]
TREEBANK = "".join(f"1\t{det}\t{det}\tDET\tDT\t_\t2\tdet\t_\t_\n2\t{noun}\t{noun}\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
                   f"3\t{verb}\t{verb}\tVERB\tVBD\t_\t0\troot\t_\t_\n4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n"
                   for det, noun, verb in (("the", "cat", "sat"), ("a", "dog", "ran"), ("the", "girl", "sat"),
                                           ("a", "boy", "ran"), ("the", "man", "sat"), ("a", "woman", "ran")))

# {m} the family's bare encoder, {m2} a second one (another seed), {mlm} its masked LM, {run} a classification run
# fine-tuned from {m} (the "finetune" entry, run first), {c} a file of SENTENCES, {t} a CoNLL-U treebank,
# {task} a labelled JSON Lines file, {mask} the tokenizer's mask token, {sae} a sparse autoencoder trained first.
ARGV = {
    "finetune": ["--model", "{m}", "--task", "{task}", "--run", "every-run", "--epochs", "1", "--max-length", "16",
                 "--threads", "1"],
    "contrastive": ["--model", "{m}", "--task", "{task}", "--run", "every-simcse", "--train-limit", "16",
                    "--eval-limit", "8", "--max-length", "16", "--threads", "1"],
    "anisotropy": ["--model", "{m}", "--corpus", "{c}", "--pairs", "10", "--min-contexts", "2"],
    "compare": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "probe": ["--model", "{m}", "--corpus", "{t}", "--rank", "2", "--epochs", "1", "--no-cache"],
    "pca": ["--model", "{m}", "--text", "the cat sat .", "--text", "a dog ran ."],
    "fill-mask": ["--model", "{mlm}", "--text", "the {mask} sat .", "--top-k", "2"],
    "fit-mlm-head": ["--model", "{m}", "--corpus", "builtin", "--limit", "60", "--steps", "2", "--out", "every-head"],
    "neuron": ["--model", "{m}", "--text", "the cat sat on the mat .", "--layer", "2", "--head", "0", "--query", "1"],
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
    "patch": ["--model", "{mlm}", "--clean", "the man sat on the {mask} .", "--corrupt",
              "the woman sat on the {mask} .", "--target", "{target}", "--over", "heads"],
    "lens": ["--model", "{mlm}", "--text", "the cat sat .", "--top-k", "2"],
    "fit-tuned-lens": ["--model", "{mlm}", "--corpus", "{c}", "--steps", "2", "--out", "every-lens"],
    "sae-train": ["--model", "{m}", "--corpus", "{c}", "--layer", "1", "--features", "16", "--k", "2", "--out",
                  "every-sae", "--steps", "3"],
    "sae-features": ["--sae", "every-sae", "--text", "the cat sat ."],
    "encode": ["--model", "{m}", "--text", "the cat sat .", "--out", "{encoded}"],
    "reproduce": ["fake", "--limit", "2", "--model", "{m}"],
}
# Run before the rest: their outputs are what later entries read ({run}, every-sae).
FIRST = ("finetune", "sae-train")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def commands_taking_model(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The subcommands whose parser has a --model option, in the order they run here (FIRST, then by name)."""
    if parser is None:
        from core.__main__ import build_parser

        parser = build_parser()
    names = sorted(name for name, sub in _subparsers(parser).items() if "--model" in sub._option_string_actions)
    return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]


def missing_argv(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """Subcommands taking --model with no ARGV entry (a new subcommand must be given one)."""
    return [name for name in commands_taking_model(parser) if name not in ARGV]


@dataclass(frozen=True)
class Inputs:
    """What the ARGV templates name, for one family's tiny models."""

    values: dict

    @classmethod
    def build(cls, folder: Path, *, model: Path, second: Path, masked_lm: Path, target: str) -> "Inputs":
        """Files under `folder` plus the family's models: `model` a bare encoder, `second` another, `masked_lm` a
        model with an MLM head; `target` one word piece of its vocabulary for patch's --target."""
        from transformers import AutoTokenizer

        from core.analyses.pattern_labels import MapLabel, downsample, write_labels

        folder.mkdir(parents=True, exist_ok=True)
        corpus, treebank, task = folder / "sentences.txt", folder / "tiny.conllu", folder / "words.jsonl"
        corpus.write_text("\n".join(SENTENCES) + "\n")
        treebank.write_text(TREEBANK)
        rng = random.Random(1)
        filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
        task.write_text("".join(json.dumps({"text": " ".join(rng.sample(filler, 4) + [label]), "label": label}) + "\n"
                                for label in ["cat", "dog"] * 30))
        labels = folder / "labels.json"  # one hand label per type: pattern-shares trains on them
        write_labels(labels, [MapLabel("m", p, None, 0, 0, p, tuple(downsample(a)))
                              for p, a in (("vertical", [[1, 0], [1, 0]]), ("diagonal", [[1, 0], [0, 1]]))])
        mask = AutoTokenizer.from_pretrained(str(masked_lm)).mask_token
        return cls({"m": str(model), "m2": str(second), "mlm": str(masked_lm), "run": "every-run", "c": str(corpus),
                    "t": str(treebank), "task": str(task), "labels": str(labels), "mask": mask, "target": target,
                    "encoded": str(folder / "encoded.npz")})


def install_fakes(monkeypatch) -> None:
    """The real data (MRPC, SemEval-14) stays out, as in tests/integration/test_cli_json.py: the pairs are four of
    SENTENCES, the aspect rows one; `reproduce` gets the fake study."""
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


def argv(name: str, inputs: Inputs, *, json_output: bool = True) -> list[str]:
    """The argv of one subcommand (without "python -m core"), placeholders filled; --json --quiet where it takes
    them."""
    filled = [re.sub(r"\{(\w+)\}", lambda m: inputs.values[m[1]], arg) for arg in ARGV[name]]
    return [name, *filled, *(["--json", "--quiet"] if json_output and name != "encode" else [])]
