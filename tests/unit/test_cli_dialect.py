"""One CLI dialect (issue 38): limits are --limit / --train-limit / --eval-limit, several models are a repeated
--model, the old spellings still parse for one release but --help no longer shows them; one recipe field for frozen
layers, with old recipe files still loading; every built-in task in `finetune --help`."""

from __future__ import annotations

import argparse

import pytest

from core.__main__ import build_parser
from core.commands import two_models
from core.commands.train import recipe_from_args
from core.training.recipe import Recipe
from core.training.tasks import BUILTIN_TASKS

OLD_SPELLINGS = {"--max-train", "--max-eval", "--test-limit", "--a", "--b"}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _shown_options(sub: argparse.ArgumentParser) -> set[str]:
    return {option for a in sub._actions if a.help != argparse.SUPPRESS for option in a.option_strings}


def test_help_shows_one_spelling_of_each_limit_and_of_several_models():
    for name, sub in _subparsers().items():
        shown = _shown_options(sub)
        limits = {o for o in shown if "limit" in o or o.startswith(("--max-train", "--max-eval"))}
        assert limits <= {"--limit", "--train-limit", "--eval-limit"}, (name, limits)
        assert not shown & OLD_SPELLINGS, (name, shown & OLD_SPELLINGS)
    for name in ("finetune", "contrastive"):
        assert "--freeze-lowest" not in _shown_options(_subparsers()[name])


def test_old_spellings_still_parse_into_the_new_destinations():
    parser = build_parser()
    for command in ("compare", "attention-change"):
        for argv in (["--a", "x", "--b", "y"], ["--model", "x", "--model", "y"], ["--a", "x", "--model", "y"],
                     ["--model", "x", "--b", "y"]):
            assert two_models(parser.parse_args([command, "--corpus", "builtin", *argv])) == ("x", "y"), argv
    with pytest.raises(ValueError, match="two models"):
        two_models(parser.parse_args(["compare", "--corpus", "builtin", "--model", "x"]))
    probe = parser.parse_args(["probe", "--corpus", "ud", "--max-train", "7", "--max-eval", "3"])
    assert (probe.train_limit, probe.eval_limit) == (7, 3)
    assert parser.parse_args(["probe", "--corpus", "ud"]).train_limit is None
    assert parser.parse_args(["bias", "--test-limit", "40"]).eval_limit == 40
    finetune = parser.parse_args(["finetune", "--model", "m", "--task", "snli", "--run", "r", "--freeze-lowest", "2",
                                  "--freeze-layers", "0,6"])
    # --freeze-layers counts as the charts do: 0 = the embeddings, 6 = array index 5 (core.numbering)
    assert recipe_from_args(finetune).frozen_layers == (0, 1, 5) and recipe_from_args(finetune).freeze_embeddings


def test_one_recipe_field_for_frozen_layers_and_old_files_still_load():
    assert "freeze_layers" not in Recipe(model="m", task="snli", run_name="r").to_dict()
    old = {"model": "m", "task": "snli", "run_name": "r", "freeze_layers": 3, "frozen_layers": [5]}
    assert Recipe.from_dict(old).frozen_layers == (0, 1, 2, 5)
    assert Recipe.from_dict({**old, "freeze_layers": 0, "frozen_layers": []}).frozen_layers == ()
    for bad in ("two", -1, 1.5):
        with pytest.raises(ValueError, match='recipe.json: field "freeze_layers"'):
            Recipe.from_dict({**old, "freeze_layers": bad}, where="recipe.json")


def test_finetune_help_lists_every_built_in_task(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no line break inside a task name such as drugs-rating3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["finetune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    missing = [task for task in BUILTIN_TASKS if f"{task}:" not in text]
    assert missing == []


def test_finetune_lr_decay_goes_into_the_recipe_and_a_paper_protocol_fixes_it():
    parser = build_parser()
    base = ["finetune", "--model", "m", "--task", "snli", "--run", "r"]
    assert recipe_from_args(parser.parse_args([*base, "--lr-decay", "0.95"])).lr_decay == 0.95
    assert recipe_from_args(parser.parse_args(base)).lr_decay == 1.0
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--lr-decay", "1.5"])
    with pytest.raises(ValueError, match="--lr-decay 0.9 clash with --protocol slides"):
        recipe_from_args(parser.parse_args([*base, "--protocol", "slides", "--lr-decay", "0.9"]))
