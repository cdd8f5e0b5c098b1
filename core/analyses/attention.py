"""Turning one input's attentions into the matrix a person looks at: pick heads, filter by sentence,
hide special tokens, merge word pieces into words. Pure functions over numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering
from core.contract import Analysis, setting
from core.model.encoding import encode, pool_attention

PAIR_FILTERS: tuple[str, ...] = ("all", "A→A", "A→B", "B→A", "B→B")
# The command line's spelling of PAIR_FILTERS (no arrow to type): every front end takes both (core.contract aliases).
PAIR_FILTER_SPELLINGS = {"a-a": "A→A", "a-b": "A→B", "b-a": "B→A", "b-b": "B→B"}
MAX_LAYER_INDEX, MAX_HEAD = 127, 256  # the URL's bounds of a transformer layer (1..128) and a head (0..256)


def pair_filter_setting(url: str = "filter"):
    """The sentence-pair filter, one declaration for the head view, the model view and the neuron view."""
    return setting("all", "with a sentence pair, keep the rows (queries) of one sentence and the columns (keys) of "
                   "the other: A→B is how sentence A's tokens look at sentence B (written a-b too); not rescaled",
                   choices=PAIR_FILTERS, aliases=PAIR_FILTER_SPELLINGS, url=url)


def head_layer_setting(url: str = "layer"):
    """A transformer layer held as its array index, shown 1..L; left out: numbering.default_head_layer."""
    return setting(None, f"transformer layer, {numbering.LAYER_ARGUMENT_HELP}; core.lens takes its array index, "
                   "one less; by default layer 3, or the last of a shallower model", type="int", low=0, high=MAX_LAYER_INDEX, shown=1, url=url)


@dataclass(frozen=True)
class HeadViewSettings:
    """What the head view (the "One sentence" tab, `python -m core head-view`, core.lens.head_view) shows."""

    layer: int | None = head_layer_setting()
    heads: tuple = setting((0,), "heads to show, from 0; several are averaged", low=0, high=MAX_HEAD)
    pair_filter: str = pair_filter_setting()
    hide_special: bool = setting(False, "hide [CLS]/[SEP] and rescale each row to sum to 1 over the tokens left")
    word_level: bool = setting(False, "merge word pieces into whole words: attention to a word summed over its "
                               "pieces, from a word averaged", url="words")


@dataclass(frozen=True)
class AttentionView:
    """A [query, key] attention matrix with the labels and positions of its rows and columns.

    weights           [Q, K] float32; row q is how query q spreads its attention over the keys shown
    query_labels      [Q] unique labels "index·text" (index = token or word position in the full input)
    key_labels        [K]
    renormalised      True when hidden keys' mass was redistributed so each full row sums to 1 again
    """

    weights: np.ndarray
    query_labels: tuple[str, ...]
    key_labels: tuple[str, ...]
    layer: int
    heads: tuple[int, ...]
    renormalised: bool
    word_level: bool
    pair_filter: str

    @property
    def title(self) -> str:
        return numbering.head_title(self.layer, self.heads)

    def to_json(self) -> dict:
        """The keys of `python -m core head-view --json`: the layer as every chart numbers it (1..L)."""
        return {"layer": numbering.shown(self.layer), "heads": list(self.heads), "pair_filter": self.pair_filter,
                "hide_special": self.renormalised, "word_level": self.word_level,
                "queries": list(self.query_labels), "keys": list(self.key_labels), "weights": self.weights.tolist()}


def layer_in_range(layer: int | None, num_layers: int) -> int:
    """The array index a head's view draws: the chosen one, or numbering.default_head_layer when None; ValueError
    in the 1..L numbering every chart shows when the model has no such layer."""
    if layer is None:
        return numbering.default_head_layer(num_layers)
    return numbering.block_index(numbering.shown(layer), num_layers)


def head_view_of(encoding, settings: HeadViewSettings) -> AttentionView:
    """The head view of one core.model.encoding.Encoding with these settings (the CLI and core.lens)."""
    return attention_view(encoding, layer_in_range(settings.layer, encoding.attentions.shape[0]), settings.heads,
                          pair_filter=settings.pair_filter, hide_special=settings.hide_special,
                          word_level=settings.word_level)


def head_view(lm, inputs, settings: HeadViewSettings, progress=None, should_stop=None) -> AttentionView:
    """The head view of one input (text, or (text, text_b)) with these settings: the declaration's `run`."""
    return head_view_of(encode(lm, inputs), settings)


def average_heads(attentions: np.ndarray, layer: int, heads: Sequence[int]) -> np.ndarray:
    """Mean over the chosen heads of one layer: attentions [layer, head, query, key] -> [query, key]."""
    if not heads:
        raise ValueError("Pick at least one head.")
    n_layers, n_heads = attentions.shape[:2]
    if not 0 <= layer < n_layers:
        raise ValueError(f"Layer {layer} does not exist; the model has layers 0..{n_layers - 1}.")
    bad = [h for h in heads if not 0 <= h < n_heads]
    if bad:
        raise ValueError(f"Head(s) {bad} do not exist; the model has heads 0..{n_heads - 1}.")
    return attentions[layer, list(heads)].mean(axis=0)


def drop_keys_and_queries(weights: np.ndarray, keep: np.ndarray, renormalise: bool) -> np.ndarray:
    """Remove rows and columns where keep is False; optionally rescale rows to sum to 1 again."""
    kept = weights[np.ix_(keep, keep)]
    if renormalise:
        sums = kept.sum(axis=1, keepdims=True)
        kept = np.divide(kept, sums, out=np.zeros_like(kept), where=sums > 0)
    return kept


def pair_masks(segment_ids: np.ndarray, pair_filter: str) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (query rows, key columns) to show for a sentence-pair filter such as "A→B"."""
    if pair_filter not in PAIR_FILTERS:
        raise ValueError(f"Unknown filter {pair_filter!r}; use one of {', '.join(PAIR_FILTERS)}.")
    every = np.ones(len(segment_ids), dtype=bool)
    if pair_filter == "all":
        return every, every
    source, target = pair_filter.split("→")
    segment = {"A": 0, "B": 1}
    return segment_ids == segment[source], segment_ids == segment[target]


def attention_view(
    encoding,
    layer: int,
    heads: Sequence[int],
    *,
    pair_filter: str = "all",
    hide_special: bool = False,
    word_level: bool = False,
    attentions: np.ndarray | None = None,
) -> AttentionView:
    """The matrix to draw for one Encoding, in this order: average heads, merge pieces into words,
    hide special tokens (renormalising rows), then keep the rows and columns of the pair filter
    (not renormalised: A→B shows how much of A's attention goes to B).

    attentions: [layer, head, query, key] to draw instead of the encoding's raw attention (norm-weighted,
    rollout...), with rows summing to 1 like raw attention."""
    weights = average_heads(encoding.attentions if attentions is None else attentions, layer, heads)
    labels = [t for t in encoding.tokens]
    positions = np.arange(len(labels))
    segments = np.asarray(encoding.segment_ids)
    special = np.asarray(encoding.special_mask)
    if word_level:
        merged, first_token = pool_attention(weights, encoding.word_ids, include_special=True)
        weights = merged.astype(np.float32)
        labels = [
            encoding.words[encoding.word_ids[t]] if encoding.word_ids[t] >= 0 else encoding.tokens[t]
            for t in first_token
        ]
        positions, segments, special = np.arange(len(first_token)), segments[first_token], special[first_token]
    if hide_special:
        keep = ~special
        weights = drop_keys_and_queries(weights, keep, renormalise=True)
        labels = [label for label, k in zip(labels, keep) if k]
        positions, segments = positions[keep], segments[keep]
    rows, cols = pair_masks(segments, pair_filter)
    weights = weights[np.ix_(rows, cols)]
    full_labels = [f"{p}·{label}" for p, label in zip(positions, labels)]
    return AttentionView(
        weights=np.ascontiguousarray(weights, dtype=np.float32),
        query_labels=tuple(lab for lab, r in zip(full_labels, rows) if r),
        key_labels=tuple(lab for lab, c in zip(full_labels, cols) if c),
        layer=layer,
        heads=tuple(heads),
        renormalised=hide_special,
        word_level=word_level,
        pair_filter=pair_filter,
    )


# A line below 2 % opacity cannot be seen; 20 keys a query keep a 512-token head view near 10k lines, not 262k.
LINE_THRESHOLD, LINE_TOP_K = 0.02, 20


def visible_pairs(weights: np.ndarray, threshold: float = LINE_THRESHOLD, top_k: int | None = LINE_TOP_K) -> np.ndarray:
    """[Q, K] weights -> [Q, K] bool: the pairs worth a line, those with weight >= threshold that are also among
    the top_k largest keys of their query (ties at the k-th weight all kept). threshold=0, top_k=None: every pair."""
    weights = np.asarray(weights, dtype=np.float32)
    keep = weights >= threshold
    if top_k is not None and 0 < top_k < weights.shape[1]:
        kth = -np.partition(-weights, top_k - 1, axis=1)[:, top_k - 1 : top_k]
        keep &= weights >= kth
    return keep


def head_entropy(attentions: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """Mean entropy (nats) of each head's attention rows, in float64: [layer, head, query, key] -> [layer, head]
    (any leading axes). The one entropy of a head: the model view's and the heads survey's.

    smoothing s > 0: each row is taken as (1 - s)·a + s/T first (Clark et al. 2019's 0.9999·a + 0.0001/T is
    s = 1e-4), so no weight is 0; s = 0: the weights are clipped at 1e-12, so a 0 weight adds (almost) 0."""
    a = np.asarray(attentions, dtype=np.float64)
    p = (1.0 - smoothing) * a + smoothing / a.shape[-1] if smoothing else np.clip(a, 1e-12, 1.0)
    return (-(p * np.log(p)).sum(axis=-1)).mean(axis=-1)


ANALYSIS = Analysis(
    name="head-view", view="attention", command="head-view", lens="head_view", settings=HeadViewSettings,
    run=head_view, charts="core.charts.attention:head_view_charts", title="One sentence", order=10,
    summary="one layer's attention heads (several averaged) for one sentence or pair, as lines between tokens "
            "(bertviz's head view)",
)
