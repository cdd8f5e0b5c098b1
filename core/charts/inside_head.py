"""Inside a head: the neuron view (q, k, q⊙k, scores, softmax) and raw vs norm-weighted attention (Kobayashi et
al. 2020) for one row and over a dataset. No streamlit here.

Token axes are keyed by position ("3·the") with an explicit order, as in core.charts.attention.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.analyses.inside_head import row_shares
from core.charts import layout
from core.model.loading import display_name

HOVER = "dim_hover"
RAW, NORM = "raw attention α", "norm-weighted ‖α f(x)‖"


def _labels(tokens) -> list[str]:
    return [f"{i}·{t}" for i, t in enumerate(tokens)]


def _key_labels(view) -> list[str]:
    """The neuron view's key rows, "position·token" (a sentence-pair filter keeps some of the tokens)."""
    return [f"{p}·{view.tokens[p]}" for p in view.positions()]


def neuron_frame(view) -> pd.DataFrame:
    """One row per (key token, dimension): key, key_order, dim, k (the key's value), q (the query's), product."""
    t, d = view.keys.shape
    return pd.DataFrame({
        "key": np.repeat(_key_labels(view), d), "key_order": np.repeat(np.arange(t), d),
        "dim": np.tile(np.arange(d), t), "k": view.keys.ravel().astype(float),
        "q": np.tile(view.query, t).astype(float), "product": view.products.ravel().astype(float),
    })


def _visible(view) -> np.ndarray:
    return np.ones(len(view.scores), bool) if view.visible is None else np.asarray(view.visible, bool)


def score_frame(view) -> pd.DataFrame:
    """One row per key token: key, score, attention, bias, visible (False outside a local layer's window), and
    DeBERTa's score terms c2c, c2p, p2c."""
    frame = pd.DataFrame({"key": _key_labels(view), "key_order": np.arange(len(view.scores)),
                          "score": view.scores.astype(float), "attention": view.attention.astype(float),
                          "bias": view.bias.astype(float), "visible": _visible(view)})
    for name, row in (view.terms or {}).items():
        frame[name] = row.astype(float)
    return frame


TERM_TITLES = {"c2c": "c2c: content → content (q·k)", "c2p": "c2p: query content → key's relative position",
               "p2c": "p2c: query's relative position → key content"}


def terms_frame(view) -> pd.DataFrame:
    """DeBERTa's score terms, one row per (key, term): key, key_order, term, value (empty for other families)."""
    if not view.terms:
        return pd.DataFrame(columns=["key", "key_order", "term", "value"])
    labels = _key_labels(view)
    return pd.DataFrame([{"key": labels[i], "key_order": i, "term": name, "meaning": TERM_TITLES[name],
                          "value": float(row[i])} for name, row in view.terms.items() for i in range(len(labels))])


def _diverging(values: np.ndarray) -> alt.Scale:
    bound = max(float(np.abs(values).max()), 1e-6)
    return alt.Scale(scheme="redblue", domain=[bound, -bound])  # red = positive, blue = negative


def neuron_chart(view) -> alt.VConcatChart:
    """bertviz's neuron view as four aligned panels: the query vector (one row), every key vector, q⊙k
    (red = pushes the score up, blue = down) and, on the right, the score and softmax per key. Pointing at a
    dimension of q⊙k highlights that dimension in every panel."""
    frame = neuron_frame(view)
    labels = _key_labels(view)
    query_label = _labels(view.tokens)[view.query_index]
    d = view.keys.shape[1]
    cell = max(3, min(10, 256 // max(d, 1)))  # both d x T panels and the bars fit a wide column
    hover = alt.selection_point(name=HOVER, fields=["dim"], on="pointerover", clear="pointerout", empty=True)
    fade = alt.condition(hover, alt.value(1.0), alt.value(0.25))
    x = alt.X("dim:O", title="dimension of this head", axis=alt.Axis(labels=d <= 32, ticks=False))
    y = alt.Y("key:N", sort=labels, title="key", axis=layout.token_axis())
    height = layout.token_step()
    query = frame[frame["key_order"] == 0][["dim", "q"]]
    turned = " (after the rotary position embedding)" if view.rotated else ""
    q_chart = alt.Chart(query, title=f"query q of {query_label}{turned}").mark_rect().encode(
        x=alt.X("dim:O", axis=None), color=alt.Color("q:Q", scale=_diverging(view.query), legend=None),
        opacity=fade, tooltip=["dim", alt.Tooltip("q:Q", format="+.3f")],
    ).properties(width=cell * d, height=16)
    k_chart = alt.Chart(frame, title="keys k").mark_rect().encode(
        x=x, y=y, color=alt.Color("k:Q", scale=_diverging(view.keys), legend=None), opacity=fade,
        tooltip=["key", "dim", alt.Tooltip("k:Q", format="+.3f")],
    ).properties(width=cell * d, height=height)
    p_chart = alt.Chart(frame, title="q ⊙ k (red: raises the score, blue: lowers it)").mark_rect().encode(
        x=x, y=alt.Y("key:N", sort=labels, axis=None),
        color=alt.Color("product:Q", scale=_diverging(view.products), title="q⊙k"), opacity=fade,
        tooltip=["key", "dim", alt.Tooltip("q:Q", format="+.3f"), alt.Tooltip("k:Q", format="+.3f"),
                 alt.Tooltip("product:Q", format="+.3f")],
    ).add_params(hover).properties(width=cell * d, height=height)
    scores = score_frame(view)
    # A local (sliding-window) layer's query sees only nearby keys: the others' scores are drawn grey, as the
    # softmax gives them nothing whatever their score.
    windowed = not _visible(view).all()
    scores = scores.assign(effect=np.where(~scores["visible"], "outside the window",
                                           np.where(scores["score"] > 0, "raises", "lowers")))
    score_title = ("score q·k/√d" if not view.terms else "score = Σ terms") + (
        " (grey: outside the window)" if windowed else "")
    s_chart = alt.Chart(scores, title=score_title).mark_bar().encode(
        y=alt.Y("key:N", sort=labels, axis=None), x=alt.X("score:Q", title="score"),
        color=alt.Color("effect:N", legend=None, scale=alt.Scale(domain=["raises", "lowers", "outside the window"],
                                                                 range=["#c92a2a", "#1c7ed6", "#adb5bd"])),
        tooltip=["key", alt.Tooltip("score:Q", format="+.3f"), alt.Tooltip("bias:Q", format="+.3f", title="position bias"),
                 alt.Tooltip("visible:N", title="in the window")],
    ).properties(width=90 + 60 * windowed, height=height)
    a_chart = alt.Chart(scores, title="softmax").mark_bar(color="#2b6cb0").encode(
        y=alt.Y("key:N", sort=labels, axis=None), x=alt.X("attention:Q", scale=alt.Scale(domain=[0, 1]), title="attention"),
        tooltip=["key", alt.Tooltip("attention:Q", format=".3f")],
    ).properties(width=90, height=height)
    panels = [k_chart, p_chart, s_chart, a_chart]
    if view.terms:  # DeBERTa: its three terms apart, one column each per key (row), summing to the score
        terms = terms_frame(view)
        base = alt.Chart(terms, title="terms").encode(
            x=alt.X("term:N", sort=list(TERM_TITLES), title="c2c + c2p + p2c", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("key:N", sort=labels, axis=None),
            tooltip=["key", "meaning", alt.Tooltip("value:Q", format="+.3f")])
        cells = base.mark_rect().encode(color=alt.Color("value:Q", scale=_diverging(terms["value"].to_numpy()),
                                                        legend=None))
        values = base.mark_text(fontSize=9).encode(text=alt.Text("value:Q", format="+.1f"))
        panels.insert(3, alt.layer(cells, values).properties(width=3 * 34, height=height))
    # Lowercase "layer": the head view's "Layer L, head H" title, drawn in another tab, stays unique on the page.
    shown = "" if view.pair_filter == "all" else f", keys of {view.pair_filter}"
    # Each panel keeps its own colour scale: shared (Vega-Lite's default in a concat), the domains [b, -b] that make
    # red positive were merged into one ascending [-b, b], and red meant negative.
    return layout.fixed_size(alt.vconcat(q_chart, alt.hconcat(*panels, spacing=6).resolve_scale(color="independent"),
                                         title=f"layer {numbering.shown(view.layer)}, head {view.head}, query {query_label}{shown}")
                             .resolve_scale(color="independent"))


def neuron_table(view) -> pd.DataFrame:
    """The neuron view as one table (the page's CSV, core.lens.neuron_view's frame): per key and dimension k, q,
    q⊙k, with the key's score, softmax and position bias."""
    return neuron_frame(view).merge(score_frame(view), on=["key", "key_order"])


def neuron_charts(view) -> list:
    """The neuron analysis's charts (core.contract)."""
    return [(neuron_chart(view), "Inside the head: query, key, q⊙k and the scores.")]


def row_frame(norms, layer: int, head: int, query: int) -> pd.DataFrame:
    """One query's row, raw vs norm-weighted (rescaled to sum to 1): key, key_order, measure, share, and the
    key's ‖f(x)‖."""
    labels = _labels(norms.tokens)
    raw = norms.attentions[layer, head, query].astype(float)
    weighted = row_shares(norms.norms[layer, head, query].astype(np.float64))
    fx = norms.value_norms[layer, head].astype(float)
    n = len(labels)
    return pd.DataFrame({"key": labels * 2, "key_order": list(range(n)) * 2,
                         "measure": [RAW] * n + [NORM] * n, "share": np.concatenate([raw, weighted]),
                         "‖f(x)‖": np.concatenate([fx, fx])})


def row_chart(frame: pd.DataFrame, title: str = "") -> alt.Chart:
    labels = list(frame[frame["measure"] == RAW]["key"])
    return layout.fixed_size(alt.Chart(frame, title=title).mark_bar().encode(
        y=alt.Y("key:N", sort=labels, title="key", axis=layout.token_axis()), yOffset="measure:N",
        x=alt.X("share:Q", title="share of the row", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("measure:N", scale=alt.Scale(domain=[RAW, NORM], range=["#2b6cb0", "#e8590c"]),
                        legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["key", "measure", alt.Tooltip("share:Q", format=".3f"), alt.Tooltip("‖f(x)‖:Q", format=".3f")],
    ).properties(width=320, height=alt.Step(layout.MIN_ROW_PX // 2)))  # the step of one bar: two per key


def shares_frame(shares) -> pd.DataFrame:
    """A core.analyses.inside_head.NormShares as rows layer (1..L, core.numbering), category, measure, share."""
    rows = []
    for name, values in ((RAW, shares.raw), (NORM, shares.norm)):
        for layer, row in enumerate(values):
            rows += [{"layer": numbering.shown(layer), "category": c, "measure": name, "share": float(v)}
                     for c, v in zip(shares.categories, row)]
    return pd.DataFrame(rows)


def shares_chart(shares) -> tuple[alt.FacetChart, pd.DataFrame]:
    """Per layer, the share of raw vs norm-weighted attention going to [CLS], [SEP], punctuation and other tokens
    (one panel per category)."""
    frame = shares_frame(shares)
    chart = alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("layer:O", title=numbering.BLOCK_AXIS, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("share:Q", title="share of attention", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("measure:N", scale=alt.Scale(domain=[RAW, NORM], range=["#2b6cb0", "#e8590c"]),
                        legend=alt.Legend(orient="bottom", title=None, labelLimit=400)),
        strokeDash=alt.StrokeDash("measure:N", legend=None),
        tooltip=["category", "layer", "measure", alt.Tooltip("share:Q", format=".3f")],
    ).properties(width=200, height=170).facet(
        facet=alt.Facet("category:N", sort=list(shares.categories), title=None), columns=4,
        title=f"{display_name(shares.model)}: where attention goes, raw vs norm-weighted "
              f"({shares.n_inputs} inputs)")
    return chart, frame


def shares_charts(shares) -> list:
    """The attention-norm-shares analysis's charts (core.contract)."""
    return [(shares_chart(shares)[0], "Raw vs norm-weighted attention to [CLS], [SEP], punctuation and other tokens.")]
