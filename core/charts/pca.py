"""Layerwise PCA charts: one layer of a core.analyses.projection.LayerProjection as a scatter of word pieces, and the
share of each layer's variance on the two axes. No streamlit here."""

from __future__ import annotations

import textwrap
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.charts import layout
from core.analyses.projection import METHOD_LABELS, LayerProjection
from core.protocols import describe

OTHER = "other words"
# Characters per subtitle line of a chart that has the main column to itself (~460 px at 12 px, ~650 px in
# presenter mode's larger type), and of one beside another (~270 px): wrapped at 48 always, the subtitle of a
# lone chart was a 5-line, 250 px column at the left of a 700 px chart.
SUBTITLE_CHARS = 96
SUBTITLE_CHARS_SIDE_BY_SIDE = 48


def subtitle_lines(text: str, columns: int = 1) -> list[str]:
    """A subtitle wrapped for a chart drawn in one of `columns` side by side columns."""
    return textwrap.wrap(text, SUBTITLE_CHARS if columns <= 1 else SUBTITLE_CHARS_SIDE_BY_SIDE)


def projection_frame(projection: LayerProjection, layers: Sequence[int] | None = None) -> pd.DataFrame:
    """Long table: one row per (layer, token) with x, y and the token's labels, for charts and CSV."""
    layers = list(projection.layers) if layers is None else list(layers)
    n = len(projection.tokens)
    frames = []
    for layer in layers:
        frames.append(
            pd.DataFrame(
                {
                    "layer": layer,
                    "label": projection.labels,
                    "token": projection.tokens,
                    "word": projection.word,
                    "sentence": projection.sentence,
                    "position": projection.position,
                    "segment": np.where(projection.segment == 0, "A", "B"),
                    "is_special": projection.is_special,
                    "is_punct": projection.is_punct,
                    "x": projection.coords[layer, :, 0],
                    "y": projection.coords[layer, :, 1],
                    "order": np.arange(n),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


NAME_PX = 320  # a sentence name of 45 characters in the legend's 11 px type, with room to spare


def sentence_names(items: Sequence[tuple[str, str | None]]) -> list[str]:
    """Legend names of the projected sentences (or pairs): index and the first 40 characters."""
    names = []
    for i, (a, b) in enumerate(items):
        text = a if b is None else f"{a} / {b}"
        names.append(f"{i}: {text[:40]}{'…' if len(text) > 40 else ''}")
    return names


def points_frame(projection: LayerProjection, layer: int, names: Sequence[str], chosen_word: str | None) -> pd.DataFrame:
    """projection_frame of one layer plus sentence_name and highlight (the chosen word, any case, or OTHER)."""
    frame = projection_frame(projection, [layer])
    frame["sentence_name"] = [names[s] for s in frame["sentence"]]
    frame["highlight"] = np.where(frame["word"].str.lower() == (chosen_word or "").lower(), chosen_word or "", OTHER)
    return frame


# Token labels are placed for a plot this size (the narrowest the page draws: two models side by side).
LABEL_PLOT_PX = (300, 460)
LABEL_FONT_PX = 11


def label_mask(x: np.ndarray, y: np.ndarray, texts: Sequence[str], first: np.ndarray | None = None,
               domains: tuple[Sequence[float], Sequence[float]] | None = None,
               plot_px: tuple[int, int] = LABEL_PLOT_PX, font_px: int = LABEL_FONT_PX) -> np.ndarray:
    """bool [n]: which points get their token written beside them so that no two labels overlap: each label's
    box (right of its point, as the chart draws it on axes spanning `domains`, default the points' extent) is
    placed greedily, `first` (bool [n]) points before the rest, then in order; a label that would touch one
    already placed is left to the tooltip."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    (x0, x1), (y0, y1) = domains or ((x.min(), x.max()), (y.min(), y.max()))
    px = (x - x0) / ((x1 - x0) or 1.0) * plot_px[0]
    py = (1 - (y - y0) / ((y1 - y0) or 1.0)) * plot_px[1]
    order = np.argsort(~np.asarray(first, dtype=bool), kind="stable") if first is not None else np.arange(len(x))
    placed: list[tuple[float, float, float, float]] = []
    keep = np.zeros(len(x), dtype=bool)
    for i in order:
        box = (px[i] + 7, py[i] - 4 - font_px, px[i] + 7 + 0.6 * font_px * len(str(texts[i])), py[i] - 4)
        if all(box[2] <= b[0] or box[0] >= b[2] or box[3] <= b[1] or box[1] >= b[3] for b in placed):
            placed.append(box)
            keep[i] = True
    return keep


def colour_encoding(colour: str, names: Sequence[str], chosen_word: str | None) -> alt.Color:
    """colour: "sentence", "segment" or "word" (the chosen word red, the rest grey)."""
    if colour == "segment":
        return alt.Color("segment:N", title="segment", scale=alt.Scale(domain=["A", "B"]))
    if colour == "word":
        return alt.Color("highlight:N", title="word", scale=alt.Scale(domain=[chosen_word or "", OTHER], range=["#d62728", "#c7c7c7"]))
    # wide enough for a whole name (sentence_names cuts at 40 characters): the theme's limit cut it at 25
    return alt.Color("sentence_name:N", title="sentence", scale=alt.Scale(domain=list(names)),
                     legend=alt.Legend(labelLimit=NAME_PX))


def scatter(projection: LayerProjection, layer: int, title: str, *, names: Sequence[str], colour: str = "sentence",
            chosen_word: str | None = None, show_labels: bool = True, columns: int = 1) -> tuple[alt.LayerChart, pd.DataFrame]:
    """Every word piece of one layer as a point (with its token as a label if asked); the chart and its frame.
    columns: how many charts the page draws side by side (the subtitle is wrapped to fit one)."""
    frame = points_frame(projection, layer, names, chosen_word)
    axis_name = "t-SNE" if projection.method == "tsne" else "PC"
    domains = None
    if projection.method == "joint":
        # One plane for all layers: fixed axes, so motion on screen is motion in the plane.
        lo, hi = projection.coords.min(axis=(0, 1)), projection.coords.max(axis=(0, 1))
        pad = (hi - lo) * 0.05 + 1e-9
        domains = ([float(lo[0] - pad[0]), float(hi[0] + pad[0])], [float(lo[1] - pad[1]), float(hi[1] + pad[1])])
        x_scale = alt.Scale(domain=domains[0], nice=False)
        y_scale = alt.Scale(domain=domains[1], nice=False)
    else:
        x_scale = y_scale = alt.Scale(zero=False)
    # only labels that overlap no other are written (the chosen word's first): the rest would pile up unreadably
    frame["labelled"] = label_mask(frame["x"], frame["y"], frame["token"], first=frame["highlight"] != OTHER,
                                   domains=domains)
    # left-aligned and wrapped to the column the page draws it in, so a centred title wider than the plot is not
    # cut on both sides
    chart_title = alt.TitleParams(title, subtitle=subtitle_lines(fit_caption(projection), columns), anchor="start")
    base = alt.Chart(frame).encode(
        x=alt.X("x:Q", scale=x_scale, title=f"{axis_name} 1"),
        y=alt.Y("y:Q", scale=y_scale, title=f"{axis_name} 2"),
        tooltip=["token", "word", "sentence_name", "segment", alt.Tooltip("x:Q", format=".3f"), alt.Tooltip("y:Q", format=".3f")],
    )
    points = base.mark_circle(size=90, opacity=0.85).encode(color=colour_encoding(colour, names, chosen_word))
    layers = [points]
    if show_labels:
        layers.append(base.transform_filter(alt.datum.labelled).mark_text(
            align="left", dx=7, dy=-4, fontSize=LABEL_FONT_PX).encode(text="token:N"))
    return alt.layer(*layers).properties(width="container", height=460, title=chart_title), frame


def variance_frame(projection: LayerProjection, layer: int) -> pd.DataFrame:
    """layer, axis (PC 1 / PC 2), share of that layer's variance, current (the layer shown)."""
    ratio = projection.explained_variance_ratio
    return pd.DataFrame(
        {
            "layer": np.repeat(projection.layers, 2),
            "axis": ["PC 1", "PC 2"] * len(projection.layers),
            "share": ratio.reshape(-1),
            "current": np.repeat(projection.layers == layer, 2),
        }
    )


def fit_caption(projection: LayerProjection) -> str:
    """Which fit and protocol a chart shows, in one line."""
    return f"Fit: {METHOD_LABELS[projection.method]}. {describe(projection.protocol)}"


def variance_chart(projection: LayerProjection, layer: int, columns: int = 1) -> alt.Chart:
    title = alt.TitleParams("Share of each layer's variance on the two axes",
                            subtitle=subtitle_lines(fit_caption(projection), columns), anchor="start")
    return layout.fixed_size(
        alt.Chart(variance_frame(projection, layer), title=title)
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="layer (0 = embeddings)", axis=layout.token_axis()),
            y=alt.Y("share:Q", stack=True, axis=alt.Axis(format="%"), title="explained variance"),
            color=alt.Color("axis:N", title=None),
            opacity=alt.condition(alt.datum.current, alt.value(1.0), alt.value(0.35)),
            tooltip=["layer", "axis", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=alt.Step(max(32, layout.column_step(len(projection.layers)).step)), height=240)
    )
