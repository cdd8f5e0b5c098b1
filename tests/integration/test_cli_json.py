"""One CLI dialect (issue 38): every subcommand with --json, found from the parser itself, also takes --quiet, and
run on a tiny random model and a tiny corpus with `--json --quiet` prints exactly one JSON object on stdout and no
progress on stderr. A new subcommand with --json fails test_every_json_subcommand_is_run until it is added below."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from core.__main__ import build_parser, main
from tests.commands_with_model import ARGV, make_inputs, stub_data
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm
# Progress as core.commands.stderr_progress, anisotropy, compare / probe and finetune draw it: "3/10"; not
# transformers' own tqdm bars ("Loading weights: 100%|██| 39/39"), which are not ours to silence.
PROGRESS = re.compile(r"\b\d+/\d+\b")


def _our_progress(err: str) -> list[str]:
    return [part for part in re.split(r"[\r\n]", err) if PROGRESS.search(part) and "%|" not in part
            and not part.startswith(("warning:", "note:"))]

# {m} tiny BERT, {m2} a second one, {mlm} a tiny masked LM, {run} a classification run fine-tuned first, {c} a
# file of sentences, {t} a CoNLL-U treebank, {task} a labelled JSON Lines file.
SHARED = ("anisotropy", "probe", "pca", "neuron", "attention-norms", "model-view", "head-view", "attention-norm-shares",
          "heads", "syntax-heads", "pair-attention", "head-features", "aspect-heads", "head-map", "pattern-shares",
          "project", "neighbours", "neurons", "bias", "bias-heads", "probe-labels", "erase")
COMMANDS = {
    "finetune": ["--model", "{m}", "--task", "{task}", "--run", "walk-run", "--epochs", "1", "--max-length", "16",
                 "--threads", "1"],
    "contrastive": ["--model", "{m}", "--task", "{task}", "--run", "walk-simcse", "--train-limit", "16",
                    "--eval-limit", "8", "--max-length", "16", "--threads", "1"],
    # after finetune (project and bias read its run): the least argv of any family's tiny model
    **{name: ARGV[name] for name in SHARED},
    "runs": [],
    "views": [],
    "models": [],
    "compare": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "fill-mask": ["--model", "{mlm}", "--text", "the [MASK] sat .", "--top-k", "2"],
    "fit-mlm-head": ["--model", "{m}", "--corpus", "builtin", "--limit", "60", "--steps", "2", "--out", "walk-head"],
    "attention-change": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "cls-attention": ["--model", "{m}", "--model", "{m2}", "--corpus", "{c}"],
    "explain": ["--model", "{run}", "--text", "the cat sat .", "--method", "attention"],
    "explain-faithfulness": ["--model", "{run}", "--corpus", "{c}", "--methods", "attention", "--steps", "2"],
    "ablate": ["--model", "{run}", "--limit", "8", "--no-layers"],
    "neurons-diff": ["--model", "{m}", "--model", "{m2}", "--layer", "2", "--corpus", "{c}", "--top", "3"],
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
    # The real data (MRPC, SemEval-14) stays out: the JSON contract is under test, not the data loaders.
    stub_data(monkeypatch)
    made = make_inputs(tmp_path, make_tiny_bert(tmp_path / "m"), "walk-run")  # corpus, treebank, task, labels
    return {**made, "m2": str(make_tiny_bert(tmp_path / "m2", seed=1)), "mlm": str(make_tiny_mlm(tmp_path / "mlm"))}


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
