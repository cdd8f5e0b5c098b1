"""sae-train sized for a lesson (issue 47, item 4): the held-out FVE it reports is the one numpy computes here from
the saved weights, transformers' own hidden states and the held-out split redone by hand; under 0.8 it is said as a
warning (stderr, the JSON's "warning", the notebook); the defaults are the bench's (2,000 pairs, 400 steps)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from core import lens
from core.__main__ import main
from core.analyses import sparse_features as sf
from core.data import corpus as corpora
from tests.integration.test_sparse_features import hidden_at_words, sentences

LAYER = 1


@pytest.fixture()
def corpus_file(tmp_path) -> str:
    path = tmp_path / "sae.txt"
    path.write_text("\n".join(sentences(150, seed=4)))
    return str(path)


def held_out_fve(folder: Path, model: Path, corpus: str, seed: int = 0) -> float:
    """1 − Σ‖x − x̂‖² / Σ‖x − mean x‖² over the held-out sentences' word pieces: a seeded permutation of the inputs
    whose last round(10 %) are held out; x from transformers' hidden_states[LAYER] of each sentence alone; x̂ the
    saved SAE's z = ReLU(TopK_k(W_encᵀ(x/s − b_dec) + b_enc)), x̂ = s (W_decᵀ z + b_dec), in numpy."""
    weights = {k: v.astype(np.float64) for k, v in load_file(str(folder / "sae.safetensors")).items()}
    config = json.loads((folder / "config.json").read_text())
    texts = list(corpora.resolve(corpus, seed=seed).sentences)
    order = np.random.default_rng(seed).permutation(len(texts))
    n_held = max(1, int(round(len(texts) * 0.1)))
    x = np.concatenate([hidden_at_words(model, texts[i], LAYER)[1].numpy() for i in sorted(order[len(texts) - n_held:])])
    x = x.astype(np.float64)
    s, k = config["input_scale"], config["k"]
    pre = (x / s - weights["b_dec"]) @ weights["W_enc"] + weights["b_enc"]
    kth = np.sort(pre, axis=1)[:, -k][:, None]
    z = np.maximum(np.where(pre >= kth, pre, 0.0), 0.0)
    x_hat = s * (z @ weights["W_dec"] + weights["b_dec"])
    return float(1 - ((x - x_hat) ** 2).sum() / ((x - x.mean(axis=0)) ** 2).sum())


def train(model: Path, corpus: str, name: str, steps: int, capsys) -> tuple[dict, str]:
    assert main(["sae-train", "--model", str(model), "--corpus", corpus, "--layer", str(LAYER), "--features", "48",
                 "--k", "4", "--batch", "128", "--steps", str(steps), "--lr", "3e-3", "--out", name, "--json",
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_the_reported_fve_is_numpys_on_the_held_out_tokens_and_a_low_one_warns(tiny, corpus_file, capsys):
    low, err = train(tiny, corpus_file, "one-step", 1, capsys)
    expected = held_out_fve(Path(low["path"]), tiny, corpus_file)
    assert low["fve"] == pytest.approx(expected, abs=1e-4)
    assert expected < 0.8  # one step: forced low, by the independent figure
    assert low["warning"] and f"{expected:.1%}" in low["warning"] and "under 80%" in low["warning"]
    assert f"warning: {low['warning']}" in err

    better, err = train(tiny, corpus_file, "trained", 150, capsys)
    expected = held_out_fve(Path(better["path"]), tiny, corpus_file)
    assert better["fve"] == pytest.approx(expected, abs=1e-4)
    assert (better["warning"] is None) == (expected >= 0.8)  # said exactly when it is under 0.8
    assert ("warning:" in err) == (expected < 0.8)


def test_the_warning_is_said_under_point_eight_and_only_then():
    assert sf.Quality(0.8, 0.0, 4.0, 100).warning is None
    assert sf.Quality(0.93, 0.0, 4.0, 100).warning is None
    warning = sf.Quality(0.763, 0.01, 4.0, 1234).warning
    assert "76.3%" in warning and "1,234" in warning and "2,000 pairs, 400 steps" in warning
    assert sf.Quality(0.5, 0.0, 4.0, 10).to_json()["warning"] == sf.Quality(0.5, 0.0, 4.0, 10).warning


def test_the_notebook_warns_a_low_fve(tiny, corpus_file):
    settings = dict(features=48, k=4, batch=128, steps=1, lr=3e-3)
    with pytest.warns(UserWarning, match="the autoencoder explains only"):
        lens.sae_train(str(tiny), corpus_file, LAYER, "nb-one-step", **settings)


def test_defaults_are_the_benchs_two_thousand_pairs_and_four_hundred_steps(data_dir):
    assert sf.TrainSettings().steps == sf.DEFAULT_STEPS == 400
    assert len(corpora.resolve("snli:train", default_n=sf.DEFAULT_PAIRS).items) == sf.DEFAULT_PAIRS == 2000


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from tests.conftest import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("sae-defaults-tiny"))
