"""Charts of the head studies (core.analyses.head_features, core.analyses.aspect_heads, core.analyses.head_clustering): one or more models
side by side, each chart built from a tidy frame that the function next to it derives from the results."""

from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.analyses.head_clustering import HeadMap
from core.analyses.head_features import (CLS_FEATURE_TITLES, CLS_FEATURES, FEATURE_TITLES, FEATURES, TOKEN_TYPES,
                                         ClsAttention, ClsFeatureAttention, FeatureAttention)
from core.analyses.aspect_heads import ABSENT_PARTS, AspectHeads
from core.analyses.heads import PATTERNS
from core.analyses.pattern_labels import PatternShares
from core.charts import layout
from core.model.loading import display_name

TYPE_TITLES = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation", "other": "other tokens"}
PART_TITLES = {"cls": "[CLS]", "sep": "[SEP]", "question": "question words", "review": "review words"}


def _grid(values: np.ndarray, model: str, name: str) -> pd.DataFrame:
    layers, heads = values.shape
    return pd.DataFrame({"model": display_name(model), "layer": numbering.shown(0) + np.repeat(np.arange(layers), heads),
                         "head": np.tile(np.arange(heads), layers), name: values.ravel()})


def _side_by_side(frame: pd.DataFrame, name: str, title: str, scheme: str = "viridis") -> alt.Chart:
    """One layer x head heatmap per model, one colour scale for all (so the models compare by colour)."""
    return alt.Chart(frame).mark_rect().encode(
        x=alt.X("head:O", axis=alt.Axis(labelAngle=0)), y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        color=alt.Color(f"{name}:Q", scale=alt.Scale(scheme=scheme), title=name),
        tooltip=["model", "layer", "head", alt.Tooltip(f"{name}:Q", format=".4f")],
    ).properties(width=alt.Step(22), height=alt.Step(18)).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(frame["model"]))), title=title)


# ---- Kovaleva Fig. 6 ----------------------------------------------------------------------------------------


def features_frame(results: Sequence[FeatureAttention], feature: str) -> pd.DataFrame:
    return pd.concat([_grid(r.feature(feature), r.model, "score") for r in results], ignore_index=True)


def features_chart(results: Sequence[FeatureAttention], feature: str) -> tuple[alt.Chart, pd.DataFrame]:
    frame = features_frame(results, feature)
    return _side_by_side(frame, "score", f"Attention to {FEATURE_TITLES[feature]}, per head (Kovaleva Fig. 6)"), frame


def features_table(results: Sequence[FeatureAttention]) -> pd.DataFrame:
    """Every feature of every model: model, feature, layer, head, score."""
    parts = []
    for f in FEATURES:
        frame = features_frame(results, f)
        frame.insert(1, "feature", f)
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


# ---- Kovaleva Fig. 7 ----------------------------------------------------------------------------------------


def cls_frame(results: Sequence[ClsAttention]) -> pd.DataFrame:
    rows = []
    for r in results:
        for k, t in enumerate(TOKEN_TYPES):
            for h, v in enumerate(r.shares[k]):
                rows.append({"model": display_name(r.model), "head": h, "token type": TYPE_TITLES[t], "share": float(v)})
    return pd.DataFrame(rows)


def cls_chart(results: Sequence[ClsAttention]) -> tuple[alt.Chart, pd.DataFrame]:
    frame = cls_frame(results)
    order = [TYPE_TITLES[t] for t in TOKEN_TYPES]
    chart = alt.Chart(frame).mark_bar().encode(
        x=alt.X("head:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("share:Q", stack="normalize", title="share of the [CLS] row"),
        color=alt.Color("token type:N", sort=order, scale=alt.Scale(domain=order)),
        order=alt.Order("order:Q"),
        tooltip=["model", "head", "token type", alt.Tooltip("share:Q", format=".3f")],
    ).transform_calculate(order=f"indexof({order!r}, datum['token type'])").properties(width=alt.Step(22), height=220)
    chart = chart.facet(column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(frame["model"]))),
                        title="Last layer: where [CLS] attends, by token type (Kovaleva Fig. 7)")
    return chart, frame


# "nouns (UPOS NOUN, PROPN)" -> "nouns": short axis labels, the definitions in the tooltip
CLS_FEATURE_LABELS = {f: CLS_FEATURE_TITLES[f].split(" (")[0] for f in CLS_FEATURES}


def cls_features_frame(results: Sequence[ClsFeatureAttention]) -> pd.DataFrame:
    """model, feature (short label), definition, head, share, sentences (how many had the feature)."""
    rows = []
    for r in results:
        for k, f in enumerate(CLS_FEATURES):
            for h, v in enumerate(r.shares[k]):
                rows.append({"model": display_name(r.model), "feature": CLS_FEATURE_LABELS[f],
                             "definition": CLS_FEATURE_TITLES[f], "head": h,
                             "share": None if np.isnan(v) else float(v), "sentences": int(r.counts[k])})
    return pd.DataFrame(rows)


def cls_features_chart(results: Sequence[ClsFeatureAttention]) -> tuple[alt.Chart, pd.DataFrame]:
    """A feature x head heatmap per model, one colour scale for all (features overlap: a column need not add to 1)."""
    frame = cls_features_frame(results)
    order = [CLS_FEATURE_LABELS[f] for f in CLS_FEATURES]
    chart = alt.Chart(frame).mark_rect().encode(
        x=alt.X("head:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("feature:N", sort=order, title=None, axis=alt.Axis(labelOverlap=False, labelLimit=120)),
        color=alt.Color("share:Q", scale=alt.Scale(scheme="viridis"), title="share of the [CLS] row"),
        tooltip=["model", "definition", "head", alt.Tooltip("share:Q", format=".3f"), "sentences"],
    ).properties(width=alt.Step(22), height=alt.Step(22)).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(frame["model"]))),
        title="Last layer: where [CLS] attends, by linguistic feature (Kovaleva Fig. 7, §4.3 features)")
    return chart, frame


# ---- aspect heads -------------------------------------------------------------------------------------------


def aspect_frame(results: Sequence[AspectHeads]) -> pd.DataFrame:
    """model, layer, head, span score, uniform baseline, and each absent / present part."""
    parts = []
    for r in results:
        frame = _grid(r.span_score, r.model, "span score")
        frame["uniform baseline"] = r.span_baseline.ravel()
        for i, p in enumerate(ABSENT_PARTS):
            frame[f"absent to {p}"] = r.absent_parts[i].ravel()
            frame[f"present to {p}"] = r.present_parts[i].ravel()
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def aspect_chart(results: Sequence[AspectHeads]) -> tuple[alt.Chart, pd.DataFrame]:
    frame = aspect_frame(results)
    chart = _side_by_side(frame, "span score", "Aspect word in the question → its aspect term in the review")
    return chart, frame


def absent_chart(results: Sequence[AspectHeads], part: str = "sep") -> tuple[alt.Chart, pd.DataFrame]:
    frame = aspect_frame(results)
    name = f"absent to {part}"
    chart = _side_by_side(frame, name, f"Absent aspect: the aspect word's attention to {PART_TITLES[part]}",
                          scheme="greens")
    return chart, frame


def aspect_row_chart(row) -> tuple[alt.Chart, pd.DataFrame]:
    """One pair's aspect-word attention in one head (core.analyses.aspect_heads.AspectRow), tokens in order."""
    labels = [f"{i}·{t}" for i, t in enumerate(row.tokens)]
    frame = pd.DataFrame({"token": labels, "weight": row.weights, "kind": row.kinds})
    kinds = ["[CLS]", "[SEP]", "question", "aspect word", "review", "aspect term"]
    chart = alt.Chart(frame, title=f"Layer {numbering.shown(row.layer)}, head {row.head}: where the aspect word looks").mark_bar().encode(
        x=alt.X("token:N", sort=labels, axis=layout.token_axis(angle=-60)), y=alt.Y("weight:Q"),
        color=alt.Color("kind:N", scale=alt.Scale(domain=kinds)),
        tooltip=["token", "kind", alt.Tooltip("weight:Q", format=".3f")],
    ).properties(width=layout.column_step(len(labels)), height=220)
    return layout.fixed_size(chart), frame


# ---- Clark §6 -----------------------------------------------------------------------------------------------


def head_map_frame(results: Sequence[HeadMap]) -> pd.DataFrame:
    rows = []
    for r in results:
        for i, (name, value) in enumerate(r.top_statistic()):
            rows.append({"model": display_name(r.model), "layer": numbering.shown(i // r.n_heads), "head": i % r.n_heads,
                         "x": float(r.points[i, 0]), "y": float(r.points[i, 1]),
                         "top statistic": name, "value": value})
    return pd.DataFrame(rows)


def head_map_chart(results: Sequence[HeadMap]) -> tuple[alt.Chart, pd.DataFrame]:
    frame = head_map_frame(results)
    chart = alt.Chart(frame).mark_circle(size=60, opacity=0.85).encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None),
        color=alt.Color("layer:O", scale=alt.Scale(scheme="redblue")),
        tooltip=["model", "layer", "head", "top statistic", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=300, height=300).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(frame["model"]))),
        title="Heads embedded by Jensen–Shannon distance (Clark §6 MDS), coloured by layer",
    ).resolve_scale(x="independent", y="independent")
    return chart, frame


# ---- Kovaleva §4.1 by hand: pattern shares from labels --------------------------------------------------------


def pattern_shares_frame(result: PatternShares) -> pd.DataFrame:
    """pattern, method ("threshold rules" or the classifier with its label count), share, maps (how many were
    typed)."""
    classifier = f"classifier ({result.n_labels} labelled maps)"
    return pd.DataFrame([{"pattern": p, "method": method, "share": float(shares[p]), "maps": result.n_maps}
                         for method, shares in (("threshold rules", result.by_rules), (classifier, result.by_classifier))
                         for p in shares])


def pattern_shares_chart(result: PatternShares) -> tuple[alt.Chart, pd.DataFrame]:
    frame = pattern_shares_frame(result)
    methods = list(dict.fromkeys(frame["method"]))
    chart = alt.Chart(frame, title=f"Pattern types of {result.n_maps} head maps ({result.n_inputs} inputs), two ways").mark_bar().encode(
        x=alt.X("pattern:N", sort=list(PATTERNS), axis=alt.Axis(labelAngle=0), title=None),
        xOffset=alt.XOffset("method:N", sort=methods),
        y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="share of the maps"),
        color=alt.Color("method:N", sort=methods, legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["pattern", "method", alt.Tooltip("share:Q", format=".1%"), "maps"],
    ).properties(width=alt.Step(36), height=220)
    return chart, frame


# ---- each study's charts as [(chart, caption)], from its results (core.analyses.head_studies declarations) -------

def _each(results) -> list:
    """The per-model results of a core.analyses.head_studies.StudyResults, a sequence of results, or one result."""
    if hasattr(results, "results"):
        return list(results.results)
    return list(results) if isinstance(results, (list, tuple)) else [results]


def features_charts(results) -> list:
    """head-features: one chart per Fig. 6 feature, the models side by side."""
    each = _each(results)
    return [(features_chart(each, f)[0], f"Attention to {FEATURE_TITLES[f]} per head.") for f in FEATURES]


def cls_charts(results) -> list:
    """cls-attention: by token type or by feature (whichever the results hold)."""
    each = _each(results)
    if isinstance(each[0], ClsFeatureAttention):
        return [(cls_features_chart(each)[0], "The last layer's [CLS] row by linguistic feature, per head.")]
    return [(cls_chart(each)[0], "The last layer's [CLS] row by token type, per head.")]


def aspect_charts(results) -> list:
    each = _each(results)
    return [(aspect_chart(each)[0], "Aspect word → aspect term attention per head (present aspects)."),
            (absent_chart(each, "sep")[0], "Where an absent aspect's word attends: [SEP].")]


def head_map_charts(results) -> list:
    return [(head_map_chart(_each(results))[0], "Heads placed by Jensen-Shannon distance between their maps (MDS).")]


def pattern_charts(results) -> list:
    return [(pattern_shares_chart(r)[0], f"{display_name(r.model)}: pattern types, threshold rules beside the "
                                          "classifier.") for r in _each(results)]
