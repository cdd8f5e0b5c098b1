"""Every subcommand that takes --model (found from the parser: tests/commands_with_model.py) runs on the tiny
DeBERTa (tests/tiny_deberta.py) and prints one JSON object: issue 46's "done when". The classifier the run-reading
commands take is fine-tuned from the tiny DeBERTa once per module (with a time-lapse, so that path runs too)."""

from __future__ import annotations

import json
import shutil

import pytest

from core.__main__ import main
from tests.commands_with_model import (ARGV, NEEDS, argv_for, commands_taking_model, finetune_argv, forms, make_inputs,
                                       stub_data)


@pytest.fixture(scope="module")
def finished_run(tiny_deberta_dir, tmp_path_factory):
    """A classification run fine-tuned from the tiny DeBERTa, in a cache of its own: its folder is what the tests'
    run-reading commands are given (each test has its own models_cache)."""
    cache = tmp_path_factory.mktemp("deberta-run-cache")
    inputs = make_inputs(tmp_path_factory.mktemp("deberta-run-inputs"), tiny_deberta_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLENS_CACHE", str(cache))
        assert main(finetune_argv(inputs, "deberta-run")) == 0
    from core import settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLENS_CACHE", str(cache))
        return settings.runs_dir() / "deberta-run"


def test_the_enumeration_knows_every_command():
    assert set(commands_taking_model()) - set(ARGV) == set()


@pytest.mark.parametrize("name,form", [(name, form) for name in commands_taking_model() for form in forms(name)])
def test_every_command_runs_on_deberta(name, form, tiny_deberta_dir, finished_run, tmp_path, monkeypatch, capsys):
    stub_data(monkeypatch)
    inputs = make_inputs(tmp_path / "inputs", tiny_deberta_dir, finished_run)
    if name in NEEDS:
        assert main(argv_for(NEEDS[name], inputs)) == 0, capsys.readouterr().err
    capsys.readouterr()
    status = main(argv_for(name, inputs) + list(form))
    printed = capsys.readouterr()
    assert status == 0, printed.err[-2000:]
    if name != "encode":
        assert isinstance(json.loads(printed.out.splitlines()[-1]), dict)


def test_the_fine_tuned_run_kept_a_time_lapse(finished_run):
    from core.model.loading import kept_steps

    assert (finished_run / "config.json").is_file() and kept_steps(finished_run)
    assert json.loads((finished_run / "config.json").read_text())["model_type"] == "deberta-v2"


def test_a_deberta_without_an_mlm_head_gets_a_fitted_one_that_fills_masks(tiny_deberta_dir, tmp_path, capsys):
    """DeBERTa-v3's released checkpoints have no head their config builds (test_deberta.py): the fitted-head
    route (fit-mlm-head, then the head's name as the model) serves them."""
    config = json.loads((tiny_deberta_dir / "config.json").read_text())
    headless = tmp_path / "deberta-v3-like"
    shutil.copytree(tiny_deberta_dir, headless)
    (headless / "config.json").write_text(json.dumps({**config, "legacy": True}))
    assert main(["fit-mlm-head", "--model", str(headless), "--corpus", "builtin", "--limit", "60", "--steps", "2",
                 "--out", "deberta-head", "--json", "--quiet"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["fill-mask", "--model", "deberta-head", "--text", "the cat sat on the [MASK] .", "--top-k", "3",
                 "--json", "--quiet"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out, out


def test_the_bias_experiment_trains_its_three_runs_on_deberta(tiny_deberta_dir, data_dir, capsys):
    """`bias` with a base model (not a run) trains full, biased and control classifiers from it on SNLI."""
    from tests.conftest import require_data

    require_data(data_dir / "snli", "SNLI")
    assert main(["bias", "--model", str(tiny_deberta_dir), "--train-limit", "300", "--eval-limit", "100", "--epochs", "1",
                 "--max-length", "32", "--threads", "1", "--bootstrap", "20", "--name", "deberta-bias", "--json",
                 "--quiet"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert "differences" in out
