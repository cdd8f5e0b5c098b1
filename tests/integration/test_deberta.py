"""DeBERTa-v2/v3 (issue 46) on a tiny random DebertaV2ForMaskedLM saved with safetensors and loaded as the app loads
it: every hook point against transformers' own outputs and a computation written here (the disentangled terms
from the weights, with the relative-position buckets re-derived from the DeBERTa paper's formula), fill-mask
against transformers' pipeline, patching against plain hooks, and the loading rules (MLM head or not, token types,
eager attention, the convolution variant refused)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from core.analyses import masked, patching
from core.model.adapter import DEBERTA_TERMS, AdapterError, ModelAdapter
from core.model.encoding import padded_batch, tokenize
from core.model.loading import has_mlm_head, load_model

PAIR = ("the cat sat on the mat .", "he ran to the river bank .")
SHORT = "a dog ran quickly ."
CLEAN = "the man sat on the [MASK] ."
CORRUPT = "the woman sat on the [MASK] ."
TARGET = "mat"


@pytest.fixture(scope="module")
def lm(tiny_deberta_dir):
    return load_model(str(tiny_deberta_dir), masked_lm=True)


def _pass(lm, points):
    feed = padded_batch(lm, tokenize(lm, [PAIR, SHORT]))
    adapter = ModelAdapter.of(lm.masked_lm)
    with torch.no_grad(), adapter.capture(points) as store:
        out = lm.masked_lm(**feed, output_attentions=True, output_hidden_states=True)
    return feed, store, out


def _bucket(relative: np.ndarray, buckets: int, max_position: int) -> np.ndarray:
    """DeBERTa's relative position bucket (He et al. 2021, log buckets): exact up to buckets/2 either way, then
    log-spaced up to max_position."""
    mid = buckets // 2
    out = relative.astype(np.float64).copy()
    far = np.abs(relative) > mid
    magnitude = np.abs(relative[far]).astype(np.float64)
    out[far] = np.sign(relative[far]) * (np.ceil(np.log(magnitude / mid) / np.log((max_position - 1) / mid)
                                                 * (mid - 1)) + mid)
    return out.astype(np.int64)


def _terms_by_hand(lm, hidden: torch.Tensor, layer: int) -> dict:
    """c2c, c2p and p2c of one layer from its weights and input [B, T, D], written from the paper and config."""
    config, base = lm.config, lm.masked_lm.deberta
    attention = base.encoder.layer[layer].attention.self
    heads, d = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    linear = lambda m, x: (x.double() @ m.weight.double().T + m.bias.double())  # noqa: E731
    split = lambda x: x.view(*x.shape[:-1], heads, d).movedim(-2, -3)  # noqa: E731 [..., T, H*d] -> [..., H, T, d]
    q, k = split(linear(attention.query_proj, hidden)), split(linear(attention.key_proj, hidden))
    rel = torch.nn.functional.layer_norm(base.encoder.rel_embeddings.weight.double(), (config.hidden_size,),
                                         base.encoder.LayerNorm.weight.double(), base.encoder.LayerNorm.bias.double(),
                                         config.layer_norm_eps)
    pos_q, pos_k = split(linear(attention.query_proj, rel)), split(linear(attention.key_proj, rel))  # share_att_key
    n = hidden.shape[1]
    positions = np.arange(n)
    span = config.position_buckets
    delta = _bucket(positions[:, None] - positions[None, :], span, config.max_relative_positions)  # [i, j]: i - j
    c2p_index = torch.as_tensor(np.clip(delta + span, 0, 2 * span - 1))
    p2c_index = torch.as_tensor(np.clip(-delta.T + span, 0, 2 * span - 1))  # [i, j]: the bucket of j - i, negated
    scale = math.sqrt(d * 3)
    c2c = q @ k.transpose(-1, -2) / scale
    c2p = torch.einsum("bhid,hijd->bhij", q, pos_k[:, c2p_index]) / scale
    p2c = torch.einsum("bhjd,hijd->bhij", k, pos_q[:, p2c_index]) / scale
    return {"c2c": c2c, "c2p": c2p, "p2c": p2c}


def test_it_loads_as_deberta_with_its_mlm_head_and_no_token_types(lm, tiny_deberta_dir):
    adapter = ModelAdapter.of(lm.masked_lm)
    assert adapter.family == "deberta-v2" and adapter.has_score_terms and adapter.num_layers == 2
    assert lm.masked_lm is not None and has_mlm_head(tiny_deberta_dir)
    assert lm.model.config._attn_implementation == "eager"
    # type_vocab_size 0: the model has no segment embeddings, so no front end builds token types for it
    assert lm.config.type_vocab_size == 0 and "token_type_ids" not in padded_batch(lm, tokenize(lm, [PAIR]))
    item = tokenize(lm, [PAIR])[0]
    assert item.tokens[:3] == ("[CLS]", "▁the", "▁cat") and item.words[:2] == ("the", "cat")


def test_sdpa_asked_for_loads_eager(tiny_deberta_dir):
    """transformers has no SDPA for DeBERTa: training and the classifier loops ask for it and get eager."""
    loaded = load_model(str(tiny_deberta_dir), attention="sdpa")
    assert loaded.model.config._attn_implementation == "eager"


def test_hidden_states_attentions_and_points_equal_transformers(lm):
    feed, store, out = _pass(lm, ["resid_pre", "resid_post", "q", "k", "v", "z", "pattern", "attn_scores",
                                  "attn_terms", "ffn_act"])
    base = lm.masked_lm.deberta
    for layer in range(2):
        x = out.hidden_states[layer]
        torch.testing.assert_close(store["resid_pre", layer], x, atol=1e-5, rtol=0)
        torch.testing.assert_close(store["resid_post", layer], out.hidden_states[layer + 1], atol=1e-5, rtol=0)
        torch.testing.assert_close(store["pattern", layer], out.attentions[layer], atol=1e-5, rtol=0)
        torch.testing.assert_close(store["attn_scores", layer].softmax(-1), out.attentions[layer], atol=1e-5, rtol=0)
        self_attention = base.encoder.layer[layer].attention.self
        # q and k are the tokens' projections, not their second run on the relative embeddings (share_att_key)
        q = x @ self_attention.query_proj.weight.T + self_attention.query_proj.bias
        torch.testing.assert_close(store["q", layer], q.view(*q.shape[:-1], 4, 8), atol=1e-5, rtol=0)
        z = torch.einsum("bhqk,bkhd->bqhd", out.attentions[layer], store["v", layer])
        torch.testing.assert_close(store["z", layer], z, atol=1e-5, rtol=0)


def test_c2c_c2p_p2c_equal_a_computation_from_the_weights_and_sum_to_the_scores(lm):
    feed, store, out = _pass(lm, ["attn_terms", "attn_scores"])
    real = feed["attention_mask"].bool()
    pairs = (real[:, None, :, None] & real[:, None, None, :]).expand(-1, 4, -1, -1)
    for layer in range(2):
        terms = store["attn_terms", layer]
        assert set(terms) == set(DEBERTA_TERMS)
        by_hand = _terms_by_hand(lm, out.hidden_states[layer], layer)
        for name in DEBERTA_TERMS:
            torch.testing.assert_close(terms[name].double(), by_hand[name], atol=1e-5, rtol=0)
            assert terms[name].abs().max() > 0.1  # each term matters in this model
        total = terms["c2c"] + terms["c2p"] + terms["p2c"]
        torch.testing.assert_close(total[pairs], store["attn_scores", layer][pairs], atol=1e-5, rtol=0)
        # the padding is filled, as DeBERTa's masked_fill does, so softmax gives it exactly 0
        assert (store["attn_scores", layer][~pairs] == torch.finfo(torch.float32).min).all()


def test_the_buckets_written_here_are_transformers(lm):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    relative = np.arange(-60, 61)
    expected = make_log_bucket_position(torch.as_tensor(relative), 8, 64).numpy()
    np.testing.assert_array_equal(_bucket(relative, 8, 64), expected)
    assert len(set(_bucket(relative, 8, 64))) < len(relative)  # far positions share buckets


def test_terms_are_only_for_deberta(tiny_bert_dir):
    bert = load_model(str(tiny_bert_dir))
    with pytest.raises(AdapterError, match="only DeBERTa"):
        with ModelAdapter.of(bert.model).capture(["attn_terms"]):
            pass


def test_fill_mask_top5_equals_transformers_pipeline(lm):
    from transformers import pipeline

    text = "the cat sat on the [MASK] ."
    ours = masked.fill_mask(lm, text, top_k=5, layers="last")
    theirs = pipeline("fill-mask", model=lm.masked_lm, tokenizer=lm.tokenizer, device="cpu", top_k=5)(text)
    assert list(ours.top_tokens[0][-1]) == [row["token_str"] if row["token_str"] in lm.tokenizer.get_vocab()
                                            else lm.tokenizer.convert_ids_to_tokens(row["token"]) for row in theirs]
    assert [int(i) for i in ours.top_ids[0][-1]] == [row["token"] for row in theirs]
    np.testing.assert_allclose(ours.top_probabilities[0][-1], [row["score"] for row in theirs], atol=1e-5)


def test_patching_the_last_residual_at_the_mask_recovers_exactly_one(lm):
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "positions")
    mask = result.tokens.index("[MASK]")
    assert abs(result.clean_metric - result.corrupt_metric) > 1e-3
    assert result.recovered[-1, mask] == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(np.delete(result.recovered[-1], mask), 0.0, atol=1e-4)


def test_head_patching_equals_plain_hooks(lm):
    mlm, tokenizer = lm.masked_lm, lm.tokenizer
    feeds = [dict(tokenizer(t.replace("[MASK]", tokenizer.mask_token), return_tensors="pt")) for t in (CLEAN, CORRUPT)]
    position = int((feeds[0]["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
    target = tokenizer.convert_tokens_to_ids("▁" + TARGET)
    outputs = [layer.attention.output.dense for layer in mlm.deberta.encoder.layer]

    def log_prob(feed):
        with torch.no_grad():
            return float(torch.log_softmax(mlm(**feed).logits[0, position], -1)[target])

    clean_z = []
    handles = [m.register_forward_pre_hook(lambda _m, args: clean_z.append(args[0].clone())) for m in outputs]
    log_prob(feeds[0])
    for h in handles:
        h.remove()
    expected = np.empty((2, 4))
    for layer in range(2):
        for head in range(4):
            def put(_m, args, head=head, layer=layer):
                x = args[0].clone()
                x[..., head * 8:(head + 1) * 8] = clean_z[layer][..., head * 8:(head + 1) * 8]
                return (x,)
            handle = outputs[layer].register_forward_pre_hook(put)
            expected[layer, head] = log_prob(feeds[1])
            handle.remove()
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads")
    np.testing.assert_allclose(result.patched, expected, atol=1e-4)
    assert np.ptp(expected) > 1e-3


def _copy_with(tiny_deberta_dir, tmp_path, **config_changes):
    folder = tmp_path / "variant"
    shutil.copytree(tiny_deberta_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(config_changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_v3_checkpoint_whose_head_the_config_would_not_build_counts_as_headless(tiny_deberta_dir, tmp_path):
    """DeBERTa-v3's released checkpoints hold lm_predictions.* but no "legacy": false, so transformers would build
    BERT's cls head with random weights: it has no MLM head, and the masked-word page offers the fitted head."""
    folder = _copy_with(tiny_deberta_dir, tmp_path, legacy=True)
    assert not has_mlm_head(folder)
    loaded = load_model(str(folder), masked_lm=True)
    assert loaded.masked_lm is None
    with pytest.raises(masked.NoMaskedLMHead, match="fit-mlm-head"):
        masked.fill_mask(loaded, "the cat sat on the [MASK] .")


def test_deberta_v2_with_a_convolution_is_refused_plainly(tiny_deberta_dir, tmp_path):
    from transformers import DebertaV2Config, DebertaV2Model

    config = DebertaV2Config.from_pretrained(str(tiny_deberta_dir))
    config.conv_kernel_size = 3
    with pytest.raises(AdapterError, match="convolution after its first layer"):
        ModelAdapter.of(DebertaV2Model(config))


def test_the_family_error_names_deberta(tmp_path):
    from core.model.loading import ModelUnavailable, _check_architecture

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelUnavailable, match="deberta-v2"):
        _check_architecture(tmp_path, "x")


def test_layers_rerun_from_an_unpadded_call_give_the_models_hidden_states(lm):
    """run_layers with unpadded_call (value zeroing, the layer lens): DeBERTa's layers need its mask, relative
    positions and embeddings passed again."""
    feed = padded_batch(lm, tokenize(lm, [SHORT]))
    adapter = ModelAdapter.of(lm.model)
    with torch.no_grad():
        out = lm.model(**feed, output_hidden_states=True)
        call = adapter.unpadded_call(out.hidden_states[0])
        for start in range(2):
            torch.testing.assert_close(adapter.run_layers(out.hidden_states[start], call, start),
                                       out.hidden_states[-1], atol=1e-5, rtol=0)
        torch.testing.assert_close(adapter.run_layers(out.hidden_states[0], call, 0, 1), out.hidden_states[1],
                                   atol=1e-5, rtol=0)


def test_the_neuron_view_shows_c2c_c2p_p2c_summing_to_the_scores_and_transformers_pattern(lm):
    from core.analyses import inside_head
    from core.charts.inside_head import neuron_chart, neuron_table, terms_frame

    text, layer, head, query = PAIR[0], 1, 2, 3
    view = inside_head.neuron_view(lm, text, None, layer, head, query)
    assert set(view.terms) == set(DEBERTA_TERMS) and view.scale == pytest.approx(math.sqrt(8 * 3))
    # c2c is the q⊙k row over DeBERTa's scale; the three terms sum to the score, whose softmax is transformers' row
    np.testing.assert_allclose(view.terms["c2c"], view.products.sum(-1) / view.scale, atol=1e-5)
    np.testing.assert_allclose(sum(view.terms.values()), view.scores, atol=1e-5)
    feed = dict(lm.tokenizer(text, return_tensors="pt"))
    with torch.no_grad():
        expected = lm.masked_lm(**feed, output_attentions=True).attentions[layer][0, head, query].numpy()
    np.testing.assert_allclose(view.attention, expected, atol=1e-5)
    with torch.no_grad():
        by_hand = _terms_by_hand(lm, lm.masked_lm(**feed, output_hidden_states=True).hidden_states[layer], layer)
    for name in DEBERTA_TERMS:
        np.testing.assert_allclose(view.terms[name], by_hand[name][0, head, query].numpy(), atol=1e-5)
    payload = view.to_json()
    assert set(payload["terms"]) == set(DEBERTA_TERMS) and payload["scale"] == pytest.approx(view.scale)
    drawn = terms_frame(view)
    assert len(drawn) == 3 * len(view.tokens) and {"c2c", "c2p", "p2c"} <= set(neuron_table(view).columns)
    assert "c2c + c2p + p2c" in json.dumps(neuron_chart(view).to_dict())


def test_other_families_neuron_view_has_no_terms(tiny_bert_dir):
    from core.analyses import inside_head

    view = inside_head.neuron_view(load_model(str(tiny_bert_dir)), "the cat sat .", None, 1, 0, 1)
    assert view.terms is None and "terms" not in view.to_json()


def test_the_models_command_names_deberta_v3(capsys):
    from core.__main__ import main

    assert main(["models"]) == 0
    assert "DeBERTa-v3" in capsys.readouterr().out.splitlines()[-1]
    assert main(["models", "--json"]) == 0
    assert "DeBERTa-v3" in json.loads(capsys.readouterr().out)["families"]


def test_an_intervention_on_q_changes_the_tokens_query_not_the_position_projection(lm):
    """With share_att_key DeBERTa runs query_proj again on the relative embeddings (p2c's position queries): a q
    intervention must reach c2c and c2p only. Head 0's q zeroed leaves its scores = p2c, as computed here."""
    feed = padded_batch(lm, tokenize(lm, [SHORT]))
    adapter = ModelAdapter.of(lm.masked_lm)

    def zero_head_0(q, layer):
        q = q.clone()
        q[:, :, 0] = 0
        return q

    with torch.no_grad():
        hidden = lm.masked_lm(**feed, output_hidden_states=True).hidden_states[0]
        with adapter.intervene("q", zero_head_0, layers=0), adapter.capture(["attn_terms", "pattern"], layers=0) as st:
            out = lm.masked_lm(**feed, output_attentions=True)
    by_hand = _terms_by_hand(lm, hidden, 0)
    torch.testing.assert_close(st["attn_terms", 0]["c2c"][:, 0], torch.zeros_like(by_hand["c2c"][:, 0]).float())
    torch.testing.assert_close(st["attn_terms", 0]["c2p"][:, 0], torch.zeros_like(by_hand["c2p"][:, 0]).float())
    torch.testing.assert_close(st["attn_terms", 0]["p2c"][:, 0].double(), by_hand["p2c"][:, 0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.attentions[0][:, 0].double(), by_hand["p2c"][:, 0].softmax(-1), atol=1e-5, rtol=0)
    torch.testing.assert_close(st["pattern", 0], out.attentions[0])


def _cells(svg: str, field: str) -> list[tuple[float, tuple[int, int, int]]]:
    """(value of `field`, fill colour) of each drawn cell whose aria label shows that field."""
    import re

    cells = []
    for label, fill in re.findall(r'<path[^>]*aria-label="([^"]*)"[^>]*fill="rgb\(([^)]*)\)"', svg):
        found = re.search(rf"(?:^|; ){field}: ([+−-]?[\d.]+)", label)
        if found:
            cells.append((float(found[1].replace("−", "-")), tuple(int(c) for c in fill.split(","))))
    return cells


@pytest.mark.parametrize("family", ["bert", "deberta"])
def test_neuron_view_colours_red_where_a_value_raises_the_score(family, lm, tiny_bert_dir):
    """The chart says "red: raises the score, blue: lowers it". Its panels' colour scales were shared (Vega-Lite's
    concat default), and the merged domain drew q⊙k's largest positive products blue (found on DeBERTa's terms
    panel; BERT's chart had it too)."""
    import vl_convert as vlc

    from core.analyses import inside_head
    from core.charts.inside_head import neuron_chart

    model = lm if family == "deberta" else load_model(str(tiny_bert_dir))
    view = inside_head.neuron_view(model, PAIR[0], None, 1, 2, 3)
    svg = vlc.vegalite_to_svg(neuron_chart(view).to_json())
    for field in ("product",) + (("value",) if family == "deberta" else ()):
        drawn = _cells(svg, field)
        largest = max(abs(v) for v, _ in drawn)
        cells = [(v, rgb) for v, rgb in drawn if abs(v) > 0.2 * largest]  # near 0 both colours fade to white
        assert len(cells) >= 3 and any(v > 0 for v, _ in cells) and any(v < 0 for v, _ in cells), field
        wrong = [(v, rgb) for v, rgb in cells if (v > 0) != (rgb[0] > rgb[2])]
        assert wrong == [], f"{field}: red/blue does not follow the sign: {wrong[:3]}"


def test_sentencepiece_pieces_merge_into_the_words_typed(lm):
    """"▁" starts a word; pieces without it continue one. The words are the text typed, without the space the
    "▁" piece's offsets include, for text and for pre-split words alike."""
    from core.model.encoding import Words

    text, split = tokenize(lm, ["the cats sat, happily.", (Words(["The", "unhappy", "cats"]), Words(["a", "dog"]))])
    assert text.words == ("the", "cats", "sat", ",", "happily", ".")
    assert [text.tokens[i] for i in np.flatnonzero(text.word_ids == 1)] == ["▁cat", "s"]
    assert split.words == ("The", "unhappy", "cats", "a", "dog")
    assert [split.tokens[i] for i in np.flatnonzero(split.word_ids == 2)] == ["▁cat", "s"]
