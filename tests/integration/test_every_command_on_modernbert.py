"""Issue 46: every subcommand that takes --model (found from the parser: tests/commands_with_model.py) runs on the
tiny ModernBERT models and prints one JSON object; finetune first, so the commands reading a classifier run get a
ModernBERT one."""

from __future__ import annotations

import json

import pytest

from core.__main__ import main
from tests.commands_with_model import Inputs, argv, commands_taking_model, install_fakes, missing_argv
from tests.tiny_modernbert import make_tiny_modernbert


def test_every_command_taking_a_model_has_an_argv():
    assert missing_argv() == []
    assert {"finetune", "fill-mask", "patch", "neuron", "explain", "lens"} <= set(commands_taking_model())


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    install_fakes(monkeypatch)
    return Inputs.build(tmp_path / "files", model=make_tiny_modernbert(tmp_path / "m", masked_lm=False),
                        second=make_tiny_modernbert(tmp_path / "m2", seed=1, masked_lm=False),
                        masked_lm=make_tiny_modernbert(tmp_path / "mlm"), target="Ġthe")


def test_every_command_taking_a_model_runs_on_modernbert(inputs, capsys):
    failed = {}
    for name in commands_taking_model():
        args = argv(name, inputs)
        code = main(args)
        captured = capsys.readouterr()
        if code != 0:
            failed[name] = captured.err.strip().splitlines()[-1:] if captured.err.strip() else code
            continue
        if "--json" in args:
            lines = captured.out.splitlines()
            assert len(lines) == 1 and isinstance(json.loads(lines[0]), dict), (name, captured.out[:300])
    assert failed == {}
    # the run is a ModernBERT classifier; the fitted-head route gives the bare encoder a head that fill-mask reads
    from core import settings

    assert json.loads((settings.runs_dir() / "every-run" / "config.json").read_text())["model_type"] == "modernbert"
    assert main(["fill-mask", "--model", "every-head", "--text", "the [MASK] sat .", "--json", "--quiet"]) == 0
    assert len(json.loads(capsys.readouterr().out)["masks"][0]["layers"][-1]["top"]) > 0
    # the time-lapse: frames measured on ModernBERT during a run, a kept checkpoint loadable as NAME@STEP
    from core.training.timelapse import read_timelapse

    values = inputs.values
    assert main(["finetune", "--model", values["m"], "--task", values["task"], "--run", "every-timelapse", "--epochs",
                 "1", "--max-length", "16", "--threads", "1", "--timelapse", "2", "--keep-checkpoints", "1",
                 "--timelapse-corpus", values["c"], "--json", "--quiet"]) == 0, capsys.readouterr().err[-400:]
    capsys.readouterr()
    lapse = read_timelapse(settings.runs_dir() / "every-timelapse")
    assert len(lapse.frames) == 2 and lapse.checkpoints
    assert main(["head-view", "--model", f"every-timelapse@{lapse.checkpoints[0]}", "--text", "the cat sat .",
                 "--json", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["models"]) == 0
    assert "ModernBERT" in capsys.readouterr().out.splitlines()[-1]
    # explain with every method on the ModernBERT run fine-tuned above (gradients through inputs_embeds, which
    # ModernBERT's embeddings normalise; perturbations; rollout and value zeroing through the adapter)
    from core.analyses.explain import METHODS

    for method in METHODS:
        args = ["explain", "--model", inputs.values["run"], "--text", "the cat sat .", "--method", method,
                "--steps", "4", "--samples", "20", "--json", "--quiet"]
        assert main(args) == 0, (method, capsys.readouterr().err[-400:])
        out = json.loads(capsys.readouterr().out)
        assert len(out["token_scores"]) == len(out["tokens"]) and out["tokens"][0] == "[CLS]", method
