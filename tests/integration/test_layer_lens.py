"""The logit and tuned lens (core.analyses.logit_lens) against computations written here: transformers' own
BertForMaskedLM logits and hidden states, the head applied by hand, KL in numpy; the saved lens format, the fit
lowering held-out KL, cancel leaving nothing, and the CLI's exact JSON keys."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from core.__main__ import main
from core.analyses import logit_lens as lenses
from core.model import artefacts
from core.model.adapter import NoMaskedLMHead
from core.model.loading import load_model
from core.progress import Cancelled
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_layered_mlm, make_tiny_mlm

TEXT = "the cat sat on the mat and the dog ran in the park ."
WORDS = "the a cat dog sat ran on in at to of and is was mat river bank park house tree man woman girl boy".split()


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_layered_mlm(tmp_path_factory.mktemp("lens") / "mlm")


def _reference(folder, text):
    """Per hidden state l: the head's log-probabilities [T, V], computed with transformers and numpy only."""
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    feed = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**feed, output_hidden_states=True)
        per_layer = [model.cls(h[0]).numpy().astype(np.float64) for h in out.hidden_states]
    logits = out.logits[0].numpy().astype(np.float64)
    special = np.array(tokenizer.get_special_tokens_mask(feed["input_ids"][0].tolist(), already_has_special_tokens=True), bool)
    return model, out, per_layer, logits, special


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _kl(final_logits, lens_logits, special):
    p_log, q_log = _log_softmax(final_logits), _log_softmax(lens_logits)
    return (np.exp(p_log) * (p_log - q_log)).sum(-1)[~special].mean()


def test_every_layer_and_kl_match_transformers_and_numpy(mlm_dir):
    lm = load_model(str(mlm_dir), masked_lm=True, device="cpu")
    result = lenses.logit_lens(lm, TEXT, top_k=4)
    _model, _out, per_layer, logits, special = _reference(mlm_dir, TEXT)
    assert result.layers == tuple(range(4)) and result.top_ids.shape == (4, len(result.tokens), 4)
    # the last layer is the model's own fill-mask output: BertForMaskedLM's logits, top-4 at every token
    own = np.argsort(-logits, axis=-1, kind="stable")[:, :4]
    assert np.array_equal(result.top_ids[-1], own)
    np.testing.assert_allclose(result.top_probabilities[-1],
                               np.take_along_axis(np.exp(_log_softmax(logits)), own, -1), rtol=1e-4, atol=1e-6)
    for layer, layer_logits in enumerate(per_layer):
        assert np.array_equal(result.top_ids[layer], np.argsort(-layer_logits, axis=-1, kind="stable")[:, :4]), layer
        assert result.kl_to_final[layer] == pytest.approx(_kl(logits, layer_logits, special), rel=1e-3, abs=1e-5)
    assert result.kl_to_final[-1] == 0.0
    assert (result.kl_to_final[:-1] > 0.01).all()  # the layers really differ here, so the checks above bite
    assert list(result.special_mask) == list(special)


def test_tuned_lens_applies_each_translator_before_the_head_and_identity_is_the_logit_lens(mlm_dir):
    import torch

    lm = load_model(str(mlm_dir), masked_lm=True, device="cpu")
    logit = lenses.logit_lens(lm, TEXT)
    identity = lenses.Translators.identity(lm.num_layers, lm.hidden_size)
    same = lenses.logit_lens(lm, TEXT, kind="tuned", lens=identity)
    assert np.array_equal(same.top_ids, logit.top_ids)
    assert np.array_equal(same.top_probabilities, logit.top_probabilities)
    assert np.array_equal(same.kl_to_final, logit.kl_to_final)

    rng = np.random.default_rng(0)
    d = lm.hidden_size
    moved = lenses.Translators((np.eye(d) + rng.normal(0, 0.3, (lm.num_layers, d, d))).astype(np.float32),
                               rng.normal(0, 0.5, (lm.num_layers, d)).astype(np.float32))
    tuned = lenses.logit_lens(lm, TEXT, kind="tuned", lens=moved)
    model, out, _per_layer, logits, special = _reference(mlm_dir, TEXT)
    for layer in range(lm.num_layers):
        h = out.hidden_states[layer][0].numpy().astype(np.float64)
        translated = h @ moved.weights[layer].T.astype(np.float64) + moved.biases[layer]
        with torch.no_grad():
            by_hand = model.cls(torch.from_numpy(translated).float()).numpy().astype(np.float64)
        assert np.array_equal(tuned.top_ids[layer], np.argsort(-by_hand, axis=-1, kind="stable")[:, :5]), layer
        assert tuned.kl_to_final[layer] == pytest.approx(_kl(logits, by_hand, special), rel=1e-3, abs=1e-5)
    assert np.array_equal(tuned.top_ids[-1], logit.top_ids[-1]) and tuned.kl_to_final[-1] == 0.0


def _corpus(n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + " ." for _ in range(n)]


def test_fit_lowers_held_out_kl_and_saves_exactly_the_format(mlm_dir):
    from safetensors.numpy import load_file

    lm = load_model(str(mlm_dir), masked_lm=True, device="cpu")
    fitted = lenses.fit_tuned_lens(lm, _corpus(80, 1), "tiny-lens", steps=150, batch_tokens=64)
    folder = artefacts.artefact_dir("tuned-lens") / "tiny-lens"
    assert fitted.path == str(folder) and fitted.name == "tiny-lens"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "lens.safetensors"]
    tensors = load_file(str(folder / "lens.safetensors"))
    assert set(tensors) == {f"layers.{l}.{w}" for l in range(3) for w in ("weight", "bias")}
    assert all(tensors[f"layers.{l}.weight"].shape == (32, 32) and tensors[f"layers.{l}.bias"].shape == (32,)
               for l in range(3))
    assert json.loads((folder / "config.json").read_text())["model"] == lm.ref
    # held out: the last tenth of the sentences, never trained on; the tuned lens is closer at every layer below L
    assert (fitted.kl_tuned_held_out[:-1] < fitted.kl_logit_held_out[:-1]).all(), fitted.to_json()
    # an independent check on other unseen text, through the saved file read back
    text = _corpus(1, 99)[0]
    logit = lenses.logit_lens(lm, text)
    tuned = lenses.logit_lens(lm, text, kind="tuned", lens="tiny-lens")
    assert tuned.lens == "tiny-lens" and tuned.kl_to_final.sum() < logit.kl_to_final.sum()


def test_cancel_leaves_no_folder(mlm_dir):
    lm = load_model(str(mlm_dir), masked_lm=True, device="cpu")
    calls = []

    def progress(done, total, message=None):
        calls.append(done)

    with pytest.raises(Cancelled):
        lenses.fit_tuned_lens(lm, _corpus(20, 2), "cut", steps=50, progress=progress,
                              should_stop=lambda: len(calls) > 25)
    root = artefacts.artefact_dir("tuned-lens")
    assert not root.exists() or list(root.iterdir()) == []
    assert artefacts.list_artefacts("tuned-lens") == []


def test_a_lens_for_another_model_and_a_model_without_a_head_are_refused(mlm_dir, tmp_path):
    lm = load_model(str(mlm_dir), masked_lm=True, device="cpu")
    lenses.save_lens(lenses.Translators.identity(3, 32), "other", {"model": "bert-base-uncased"})
    with pytest.raises(lenses.LensMismatch, match="fitted for 'bert-base-uncased'"):
        lenses.logit_lens(lm, TEXT, kind="tuned", lens="other")
    lenses.save_lens(lenses.Translators.identity(2, 32), "short", {"model": lm.ref})
    with pytest.raises(lenses.LensMismatch, match="2 translators"):
        lenses.logit_lens(lm, TEXT, kind="tuned", lens="short")
    with pytest.raises(ValueError, match="needs --lens"):
        lenses.logit_lens(lm, TEXT, kind="tuned")

    bare = load_model(str(make_tiny_bert(tmp_path / "bare")), masked_lm=True, device="cpu")
    head = artefacts.heads_dir() / "bare-mlm"  # a fitted head for it, as fit-mlm-head saves one
    make_tiny_mlm(head)
    config = json.loads((head / "config.json").read_text())
    (head / "config.json").write_text(json.dumps({**config, "bertlens_fitted_on": bare.ref}))
    with pytest.raises(NoMaskedLMHead, match=r"fit-mlm-head.*|bare-mlm") as err:
        lenses.logit_lens(bare, TEXT)
    assert "fit-mlm-head" in str(err.value) and "bare-mlm" in str(err.value)


def test_cli_names_fit_mlm_head_for_a_model_without_one(tmp_path, capsys):
    bare = make_tiny_bert(tmp_path / "bare")
    assert main(["lens", "--model", str(bare), "--text", "the cat sat .", "--json"]) == 2
    err = capsys.readouterr().err
    assert "no masked-word (MLM) head" in err and "python -m core fit-mlm-head" in err


def test_cli_lens_json_has_exactly_the_issue_keys_and_fit_prints_name_and_path(mlm_dir, capsys):
    assert main(["lens", "--model", str(mlm_dir), "--text", "the cat sat .", "--top-k", "3", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["tokens", "layers", "top", "kl_to_final"]
    assert out["tokens"] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"] and out["layers"] == [0, 1, 2, 3]
    assert len(out["top"]) == 4 and all(len(per_layer) == 6 for per_layer in out["top"])
    assert all(list(cell) == ["token", "p"] for per_layer in out["top"] for per_token in per_layer for cell in per_token)
    assert all(len(per_token) == 3 for per_layer in out["top"] for per_token in per_layer)
    assert len(out["kl_to_final"]) == 4 and out["kl_to_final"][-1] == 0.0

    corpus = mlm_dir.parent / "corpus.txt"
    corpus.write_text("\n".join(_corpus(12, 3)) + "\n")
    assert main(["fit-tuned-lens", "--model", str(mlm_dir), "--corpus", str(corpus), "--limit", "10", "--steps", "3",
                 "--out", "cli-lens", "--json", "--quiet"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["name"] == "cli-lens" and fitted["path"] == str(artefacts.artefact_dir("tuned-lens") / "cli-lens")
    assert main(["lens", "--model", str(mlm_dir), "--text", "the cat sat .", "--kind", "tuned", "--lens", "cli-lens",
                 "--json", "--quiet"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["tokens", "layers", "top", "kl_to_final"]
    assert main(["lens", "--model", str(mlm_dir), "--text", "the cat sat .", "--kind", "tuned", "--lens", "nope"]) == 2
    assert "no tuned-lens named 'nope'" in capsys.readouterr().err
