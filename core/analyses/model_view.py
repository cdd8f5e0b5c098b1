"""The model view's numbers: every head's [query, key] map shrunk (or grown) to a square of pixels by block-max
pooling, so no key column can vanish from a thumbnail at any length, with the colour scale (per head or one shared
maximum), a sentence-pair filter and each head's top key tokens. Pure functions over numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.analyses.attention import head_entropy, pair_filter_setting, pair_masks
from core.contract import Analysis, setting
from core.model.encoding import encode
from core.validation import check_count

SCALES: tuple[str, ...] = ("head", "shared")
DEFAULT_PIXELS = 44
MAX_PIXELS = 512  # as many as BERT's longest input: more pixels than cells only repeat cells
TOP_KEYS = 3


@dataclass(frozen=True)
class ModelViewSettings:
    """What the model view (the "One sentence" tab's Model view, `python -m core model-view`, core.lens.model_view)
    draws."""

    pair_filter: str = pair_filter_setting()
    scale: str = setting("head", "colour scale: head, each thumbnail darkest at its own maximum; shared, one "
                         "maximum over all heads", choices=SCALES)
    pixels: int = setting(DEFAULT_PIXELS, "side of each thumbnail in pixels", low=1, high=MAX_PIXELS, url=None)


def pixel_starts(cells: int, pixels: int) -> np.ndarray:
    """[pixels] int: the first of the cells pixel p covers. Pixel p covers cells starts[p] .. starts[p+1] - 1
    (the last pixel up to the end); where there are more pixels than cells a pixel covers the one cell starts[p].
    Every cell is covered: by exactly one pixel when cells >= pixels, by one or more when fewer."""
    if cells < 1 or pixels < 1:
        raise ValueError(f"cannot pool {cells} cells into {pixels} pixels; both must be at least 1")
    return (np.arange(pixels) * cells) // pixels


def block_max(matrix: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """[..., Q, K] -> [..., rows, columns]: each pixel the largest value of the block of cells it covers
    (pixel_starts on both axes); numpy's reduceat takes a single cell where a start repeats (more pixels than cells)."""
    matrix = np.asarray(matrix)
    by_key = np.maximum.reduceat(matrix, pixel_starts(matrix.shape[-1], columns), axis=-1)
    return np.maximum.reduceat(by_key, pixel_starts(matrix.shape[-2], rows), axis=-2)


@dataclass(frozen=True)
class ModelView:
    """Every head of one input as a thumbnail (L = layers, H = heads, P = pixels, Q/K = queries/keys kept by the
    pair filter, T = tokens).

    tokens           [T] the input's word pieces, special tokens included
    query_positions  [Q] token positions of the thumbnails' rows (all T unless a pair filter keeps fewer)
    key_positions    [K] token positions of the columns
    pixels           P, the side of every thumbnail
    scale            "head" (each thumbnail darkest at its own maximum) or "shared" (one maximum over all heads)
    thumbnails       [L, H, P, P] float32: each pixel the largest attention weight of the cells it covers, before
                     colouring (pixel_starts says which cells)
    scale_max        [L, H] float32: the weight drawn darkest in each thumbnail; every entry equal under "shared"
    entropy          [L, H] mean entropy (nats) of each head's full attention rows (before the filter)
    top_keys         [L][H] the head's TOP_KEYS keys by mean attention received from the rows kept, as
                     (token position, mean weight), strongest first
    pair_filter      one of core.analyses.attention.PAIR_FILTERS
    """

    tokens: tuple[str, ...]
    query_positions: tuple[int, ...]
    key_positions: tuple[int, ...]
    pixels: int
    scale: str
    thumbnails: np.ndarray
    scale_max: np.ndarray
    entropy: np.ndarray
    top_keys: tuple[tuple[tuple[tuple[int, float], ...], ...], ...]
    pair_filter: str

    def colour_fraction(self) -> np.ndarray:
        """[L, H, P, P] in 0..1: each thumbnail divided by its scale maximum (0 for an all-zero map)."""
        peak = self.scale_max[:, :, None, None]
        return np.divide(self.thumbnails, peak, out=np.zeros_like(self.thumbnails), where=peak > 0)

    def top_keys_text(self, layer: int, head: int) -> str:
        """"0·[CLS] 0.412, 7·[SEP] 0.300, ..." for the hover."""
        return ", ".join(f"{p}·{self.tokens[p]} {w:.3f}" for p, w in self.top_keys[layer][head])

    def to_json(self) -> dict:
        """The keys of `python -m core model-view --json`: scale_max per head ([L][H]) or one number ("shared")."""
        scale_max = float(self.scale_max.flat[0]) if self.scale == "shared" else self.scale_max.tolist()
        return {"tokens": list(self.tokens), "pixels": self.pixels, "scale": self.scale,
                "thumbnails": self.thumbnails.tolist(), "scale_max": scale_max, "pair_filter": self.pair_filter,
                "query_positions": list(self.query_positions), "key_positions": list(self.key_positions)}


def model_view(attentions: np.ndarray, tokens: Sequence[str], segment_ids: Sequence[int], *,
               pixels: int = DEFAULT_PIXELS, scale: str = "head", pair_filter: str = "all") -> ModelView:
    """attentions [L, H, T, T] (raw attention or any map with the same shape) -> a ModelView.

    The pair filter keeps the rows of one sentence and the columns of the other, as the head view's (not rescaled);
    the colour scale's maximum is taken over what the filter keeps."""
    attentions = np.asarray(attentions, dtype=np.float32)
    if attentions.ndim != 4 or attentions.shape[-1] != attentions.shape[-2]:
        raise ValueError(f"attentions must be [layer, head, query, key] with as many queries as keys, "
                         f"not shape {attentions.shape}")
    if attentions.shape[-1] != len(tokens):
        raise ValueError(f"attention has {attentions.shape[-1]} positions, while the number of tokens is {len(tokens)}")
    if scale not in SCALES:
        raise ValueError(f"unknown colour scale {scale!r}; use one of {', '.join(SCALES)}")
    pixels = check_count(pixels, "pixels", minimum=1, maximum=MAX_PIXELS)
    rows, columns = pair_masks(np.asarray(segment_ids), pair_filter)
    if not rows.any() or not columns.any():
        raise ValueError(f"the filter {pair_filter} needs a sentence pair (a second sentence, text B)")
    kept = attentions if rows.all() and columns.all() else attentions[:, :, rows][:, :, :, columns]
    thumbnails = block_max(kept, pixels, pixels)
    peaks = thumbnails.max(axis=(-2, -1))
    if scale == "shared":
        peaks = np.full_like(peaks, peaks.max())
    key_positions = np.flatnonzero(columns)
    received = kept.mean(axis=-2)  # [L, H, K]
    order = np.argsort(-received, axis=-1, kind="stable")[..., :TOP_KEYS]
    top = tuple(tuple(tuple((int(key_positions[k]), float(received[layer, head, k])) for k in order[layer, head])
                      for head in range(kept.shape[1])) for layer in range(kept.shape[0]))
    return ModelView(tokens=tuple(tokens), query_positions=tuple(int(p) for p in np.flatnonzero(rows)),
                     key_positions=tuple(int(p) for p in key_positions), pixels=pixels, scale=scale,
                     thumbnails=thumbnails, scale_max=peaks.astype(np.float32),
                     entropy=head_entropy(attentions), top_keys=top, pair_filter=pair_filter)



def model_view_of(encoding, settings: ModelViewSettings) -> ModelView:
    """The model view of one core.model.encoding.Encoding with these settings (the CLI and core.lens)."""
    return model_view(encoding.attentions, encoding.tokens, encoding.segment_ids, pixels=settings.pixels,
                      scale=settings.scale, pair_filter=settings.pair_filter)


def model_view_of_input(lm, inputs, settings: ModelViewSettings, progress=None, should_stop=None) -> ModelView:
    """The model view of one input (text, or (text, text_b)): the declaration's `run`."""
    return model_view_of(encode(lm, inputs), settings)


ANALYSIS = Analysis(
    name="model-view", view="attention", command="model-view", lens="model_view", settings=ModelViewSettings,
    run=model_view_of_input, charts="core.charts.attention:model_view_charts", title="One sentence", order=11,
    summary="every layer × head as a thumbnail: each pixel the largest attention weight of the cells it covers "
            "(the attention page's model view)",
)
