"""The adapter's "pattern" and "attn_scores" points on a tiny random model of every family it knows (MiniLM is a
BertModel, so "bert" covers it), checked against transformers' own `output_attentions` and, for BERT, against q·kᵀ/√d
plus the mask computed here from the captured q and k; the same under SDPA attention (which returns no
probabilities); an intervention on q shows in both; both are read-only; no hook outlives the block."""

from __future__ import annotations

import pytest
import torch

from core.model.adapter import AdapterError, ModelAdapter
from tests.conftest import TINY_VOCAB

FAMILIES = ("bert", "roberta", "xlm-roberta", "camembert", "electra", "albert", "mpnet", "distilbert")
TEXTS = [("the cat sat on the mat .", "the dog ran , he was unhappy ."), ("a man ran to the river bank .", "")]
LAYERS, HEADS = 3, 4


def _model(family: str):
    import transformers as tf

    common = dict(vocab_size=len(TINY_VOCAB), max_position_embeddings=80, pad_token_id=0)
    size = dict(hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=48)
    config, cls = {
        "bert": lambda: (tf.BertConfig(**common, **size), tf.BertForMaskedLM),
        "roberta": lambda: (tf.RobertaConfig(**common, **size), tf.RobertaForMaskedLM),
        "xlm-roberta": lambda: (tf.XLMRobertaConfig(**common, **size), tf.XLMRobertaForMaskedLM),
        "camembert": lambda: (tf.CamembertConfig(**common, **size), tf.CamembertForMaskedLM),
        "electra": lambda: (tf.ElectraConfig(**common, **size, embedding_size=24), tf.ElectraForMaskedLM),
        "albert": lambda: (tf.AlbertConfig(**common, **size, embedding_size=24, num_hidden_groups=1),
                           tf.AlbertForMaskedLM),
        "mpnet": lambda: (tf.MPNetConfig(**common, **size), tf.MPNetForMaskedLM),
        "distilbert": lambda: (tf.DistilBertConfig(**common, dim=32, n_layers=LAYERS, n_heads=HEADS, hidden_dim=48),
                               tf.DistilBertForMaskedLM),
    }[family]()
    config._attn_implementation = "eager"
    torch.manual_seed(11)
    model = cls(config).eval()
    with torch.no_grad():  # peaked attention (random init is near uniform), so a wrong map cannot hide in float error
        for name, p in model.named_parameters():
            if any(s in name for s in ("query.weight", "key.weight", "q_lin.weight", "k_lin.weight", ".q.weight",
                                       ".k.weight")):
                p.normal_(0.0, 0.3)
    return model


def _feed(family: str) -> dict:
    from transformers import BertTokenizerFast

    names = ["input_ids", "attention_mask"] + ([] if family in ("mpnet", "distilbert") else ["token_type_ids"])
    tokenizer = BertTokenizerFast(vocab={p: i for i, p in enumerate(TINY_VOCAB)}, do_lower_case=True,
                                  model_max_length=64, model_input_names=names)
    feed = dict(tokenizer([a for a, _ in TEXTS], [b for _, b in TEXTS], padding=True, return_tensors="pt"))
    assert not feed["attention_mask"].all()  # the batch has padding: the mask must be in the scores
    return feed


def _no_hooks(model) -> bool:
    """No hook but transformers' own (installed for good on the first output_attentions pass)."""
    return all(getattr(hook, "__name__", "") == "output_capturing_hook"
               for m in model.modules() for hook in (*m._forward_hooks.values(), *m._forward_pre_hooks.values()))


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param, _model(request.param), _feed(request.param)


def test_pattern_is_transformers_attentions_and_the_softmax_of_the_scores(family):
    name, model, feed = family
    adapter = ModelAdapter.of(model)
    with torch.no_grad(), adapter.capture(["pattern", "attn_scores"]) as store:
        out = model(**feed, output_attentions=True)
    assert _no_hooks(model)
    for layer in range(LAYERS):
        pattern, scores = store["pattern", layer], store["attn_scores", layer]
        assert pattern.shape == scores.shape == (2, HEADS, feed["input_ids"].shape[1], feed["input_ids"].shape[1])
        torch.testing.assert_close(pattern, out.attentions[layer], atol=1e-6, rtol=0)
        torch.testing.assert_close(scores.softmax(dim=-1), pattern, atol=1e-5, rtol=0)
    # ALBERT runs one module three times: each layer still has its own map
    assert not torch.equal(store["pattern", 0], store["pattern", 1]), name


def test_pattern_without_asking_transformers_for_attentions(family):
    """A plain pass (no output_attentions: MPNet's attention then returns no probabilities) gives the same maps."""
    _, model, feed = family
    adapter = ModelAdapter.of(model)
    with torch.no_grad():
        reference = model(**feed, output_attentions=True).attentions
        with adapter.capture(["pattern"], layers=[0, 2]) as store:
            model(**feed)
    assert ("pattern", 1) not in store
    for layer in (0, 2):
        torch.testing.assert_close(store["pattern", layer], reference[layer], atol=1e-6, rtol=0)


def test_sdpa_attention_gives_the_eager_pattern(family):
    """SDPA returns no probabilities and takes a boolean mask: the pattern is then softmax(attn_scores)."""
    name, model, feed = family
    if name == "mpnet":
        pytest.skip("MPNet has one attention implementation (its own forward)")
    with torch.no_grad():
        reference = model(**feed, output_attentions=True).attentions
    model.set_attn_implementation("sdpa")
    try:
        with torch.no_grad(), ModelAdapter.of(model).capture(["pattern"]) as store:
            model(**feed)
    finally:
        model.set_attn_implementation("eager")
    for layer in range(LAYERS):
        torch.testing.assert_close(store["pattern", layer], reference[layer], atol=1e-5, rtol=0)


def test_an_intervention_on_q_shows_in_scores_and_pattern(family):
    """Head 0's query zeroed: its scores are the mask alone (plus MPNet's position bias), so without a bias it
    attends evenly to the real tokens; the captured maps are those of the changed pass, whichever block was opened
    first."""
    name, model, feed = family
    adapter = ModelAdapter.of(model)

    def no_query(q, _layer):
        q = q.clone()
        q[:, :, 0] = 0
        return q

    real = feed["attention_mask"].bool()
    points = ["attn_scores", "pattern"] + (["position_bias"] if name == "mpnet" else [])
    with torch.no_grad(), adapter.capture(points, layers=1) as store:
        with adapter.intervene("q", no_query, layers=1):
            out = model(**feed, output_attentions=True)
    torch.testing.assert_close(store["pattern", 1], out.attentions[1], atol=1e-6, rtol=0)
    scores = store["attn_scores", 1][:, 0]  # [B, T, T]
    keys = real[:, None, :].expand_as(scores)
    bias = store["position_bias", 1][:, 0].expand_as(scores) if name == "mpnet" else torch.zeros_like(scores)
    torch.testing.assert_close(scores[keys], bias[keys], atol=1e-6, rtol=0)
    if name != "mpnet":
        even = real.float() / real.sum(-1, keepdim=True)  # [B, T]: 1/n over the n real tokens
        head = store["pattern", 1][:, 0]
        torch.testing.assert_close(head, even[:, None, :].expand_as(head), atol=1e-6, rtol=0)
    with torch.no_grad(), adapter.intervene("q", no_query, layers=1):  # opened the other way round
        with adapter.capture(["pattern"], layers=1) as inner:
            model(**feed)
    torch.testing.assert_close(inner["pattern", 1], out.attentions[1], atol=1e-6, rtol=0)
    assert _no_hooks(model)


def test_scores_and_pattern_are_read_only(family):
    _, model, _ = family
    adapter = ModelAdapter.of(model)
    for point in ("attn_scores", "pattern"):
        with pytest.raises(AdapterError, match="captured, not changed"):
            with adapter.intervene(point, lambda value, layer: value):
                pass
    assert _no_hooks(model)


def test_a_failing_pass_leaves_no_reader_behind(family):
    _, model, feed = family
    adapter = ModelAdapter.of(model)

    def fail(_value, _layer):
        raise RuntimeError("stop inside the attention")

    with pytest.raises(RuntimeError, match="stop inside"), torch.no_grad():
        with adapter.capture(["attn_scores"]), adapter.intervene("k", fail, layers=0):
            model(**feed)
    assert _no_hooks(model)


def test_bert_scores_equal_q_dot_k_over_root_d_plus_the_mask():
    """attn_scores against the formula written here from the captured q and k and the tokenizer's mask."""
    model, feed = _model("bert"), _feed("bert")
    adapter = ModelAdapter.of(model)
    with torch.no_grad(), adapter.capture(["q", "k", "attn_scores"]) as store:
        model(**feed)
    real = feed["attention_mask"].bool()  # [B, T]
    for layer in range(LAYERS):
        q, k = store["q", layer], store["k", layer]  # [B, T, H, d]
        expected = torch.einsum("bihd,bjhd->bhij", q, k) / q.shape[-1] ** 0.5
        scores = store["attn_scores", layer]
        keys = real[:, None, None, :].expand_as(scores)
        torch.testing.assert_close(scores[keys], expected[keys], atol=1e-5, rtol=1e-5)
        # padding keys: the mask's large negative number, so softmax gives them nothing
        assert (scores[~keys] < torch.finfo(scores.dtype).min / 2).all()


def test_another_threads_pass_inside_ours_changes_neither(family):
    """Another thread's pass on the shared model runs while ours is inside layer 1's attention (between the call's
    start and its key projection): our maps are still ours, and its output is the plain model's."""
    import threading

    _, model, feed = family
    adapter = ModelAdapter.of(model)
    other_feed = {name: value[1:] for name, value in feed.items()}  # the second input alone: another length
    with torch.no_grad():
        reference = model(**feed, output_attentions=True).attentions
        plain = model(**other_feed).logits
    seen = []

    def run_another(_k, _layer):
        def other():
            with torch.no_grad():
                seen.append(model(**other_feed).logits)
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()

    with torch.no_grad(), adapter.capture(["pattern", "attn_scores"], layers=1) as store:
        with adapter.intervene("k", run_another, layers=1):
            model(**feed)
    torch.testing.assert_close(seen[0], plain, atol=0, rtol=0)
    torch.testing.assert_close(store["pattern", 1], reference[1], atol=1e-6, rtol=0)
    torch.testing.assert_close(store["attn_scores", 1].softmax(-1), reference[1], atol=1e-5, rtol=0)
    assert _no_hooks(model)
