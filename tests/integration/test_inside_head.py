"""The neuron view and norm-weighted attention against transformers' own attention and against q, k, v and
‖α f(x)‖ computed here from each model's weights and the layer's input hidden state (output_hidden_states)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from core.model.loading import load_model
from tests.conftest import TINY_VOCAB

TEXT, TEXT_B = "the cat sat on the mat .", "the dog ran , he was unhappy ."


def _tokenizer(folder, with_types: bool):
    from transformers import BertTokenizerFast

    names = ["input_ids", "token_type_ids", "attention_mask"] if with_types else ["input_ids", "attention_mask"]
    tok = BertTokenizerFast(vocab={p: i for i, p in enumerate(TINY_VOCAB)}, do_lower_case=True, model_max_length=64,
                            model_input_names=names)
    tok.save_pretrained(folder)


def _config(family: str):
    import transformers as tf

    common = dict(vocab_size=len(TINY_VOCAB), max_position_embeddings=80, pad_token_id=0)
    size = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48)
    if family == "bert":
        return tf.BertConfig(**common, **size), tf.BertModel, True
    if family == "roberta":
        return tf.RobertaConfig(**common, **size), tf.RobertaModel, True
    if family == "electra":
        return tf.ElectraConfig(**common, **size, embedding_size=32), tf.ElectraModel, True
    if family == "albert":
        return tf.AlbertConfig(**common, **size, embedding_size=32, num_hidden_groups=1), tf.AlbertModel, True
    if family == "mpnet":
        return tf.MPNetConfig(**common, **size), tf.MPNetModel, False
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=len(TINY_VOCAB), max_position_embeddings=80, pad_token_id=0, dim=32,
                                   n_layers=3, n_heads=4, hidden_dim=48), tf.DistilBertModel, False
    raise KeyError(family)


FAMILIES = ("bert", "roberta", "electra", "albert", "mpnet", "distilbert")


@pytest.fixture(scope="module", params=FAMILIES)
def family_model(request, tmp_path_factory):
    config, cls, with_types = _config(request.param)
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}")
    torch.manual_seed(11)
    model = cls(config)
    with torch.no_grad():  # random init (std 0.02) gives near-uniform attention: larger q/k
        # weights (and ALBERT's embedding-to-hidden map) make the softmax peaked
        for name, p in model.named_parameters():
            if any(s in name for s in ("query.weight", "key.weight", "q_lin.weight", "k_lin.weight", ".q.weight", ".k.weight",
                                           "embedding_hidden_mapping_in.weight")):
                p.normal_(0.0, 0.3)
    model.save_pretrained(folder, safe_serialization=True)
    _tokenizer(folder, with_types)
    return request.param, load_model(str(folder), device="cpu")


def _reference(lm, text_a, text_b=None):
    """transformers' attentions and hidden states for the same tokens."""
    tok = lm.tokenizer(text_a, text_b, return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**tok, output_attentions=True, output_hidden_states=True)
    return out


def _projections(family, model, layer):
    """(Wq, bq, Wk, bk, Wv, bv, Wo) of a layer, read here by each family's own attribute names."""
    if family in ("bert", "roberta", "electra"):
        s = model.encoder.layer[layer].attention
        q, k, v, o = s.self.query, s.self.key, s.self.value, s.output.dense
    elif family == "albert":
        a = model.encoder.albert_layer_groups[0].albert_layers[0].attention
        q, k, v, o = a.query, a.key, a.value, a.dense
    elif family == "mpnet":
        a = model.encoder.layer[layer].attention.attn
        q, k, v, o = a.q, a.k, a.v, a.o
    else:
        a = model.transformer.layer[layer].attention
        q, k, v, o = a.q_lin, a.k_lin, a.v_lin, a.out_lin
    return [t.detach().double() for t in (q.weight, q.bias, k.weight, k.bias, v.weight, v.bias, o.weight)]


def test_softmax_row_equals_transformers_attention_and_q_k_are_the_projections(family_model):
    from core.analyses.inside_head import neuron_view

    family, lm = family_model
    out = _reference(lm, TEXT, TEXT_B)
    d = lm.hidden_size // lm.num_heads
    for layer, head, query in [(0, 1, 2), (lm.num_layers - 1, 3, 0), (1, 0, 9)]:
        view = neuron_view(lm, TEXT, TEXT_B, layer, head, query)
        expected = out.attentions[layer][0, head, query].numpy()
        assert view.attention.shape == expected.shape
        np.testing.assert_allclose(view.attention, expected, atol=1e-5)
        assert expected.max() > 2.0 / len(expected)  # a peaked row, so agreement is not just two uniform rows
        x = out.hidden_states[layer][0].double()  # this layer's input
        wq, bq, wk, bk, *_ = _projections(family, lm.model, layer)
        part = slice(head * d, (head + 1) * d)
        q = (x @ wq.T + bq)[query, part].numpy()
        k = (x @ wk.T + bk)[:, part].numpy()
        np.testing.assert_allclose(view.query, q, atol=1e-4)
        np.testing.assert_allclose(view.keys, k, atol=1e-4)
        np.testing.assert_allclose(view.products, q[None] * k, atol=1e-4)
        np.testing.assert_allclose(view.scores - view.bias, k @ q / np.sqrt(d), atol=1e-4)
        if family != "mpnet":
            assert not view.bias.any()


def test_norm_weighted_attention_equals_independent_computation(family_model):
    from core.analyses.inside_head import attention_norms

    family, lm = family_model
    out = _reference(lm, TEXT, TEXT_B)
    result = attention_norms(lm, TEXT, TEXT_B)
    heads, d = lm.num_heads, lm.hidden_size // lm.num_heads
    assert result.norms.shape == (lm.num_layers, heads, len(result.tokens), len(result.tokens))
    for layer in range(lm.num_layers):
        x = out.hidden_states[layer][0].double()
        *_, wv, bv, wo = _projections(family, lm.model, layer)
        v = x @ wv.T + bv  # [T, H*d]
        alpha = out.attentions[layer][0].double()  # [H, T, T]
        for h in range(heads):
            f = v[:, h * d:(h + 1) * d] @ wo[:, h * d:(h + 1) * d].T  # [T, D]: f^h(x_j)
            # ‖α_ij f(x_j)‖ as the vector norm of the scaled vector, not as α·‖f‖
            expected = torch.linalg.vector_norm(alpha[h][:, :, None] * f[None, :, :], dim=-1).numpy()
            np.testing.assert_allclose(result.norms[layer, h], expected, rtol=1e-4, atol=1e-5)


def test_zeroed_value_projection_gives_zero_norms(tmp_path):
    from core.analyses.inside_head import attention_norms
    from tests.conftest import make_tiny_bert

    folder = make_tiny_bert(tmp_path / "zeroed", layers=2, heads=4, seed=5)
    lm = load_model(str(folder), device="cpu")
    before = attention_norms(lm, TEXT)
    value = lm.model.encoder.layer[1].attention.self.value
    with torch.no_grad():
        value.weight[8:16] = 0.0  # head 1 of 4 (head size 8)
        value.bias[8:16] = 0.0
    after = attention_norms(lm, TEXT)
    assert np.all(after.norms[1, 1] == 0.0)
    assert after.norms[1, 0].min() > 0 and before.norms[1, 1].min() > 0
    np.testing.assert_allclose(after.norms[0], before.norms[0], rtol=1e-6)
    np.testing.assert_allclose(after.attentions[1, 1], before.attentions[1, 1], rtol=1e-6)  # α itself unchanged


def test_hooks_are_removed_even_when_the_pass_fails(tiny_bert_dir, monkeypatch):
    from core.analyses import inside_head

    lm = load_model(str(tiny_bert_dir), device="cpu")
    modules = list(lm.model.modules())
    boom = RuntimeError("boom")

    def fail(*args, **kwargs):
        raise boom

    monkeypatch.setattr(type(lm.model), "forward", fail)
    with pytest.raises(RuntimeError):
        inside_head.neuron_view(lm, TEXT, None, 0, 0, 1)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in modules)


def test_bad_layer_head_query_get_messages(tiny_bert_dir):
    from core.analyses.inside_head import InsideHeadError, neuron_view

    lm = load_model(str(tiny_bert_dir), device="cpu")
    for args, word in [((9, 0, 0), "layer"), ((0, 9, 0), "head"), ((0, 0, 99), "query")]:
        with pytest.raises(InsideHeadError, match=word):
            neuron_view(lm, TEXT, None, *args)
    with pytest.raises(InsideHeadError):
        neuron_view(lm, "  ", None, 0, 0, 0)


def test_norm_shares_over_a_corpus_match_per_input_average(tiny_bert_dir):
    from core.analyses.inside_head import CATEGORIES, attention_norms, norm_shares

    lm = load_model(str(tiny_bert_dir), device="cpu")
    inputs = [TEXT, (TEXT, TEXT_B), "he ran to the river bank ."]
    shares = norm_shares(lm, inputs, batch_size=2)
    assert shares.raw.shape == shares.norm.shape == (lm.num_layers, len(CATEGORIES))
    np.testing.assert_allclose(shares.raw.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(shares.norm.sum(axis=1), 1.0, atol=1e-5)
    # independent: loop over inputs one at a time, classify tokens by their text
    raw, norm = np.zeros_like(shares.raw), np.zeros_like(shares.norm)
    for item in inputs:
        a, b = (item, None) if isinstance(item, str) else item
        r = attention_norms(lm, a, b)
        cat = np.array([0 if t == "[CLS]" else 1 if t == "[SEP]" else 2 if t in ".,!?" else 3 for t in r.tokens])
        for layer in range(lm.num_layers):
            for c in range(4):
                raw[layer, c] += r.attentions[layer][..., cat == c].sum(-1).mean()
                w = r.norms[layer]
                norm[layer, c] += (w[..., cat == c].sum(-1) / w.sum(-1)).mean()
    np.testing.assert_allclose(shares.raw, raw / 3, atol=1e-5)
    np.testing.assert_allclose(shares.norm, norm / 3, atol=1e-5)


def test_cli_contracts(tiny_bert_dir):
    run = lambda *a: subprocess.run([sys.executable, "-m", "core", *a], capture_output=True, text=True, check=True)  # noqa: E731
    out = json.loads(run("neuron", "--model", str(tiny_bert_dir), "--text", TEXT, "--text-b", TEXT_B, "--layer", "2",
                         "--head", "2", "--query", "3", "--json").stdout)
    # issue 45 added where the view is and the keys its sentence filter keeps (all: every token); issue 46 the keys
    # the query may see ("visible": a local sliding-window layer hides the rest; BERT's see every key)
    assert list(out) == ["tokens", "query", "keys", "products", "scores", "attention", "layer", "head", "query_index",
                         "pair_filter", "key_positions", "visible", "truncated"]
    assert out["visible"] == [True] * len(out["tokens"])
    assert (out["layer"], out["head"], out["query_index"], out["pair_filter"]) == (2, 2, 3, "all")
    assert out["key_positions"] == list(range(len(out["tokens"])))
    assert out["truncated"] == {"tokens_dropped": 0}  # issue 32: what a long input lost
    t = len(out["tokens"])
    assert len(out["query"]) == 8 and np.shape(out["keys"]) == (t, 8) and np.shape(out["products"]) == (t, 8)
    assert len(out["scores"]) == len(out["attention"]) == t and abs(sum(out["attention"]) - 1) < 1e-5
    norms = json.loads(run("attention-norms", "--model", str(tiny_bert_dir), "--text", TEXT, "--json").stdout)
    assert list(norms) == ["tokens", "norms", "truncated"]
    assert np.shape(norms["norms"]) == (2, 4, len(norms["tokens"]), len(norms["tokens"]))
