"""Attention charts: one sentence (heatmap, bertviz-style lines, the model view of every head) and heads over a
dataset (layer x head grids, pattern types, ablation, change after fine-tuning, syntactic heads). No streamlit here.

Token axes are keyed by position ("3·the") and given an explicit order: altair otherwise sorts nominal
axes alphabetically and merges equal labels, so "the ... the" would collapse into one row.
"""

from __future__ import annotations

import base64
import io

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image

from core import numbering, references
from core.analyses.attention import LINE_THRESHOLD, LINE_TOP_K, AttentionView, head_entropy, visible_pairs
from core.analyses.heads import PATTERNS
from core.analyses.model_view import ModelView, block_max
from core.charts import layout
from core.model.loading import display_name
from core.protocols import PROTOCOLS

BLUES_LOW, BLUES_HIGH = np.array([247, 251, 255]), np.array([8, 48, 107])


def view_frame(view: AttentionView, keep: np.ndarray | None = None) -> pd.DataFrame:
    """Long table of a view: one row per (query, key) with its weight and both positions; with `keep` ([Q, K]
    bool, see core.analyses.attention.visible_pairs) only the pairs it marks."""
    q_idx, k_idx = np.nonzero(np.ones(view.weights.shape, dtype=bool) if keep is None else keep)
    queries, keys = np.asarray(view.query_labels, dtype=object), np.asarray(view.key_labels, dtype=object)
    return pd.DataFrame(
        {
            "query": queries[q_idx],
            "key": keys[k_idx],
            "query_order": q_idx,
            "key_order": k_idx,
            "weight": view.weights[q_idx, k_idx].astype(float),
        }
    )


# Past this many tokens the head view draws thinner lines on tighter rows.
LONG_INPUT_TOKENS = 128

# Above this many cells a heatmap goes as one image (vega draws 262k rects for 512 tokens in seconds).
HEATMAP_IMAGE_CELLS = 96 * 96


def lines_note(view: AttentionView, threshold: float = LINE_THRESHOLD, top_k: int | None = LINE_TOP_K) -> str:
    """The sentence under a thresholded head view: what was left out and why."""
    shown = int(visible_pairs(view.weights, threshold, top_k).sum())
    total = view.weights.size
    if shown == total:
        return f"All {total:,} lines drawn."
    limit = f" and at most the {top_k} strongest keys per query" if top_k else ""
    return (f"{shown:,} of {total:,} lines drawn: weights ≥ {threshold:g}{limit} (fainter lines would be "
            "invisible; the CSV has every pair).")


def attention_heatmap(view: AttentionView, title: str = "") -> alt.Chart:
    """One rect per (query, key); past HEATMAP_IMAGE_CELLS cells, attention_heatmap_image instead."""
    if view.weights.size > HEATMAP_IMAGE_CELLS:
        return attention_heatmap_image(view, title)
    frame = view_frame(view)
    return layout.fixed_size(
        alt.Chart(frame, title=title)
        .mark_rect()
        .encode(
            x=alt.X("key:N", sort=list(view.key_labels), title="attends to (key)", axis=layout.token_axis(angle=-60)),
            y=alt.Y("query:N", sort=list(view.query_labels), title="from (query)", axis=layout.token_axis()),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="attention"),
            tooltip=["query", "key", alt.Tooltip("weight:Q", format=".3f")],
        )
        # square cells, the map at least MIN_CHART_PX across: a 5-token map of 16 px cells was 80 px wide
        .properties(width=layout.column_step(len(view.key_labels)), height=layout.column_step(len(view.query_labels)))
    )


def head_view_lines(view: AttentionView, title: str = "", highlight: str | None = None, *,
                    threshold: float = LINE_THRESHOLD, top_k: int | None = LINE_TOP_K) -> alt.LayerChart:
    """bertviz-style head view: queries on the left, keys on the right, a line per pair whose
    opacity is the weight. Pointing at a left token highlights its own lines. `highlight` (a query label) starts
    with that row's lines alone and its label larger, in red (the Masked words page's [MASK]).

    Only pairs with weight >= threshold among each query's top_k keys get a line (lines_note says so under the
    chart), so the data grows with the tokens, not their square; threshold=0, top_k=None draws every pair."""
    frame = view_frame(view, visible_pairs(view.weights, threshold, top_k))
    n = max(view.weights.shape)
    # Long inputs: thinner lines and rows. Drawing the lines dominates the browser's time (rasterising thousands of
    # long anti-aliased strokes on a tall canvas: at 512 tokens ~1.3 s at 2 px and 18 px rows; bench/app_latency.py).
    long_input = n > LONG_INPUT_TOKENS
    height = max(200, (layout.MIN_ROW_PX - 2 if long_input else layout.MIN_ROW_PX + 2) * n)
    y_scale = alt.Scale(domain=[-0.5, n - 0.5], reverse=True)
    hover = alt.selection_point(name="hover_query", on="pointerover", fields=["query"], empty=True,
                                clear="pointerout", **({"value": [{"query": highlight}]} if highlight else {}))
    queries = pd.DataFrame({"query": view.query_labels, "order": np.arange(len(view.query_labels)), "x": 0.0})
    keys = pd.DataFrame({"key": view.key_labels, "order": np.arange(len(view.key_labels)), "x": 1.0})
    x_scale = alt.Scale(domain=[-0.6, 1.6])
    lines = (
        alt.Chart(frame)
        .mark_rule(strokeWidth=1 if long_input else 2)
        .encode(
            # constant ends (datum, not a column): thousands of lines send only what differs between them
            x=alt.X(datum=0.0, scale=x_scale, axis=None),
            x2=alt.X2(datum=1.0),
            y=alt.Y("query_order:Q", scale=y_scale, axis=None),
            y2=alt.Y2("key_order:Q"),
            opacity=alt.condition(hover, alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None), alt.value(0.02)),
            color=alt.value("#2b6cb0"),
            # typed: a head with no visible line leaves the frame empty, and altair cannot infer an empty column
            tooltip=["query:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
        )
    )
    left = (
        alt.Chart(queries)
        .mark_text(align="right", dx=-6, fontSize=12)
        .encode(x=alt.X("x:Q", scale=x_scale, axis=None), y=alt.Y("order:Q", scale=y_scale, axis=None), text="query:N",
                **({"color": alt.condition(alt.datum.query == highlight, alt.value("#c53030"), alt.value("black")),
                    "size": alt.condition(alt.datum.query == highlight, alt.value(14), alt.value(12))}
                   if highlight else {}))
        .add_params(hover)
    )
    right = (
        alt.Chart(keys)
        .mark_text(align="left", dx=6, fontSize=12)
        .encode(x=alt.X("x:Q", scale=x_scale, axis=None), y=alt.Y("order:Q", scale=y_scale, axis=None), text="key:N")
    )
    return layout.fixed_size(alt.layer(lines, left, right, title=title).properties(width=360, height=height))


HEAD_VIEW_CAPTION = "Lines from each token to the tokens it attends to; darker = more attention."
MODEL_VIEW_CAPTION = "Every layer × head: each square is one head's attention; a pixel shows the largest weight it covers."


def head_view_charts(view: AttentionView) -> list:
    """The head-view analysis's charts (core.contract): its lines, titled by layer and heads."""
    return [(head_view_lines(view, view.title), HEAD_VIEW_CAPTION)]


def heatmap_rgb(matrix: np.ndarray, peak: float = 1.0) -> np.ndarray:
    """[Q, K] weights -> [Q, K, 3] uint8 on the blues ramp (white = 0, dark blue = peak)."""
    t = np.clip(np.asarray(matrix, dtype=np.float32) / (peak or 1.0), 0, 1)[..., None]
    return (BLUES_LOW * (1 - t) + BLUES_HIGH * t).astype(np.uint8)


def png_data_uri(rgb: np.ndarray) -> str:
    """[H, W, 3] uint8 as a PNG data URI, one image pixel per entry (shrink with block_max first: resizing with
    nearest-neighbour sampling drops whole columns)."""
    image = Image.fromarray(rgb, mode="RGB")
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def row_summary_frame(view: AttentionView, top: int = 3) -> pd.DataFrame:
    """One row per query: its position, label and its `top` strongest keys with their weights ("12·bank 0.412, ...")."""
    order = np.argsort(-view.weights, axis=1, kind="stable")[:, :top]
    keys = np.asarray(view.key_labels, dtype=object)
    return pd.DataFrame({
        "query": list(view.query_labels),
        "query_order": np.arange(len(view.query_labels)),
        "strongest keys": [", ".join(f"{keys[k]} {view.weights[q, k]:.3f}" for k in row) for q, row in enumerate(order)],
    })


def attention_heatmap_image(view: AttentionView, title: str = "") -> alt.LayerChart:
    """The heatmap of a long input as one 640 px PNG (colour scale 0..1 as attention_heatmap; each pixel the
    largest weight of the cells it covers, so no key column vanishes at any length) under a band per query
    row: pointing at a row shows that query's three strongest keys, so the data grows with the tokens."""
    q, k = view.weights.shape
    size = 640
    # block-max pooling (the model view's rule): a pixel covering several cells shows their largest weight
    uri = png_data_uri(heatmap_rgb(block_max(view.weights, size, size)))
    x_scale, y_scale = alt.Scale(domain=[-0.5, k - 0.5], nice=False), alt.Scale(domain=[-0.5, q - 0.5], reverse=True, nice=False)
    image = alt.Chart(pd.DataFrame({"url": [uri], "x": [(k - 1) / 2], "y": [(q - 1) / 2]})).mark_image(
        width=size, height=size, aspect=False).encode(
        x=alt.X("x:Q", scale=x_scale, title="attends to (key position)"),
        y=alt.Y("y:Q", scale=y_scale, title="from (query position)"), url="url:N")
    rows = row_summary_frame(view)
    rows["lo"], rows["hi"] = rows["query_order"] - 0.5, rows["query_order"] + 0.5
    bands = alt.Chart(rows).mark_rect(opacity=0.0).encode(
        y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q", x=alt.value(0), x2=alt.value(size),
        tooltip=["query", "strongest keys"])
    # drawn at its own size: stretched to the column, the axes widened past the 640 px image and keys sat off their ticks
    return layout.fixed_size(alt.layer(image, bands, title=title).properties(width=size, height=size))


def thumbnail_data_uri(fraction: np.ndarray) -> str:
    """A thumbnail's [P, P] values in 0..1 (core.analyses.model_view.ModelView.colour_fraction) as a PNG
    (white = 0, dark blue = 1), one image pixel per value, base64 data URI."""
    return png_data_uri(heatmap_rgb(fraction))


MODEL_VIEW_SELECTION = "cell"


def model_view_frame(view: ModelView) -> pd.DataFrame:
    """One row per head: layer, head, url (its thumbnail), top keys (the hover), scale max, entropy."""
    fractions = view.colour_fraction()
    n_layers, n_heads = fractions.shape[:2]
    return pd.DataFrame([
        {"layer": numbering.shown(layer), "head": head, "url": thumbnail_data_uri(fractions[layer, head]),
         "top keys": view.top_keys_text(layer, head), "scale max": float(view.scale_max[layer, head]),
         "entropy": float(view.entropy[layer, head])}
        for layer in range(n_layers) for head in range(n_heads)
    ])


def model_view_grid(view: ModelView) -> alt.LayerChart:
    """All heads at once (a core.analyses.model_view.ModelView): a layer x head grid of thumbnails, each pixel the
    largest weight of the cells it covers. Pointing at one shows the head's top keys; clicking selects
    {layer (shown 1..L), head} through the point selection named MODEL_VIEW_SELECTION."""
    frame = model_view_frame(view)
    pick = alt.selection_point(name=MODEL_VIEW_SELECTION, fields=["layer", "head"], on="click", empty=False)
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        tooltip=["layer", "head", alt.Tooltip("top keys:N", title="top keys (mean attention received)"),
                 alt.Tooltip("scale max:Q", format=".3f", title="weight drawn darkest"),
                 alt.Tooltip("entropy:Q", format=".2f", title="mean entropy (nats)")],
    )
    images = base.mark_image(width=view.pixels, height=view.pixels).encode(url="url:N")
    cells = base.mark_rect(fillOpacity=0.0, strokeWidth=2).encode(
        stroke=alt.condition(pick, alt.value("#e53e3e"), alt.value("transparent"))
    ).add_params(pick)
    step = view.pixels + 4
    return alt.layer(images, cells).properties(width=alt.Step(step), height=alt.Step(step))


def model_view_charts(view: ModelView) -> list:
    """The model-view analysis's charts (core.contract): the grid of every head."""
    return [(model_view_grid(view), MODEL_VIEW_CAPTION)]


# ---- heads over a dataset ----------------------------------------------------------------------------------

# In core.analyses.heads.PATTERNS order; each over 3:1 on white (tableau10's orange and grey, 2.4 and 2.1:1, were not).
PATTERN_COLOURS = ["#4c78a8", "#d55e00", "#b279a2", "#54a24b", "#767676"]


def grid_frame(values: np.ndarray, name: str, first: int = 0) -> pd.DataFrame:
    """[layers, heads] values -> one row per head: layer (shown 1..L, core.numbering), head, `name`; heads numbered
    from `first` (1 under the Clark protocol, as in the paper)."""
    layers, heads = values.shape
    return pd.DataFrame({"layer": numbering.shown(0) + np.repeat(np.arange(layers), heads),
                         "head": np.tile(np.arange(heads), layers) + first, name: values.ravel()})


def _first(protocol: str) -> int:
    return 1 if protocol == "clark" else 0


def protocol_title(title: str, protocol: str) -> str:
    """A chart title that says which protocol it shows."""
    return f"{title} [{PROTOCOLS[protocol].paper.split(',')[0]} protocol]"


def grid_chart(frame: pd.DataFrame, name: str, title: str | alt.TitleParams, scheme: str = "viridis",
               diverging: bool = False, fmt: str = ".3f", domain: tuple[float, float] | None = None) -> alt.Chart:
    """A layer x head heatmap of column `name` (layer 1 at the top, as in the papers' figures); `domain` fixes the
    colour scale (values outside it take the end colours), else it spans the data."""
    if diverging:
        bound = max(float(np.nanmax(np.abs(frame[name].to_numpy()))), 0.01)
        scale = alt.Scale(scheme="redblue", domain=[-bound, bound], domainMid=0)
    elif domain is not None:
        scale = alt.Scale(scheme=scheme, domain=list(domain), clamp=True)
    else:
        scale = alt.Scale(scheme=scheme)
    return alt.Chart(frame, title=title).mark_rect().encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        color=alt.Color(f"{name}:Q", scale=scale, title=name),
        tooltip=["layer", "head", alt.Tooltip(f"{name}:Q", format=fmt)],
    ).properties(width=alt.Step(30), height=alt.Step(24))


def map_frame(example) -> pd.DataFrame:
    """One example map (core.analyses.heads.PatternExample) as rows query, key, weight; labels keyed by position."""
    labels = [f"{i}·{t}" for i, t in enumerate(example.tokens)]
    t = len(labels)
    return pd.DataFrame({"query": np.repeat(labels, t), "key": np.tile(labels, t), "weight": example.attention.ravel()})


def map_chart(example, size: int = 180) -> alt.Chart:
    labels = [f"{i}·{t}" for i, t in enumerate(example.tokens)]
    return alt.Chart(map_frame(example), title=numbering.head_name(example.layer, example.head)).mark_rect().encode(
        x=alt.X("key:N", sort=labels, axis=None),
        y=alt.Y("query:N", sort=labels, axis=None),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), legend=None),
        tooltip=["query", "key", alt.Tooltip("weight:Q", format=".3f")],
    ).properties(width=size, height=size)


def examples_chart(examples) -> alt.HConcatChart:
    """Example maps side by side (rows: queries, columns: keys), the row at least MIN_CHART_PX wide (a type with
    one example was a 180 px map)."""
    size = max(180, -(-layout.MIN_CHART_PX // max(len(examples), 1)))
    return alt.hconcat(*[map_chart(e, size) for e in examples])


def statistic_chart(survey, name: str, title: str) -> tuple[alt.Chart, pd.DataFrame]:
    """The layer x head grid of one head statistic of a core.analyses.heads.HeadSurvey, and its frame (layers from 1,
    as the layer-means line below it; heads from 1 under the Clark protocol)."""
    frame = grid_frame(survey.stat(name), name, _first(survey.protocol))
    scheme = "viridis" if name != "entropy" else "magma"
    return grid_chart(frame, name, protocol_title(title, survey.protocol), scheme=scheme), frame


# Clark et al.'s Figure 2 lines, by statistic name.
LAYER_REFERENCES = {"cls": "clark-cls", "sep": "clark-sep", "punct": "clark-punct"}


LEGEND_CHARS = 80  # a legend line of 11 px type: about 480 px, inside the page's main column


def layer_means_frame(survey, name: str) -> pd.DataFrame:
    """Mean over heads per layer (layer k = transformer layer k, from 1 as in Clark's Figure 2 and core.numbering): rows layer, value,
    series; with Clark's published line beside it for [CLS], [SEP] and punctuation, labelled by
    core.references.overlay_label (same model and protocol, or shape only)."""
    means = survey.layer_means(name)
    frame = pd.DataFrame({"layer": numbering.shown(0) + np.arange(len(means)), "value": means,
                          "series": f"measured: {display_name(survey.model)}"})
    key = LAYER_REFERENCES.get(name)
    if key is None:
        return frame
    ref = references.get(key)
    paper = pd.DataFrame({"layer": list(ref.values), "value": list(ref.values.values()),
                          "series": references.overlay_label(ref, survey.model, survey.protocol)})
    return pd.concat([frame, paper], ignore_index=True)


def layer_means_chart(survey, name: str, title: str) -> tuple[alt.Chart, pd.DataFrame]:
    frame = layer_means_frame(survey, name)
    # the measured line strong and solid, the paper's grey and dashed (layout.MEASURED_COLOUR)
    series = list(dict.fromkeys(frame["series"]))
    colours = alt.Scale(domain=series, range=[layout.MEASURED_COLOUR, layout.PAPER_COLOUR][: len(series)])
    dashes = alt.Scale(domain=series, range=[[1, 0], [5, 3]][: len(series)])
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=520, title=None, symbolType="stroke", symbolStrokeWidth=2,
                        labelExpr=layout.wrapped_labels(series, LEGEND_CHARS))
    chart = alt.Chart(frame, title=protocol_title(title, survey.protocol)).mark_line(point=True).encode(
        x=alt.X("layer:O", title=numbering.BLOCK_AXIS, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("value:Q", title="mean over heads"),
        color=alt.Color("series:N", scale=colours, legend=legend),
        strokeDash=alt.StrokeDash("series:N", scale=dashes, legend=None),
        tooltip=["series", "layer", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=420, height=220)
    chart = layout.fixed_size(chart)
    return chart, frame


def pattern_frame(survey) -> pd.DataFrame:
    """Per head: layer, head, type_index, pattern (its dominant type) and the share of inputs on which it won."""
    frame = grid_frame(survey.dominant_pattern, "type_index", _first(survey.protocol))
    frame["pattern"] = [PATTERNS[k] for k in frame["type_index"]]
    frame["share of inputs"] = survey.pattern_counts.max(axis=-1).ravel() / max(survey.n_examples, 1)
    return frame


def pattern_chart(survey, frame: pd.DataFrame | None = None) -> alt.HConcatChart:
    """Dominant type per head (paler = won on fewer inputs) beside the share of all (input, head) maps per type."""
    frame = pattern_frame(survey) if frame is None else frame
    colours = alt.Scale(domain=list(PATTERNS), range=PATTERN_COLOURS)
    grid = alt.Chart(frame, title="Dominant pattern type per head").mark_rect().encode(
        x=alt.X("head:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        color=alt.Color("pattern:N", scale=colours),
        opacity=alt.Opacity("share of inputs:Q", scale=alt.Scale(domain=[0, 1], range=[0.35, 1]), legend=None),
        tooltip=["layer", "head", "pattern", alt.Tooltip("share of inputs:Q", format=".0%")],
    ).properties(width=alt.Step(30), height=alt.Step(24))
    share = pd.DataFrame({"pattern": list(survey.pattern_share), "share": list(survey.pattern_share.values())})
    bars = alt.Chart(share, title="Share of all (input, head) maps").mark_bar().encode(
        x=alt.X("share:Q", axis=alt.Axis(format="%")),
        y=alt.Y("pattern:N", sort=list(PATTERNS)),
        color=alt.Color("pattern:N", scale=colours, legend=None),
        tooltip=["pattern", alt.Tooltip("share:Q", format=".1%")],
    )
    return alt.hconcat(grid, bars)


def ablation_chart(result) -> tuple[alt.HConcatChart, pd.DataFrame]:
    """A core.analyses.ablation sweep: accuracy change per disabled head (▲ where removal helps) beside each whole layer
    disabled; returns the chart and the head frame (layer, head, accuracy change)."""
    frame = grid_frame(result.head_delta, "accuracy change")
    heat = grid_chart(frame, "accuracy change", f"Accuracy change with one head disabled ({result.mode})",
                      diverging=True, fmt="+.3f")
    marks = alt.Chart(frame[frame["accuracy change"] > 0]).mark_text(text="▲", color="black").encode(
        x="head:O", y="layer:O")
    layers = pd.DataFrame({"layer": numbering.shown(0) + np.arange(len(result.layer_delta)),
                           "accuracy change": result.layer_delta})
    bars = alt.Chart(layers, title="Whole layer disabled").mark_bar().encode(
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS), x=alt.X("accuracy change:Q", axis=alt.Axis(format="+.2f")),
        color=alt.condition("datum['accuracy change'] > 0", alt.value("#2b8a3e"), alt.value("#c92a2a")),
        tooltip=["layer", alt.Tooltip("accuracy change:Q", format="+.3f")])
    return alt.hconcat(alt.layer(heat, marks), bars), frame


def change_chart(change) -> tuple[alt.Chart, pd.DataFrame]:
    """Per-head cosine of two models' attention maps (core.analyses.heads.AttentionChange), and its frame."""
    frame = grid_frame(change.cosine, "cosine")
    chart = grid_chart(frame, "cosine", f"Cosine of attention maps: {display_name(change.model_a)} vs {display_name(change.model_b)}", scheme="plasma")
    return chart, frame


def syntax_frame(table: pd.DataFrame, min_count: int = 20) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From the per-relation table (relation, count, best head, accuracy, baseline_accuracy): the relations
    charted (those with >= min_count dependents, unless that leaves one or none) and their long form
    (relation, count, best head, predictor, share correct)."""
    shown = table[table["count"] >= min_count] if (table["count"] >= min_count).sum() > 1 else table
    long = shown.melt(id_vars=["relation", "count", "best head"], value_vars=["accuracy", "baseline_accuracy"],
                      var_name="predictor", value_name="share correct")
    long["predictor"] = long["predictor"].map({"accuracy": "best head", "baseline_accuracy": "fixed offset"})
    return shown, long


def syntax_note(protocol: str) -> str:
    """How the syntactic-heads table scores and names heads: under the Clark protocol by the paper's layer-head from
    1 (its example head is the paper's, BERT-base's, and says so); else as every chart (core.numbering)."""
    if protocol == "clark":
        return ("For every word (a root counts as a miss), a head predicts the other word it attends to most "
                "(dependent→head) or the word that attends to it most (head→dependent); per relation and head the "
                "better direction is kept. A possessor followed by 's is scored through the 's. Baseline: the best "
                "fixed offset in -3..+2. Best heads are named layer-head from 1, as in the paper (its direct-object "
                "head in BERT-base is 8-10: layer 8, head 10).")
    return ("For each dependent word (roots left out), a head predicts its most-attended other word. Baseline: "
            "always the best fixed relative position for that relation. Heads are named by layer from 1, as on "
            "every chart, and head from 0 (L1 H0 is the first head of the first layer).")


def syntax_chart(table: pd.DataFrame, protocol: str = "bertlens") -> alt.Chart:
    shown, long = syntax_frame(table)
    title = "Predicted head = gold head" + (" (better of both directions)" if protocol == "clark" else
                                            " (most-attended other word)")
    return alt.Chart(long, title=protocol_title(title, protocol)).mark_bar().encode(
        y=alt.Y("relation:N", sort=list(shown["relation"]), title=None),
        yOffset="predictor:N",
        x=alt.X("share correct:Q", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("predictor:N"),
        tooltip=["relation", "count", "best head", "predictor", alt.Tooltip("share correct:Q", format=".3f")],
    )


def relation_chart(result, relation: str) -> tuple[alt.Chart, pd.DataFrame]:
    """Every head's accuracy for one relation of a core.analyses.heads.SyntaxHeads, and its frame."""
    r = result.relations.index(relation)
    frame = grid_frame(result.accuracy[r], "accuracy", _first(result.protocol))
    title = f"{relation}: accuracy of each head (baseline {result.baseline_accuracy[r]:.2f})"
    return grid_chart(frame, "accuracy", protocol_title(title, result.protocol)), frame
