"""core.model.artefacts: fitted heads, tuned lenses and autoencoders are listed with the model they belong to."""

from __future__ import annotations

import json

import pytest

from core.__main__ import main
from core.model import artefacts
from core.model.loading import available_models, resolve


def _folder(path, files, config):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    for name in files:
        (path / name).write_bytes(b"x")


def test_complete_folders_are_listed_with_their_model_and_half_written_ones_are_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BERTLENS_CACHE", str(tmp_path))
    _folder(tmp_path / "lenses" / "minilm-tuned", ["lens.safetensors"], {"model": "minilm"})
    _folder(tmp_path / "lenses" / ".minilm-half", ["lens.safetensors"], {"model": "minilm"})
    _folder(tmp_path / "lenses" / "no-weights", [], {"model": "minilm"})
    _folder(tmp_path / "saes" / "l4", ["sae.safetensors"], {"model": "run-a", "k": 8})
    _folder(tmp_path / "heads" / "minilm-mlm", ["model.safetensors"],
            {"bertlens_fitted_on": "all-MiniLM-L6-v2", "model_type": "bert"})

    assert [(a.name, a.kind, a.model) for a in artefacts.list_artefacts()] == [
        ("minilm-tuned", "tuned-lens", "minilm"), ("l4", "sae", "run-a")]
    assert [a.name for a in artefacts.list_artefacts("sae")] == ["l4"]
    assert artefacts.find_artefact("tuned-lens", "minilm-tuned").path == str(tmp_path / "lenses" / "minilm-tuned")
    with pytest.raises(ValueError, match="no sae named 'x'.*saved: l4"):
        artefacts.find_artefact("sae", "x")

    head = [e for e in available_models() if e.source == "fitted-head"]
    assert [(e.name, e.fitted_on) for e in head] == [("minilm-mlm", "all-MiniLM-L6-v2")]
    assert resolve("minilm-mlm") == ("fitted-head", tmp_path / "heads" / "minilm-mlm")

    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"name": "minilm-mlm", "source": "fitted-head", "path": str(tmp_path / "heads" / "minilm-mlm"),
            "fitted_on": "all-MiniLM-L6-v2", "warning": ""} in listed["models"]  # no fit figures saved: not weak
    assert [a["name"] for a in listed["artefacts"]] == ["minilm-tuned", "l4"]
