"""`python -m core pca` on a tiny random BERT and the real MiniLM: output lines up with the tokenizer, numbers
equal scikit-learn's PCA on the model's own hidden states."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from core.__main__ import main
from core.model.loading import load_model

ROOT = Path(__file__).resolve().parents[2]


def run_json(capsys, *args) -> dict:
    assert main(["pca", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def hidden_states(model_dir, text):
    import torch

    lm = load_model(str(model_dir))
    with torch.inference_mode():
        out = lm.model(**lm.tokenizer(text, return_tensors="pt"), output_hidden_states=True)
    return np.stack([h[0].double().numpy() for h in out.hidden_states])


def same_up_to_sign(actual, expected, atol):
    for k in range(2):
        sign = np.sign(actual[:, k] @ expected[:, k]) or 1.0
        np.testing.assert_allclose(actual[:, k], sign * expected[:, k], atol=atol)


def test_default_keeps_every_piece_and_matches_sklearn_joint_pca(tiny_bert_dir, capsys):
    text = "The cat sat on the river bank."
    out = run_json(capsys, "--model", str(tiny_bert_dir), "--text", text)
    tokenizer_tokens = load_model(str(tiny_bert_dir)).tokenizer(text).tokens()
    assert out["tokens"] == tokenizer_tokens
    assert out["layers"] == [0, 1, 2] and out["fit"] == "joint"
    coords = np.array(out["coords"])
    assert coords.shape == (3, len(tokenizer_tokens), 2)
    states = hidden_states(tiny_bert_dir, text)
    pca = PCA(n_components=2).fit(states.reshape(-1, states.shape[2]))
    expected = pca.transform(states.reshape(-1, states.shape[2]))
    same_up_to_sign(coords.reshape(-1, 2), expected, atol=1e-4)
    np.testing.assert_allclose(out["joint_explained_variance_ratio"], pca.explained_variance_ratio_, rtol=1e-4)
    assert np.array(out["explained_variance_ratio"]).shape == (3, 2)


def test_per_layer_fit_matches_sklearn_per_layer(tiny_bert_dir, capsys):
    texts = ["The dog ran in the park.", "She sat at the bank of the river."]
    out = run_json(capsys, "--model", str(tiny_bert_dir), "--text", texts[0], "--text", texts[1], "--fit", "per-layer")
    first = load_model(str(tiny_bert_dir)).tokenizer(texts[0]).tokens()
    assert out["tokens"][: len(first)] == first
    assert out["sentence"] == [0] * len(first) + [1] * (len(out["tokens"]) - len(first))
    states = np.concatenate([hidden_states(tiny_bert_dir, t) for t in texts], axis=1)
    coords, ratio = np.array(out["coords"]), np.array(out["explained_variance_ratio"])
    for layer in range(3):
        pca = PCA(n_components=2).fit(states[layer])
        same_up_to_sign(coords[layer], pca.transform(states[layer]), atol=1e-4)
        np.testing.assert_allclose(ratio[layer], pca.explained_variance_ratio_, rtol=1e-4)


def test_drop_flags_remove_specials_and_punctuation(tiny_bert_dir, capsys):
    out = run_json(capsys, "--model", str(tiny_bert_dir), "--text", "The cat sat, the dog ran!", "--drop-special", "--drop-punct")
    assert out["tokens"] == ["the", "cat", "sat", "the", "dog", "ran"]
    assert out["position"] == [1, 2, 3, 5, 6, 7]
    assert np.array(out["coords"]).shape == (3, 6, 2)


def test_builtin_background_and_tsne(tiny_bert_dir, capsys):
    from core.data.corpus import builtin_sentences

    out = run_json(capsys, "--model", str(tiny_bert_dir), "--text", "The cat sat.", "--background", "builtin",
                   "--background-size", "30")
    tokenizer = load_model(str(tiny_bert_dir)).tokenizer
    # the bank's first 30 lines, read straight from the data file
    assert out["n_fit"] == sum(len(tokenizer(s).tokens()) for s in builtin_sentences()[:30])
    assert out["background"] == "builtin"
    tsne = run_json(capsys, "--model", str(tiny_bert_dir), "--text", "The cat sat on the mat in the house.", "--fit", "tsne", "--seed", "3")
    again = run_json(capsys, "--model", str(tiny_bert_dir), "--text", "The cat sat on the mat in the house.", "--fit", "tsne", "--seed", "3")
    assert tsne["coords"] == again["coords"]
    assert tsne["explained_variance_ratio"][0] == [None, None]


def test_snli_background_on_minilm(minilm_dir, capsys):
    pytest.importorskip("core.data.datasets")
    out = run_json(capsys, "--model", str(minilm_dir), "--text", "The bank raised rates.", "--background", "snli", "--background-size", "4", "--fit", "per-layer")
    assert len(out["layers"]) == 7 and out["n_fit"] > 8 * 4
    ratio = np.array(out["explained_variance_ratio"])
    assert ((ratio > 0) & (ratio < 1)).all()


def test_tsne_with_background_is_refused_with_a_reason(tiny_bert_dir, capsys):
    assert main(["pca", "--model", str(tiny_bert_dir), "--text", "The cat sat.", "--fit", "tsne", "--background", "builtin"]) == 2
    assert "t-SNE cannot project" in capsys.readouterr().err


def test_module_entry_point_prints_a_table(tiny_bert_dir):
    done = subprocess.run(
        [sys.executable, "-m", "core", "pca", "--model", str(tiny_bert_dir), "--text", "The cat sat."],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "6 tokens, 3 layers" in done.stdout and "s0·1·the" in done.stdout


def test_visbert_protocol_is_sklearn_pca_fitted_per_layer_on_the_input(tiny_bert_dir, capsys):
    text = "The woman sat on the bank of the river."
    out = run_json(capsys, "--model", str(tiny_bert_dir), "--text", text, "--protocol", "visbert")
    assert out["protocol"] == "visbert" and out["fit"] == "per-layer" and out["background"] is None
    states = hidden_states(tiny_bert_dir, text)
    coords = np.array(out["coords"])
    for layer in range(states.shape[0]):
        pca = PCA(n_components=2).fit(states[layer])
        same_up_to_sign(coords[layer], pca.transform(states[layer]), atol=1e-4)
        np.testing.assert_allclose(out["explained_variance_ratio"][layer], pca.explained_variance_ratio_, rtol=1e-4)
    assert run_json(capsys, "--model", str(tiny_bert_dir), "--text", text)["protocol"] == "bertlens"


def test_visbert_protocol_refuses_a_joint_fit_or_background(tiny_bert_dir):
    for extra in (["--fit", "joint"], ["--background", "builtin"]):
        out = subprocess.run([sys.executable, "-m", "core", "pca", "--model", str(tiny_bert_dir), "--text", "a cat sat .",
                              "--protocol", "visbert", *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and "visbert" in out.stderr, out.stderr


def _without_notes(cli: dict, notes=("truncated", "background_truncated")) -> dict:
    return {k: v for k, v in cli.items() if k not in notes}


def test_lens_layerwise_pca_returns_what_the_cli_json_has(tiny_bert_dir, capsys):
    """The notebook twin takes the same settings (--fit is `method`, --drop-special `hide_special`) and gives the
    same data as --json, background corpus included."""
    from core import lens

    texts = ["the cat sat on the mat .", "a dog ran ."]
    cli = run_json(capsys, "--model", str(tiny_bert_dir), "--text", texts[0], "--text", texts[1], "--fit",
                   "per-layer", "--drop-special", "--quiet")
    data = lens.layerwise_pca(str(tiny_bert_dir), texts, method="per-layer", hide_special=True, return_data=True)
    assert data.to_json().keys() == _without_notes(cli).keys()
    assert json.loads(json.dumps(data.to_json())) == _without_notes(cli)
    cli = run_json(capsys, "--model", str(tiny_bert_dir), "--text", texts[0], "--background", "builtin",
                   "--background-size", "5", "--drop-punct", "--quiet")
    data = lens.layerwise_pca(str(tiny_bert_dir), texts[0], background="builtin", background_size=5,
                              hide_punct=True, return_data=True)
    assert json.loads(json.dumps(data.to_json())) == _without_notes(cli)
    with pytest.raises(ValueError, match="method must be one of joint, per-layer, tsne"):
        lens.layerwise_pca(str(tiny_bert_dir), texts, method="umap")
