"""core.model.adapter on a tiny random model of each family (BERT, RoBERTa, ELECTRA, ALBERT with one shared layer,
MPNet, DistilBERT), checked against computations written here: each family's weights read by its own attribute
names, plain torch hooks, and transformers' own outputs (hidden states, attentions, logits). Then ablation, inside
a head, value zeroing and the MLM lens, which run through the adapter, against the same independent references;
hooks gone after a failing pass; another thread's pass untouched; the one batched classifier predict."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from core.model.adapter import AdapterError, ModelAdapter, NoMaskedLMHead
from core.model.loading import LoadedModel
from tests.conftest import TINY_VOCAB

FAMILIES = ("bert", "roberta", "electra", "albert", "mpnet", "distilbert")
TEXTS = [("the cat sat on the mat .", "the dog ran , he was unhappy ."), ("a man ran to the river bank .", None)]


def _config(family: str):
    import transformers as tf

    common = dict(vocab_size=len(TINY_VOCAB), max_position_embeddings=80, pad_token_id=0, num_labels=3)
    size = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48)
    if family == "bert":
        return tf.BertConfig(**common, **size), tf.BertForMaskedLM, tf.BertForSequenceClassification
    if family == "roberta":
        return tf.RobertaConfig(**common, **size), tf.RobertaForMaskedLM, tf.RobertaForSequenceClassification
    if family == "electra":
        return (tf.ElectraConfig(**common, **size, embedding_size=24), tf.ElectraForMaskedLM,
                tf.ElectraForSequenceClassification)
    if family == "albert":
        return (tf.AlbertConfig(**common, **size, embedding_size=24, num_hidden_groups=1), tf.AlbertForMaskedLM,
                tf.AlbertForSequenceClassification)
    if family == "mpnet":
        return tf.MPNetConfig(**common, **size), tf.MPNetForMaskedLM, tf.MPNetForSequenceClassification
    config = tf.DistilBertConfig(**common, dim=32, n_layers=3, n_heads=4, hidden_dim=48)
    return config, tf.DistilBertForMaskedLM, tf.DistilBertForSequenceClassification


def _tokenizer(with_types: bool):
    from transformers import BertTokenizerFast

    names = ["input_ids", "token_type_ids", "attention_mask"] if with_types else ["input_ids", "attention_mask"]
    return BertTokenizerFast(vocab={p: i for i, p in enumerate(TINY_VOCAB)}, do_lower_case=True, model_max_length=64,
                             model_input_names=names)


def _peaked(model) -> None:
    """Random init (std 0.02) gives near-uniform attention and tiny attention outputs; larger weights make each
    head matter, so a wrong hook cannot hide below float error."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(s in name for s in ("query.weight", "key.weight", "value.weight", "q_lin.weight", "k_lin.weight",
                                       "v_lin.weight", ".q.weight", ".k.weight", ".v.weight")):
                p.normal_(0.0, 0.3)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    name = request.param
    config, mlm_cls, clf_cls = _config(name)
    config._attn_implementation = "eager"
    torch.manual_seed(7)
    mlm = mlm_cls(config).eval()
    _peaked(mlm)
    torch.manual_seed(8)
    clf = clf_cls(config).eval()
    _peaked(clf)
    tokenizer = _tokenizer(name not in ("mpnet", "distilbert"))
    lm = LoadedModel(ref=f"tiny-{name}", path="", source="local", model=mlm.base_model, tokenizer=tokenizer,
                     device="cpu", masked_lm=mlm)
    return name, mlm, clf, lm


def _feed(tokenizer, texts=TEXTS):
    firsts = [a for a, _ in texts]
    seconds = [b or "" for _, b in texts]
    return dict(tokenizer(firsts, seconds, padding=True, return_tensors="pt"))


def _modules(family: str, model, layer: int) -> dict:
    """Each family's attention projections and LayerNorms, by its own attribute names (not the adapter's)."""
    base = model.base_model
    if family in ("bert", "roberta", "electra"):
        l = base.encoder.layer[layer]
        a = l.attention
        return dict(q=a.self.query, k=a.self.key, v=a.self.value, o=a.output.dense, ln1=a.output.LayerNorm,
                    ln2=l.output.LayerNorm)
    if family == "albert":
        l = base.encoder.albert_layer_groups[0].albert_layers[0]
        a = l.attention
        return dict(q=a.query, k=a.key, v=a.value, o=a.dense, ln1=a.LayerNorm, ln2=l.full_layer_layer_norm)
    if family == "mpnet":
        l = base.encoder.layer[layer]
        a = l.attention.attn
        return dict(q=a.q, k=a.k, v=a.v, o=a.o, ln1=l.attention.LayerNorm, ln2=l.output.LayerNorm)
    l = base.transformer.layer[layer]
    a = l.attention
    return dict(q=a.q_lin, k=a.k_lin, v=a.v_lin, o=a.out_lin, ln1=l.sa_layer_norm, ln2=l.output_layer_norm)


def _linear(module, x):
    return x @ module.weight.T + module.bias


def _heads(x, n_heads=4):
    return x.view(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)


def _no_hooks(model) -> bool:
    """No hook but transformers' own (installed for good on the first output_attentions / output_hidden_states pass)."""
    return all(getattr(hook, "__name__", "") == "output_capturing_hook"
               for m in model.modules() for hook in (*m._forward_hooks.values(), *m._forward_pre_hooks.values()))


def test_every_point_equals_the_models_own_computation(family):
    name, mlm, _, lm = family
    feed = _feed(lm.tokenizer)
    adapter = ModelAdapter.of(mlm)
    points = ["resid_pre", "q", "k", "v", "z", "attn_out", "ffn_in", "ffn_out", "resid_post"]
    with torch.no_grad(), adapter.capture(points) as store:
        out = mlm(**feed, output_hidden_states=True, output_attentions=True)
    assert adapter.num_layers == 3 and _no_hooks(mlm)
    for layer in range(3):
        m = _modules(name, mlm, layer)
        x = out.hidden_states[layer]
        torch.testing.assert_close(store["resid_pre", layer], x)
        torch.testing.assert_close(store["resid_post", layer], out.hidden_states[layer + 1])
        for point in ("q", "k", "v"):
            assert store[point, layer].shape == (2, x.shape[1], 4, 8)
            torch.testing.assert_close(store[point, layer], _heads(_linear(m[point], x)), atol=1e-5, rtol=1e-5)
        # z: transformers' own attention probabilities times the value vectors, per head
        z = torch.einsum("bhqk,bkhd->bqhd", out.attentions[layer], _heads(_linear(m["v"], x)))
        torch.testing.assert_close(store["z", layer], z, atol=1e-5, rtol=1e-5)
        # output projection + residual + LayerNorm = the attention sub-layer's output = the feed-forward input
        attn_out = _linear(m["o"], z.flatten(-2))
        torch.testing.assert_close(store["attn_out", layer], attn_out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(store["ffn_in", layer], m["ln1"](attn_out + x), atol=1e-5, rtol=1e-5)
        # feed-forward output + residual + LayerNorm = the layer's output
        torch.testing.assert_close(m["ln2"](store["ffn_out", layer] + store["ffn_in", layer]),
                                   out.hidden_states[layer + 1], atol=1e-5, rtol=1e-5)
    if name == "albert":  # one shared module, yet three different layers' values
        assert not torch.allclose(store["q", 0], store["q", 1])


def _activation_modules(family: str, model) -> list:
    """The module whose output is each layer's feed-forward activation (after GELU), by each family's own names;
    ALBERT: its shared layer's activation, called once per layer."""
    base = model.base_model
    if family == "albert":
        return [base.encoder.albert_layer_groups[0].albert_layers[0].activation]
    if family == "distilbert":
        return [l.ffn.activation for l in base.transformer.layer]
    return [l.intermediate for l in base.encoder.layer]  # dense + act: BERT, RoBERTa, ELECTRA, MPNet


def test_ffn_act_equals_a_plain_hook_on_the_intermediate_module(family):
    name, mlm, _, lm = family
    feed = _feed(lm.tokenizer)
    seen = []
    handles = [m.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
               for m in _activation_modules(name, mlm)]
    try:
        with torch.no_grad():
            mlm(**feed)
    finally:
        for handle in handles:
            handle.remove()
    assert len(seen) == 3
    adapter = ModelAdapter.of(mlm)
    with torch.no_grad(), adapter.capture(["ffn_act", "ffn_out"]) as store:
        mlm(**feed)
    for layer in range(3):
        assert store["ffn_act", layer].shape == (2, feed["input_ids"].shape[1], 48)
        torch.testing.assert_close(store["ffn_act", layer], seen[layer], atol=0, rtol=0)
    # silencing every neuron of layer 1 leaves the feed-forward output at the second Linear's bias
    second = adapter.parts(1).ffn_act
    with torch.no_grad(), adapter.intervene("ffn_act", lambda value, _layer: torch.zeros_like(value), layers=1), \
            adapter.capture(["ffn_out"], layers=1) as silenced:
        mlm(**feed)
    torch.testing.assert_close(silenced["ffn_out", 1], second.bias.expand_as(silenced["ffn_out", 1]))
    assert _no_hooks(mlm)


def test_mlm_lens_at_the_last_layer_is_the_models_output(family):
    from core.analyses.masked import fill_mask, head_probabilities

    name, mlm, clf, lm = family
    feed = _feed(lm.tokenizer)
    with torch.no_grad():
        out = mlm(**feed, output_hidden_states=True)
        torch.testing.assert_close(ModelAdapter.of(mlm).mlm_logits(out.hidden_states[-1]), out.logits, atol=1e-5, rtol=1e-5)
    probs = head_probabilities(mlm, out.hidden_states[-1][1].numpy(), "cpu")
    np.testing.assert_allclose(probs, torch.softmax(out.logits[1], -1).numpy(), atol=1e-6)
    # the whole analysis: its last layer's guesses are the model's own softmax at the mask
    text = "the [MASK] sat on the mat ."
    result = fill_mask(lm, text, top_k=3)
    with torch.no_grad():
        own = torch.softmax(mlm(**lm.tokenizer(text, return_tensors="pt")).logits[0, 2], -1).numpy()
    assert result.positions == (2,) and len(result.layers) == 4
    np.testing.assert_allclose(result.top_probabilities[0, -1], np.sort(own)[::-1][:3], atol=1e-5)
    for model in (lm.model, clf):
        with pytest.raises(NoMaskedLMHead, match=type(model).__name__):
            ModelAdapter.of(model).mlm_head


@pytest.mark.parametrize("mode", ["mask", "uniform"])
def test_ablation_through_the_adapter_equals_hooks_written_here(family, mode):
    from core.analyses.ablation import HeadDisabler

    name, _, clf, lm = family
    feed = _feed(lm.tokenizer)
    real = feed["attention_mask"].bool()
    layer, heads = 1, (0, 2)
    with torch.no_grad():
        intact = clf(**feed).logits
        with HeadDisabler(clf, mode=mode) as disabler:
            disabler.disabled = {}
            unablated = clf(**feed).logits
            disabler.disabled = {layer: heads}
            ablated = clf(**feed).logits
    torch.testing.assert_close(unablated, intact)
    # independent: plain torch hooks, counting calls so ALBERT's shared modules act at the right layer only
    m = _modules(name, clf, layer)
    target = layer if name == "albert" else 0  # the call of these modules that is layer 1 (ALBERT: one for all)
    calls = {"v": 0, "o": 0}
    values = {}

    def keep_value(_module, _inputs, output):
        if calls["v"] == target:
            values["v"] = output
        calls["v"] += 1

    def edit_context(_module, inputs):
        call, calls["o"] = calls["o"], calls["o"] + 1
        if call != target:
            return None
        context = inputs[0].clone()
        for h in heads:
            part = slice(h * 8, (h + 1) * 8)
            if mode == "mask":
                context[..., part] = 0.0
            else:
                w = (real.float() / real.sum(1, keepdim=True))[..., None]
                context[..., part] = (values["v"][..., part] * w).sum(1, keepdim=True)
        return (context,)

    handles = [m["v"].register_forward_hook(keep_value), m["o"].register_forward_pre_hook(edit_context)]
    try:
        with torch.no_grad():
            expected = clf(**feed).logits
    finally:
        for handle in handles:
            handle.remove()
    torch.testing.assert_close(ablated, expected, atol=1e-5, rtol=1e-5)
    assert (ablated - intact).abs().max() > 1e-4
    assert _no_hooks(clf)


def test_inside_a_head_through_the_adapter(family):
    from core.analyses.inside_head import attention_norms, neuron_view

    name, mlm, _, lm = family
    a, b = TEXTS[0]
    with torch.no_grad():
        out = lm.model(**lm.tokenizer(a, b, return_tensors="pt"), output_attentions=True, output_hidden_states=True)
    layer, head, query = 2, 1, 3
    view = neuron_view(lm, a, b, layer, head, query)
    m = _modules(name, mlm, layer)
    x = out.hidden_states[layer][0]
    with torch.no_grad():
        q = _heads(_linear(m["q"], x))[query, head]
        k = _heads(_linear(m["k"], x))[:, head]
    np.testing.assert_allclose(view.query, q.numpy(), atol=1e-5)
    np.testing.assert_allclose(view.products, (q[None] * k).numpy(), atol=1e-5)
    np.testing.assert_allclose(view.attention, out.attentions[layer][0, head, query].numpy(), atol=1e-5)
    norms = attention_norms(lm, a, b)
    with torch.no_grad():
        v = _heads(_linear(m["v"], x))[:, head]  # [T, d]
        f = v @ m["o"].weight[:, head * 8:(head + 1) * 8].T  # [T, D]
        expected = torch.linalg.vector_norm(out.attentions[layer][0, head][:, :, None] * f[None], dim=-1)
    np.testing.assert_allclose(norms.norms[layer, head], expected.numpy(), rtol=1e-4, atol=1e-6)


def test_value_zeroing_through_the_adapter_equals_whole_model_passes(family):
    from core.analyses.explain import value_zeroing

    name, mlm, _, lm = family
    feed = lm.tokenizer("the cat sat on the mat .", return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**feed, output_hidden_states=True)
    hidden = torch.stack(out.hidden_states)[:, 0].numpy()
    got = value_zeroing(lm, hidden)
    n = hidden.shape[1]
    assert got.shape == (3, n, n)
    # independent: the whole model run once per (layer, token) with a plain hook zeroing that token's value vectors
    # in that layer only; the layer's output is then hidden_states[layer + 1] of that pass
    for layer in range(3):
        value = _modules(name, mlm, layer)["v"]
        scores = np.zeros((n, n))
        for j in range(n):
            calls = [0]

            def zero(_module, _inputs, output, j=j, target=layer if name == "albert" else 0, calls=calls):
                call, calls[0] = calls[0], calls[0] + 1
                if call == target:
                    output = output.clone()
                    output[:, j] = 0.0
                    return output
                return None

            handle = value.register_forward_hook(zero)
            try:
                with torch.no_grad():
                    zeroed = lm.model(**feed, output_hidden_states=True).hidden_states[layer + 1][0]
            finally:
                handle.remove()
            scores[:, j] = 1.0 - torch.nn.functional.cosine_similarity(zeroed, out.hidden_states[layer + 1][0], dim=-1).numpy()
        scores = np.clip(scores, 0.0, None)
        np.testing.assert_allclose(got[layer], scores / scores.sum(-1, keepdims=True), atol=2e-4)


def test_hooks_are_gone_after_a_failing_pass_and_the_lock_is_free(family):
    _, mlm, _, lm = family
    feed = _feed(lm.tokenizer)
    with torch.no_grad():
        before = mlm(**feed).logits
    adapter = ModelAdapter.of(mlm)

    def boom(value, layer):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with adapter.capture(["resid_pre", "q", "z", "ffn_out", "call"]), adapter.intervene("ffn_in", boom, layers=1):
            mlm(**feed)
    assert _no_hooks(mlm)
    with pytest.raises(RuntimeError, match="inside"):
        with adapter.intervene("z", lambda value, layer: value * 0):
            raise RuntimeError("raised inside the block")
    assert _no_hooks(mlm)
    with torch.no_grad():
        torch.testing.assert_close(mlm(**feed).logits, before)
    got = []
    thread = threading.Thread(target=lambda: got.append(adapter.lock.acquire(timeout=5) and adapter.lock.release() is None))
    thread.start()
    thread.join()
    assert got == [True]


def test_another_threads_pass_is_untouched_while_hooks_are_on(family):
    _, mlm, _, lm = family
    feed = _feed(lm.tokenizer)
    with torch.no_grad():
        before = mlm(**feed).logits
    adapter = ModelAdapter.of(mlm)
    seen = []
    with torch.no_grad(), adapter.intervene("z", lambda value, layer: torch.zeros_like(value)):
        thread = threading.Thread(target=lambda: seen.append(mlm(**feed).logits))
        thread.start()
        thread.join()
        changed = mlm(**feed).logits
    torch.testing.assert_close(seen[0], before)
    assert (changed - before).abs().max() > 1e-3


def test_bad_points_layers_and_models_get_messages(family):
    name, mlm, _, _ = family
    adapter = ModelAdapter.of(mlm)
    with pytest.raises(AdapterError, match="layer 3"):
        adapter.parts(3)
    with pytest.raises(AdapterError, match="unknown hook point"):
        with adapter.capture(["attention_pattern"]):
            pass
    if name != "mpnet":
        with pytest.raises(AdapterError, match="only MPNet"):
            with adapter.capture(["position_bias"]):
                pass
    with pytest.raises(AdapterError, match="Linear"):
        ModelAdapter.of(torch.nn.Linear(2, 2))
    assert _no_hooks(mlm)


def test_one_batched_predict_equals_one_input_at_a_time(family):
    from core.analyses.explain import Explainer
    from core.model.encoding import tokenize
    from core.progress import Cancelled
    from core.training.classifier import predict_logits

    name, _, clf, lm = family
    types = "token_type_ids" in lm.tokenizer.model_input_names

    def logits(embeds, type_ids, mask):
        return clf(inputs_embeds=embeds, attention_mask=mask, **({"token_type_ids": type_ids} if types else {})).logits

    explainer = Explainer(lm, ("a", "b", "c"), logits, clf.get_input_embeddings())
    items = tokenize(lm, ["the cat sat .", ("a man ran to the river bank .", "he was unhappy ."), "it is", "the dog"])
    seen = []
    got = predict_logits(explainer, items, batch_size=3, progress=lambda d, t: seen.append((d, t)))
    with torch.no_grad():
        for row, item in enumerate(items):
            feed = {"input_ids": torch.as_tensor(item.input_ids)[None]}
            if types:
                feed["token_type_ids"] = torch.as_tensor(item.type_ids)[None]
            np.testing.assert_allclose(got[row], clf(**feed).logits[0].numpy(), atol=1e-5)
    assert seen == [(3, 4), (4, 4)]
    with pytest.raises(Cancelled):
        predict_logits(explainer, items, should_stop=lambda: True)
    assert predict_logits(explainer, [], batch_size=3).shape == (0, 3)
