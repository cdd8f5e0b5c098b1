"""Altair chart specs (data in, chart out) and offline export to SVG/PNG/CSV. No streamlit here.

Token axes are keyed by position ("3·the") and given an explicit order: altair otherwise sorts nominal
axes alphabetically and merges equal labels, so "the ... the" would collapse into one row.
"""

from __future__ import annotations

import base64
import io

import altair as alt
import numpy as np
import pandas as pd

from core.attention import AttentionView, head_entropy

BLUES_LOW, BLUES_HIGH = np.array([247, 251, 255]), np.array([8, 48, 107])


def view_frame(view: AttentionView) -> pd.DataFrame:
    """Long table of a view: one row per (query, key) with its weight and both positions."""
    q, k = view.weights.shape
    return pd.DataFrame(
        {
            "query": np.repeat(view.query_labels, k),
            "key": np.tile(view.key_labels, q),
            "query_order": np.repeat(np.arange(q), k),
            "key_order": np.tile(np.arange(k), q),
            "weight": view.weights.reshape(-1).astype(float),
        }
    )


def attention_heatmap(view: AttentionView, title: str = "") -> alt.Chart:
    frame = view_frame(view)
    size = max(220, min(640, 16 * max(view.weights.shape)))
    return (
        alt.Chart(frame, title=title)
        .mark_rect()
        .encode(
            x=alt.X("key:N", sort=list(view.key_labels), title="attends to (key)", axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("query:N", sort=list(view.query_labels), title="from (query)"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="attention"),
            tooltip=["query", "key", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=size, height=size)
    )


def head_view_lines(view: AttentionView, title: str = "") -> alt.LayerChart:
    """bertviz-style head view: queries on the left, keys on the right, a line per pair whose
    opacity is the weight. Pointing at a left token highlights its own lines."""
    frame = view_frame(view)
    frame["left"], frame["right"] = 0.0, 1.0
    height = max(200, 18 * max(view.weights.shape))
    n = max(view.weights.shape)
    y_scale = alt.Scale(domain=[-0.5, n - 0.5], reverse=True)
    hover = alt.selection_point(name="hover_query", on="pointerover", fields=["query"], empty=True, clear="pointerout")
    queries = pd.DataFrame({"query": view.query_labels, "order": np.arange(len(view.query_labels)), "x": 0.0})
    keys = pd.DataFrame({"key": view.key_labels, "order": np.arange(len(view.key_labels)), "x": 1.0})
    x_scale = alt.Scale(domain=[-0.6, 1.6])
    lines = (
        alt.Chart(frame)
        .mark_rule(strokeWidth=2)
        .encode(
            x=alt.X("left:Q", scale=x_scale, axis=None),
            x2="right:Q",
            y=alt.Y("query_order:Q", scale=y_scale, axis=None),
            y2="key_order:Q",
            opacity=alt.condition(hover, alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None), alt.value(0.02)),
            color=alt.value("#2b6cb0"),
            tooltip=["query", "key", alt.Tooltip("weight:Q", format=".3f")],
        )
    )
    left = (
        alt.Chart(queries)
        .mark_text(align="right", dx=-6, fontSize=12)
        .encode(x=alt.X("x:Q", scale=x_scale, axis=None), y=alt.Y("order:Q", scale=y_scale, axis=None), text="query:N")
        .add_params(hover)
    )
    right = (
        alt.Chart(keys)
        .mark_text(align="left", dx=6, fontSize=12)
        .encode(x=alt.X("x:Q", scale=x_scale, axis=None), y=alt.Y("order:Q", scale=y_scale, axis=None), text="key:N")
    )
    return alt.layer(lines, left, right, title=title).properties(width=360, height=height)


def thumbnail_data_uri(matrix: np.ndarray, pixels: int = 44) -> str:
    """A [query, key] matrix as a small PNG (white = 0, dark blue = the head's max), base64 data URI."""
    from PIL import Image

    peak = float(matrix.max()) or 1.0
    t = (matrix / peak)[..., None]
    rgb = (BLUES_LOW * (1 - t) + BLUES_HIGH * t).astype(np.uint8)
    image = Image.fromarray(rgb, mode="RGB").resize((pixels, pixels), Image.NEAREST)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


MODEL_VIEW_SELECTION = "cell"


def model_view_grid(attentions: np.ndarray, pixels: int = 44) -> alt.LayerChart:
    """All heads at once: attentions [layer, head, query, key] -> a layer x head grid of thumbnails.

    Clicking a cell selects {layer, head} through the point selection named MODEL_VIEW_SELECTION.
    """
    n_layers, n_heads = attentions.shape[:2]
    entropy = head_entropy(attentions)
    rows = [
        {"layer": layer, "head": head, "url": thumbnail_data_uri(attentions[layer, head], pixels), "entropy": float(entropy[layer, head])}
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    frame = pd.DataFrame(rows)
    pick = alt.selection_point(name=MODEL_VIEW_SELECTION, fields=["layer", "head"], on="click", empty=False)
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("layer:O", title="layer"),
        tooltip=["layer", "head", alt.Tooltip("entropy:Q", format=".2f", title="mean entropy (nats)")],
    )
    images = base.mark_image(width=pixels, height=pixels).encode(url="url:N")
    cells = base.mark_rect(fillOpacity=0.0, strokeWidth=2).encode(
        stroke=alt.condition(pick, alt.value("#e53e3e"), alt.value("transparent"))
    ).add_params(pick)
    step = pixels + 4
    return alt.layer(images, cells).properties(width=alt.Step(step), height=alt.Step(step))


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline (vl-convert bundles Vega; no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), scale=scale)


def frame_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")
