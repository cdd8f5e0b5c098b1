"""Sparse features (issue 39 item 4) on a tiny random BERT: the saved folder holds exactly the issue's format, and
its weights applied by the issue's formula in plain torch (hidden states from transformers itself) give what
`sentence_features`, `sae-features --json` and the atlas show; training lowers the reconstruction error with k
features per token; a cancelled run resumes to the very weights an unbroken run reaches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from core.__main__ import main
from core.analyses import sparse_features as sf
from core.model.artefacts import artefact_dir, list_artefacts
from core.model.loading import load_model
from core.progress import Cancelled
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

WORDS = ("the a cat dog sat ran on in at to of and is was mat river bank money deposit water he she it they man "
         "woman girl boy park house tree").split()
SETTINGS = sf.TrainSettings(features=48, k=4, batch=128, steps=60, lr=3e-3, checkpoint_every=1e9)


def sentences(n: int = 120, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, int(rng.integers(3, 10)))) + " ." for _ in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("sae-tiny"))


def formula(weights: dict, config: dict, x: torch.Tensor) -> torch.Tensor:
    """The issue's encoding, written out again: z = ReLU(TopK_k(W_encᵀ((x / s) − b_dec) + b_enc))."""
    pre = (x / config["input_scale"] - weights["b_dec"]) @ weights["W_enc"] + weights["b_enc"]
    kth = pre.topk(config["k"], dim=-1).values[..., -1:]
    return torch.relu(torch.where(pre >= kth, pre, torch.zeros_like(pre)))


def hidden_at_words(folder: Path, text: str, layer: int) -> tuple[list[str], torch.Tensor]:
    """transformers' own hidden_states[layer] at the non-special tokens."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    feed = tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
    special = feed.pop("special_tokens_mask")[0].bool()
    with torch.no_grad():
        hidden = model(**feed, output_hidden_states=True).hidden_states[layer][0]
    tokens = tokenizer.convert_ids_to_tokens(feed["input_ids"][0])
    return [t for t, s in zip(tokens, special) if not s], hidden[~special]


def test_saved_format_formula_and_sae_features_agree(tiny, capsys):
    lm = load_model(str(tiny))
    trained = sf.train_sae(lm, sentences(), 1, SETTINGS, "tiny-sae", corpus="test")
    folder = artefact_dir("sae") / "tiny-sae"
    assert Path(trained.path) == folder
    weights = load_file(str(folder / "sae.safetensors"))
    assert {k: tuple(v.shape) for k, v in weights.items()} == {"W_enc": (32, 48), "b_enc": (48,), "W_dec": (48, 32),
                                                               "b_dec": (32,)}
    config = json.loads((folder / "config.json").read_text())
    assert set(config) == {"k", "layer", "model", "d", "F", "input_scale"}
    assert (config["k"], config["layer"], config["model"], config["d"], config["F"]) == (4, 1, str(tiny), 32, 48)
    assert [(a.name, a.model) for a in list_artefacts("sae")] == [("tiny-sae", str(tiny))]

    text = "the girl sat on the river bank ."
    tokens, x = hidden_at_words(tiny, text, 1)
    z = formula(weights, config, x)
    assert ((z > 0).sum(dim=1) <= 4).all()
    found = sf.sentence_features(sf.load_sae("tiny-sae"), lm, text)
    assert list(found.tokens) == tokens
    shown = np.zeros_like(z.numpy())
    shown[:, found.features] = found.activations
    np.testing.assert_allclose(shown, z.numpy(), atol=1e-5)
    firing = np.flatnonzero(z.numpy().max(axis=0) > 0)
    assert sorted(found.features.tolist()) == firing.tolist()
    x_hat = config["input_scale"] * (z @ weights["W_dec"] + weights["b_dec"])
    expected_fve = 1 - ((x - x_hat) ** 2).sum() / ((x - x.mean(dim=0)) ** 2).sum()
    assert found.reconstruction_fve == pytest.approx(float(expected_fve), abs=1e-4)

    capsys.readouterr()
    assert main(["sae-features", "--sae", "tiny-sae", "--text", text, "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == tokens and out["layer"] == 1
    from_cli = np.zeros_like(z.numpy())
    for row, active in enumerate(out["active"]):
        for entry in active:
            from_cli[row, entry["feature"]] = entry["value"]
    np.testing.assert_allclose(from_cli, z.numpy(), atol=1e-5)
    best = out["features"][0]
    assert best["max"] == pytest.approx(float(z.max()), abs=1e-5)
    assert best["feature"] == int(z.max(dim=0).values.argmax())


def test_training_lowers_the_error_with_k_features_per_token(tiny):
    lm = load_model(str(tiny))
    texts = sentences(160, seed=1)
    vectors = sf.layer_vectors(lm, texts, 2)
    untrained = sf.train_sae(lm, texts, 2, sf.TrainSettings(features=48, k=4, steps=1, lr=1e-9), "untrained")
    trained = sf.train_sae(lm, texts, 2, sf.TrainSettings(features=48, k=4, batch=128, steps=150, lr=3e-3), "trained")
    assert trained.quality.fve > untrained.quality.fve + 0.2
    assert trained.quality.fve > 0.6
    assert trained.losses[-1] < 0.5 * trained.losses[0]
    z = sf.load_sae("trained").encode(vectors.vectors)
    active = (z > 0).sum(axis=1)
    assert active.max() == 4 and np.mean(active == 4) > 0.9
    assert trained.quality.mean_active == pytest.approx(float(np.mean(active[-trained.quality.n_tokens:])), abs=1.0)


def test_cancel_then_resume_reaches_the_unbroken_weights(tiny):
    lm = load_model(str(tiny))
    texts = sentences(100, seed=2)
    unbroken = sf.train_sae(lm, texts, 1, SETTINGS, "unbroken")
    calls = []

    def stop_mid_training() -> bool:
        calls.append(1)
        return len(calls) > 25

    with pytest.raises(Cancelled):
        sf.train_sae(lm, texts, 1, SETTINGS, "broken", progress=lambda *a: None, should_stop=stop_mid_training)
    assert not (artefact_dir("sae") / "broken").exists()  # nothing that looks complete
    assert [a.name for a in list_artefacts("sae")] == ["unbroken"]
    saved = json.loads((sf.state_dir("broken") / "state.json").read_text())
    assert 0 < saved["step"] < SETTINGS.steps
    resumed = sf.train_sae(lm, texts, 1, SETTINGS, "broken")
    assert resumed.resumed_from == saved["step"]
    assert not sf.state_dir("broken").exists()
    a, b = sf.load_sae("unbroken"), sf.load_sae("broken")
    for name in sf.TENSORS:
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), atol=1e-5, err_msg=name)


def test_atlas_top_contexts_histogram_and_firing_change_match_brute_force(tiny, tmp_path):
    lm = load_model(str(tiny))
    texts = sentences(60, seed=3)
    sf.train_sae(lm, texts, 1, SETTINGS, "atlas")
    sae = sf.load_sae("atlas")
    atlas = sf.feature_atlas(sae, lm, texts, corpus="test")
    vectors = sf.layer_vectors(lm, texts, 1)
    z = sae.encode(vectors.vectors)
    np.testing.assert_allclose(atlas.firing_rate, (z > 0).mean(axis=0))
    feature = int(np.argmax((z > 0).sum(axis=0)))
    order = sorted(range(len(z)), key=lambda t: (-z[t, feature], vectors.example_ids[t], vectors.positions[t]))[:10]
    contexts = atlas.contexts(feature)
    assert [(c.example, c.position) for c in contexts] == [(int(vectors.example_ids[t]), int(vectors.positions[t]))
                                                           for t in order if z[t, feature] > 0]
    np.testing.assert_allclose([c.value for c in contexts], [z[t, feature] for t in order if z[t, feature] > 0],
                               rtol=1e-6)
    histogram = atlas.histogram(feature)
    counts, _ = np.histogram(z[z[:, feature] > 0, feature], bins=sf.HISTOGRAM_BINS)
    assert histogram.counts.tolist() == counts.tolist() and histogram.zeros == int((z[:, feature] == 0).sum())

    same = sf.firing_change(atlas, sf.feature_atlas(sae, lm, texts, corpus="test"))
    assert np.all(same.change == 0)
    other = load_model(str(make_tiny_bert(tmp_path / "other", seed=5)))
    with pytest.raises(sf.SaeError, match="trained on"):
        sf.feature_atlas(sae, other, texts)
    changed = sf.firing_change(atlas, sf.feature_atlas(sae, other, texts, same_model=False))
    z_other = sae.encode(sf.layer_vectors(other, texts, 1).vectors)
    np.testing.assert_allclose(changed.rate_b - changed.rate_a, (z_other > 0).mean(axis=0) - (z > 0).mean(axis=0))
    top = changed.top(3)
    assert abs(top[0]["change"]) == pytest.approx(float(np.abs(changed.change).max()))


def test_lens_words_are_the_head_on_the_decoded_feature(tmp_path):
    folder = make_tiny_mlm(tmp_path / "mlm")
    lm = load_model(str(folder), masked_lm=True)
    sf.train_sae(lm, sentences(60, seed=4), 2, SETTINGS, "with-head")
    sae = sf.load_sae("with-head")
    lens = sf.lens_tokens(sae, lm, 7, top=5)
    from transformers import AutoModelForMaskedLM

    head = AutoModelForMaskedLM.from_pretrained(folder).eval().cls
    weights = load_file(str(artefact_dir("sae") / "with-head" / "sae.safetensors"))
    scale = json.loads((artefact_dir("sae") / "with-head" / "config.json").read_text())["input_scale"]
    on = scale * (lens.activation * weights["W_dec"][7] + weights["b_dec"])
    off = scale * weights["b_dec"]
    with torch.no_grad():
        change = (head(on[None]) - head(off[None]))[0]
    best = change.topk(5)
    assert lens.activation == pytest.approx(32 ** 0.5)
    np.testing.assert_allclose(lens.logit_change, best.values.numpy(), rtol=1e-4, atol=1e-5)
    assert list(lens.tokens) == AutoTokenizer.from_pretrained(folder).convert_ids_to_tokens(best.indices.tolist())


def test_clear_messages(tiny):
    from core.model.adapter import NoMaskedLMHead

    lm = load_model(str(tiny))
    with pytest.raises(sf.SaeError, match="layers 0 .* to 2; layer 7"):
        sf.train_sae(lm, ["the cat sat ."], 7, SETTINGS, "x")
    with pytest.raises(sf.SaeError, match="cannot exceed"):
        sf.TrainSettings(features=4, k=8).check()
    with pytest.raises(sf.SaeError, match="usable name"):
        sf.check_name("../x")
    sf.train_sae(lm, sentences(40), 1, SETTINGS, "no-head")
    with pytest.raises(NoMaskedLMHead, match="fit-mlm-head"):
        sf.lens_tokens(sf.load_sae("no-head"), lm, 0)
    with pytest.raises(ValueError, match="no sae named 'missing'.*no-head"):
        sf.load_sae("missing")


def test_notebook_features(tiny, tmp_path):
    from core import lens

    lm = load_model(str(tiny))
    texts = sentences(40, seed=6)
    sf.train_sae(lm, texts, 1, SETTINGS, "notebook")
    text = "the dog ran to the park ."
    chart, frame = lens.features("notebook", text, return_data=True)
    found = sf.sentence_features(sf.load_sae("notebook"), lm, text)
    assert frame["feature"].drop_duplicates().tolist() == found.features[:15].tolist()
    assert chart.to_dict()["title"].startswith("Features of notebook")
    other = make_tiny_bert(tmp_path / "other", seed=7)
    chart = lens.features("notebook", text, feature=int(found.features[0]), corpus=texts, compare=str(other))
    titles = json.dumps(chart.to_dict())
    assert f"Top contexts of feature {int(found.features[0])}" in titles and "firing rate changed most" in titles
