"""Every subcommand that takes --model (found from the parser: tests/commands_with_model.py) runs on the tiny
ModernBERT (tests/tiny_modernbert.py) and the tiny DeBERTa (tests/tiny_deberta.py) and prints one JSON object: issue
46's "done when". The classifier the run-reading commands take is fine-tuned from each tiny model once per module
(with a time-lapse, so that path runs too)."""

from __future__ import annotations

import json
import shutil

import pytest

from core.__main__ import main
from tests.commands_with_model import (ARGV, NEEDS, argv_for, commands_taking_model, finetune_argv, forms, make_inputs,
                                       stub_data)

FAMILIES = {"modernbert": "tiny_modernbert_dir", "deberta-v2": "tiny_deberta_dir"}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request):
    """(model_type, the tiny model's folder) of each new family."""
    return request.param, request.getfixturevalue(FAMILIES[request.param])


@pytest.fixture(scope="module")
def finished_run(family, tmp_path_factory):
    """A classification run fine-tuned from the family's tiny model, in a cache of its own: its folder is what the
    run-reading commands are given (each test has its own models_cache)."""
    model_type, model_dir = family
    cache = tmp_path_factory.mktemp(f"{model_type}-run-cache")
    inputs = make_inputs(tmp_path_factory.mktemp(f"{model_type}-run-inputs"), model_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLENS_CACHE", str(cache))
        assert main(finetune_argv(inputs, f"{model_type}-run")) == 0
    from core import settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLENS_CACHE", str(cache))
        return settings.runs_dir() / f"{model_type}-run"


def test_the_enumeration_knows_every_command():
    assert set(commands_taking_model()) - set(ARGV) == set()
    assert {"finetune", "fill-mask", "patch", "neuron", "explain", "lens"} <= set(commands_taking_model())


@pytest.mark.parametrize("name,form", [(name, form) for name in commands_taking_model() for form in forms(name)])
def test_every_command_runs(name, form, family, finished_run, tmp_path, monkeypatch, capsys):
    stub_data(monkeypatch)
    inputs = make_inputs(tmp_path / "inputs", family[1], finished_run)
    if name in NEEDS:
        assert main(argv_for(NEEDS[name], inputs)) == 0, capsys.readouterr().err
    capsys.readouterr()
    status = main(argv_for(name, inputs) + list(form))
    printed = capsys.readouterr()
    assert status == 0, printed.err[-2000:]
    if name != "encode":
        assert isinstance(json.loads(printed.out.splitlines()[-1]), dict)


def test_the_fine_tuned_run_kept_a_time_lapse(family, finished_run):
    from core.model.loading import kept_steps

    assert (finished_run / "config.json").is_file() and kept_steps(finished_run)
    assert json.loads((finished_run / "config.json").read_text())["model_type"] == family[0]


def test_models_names_both_families(capsys):
    assert main(["models"]) == 0
    families = capsys.readouterr().out.splitlines()[-1]
    assert "ModernBERT" in families and "DeBERTa-v3" in families


def test_a_modernbert_without_an_mlm_head_gets_a_fitted_one(tmp_path, capsys):
    from tests.tiny_modernbert import make_tiny_modernbert

    bare = make_tiny_modernbert(tmp_path / "bare", masked_lm=False)
    assert main(["fit-mlm-head", "--model", str(bare), "--corpus", "builtin", "--limit", "60", "--steps", "2",
                 "--out", "modernbert-head", "--json", "--quiet"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["fill-mask", "--model", "modernbert-head", "--text", "the [MASK] sat .", "--json", "--quiet"]) == 0
    assert len(json.loads(capsys.readouterr().out)["masks"][0]["layers"][-1]["top"]) > 0


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


@pytest.mark.parametrize("fixture", list(FAMILIES.values()))
def test_the_bias_experiment_trains_its_three_runs(fixture, request, data_dir, capsys):
    """`bias` with a base model (not a run) trains full, biased and control classifiers from it on SNLI."""
    from tests.conftest import require_data

    require_data(data_dir / "snli", "SNLI")
    model_dir = request.getfixturevalue(fixture)
    assert main(["bias", "--model", str(model_dir), "--train-limit", "300", "--eval-limit", "100", "--epochs", "1",
                 "--max-length", "32", "--threads", "1", "--bootstrap", "20", "--name", "new-family-bias", "--json",
                 "--quiet"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert "differences" in out
