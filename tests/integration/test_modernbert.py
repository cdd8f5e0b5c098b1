"""ModernBERT (issue 46) on a tiny random ModernBertForMaskedLM (tests/tiny_modernbert.py: global, local with a
4-token window, global): every number BERT Lens reads checked against transformers' own outputs or a computation
written here with plain torch hooks and transformers' rotary functions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline
from transformers.models.modernbert import modeling_modernbert as mb

from core.analyses import inside_head, masked, patching
from core.charts.inside_head import neuron_chart, score_frame
from core.model.adapter import ModelAdapter
from core.model.encoding import encode
from core.model.loading import load_model

SENTENCES = ["The cat sat on the mat and the dog ran in the park.", "He is unhappy.",
             ("The girl saw the boy.", "It was unhappy.")]
CLEAN = "The man sat on the [MASK]."
CORRUPT = "The dog sat on the [MASK]."


@pytest.fixture(scope="module")
def lm(tiny_modernbert_dir):
    return load_model(str(tiny_modernbert_dir), device="cpu", masked_lm=True)


@pytest.fixture(scope="module")
def reference(tiny_modernbert_dir):
    """transformers' own model and tokenizer, loaded apart from BERT Lens."""
    model = AutoModelForMaskedLM.from_pretrained(str(tiny_modernbert_dir), attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(str(tiny_modernbert_dir))


def _feed(tokenizer, item):
    return tokenizer(*item, return_tensors="pt") if isinstance(item, tuple) else tokenizer(item, return_tensors="pt")


def test_the_tiny_model_has_a_local_layer_narrower_than_the_sentences(lm):
    assert lm.config.layer_types == ["full_attention", "sliding_attention", "full_attention"]
    assert lm.config.local_attention < len(encode(lm, SENTENCES[0]).tokens)


def test_attentions_and_hidden_states_equal_transformers_batched_and_alone(lm, reference):
    model, tokenizer = reference
    batched = encode(lm, SENTENCES)  # one padded batch: the short inputs are padded
    for item, enc in zip(SENTENCES, batched):
        with torch.no_grad():
            out = model(**_feed(tokenizer, item), output_attentions=True, output_hidden_states=True)
        expected_attn = torch.stack(out.attentions)[:, 0].numpy()
        expected_hidden = torch.stack(out.hidden_states)[:, 0].numpy()
        alone = encode(lm, item)
        for got in (enc, alone):
            np.testing.assert_allclose(got.attentions, expected_attn, atol=1e-5)
            np.testing.assert_allclose(got.hidden_states, expected_hidden, atol=1e-5)
        assert enc.tokens == tuple(tokenizer.convert_ids_to_tokens(_feed(tokenizer, item)["input_ids"][0]))


def test_a_local_layers_pattern_is_banded_and_a_global_one_is_not(lm):
    enc = encode(lm, SENTENCES[0])
    half = lm.config.local_attention // 2
    n = enc.n_tokens
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    assert (enc.attentions[1][:, distance > half] == 0).all()
    assert (enc.attentions[1][:, distance <= half] > 0).all()
    assert (enc.attentions[0][:, distance > half] > 0).any() and (enc.attentions[2][:, distance > half] > 0).any()
    np.testing.assert_allclose(enc.attentions.sum(-1), 1.0, atol=1e-5)


def _plain_reads(model, feed):
    """Wqkv's output, Wo's input, Wi's output and Wo(mlp)'s input of each layer, and the rotary tables, by hooks."""
    seen: dict = {}
    handles = []
    for index, layer in enumerate(model.model.layers):
        handles.append(layer.attn.Wqkv.register_forward_hook(
            lambda _m, _a, out, i=index: seen.__setitem__(("qkv", i), out.detach().clone())))
        handles.append(layer.attn.Wo.register_forward_pre_hook(
            lambda _m, args, i=index: seen.__setitem__(("z", i), args[0].detach().clone())))
        handles.append(layer.mlp.Wi.register_forward_hook(
            lambda _m, _a, out, i=index: seen.__setitem__(("wi", i), out.detach().clone())))
        handles.append(layer.register_forward_pre_hook(
            lambda _m, _a, kwargs, i=index: seen.__setitem__(("kwargs", i), kwargs), with_kwargs=True))
    try:
        with torch.no_grad():
            out = model(**feed, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return seen, out


def test_every_point_equals_plain_hooks_and_q_k_after_rotation_give_the_scores(lm, reference):
    model, tokenizer = reference
    feed = tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")
    seen, out = _plain_reads(model, feed)
    adapter = ModelAdapter.of(lm.masked_lm)
    points = ["q", "k", "v", "z", "q_rot", "k_rot", "attn_scores", "pattern", "ffn_act"]
    with adapter.capture(points) as store, torch.no_grad():
        lm.masked_lm(**feed)
    heads, size = 4, 8
    for layer in range(3):
        q, k, v = (t.view(*t.shape[:-1], heads, size) for t in seen[("qkv", layer)].chunk(3, dim=-1))
        torch.testing.assert_close(store["q", layer], q, atol=1e-6, rtol=0)
        torch.testing.assert_close(store["k", layer], k, atol=1e-6, rtol=0)
        torch.testing.assert_close(store["v", layer], v, atol=1e-6, rtol=0)
        torch.testing.assert_close(store["z", layer], seen[("z", layer)].view(*q.shape), atol=1e-6, rtol=0)
        gate_in, gate = seen[("wi", layer)].chunk(2, dim=-1)  # GeGLU: act(input) * gate
        torch.testing.assert_close(store["ffn_act", layer], torch.nn.functional.gelu(gate_in) * gate, atol=1e-6, rtol=0)
        # rotation by transformers' own functions, from the q/k the projection gave
        cos, sin = seen[("kwargs", layer)]["position_embeddings"]
        q_rot, k_rot = mb.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        assert not torch.allclose(q_rot, q.transpose(1, 2), atol=1e-3)  # the rotation does something
        torch.testing.assert_close(store["q_rot", layer], q_rot.transpose(1, 2), atol=1e-5, rtol=0)
        torch.testing.assert_close(store["k_rot", layer], k_rot.transpose(1, 2), atol=1e-5, rtol=0)
        mask = seen[("kwargs", layer)]["attention_mask"]
        scores = q_rot @ k_rot.transpose(2, 3) * size ** -0.5 + (mask if mask is not None else 0)
        torch.testing.assert_close(store["attn_scores", layer], scores, atol=1e-4, rtol=0)
        torch.testing.assert_close(store["pattern", layer], out.attentions[layer], atol=1e-6, rtol=0)
        torch.testing.assert_close(store["attn_scores", layer].softmax(-1), out.attentions[layer], atol=1e-5, rtol=0)


def test_the_neuron_view_shows_q_and_k_after_rotation_and_the_local_window(lm, reference):
    model, tokenizer = reference
    text = SENTENCES[0]
    seen, out = _plain_reads(model, tokenizer(text, return_tensors="pt"))
    query, half = 9, lm.config.local_attention // 2
    for layer in (0, 1):
        view = inside_head.neuron_view(lm, text, None, layer, 2, query)
        q, k, _ = (t.view(*t.shape[:-1], 4, 8).transpose(1, 2) for t in seen[("qkv", layer)].chunk(3, dim=-1))
        cos, sin = seen[("kwargs", layer)]["position_embeddings"]
        q_rot, k_rot = mb.apply_rotary_pos_emb(q, k, cos, sin)
        np.testing.assert_allclose(view.query, q_rot[0, 2, query].numpy(), atol=1e-5)
        np.testing.assert_allclose(view.keys, k_rot[0, 2].numpy(), atol=1e-5)
        expected = (q_rot[0, 2, query] @ k_rot[0, 2].T).numpy() / np.sqrt(8)
        np.testing.assert_allclose(view.scores, expected, atol=1e-4)
        np.testing.assert_allclose(view.attention, out.attentions[layer][0, 2, query].numpy(), atol=1e-5)
        visible = np.abs(np.arange(len(view.tokens)) - query) <= half if layer == 1 else np.ones(len(view.tokens), bool)
        np.testing.assert_array_equal(view.visible, visible)
        assert view.to_json()["visible"] == visible.tolist() and view.rotated
        frame = score_frame(view)  # the chart greys the keys outside the window
        assert frame["visible"].tolist() == visible.tolist()
        assert ("(grey: outside the window)" in json.dumps(neuron_chart(view).to_dict())) == (layer == 1)


def test_fill_mask_top5_equals_the_pipeline(lm, reference, tiny_modernbert_dir):
    model, tokenizer = reference
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
    result = masked.fill_mask(lm, CLEAN, top_k=5)
    expected = fill(CLEAN.replace("[MASK]", tokenizer.mask_token), top_k=5)
    assert list(result.top_ids[0, -1]) == [e["token"] for e in expected]
    np.testing.assert_allclose(result.top_probabilities[0, -1], [e["score"] for e in expected], atol=1e-5)


def test_the_per_layer_lens_reads_earlier_layers_through_the_final_norm(lm, reference):
    model, tokenizer = reference
    result = masked.fill_mask(lm, CLEAN, top_k=3, layers="all")
    enc = encode(lm, CLEAN)
    position = result.positions[0]
    with torch.no_grad():
        state = torch.from_numpy(enc.hidden_states[1, position])
        probs = torch.softmax(model.decoder(model.head(model.model.final_norm(state))), -1)
    np.testing.assert_allclose(result.top_probabilities[0, 1], torch.topk(probs, 3).values.numpy(), atol=1e-5)


def test_patching_the_last_layers_residual_at_the_mask_recovers_exactly_one(lm):
    result = patching.patch(lm, CLEAN, CORRUPT, "Ġthe", "positions")
    mask = result.tokens.index("[MASK]")
    assert abs(result.gap) > 1e-4
    assert result.recovered[2, mask] == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(np.delete(result.recovered[2], mask), 0.0, atol=1e-5)


def test_head_patching_equals_a_plain_hook_computation(lm, reference):
    model, tokenizer = reference
    result = patching.patch(lm, CLEAN, CORRUPT, "Ġthe", "heads", memory_mb=0.05)
    clean, corrupt = (tokenizer(t.replace("[MASK]", tokenizer.mask_token), return_tensors="pt") for t in (CLEAN, CORRUPT))
    clean_z = [_plain_reads(model, clean)[0][("z", layer)] for layer in range(3)]
    position = int((corrupt["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
    target = tokenizer.convert_tokens_to_ids("Ġthe")
    expected = np.empty((3, 4))
    for layer in range(3):
        for head in range(4):
            def put(_m, args, layer=layer, head=head):
                x = args[0].clone()
                x[..., head * 8:(head + 1) * 8] = clean_z[layer][..., head * 8:(head + 1) * 8]
                return (x,)
            handle = model.model.layers[layer].attn.Wo.register_forward_pre_hook(put)
            try:
                with torch.no_grad():
                    logits = model(**corrupt).logits[0, position]
            finally:
                handle.remove()
            expected[layer, head] = float(torch.log_softmax(logits, -1)[target])
    np.testing.assert_allclose(result.patched, expected, atol=1e-4)
    assert np.ptp(expected) > 1e-3


def test_running_the_layers_again_gives_the_encoders_output(lm, reference):
    model, tokenizer = reference
    feed = tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")
    adapter = ModelAdapter.of(lm.masked_lm)
    with adapter.capture(["call", "resid_pre"]) as store, torch.no_grad():
        out = lm.model(**feed)
    with torch.no_grad():
        again = adapter.run_layers(store["resid_pre", 1], store["call", 0], 1)  # call of a global layer, reused
        one = adapter.run_layers(store["resid_pre", 1], store["call", 0], 1, 2)
    rows = feed["attention_mask"].bool()
    torch.testing.assert_close(again[rows], out.last_hidden_state[rows], atol=1e-5, rtol=0)
    torch.testing.assert_close(one[rows], store["resid_pre", 2][rows], atol=1e-5, rtol=0)


def test_words_merge_from_byte_level_pieces_and_a_pair_has_no_token_types(lm):
    from core.model.encoding import Words, padded_batch, tokenize

    enc = encode(lm, ("The cat sat on the [MASK].", "He is unhappy."))
    # [CLS] A [SEP] B [SEP]; "[MASK]" takes the space before it (lstrip), shown without it
    assert enc.tokens == ("[CLS]", "The", "Ġcat", "Ġsat", "Ġon", "Ġthe", "[MASK]", ".", "[SEP]", "He", "Ġis", "Ġunhap",
                          "py", ".", "[SEP]")
    assert enc.words == ("The", "cat", "sat", "on", "the", "[MASK]", ".", "He", "is", "unhappy", ".")
    assert list(enc.segment_ids) == [0] * 9 + [1] * (enc.n_tokens - 9)
    assert "token_type_ids" not in padded_batch(lm, tokenize(lm, [("a", "b")]))
    # pre-split words (a treebank's) are read as the sentence reads them: each with the space before it
    split = encode(lm, Words(["the", "cat", "sat", "unhappy"]))
    assert split.tokens[2:] == ("Ġcat", "Ġsat", "Ġunhap", "py", "[SEP]") and list(split.word_ids) == [-1, 0, 1, 2, 3, 3, -1]


def test_loading_accepts_modernbert_and_finds_its_mlm_head(tiny_modernbert_dir, tmp_path):
    import shutil

    from core.model.loading import availability, has_mlm_head
    from tests.tiny_modernbert import make_tiny_modernbert

    assert availability(str(tiny_modernbert_dir)).loadable
    assert has_mlm_head(tiny_modernbert_dir)
    assert not has_mlm_head(make_tiny_modernbert(tmp_path / "bare", masked_lm=False))
    other = tmp_path / "gpt2"
    shutil.copytree(tiny_modernbert_dir, other)
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    refused = availability(str(other))
    assert not refused.loadable and "modernbert" in refused.reason
