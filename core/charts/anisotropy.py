"""Anisotropy charts: every measure of core.anisotropy.LayerProfile over layers, with Ethayarajh's published
bert-base-uncased curve as a reference. No streamlit here."""

from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd

from core.anisotropy import ETHAYARAJH_BERT_BASE, MEASURES, REFERENCE_LABEL, LayerProfile


def profile_frame(profiles: Sequence[LayerProfile]) -> pd.DataFrame:
    """Long table: one row per (model, measure, layer) with its value; measures a profile lacks are left out."""
    rows = []
    for p in profiles:
        for measure in MEASURES:
            values = getattr(p, measure)
            if values is None:
                continue
            rows.extend({"model": p.model, "measure": measure, "layer": int(l), "value": float(v)} for l, v in zip(p.layers, values))
    return pd.DataFrame(rows, columns=["model", "measure", "layer", "value"])


def reference_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"model": REFERENCE_LABEL, "measure": "random_cosine", "layer": range(len(ETHAYARAJH_BERT_BASE)), "value": ETHAYARAJH_BERT_BASE}
    )


def word_frame(drill, profile: LayerProfile, frame: pd.DataFrame) -> pd.DataFrame:
    """One word's self-similarity (a core.anisotropy.WordDrilldown) beside the profile's average word, as
    profile_frame rows (frame: profile_frame of the shown profiles), so layer_chart draws both."""
    return pd.concat([
        pd.DataFrame({"model": f"“{drill.word}”", "measure": "self_similarity", "layer": profile.layers,
                      "value": drill.self_similarity}),
        frame[(frame["model"] == profile.model) & (frame["measure"] == "self_similarity")].assign(model="average word"),
    ])


def layer_chart(frame: pd.DataFrame, measure: str, show_reference: bool = False, title: str | None = None) -> alt.LayerChart:
    """Line per model over layers for one measure; the published bert-base-uncased baseline dashed.

    frame: profile_frame(...) rows. The chart's single dataset has columns series, kind (measured /
    published), layer, value."""
    data = frame[frame["measure"] == measure].assign(kind="measured")
    if show_reference and measure == "random_cosine":
        data = pd.concat([data, reference_frame().assign(kind="published")], ignore_index=True)
    data = data.rename(columns={"model": "series"})[["series", "kind", "layer", "value"]]
    hover = alt.selection_point(name="hover", on="pointerover", nearest=True, fields=["layer"], empty=False)
    encoding = dict(
        x=alt.X("layer:Q", title="layer (0 = input embeddings)", axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("value:Q", title=MEASURES[measure]),
        color=alt.Color("series:N", title="model", legend=alt.Legend(orient="bottom", columns=1, labelLimit=420)),
    )
    if (data["kind"] == "published").any():
        encoding["strokeDash"] = alt.StrokeDash(
            "kind:N", title="", scale=alt.Scale(domain=["measured", "published"], range=[[1, 0], [6, 4]]),
            legend=alt.Legend(orient="bottom"),
        )
    base = alt.Chart(data, title=title or MEASURES[measure]).encode(**encoding)
    lines = base.mark_line()
    points = base.mark_point(filled=True, size=50).encode(
        opacity=alt.condition(hover, alt.value(1), alt.value(0.35)),
        tooltip=["series:N", "kind:N", "layer:Q", alt.Tooltip("value:Q", format=".3f")],
    ).add_params(hover)
    return alt.layer(lines, points).properties(height=360)
