"""Inside one attention head: bertviz's neuron view (query × key, element by element) and Kobayashi et al.'s
(2020, "Attention is not only a weight") norm-weighted attention ‖α_ij · f(x_j)‖.

q, k and v are read from the model's own projection modules through core.model.adapter (every family it
knows; ALBERT's shared layer gives one value per layer; MPNet's relative position bias, added to q·k/√d before
the softmax, is read from the call's arguments; DeBERTa's disentangled terms c2c, c2p and p2c are the adapter's
"attn_terms"), so what is shown is what the model computed, not a
re-implementation that can drift from it. The hooks are on only while one forward pass runs, under the model's
lock, record only the calling thread's pass, and are always removed.

f(x_j) for head h is (x_j W_V^h + b_V^h) W_O^h: the value vector (bias included, as the Linear computes it)
through that head's slice of the output projection; the output bias is added once per token, not per key, so
it belongs to no pair (Kobayashi et al. 2020, eq. 5-6).
"""

from __future__ import annotations

# torch and core.analyses.ablation (torch) imported in functions: importing this module (the CLI's --help, the
# studies list, the pages) must not load them.
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering, validation
from core.analyses.attention import MAX_HEAD, head_layer_setting, layer_in_range, pair_filter_setting, pair_masks
from core.contract import Analysis, setting
from core.model.adapter import AdapterError, ModelAdapter
from core.model.encoding import TextInput, Tokenized, padded_batch, tokenize
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck, check_stop

CATEGORIES = ("[CLS]", "[SEP]", "punctuation", "other")
MAX_QUERY = 4096


@dataclass(frozen=True)
class NeuronSettings:
    """Which head and query token the neuron view opens ("Inside a head", `python -m core neuron`,
    core.lens.neuron_view), and bertviz's sentence filter: A→B shows a query of sentence A against the keys of B."""

    layer: int | None = head_layer_setting(url="inside_layer")
    head: int = setting(0, "the head, from 0", low=0, high=MAX_HEAD, url="inside_head")
    query: int = setting(1, "token position of the query ([CLS] = 0)", low=0, high=MAX_QUERY, url="inside_query")
    pair_filter: str = pair_filter_setting(url="inside_filter")


@dataclass(frozen=True)
class NormsSettings:
    """Norm-weighted attention is measured for every layer, head, query and key at once: nothing to set."""


@dataclass(frozen=True)
class NormSharesSettings:
    """Raw vs norm-weighted attention shares over a corpus."""

    seed: int = setting(0, "seed of the corpus sample", low=0, high=1_000_000, url=None)
    batch_size: int = setting(16, "inputs encoded at once", low=1, high=4096, url=None)


class InsideHeadError(ValueError):
    """The model, layer, head or query cannot be shown; the message says what to pick instead."""


@dataclass(frozen=True, eq=False)
class Captured:
    """One batched forward pass with every layer's projections. B inputs, T padded tokens, L layers, H heads,
    d head size: q, k (after ModernBERT's rotary embedding: the adapter's q_rot, k_rot), v [L] tensors
    [B, T, H, d]; bias [L] tensors [B, H, T, T] or None; attentions [L] tensors [B, H, T, T] (the adapter's
    "pattern": the attention module's own probabilities); mask [B, T] bool; scores [L] tensors [B, H, T, T] (the
    adapter's attn_scores, mask included) or None; terms [L] dicts {c2c, c2p, p2c: [B, H, T, T]} (DeBERTa's
    "attn_terms") or None."""

    q: list
    k: list
    v: list
    bias: list
    attentions: list
    mask: np.ndarray
    scores: list = ()
    terms: list | None = None


def _capture(lm: LoadedModel, items: Sequence[Tokenized], want_qk: bool = True) -> Captured:
    import torch

    try:
        adapter = ModelAdapter.of(lm.model)
    except AdapterError as err:
        raise InsideHeadError(str(err)) from err
    feed = padded_batch(lm, items)
    # q_rot / k_rot: q and k as the scores use them (after ModernBERT's rotary embedding; q and k elsewhere);
    # attn_scores: which keys each query may see (a local layer's window, padding)
    points = (["v", "pattern"] + (["q_rot", "k_rot", "attn_scores"] if want_qk else [])
              + (["position_bias"] if adapter.has_position_bias else []))
    with_terms = want_qk and adapter.has_score_terms
    points += ["attn_terms"] if with_terms else []
    with adapter.capture(points) as store, torch.inference_mode():
        lm.model(**feed)
    layers = range(adapter.num_layers)
    bias = store.layers("position_bias") if adapter.has_position_bias else [None] * adapter.num_layers
    nothing = [None] * len(layers)
    return Captured(q=store.layers("q_rot") if want_qk else nothing, k=store.layers("k_rot") if want_qk else nothing,
                    v=store.layers("v"), bias=bias, attentions=store.layers("pattern"),
                    mask=feed["attention_mask"].cpu().numpy().astype(bool),
                    scores=store.layers("attn_scores") if want_qk else nothing,
                    terms=store.layers("attn_terms") if with_terms else None)


def _one(lm: LoadedModel, text_a: str, text_b: str | None) -> Tokenized:
    item: TextInput = (text_a, text_b) if text_b else text_a
    return tokenize(lm, [item])[0]


# ---- neuron view ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NeuronView:
    """One query token of one head, dimension by dimension (T tokens, d head size):

    tokens      [T] word pieces
    query       [d] the query vector q_i of token `query_index` (the model's query projection, this head's slice;
                ModernBERT: after its rotary position embedding, as the score uses it)
    keys        [T, d] every token's key vector k_j (ModernBERT: after the rotation, too)
    products    [T, d] q_i ⊙ k_j: summed and scaled they give the score
    scores      [T] q_i·k_j/√d plus the relative position bias (MPNet; `bias`, else zeros): the softmax's input
    attention   [T] softmax(scores) over the visible keys: the head view's row
    bias        [T] the position bias added to the scores (zeros except MPNet and DeBERTa)
    visible     [T] bool: the keys the query may attend to; False outside a local (sliding-window) layer's
                window (ModernBERT: within local_attention // 2 positions), where attention is 0 whatever the score
    terms       DeBERTa only (else None): {"c2c", "c2p", "p2c": [T]}, its disentangled attention's terms for this
                query: c2c = the q⊙k row summed / `scale`, c2p = the query's content against each key's relative
                position, p2c = the query's relative position against each key's content; scores = their sum,
                and bias = c2p + p2c
    scale       what the q⊙k row is divided by: √d, DeBERTa's √(d·(1 + its number of position terms))

    With a sentence-pair filter (bertviz's neuron view: "A→B" a query of sentence A, the keys of sentence B) the
    key axis keeps K <= T keys: `key_positions` [K] their token positions (None: every token), and keys, products,
    scores, attention and bias are [K] rows; the attention is not rescaled (the share of the row on those keys).
    `tokens` stays every token of the input, `query_index` the query's position in it.
    """

    model: str
    layer: int
    head: int
    query_index: int
    tokens: tuple[str, ...]
    query: np.ndarray
    keys: np.ndarray
    products: np.ndarray
    scores: np.ndarray
    attention: np.ndarray
    bias: np.ndarray
    key_positions: tuple[int, ...] | None = None
    pair_filter: str = "all"
    visible: np.ndarray | None = None
    rotated: bool = False  # q and k after a rotary position embedding (ModernBERT)
    terms: dict | None = None
    scale: float | None = None

    def positions(self) -> tuple[int, ...]:
        """The token positions of the key rows."""
        return tuple(range(len(self.tokens))) if self.key_positions is None else self.key_positions

    def to_json(self) -> dict:
        return {"tokens": list(self.tokens), "query": self.query.tolist(), "keys": self.keys.tolist(),
                "products": self.products.tolist(), "scores": self.scores.tolist(), "attention": self.attention.tolist(),
                "layer": numbering.shown(self.layer), "head": self.head, "query_index": self.query_index,
                "pair_filter": self.pair_filter, "key_positions": list(self.positions()),
                "visible": self.visible.tolist() if self.visible is not None else [True] * len(self.scores),
                **({"terms": {name: row.tolist() for name, row in self.terms.items()}, "scale": self.scale}
                   if self.terms is not None else {})}


def _check_range(name: str, value: int, size: int) -> None:
    if not 0 <= value < size:
        raise InsideHeadError(f"{name} {value} does not exist; pick {name} 0..{size - 1}")


def neuron_view(lm: LoadedModel, text_a: str, text_b: str | None, layer: int, head: int, query: int,
                pair_filter: str = "all") -> NeuronView:
    """q, every k, q⊙k, scores and softmax for one layer/head/query token of the input; `pair_filter` keeps the
    keys of one sentence (the query must be in the other side's sentence: "A→B", a query of A)."""
    import torch

    if not text_a or not text_a.strip():
        raise InsideHeadError("Type a sentence first.")
    item = _one(lm, text_a, text_b)
    _check_range("layer", layer, lm.num_layers)
    _check_range("head", head, lm.num_heads)
    _check_range("query", query, len(item.tokens))
    rows, columns = pair_masks(np.asarray(item.segment_ids), pair_filter)
    if not columns.any():
        raise InsideHeadError(f"the filter {pair_filter} needs a sentence pair (a second sentence, text B)")
    if not rows[query]:
        allowed = np.flatnonzero(rows)
        raise InsideHeadError(f"query {query} is not in sentence {pair_filter[0]}, whose tokens the filter "
                              f"{pair_filter} keeps as queries; pick a query {allowed[0]}..{allowed[-1]}")
    cap = _capture(lm, [item])
    size = cap.q[layer].shape[-1]
    q = cap.q[layer][0, query, head].double()
    keys = cap.k[layer][0, :, head].double()
    products = q[None, :] * keys
    bias = torch.zeros(len(item.tokens), dtype=torch.float64)
    scale, terms = float(np.sqrt(size)), None
    if cap.bias[layer] is not None:
        bias = cap.bias[layer][0, head, query].double().cpu()
    if cap.terms is not None:  # DeBERTa: c2c is the q⊙k row over its own scale; the position terms are the bias
        terms = {name: row[0, head, query].double().cpu() for name, row in cap.terms[layer].items()}
        scale = _deberta_scale(lm, size)
        bias = terms["c2p"] + terms["p2c"]
    scores = products.sum(-1).cpu() / scale + bias
    masked = cap.scores[layer][0, head, query].cpu()
    visible = masked > torch.finfo(masked.dtype).min / 2  # a local layer's mask: its dtype's most negative number
    attention = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    kept = np.flatnonzero(columns)  # the softmax runs over every key first: the filter only hides rows
    as_np = lambda t: t.cpu().numpy().astype(np.float32)  # noqa: E731
    return NeuronView(model=lm.ref, layer=layer, head=head, query_index=query, tokens=item.tokens, query=as_np(q),
                      keys=as_np(keys)[kept], products=as_np(products)[kept], scores=as_np(scores)[kept],
                      attention=as_np(attention)[kept], bias=as_np(bias)[kept],
                      key_positions=None if pair_filter == "all" else tuple(int(p) for p in kept),
                      pair_filter=pair_filter, visible=visible.numpy()[kept],
                      rotated=ModelAdapter.of(lm.model).family == "modernbert", scale=scale,
                      terms=None if terms is None else {name: as_np(row)[kept] for name, row in terms.items()})


def _deberta_scale(lm: LoadedModel, size: int) -> float:
    """DeBERTa's score divisor: √(d · (1 + the number of position terms its config names)); transformers counts
    them from pos_att_type even when relative attention is off."""
    kinds = list(getattr(lm.config, "pos_att_type", None) or [])
    return float(np.sqrt(size * (1 + ("c2p" in kinds) + ("p2c" in kinds))))


def neuron_of(lm: LoadedModel, inputs, settings: NeuronSettings, progress=None, should_stop=None) -> NeuronView:
    """The neuron view of one input (text, or (text, text_b)) with these settings: the declaration's `run` (a
    layer left out is numbering.default_head_layer's; one the model lacks is refused in the 1..L numbering)."""
    text_a, text_b = (inputs, None) if isinstance(inputs, str) else inputs
    try:
        layer = layer_in_range(settings.layer, lm.num_layers)
    except ValueError as err:
        raise InsideHeadError(str(err)) from None
    return neuron_view(lm, text_a, text_b, layer, settings.head, settings.query, settings.pair_filter)


def norms_of(lm: LoadedModel, inputs, settings: NormsSettings, progress=None, should_stop=None) -> "AttentionNorms":
    """Norm-weighted attention of one input (text, or (text, text_b)): the declaration's `run`."""
    text_a, text_b = (inputs, None) if isinstance(inputs, str) else inputs
    return attention_norms(lm, text_a, text_b)


# ---- norm-weighted attention ----------------------------------------------------------------------------------


def _transformed_norms(lm: LoadedModel, cap: Captured) -> list:
    """‖f^h(x_j)‖ per layer: [L] tensors [B, H, T], f^h(x) = (x W_V^h + b_V^h) W_O^h."""
    import torch

    adapter = ModelAdapter.of(lm.model)
    out = []
    for layer, v in enumerate(cap.v):  # v [B, T, H, d]
        w_o = adapter.parts(layer).output.weight.detach()  # [D, H*d] (Linear stores [out, in])
        f = torch.einsum("bthd,Dhd->bhtD", v, w_o.view(-1, *v.shape[-2:]))
        out.append(torch.linalg.vector_norm(f.float(), dim=-1))
    return out


@dataclass(frozen=True)
class AttentionNorms:
    """Norm-weighted attention of one input (L layers, H heads, T tokens):

    tokens          [T]
    norms           [L, H, T, T] ‖α_ij f(x_j)‖, [layer, head, query, key]
    attentions      [L, H, T, T] the raw attention α (the adapter's "pattern")
    value_norms     [L, H, T] ‖f(x_j)‖ per key
    """

    model: str
    tokens: tuple[str, ...]
    norms: np.ndarray
    attentions: np.ndarray
    value_norms: np.ndarray

    def to_json(self) -> dict:
        return {"tokens": list(self.tokens), "norms": self.norms.tolist()}


def attention_norms(lm: LoadedModel, text_a: str, text_b: str | None = None) -> AttentionNorms:
    """‖α_ij f(x_j)‖ for every layer, head, query and key of one input."""
    if not text_a or not text_a.strip():
        raise InsideHeadError("Type a sentence first.")
    item = _one(lm, text_a, text_b)
    cap = _capture(lm, [item], want_qk=False)
    value_norms = np.stack([n[0].cpu().numpy() for n in _transformed_norms(lm, cap)])  # [L, H, T]
    attentions = np.stack([a[0].float().cpu().numpy() for a in cap.attentions])
    return AttentionNorms(model=lm.ref, tokens=item.tokens, norms=attentions * value_norms[:, :, None, :],
                          attentions=attentions, value_norms=value_norms)


def row_shares(norms: np.ndarray) -> np.ndarray:
    """Each row rescaled to sum to 1 ([..., query, key]): the share of a query's weighted norm per key, drawn on
    the same 0..1 scale as raw attention."""
    sums = norms.sum(axis=-1, keepdims=True)
    return np.divide(norms, sums, out=np.zeros_like(norms), where=sums > 0)


# ---- over a dataset -------------------------------------------------------------------------------------------


def token_categories(item, tokenizer) -> np.ndarray:
    """[T] index into CATEGORIES: [CLS] (the tokenizer's cls token, <s> for RoBERTa), [SEP] (sep, </s>),
    punctuation (core.model.encoding's rule), other."""
    ids = np.asarray(item.input_ids)
    cats = np.full(len(ids), 3, dtype=np.int64)
    cats[np.asarray(item.punctuation_mask)] = 2
    if tokenizer.sep_token_id is not None:
        cats[ids == tokenizer.sep_token_id] = 1
    if tokenizer.cls_token_id is not None:
        cats[ids == tokenizer.cls_token_id] = 0
    return cats


@dataclass(frozen=True)
class NormShares(validation.CorpusCuts):
    """Where attention goes over a dataset, raw vs norm-weighted (L layers, C = len(CATEGORIES)):

    raw     [L, C] share of α going to each category: per input, summed over the category's keys, averaged over
            queries and heads; then averaged over inputs
    norm    [L, C] the same for ‖α f(x)‖, each query's row first rescaled to sum to 1
    dropped [N] word pieces cut off each input to fit the model's max_length (0 when it fit)
    """

    model: str
    corpus: str
    n_inputs: int
    raw: np.ndarray
    norm: np.ndarray
    categories: tuple[str, ...] = CATEGORIES
    dropped: np.ndarray | None = None
    max_length: int | None = None

    def to_json(self) -> dict:
        return {"model": self.model, "corpus": self.corpus, "n_inputs": self.n_inputs,
                "categories": list(self.categories), "raw": self.raw.tolist(), "norm": self.norm.tolist(),
                "truncated": self.truncation()}


def category_shares(weights: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """weights [L, H, T, T] (rows need not sum to 1) -> [L, C]: per row the share of its sum on each category's
    keys, averaged over heads and queries."""
    rows = row_shares(weights.astype(np.float64))
    onehot = np.eye(len(CATEGORIES))[cats]  # [T, C]
    return (rows @ onehot).mean(axis=(1, 2))


def norm_shares(lm: LoadedModel, inputs: Sequence[TextInput], *, corpus: str = "", batch_size: int = 16,
                progress: ProgressCallback = None, should_stop: StopCheck = None) -> NormShares:
    """Raw vs norm-weighted attention to [CLS], [SEP], punctuation and other tokens, per layer, over inputs."""
    if not inputs:
        raise InsideHeadError("The corpus is empty.")
    items = tokenize(lm, list(inputs))
    order = sorted(range(len(items)), key=lambda i: len(items[i].input_ids))
    raw = np.zeros((lm.num_layers, len(CATEGORIES)))
    norm = np.zeros_like(raw)
    done = 0
    for start in range(0, len(order), batch_size):
        check_stop(should_stop)
        batch = [items[i] for i in order[start:start + batch_size]]
        cap = _capture(lm, batch, want_qk=False)
        value_norms = [n.cpu().numpy() for n in _transformed_norms(lm, cap)]
        att = [a.float().cpu().numpy() for a in cap.attentions]
        for row, item in enumerate(batch):
            n = len(item.input_ids)
            alpha = np.stack([a[row, :, :n, :n] for a in att])
            weighted = alpha * np.stack([vn[row, :, :n] for vn in value_norms])[:, :, None, :]
            cats = token_categories(item, lm.tokenizer)
            raw += category_shares(alpha, cats)
            norm += category_shares(weighted, cats)
        done += len(batch)
        if progress is not None:
            progress(done, len(items))
    dropped = np.array([item.n_tokens_full - item.n_tokens for item in items])
    return NormShares(model=lm.ref, corpus=corpus, n_inputs=len(items), raw=raw / len(items), norm=norm / len(items),
                      dropped=dropped, max_length=lm.max_length)


def shares_of(lm: LoadedModel, inputs, settings: NormSharesSettings, progress=None, should_stop=None,
              corpus: str = "") -> NormShares:
    """Raw vs norm-weighted shares over a corpus's inputs with these settings: the declaration's `run`."""
    return norm_shares(lm, inputs, corpus=corpus, batch_size=settings.batch_size, progress=progress,
                       should_stop=should_stop)


ANALYSES = (
    Analysis(name="neuron", view="attention", command="neuron", lens="neuron_view", settings=NeuronSettings,
             run=neuron_of, charts="core.charts.inside_head:neuron_charts", title="Inside a head", order=30,
             summary="one head's query, keys, q⊙k, scores and softmax for one query token (bertviz's neuron view)"),
    Analysis(name="attention-norms", view="attention", command="attention-norms", lens="attention_norms",
             settings=NormsSettings, run=norms_of, title="Inside a head", order=31,
             summary="norm-weighted attention ‖α f(x)‖ (Kobayashi et al. 2020)"),
    Analysis(name="attention-norm-shares", view="attention", command="attention-norm-shares",
             lens="attention_norm_shares", settings=NormSharesSettings, run=shares_of,
             charts="core.charts.inside_head:shares_charts", title="Inside a head", order=32,
             summary="share of raw vs norm-weighted attention to [CLS]/[SEP]/punctuation/other per layer"),
)
