"""Anisotropy charts: every measure of core.analyses.anisotropy.LayerProfile over layers, with Ethayarajh's published
curve (core.references) drawn dashed and labelled with how it may be compared. No streamlit here."""

from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd

from core import protocols
from core import references as refs
from core.analyses.anisotropy import MEASURES, LayerProfile
from core.charts import layout
from core.model.loading import display_name


def profile_frame(profiles: Sequence[LayerProfile]) -> pd.DataFrame:
    """Long table: one row per (model, measure, layer) with its value; measures a profile lacks are left out. model
    is the profile's display name (core.model.loading.display_name), not its folder path."""
    rows = []
    for p in profiles:
        for measure in MEASURES:
            values = getattr(p, measure)
            if values is None:
                continue
            rows.extend({"model": display_name(p.model), "measure": measure, "layer": int(l), "value": float(v)}
                        for l, v in zip(p.layers, values))
    return pd.DataFrame(rows, columns=["model", "measure", "layer", "value"])


def reference_frame(reference: refs.Reference, model: str, protocol: str) -> pd.DataFrame:
    """A published curve as profile_frame rows; `model` is the label series: who, which model and corpus, and
    whether it is comparable with `model` measured under `protocol` (core.references.overlay_label)."""
    keys = sorted(k for k in reference.values if isinstance(k, int))
    return pd.DataFrame({"model": refs.overlay_label(reference, model, protocol), "measure": reference.measure,
                         "layer": keys, "value": [float(reference.values[k]) for k in keys]})


def word_frame(drill, profile: LayerProfile, frame: pd.DataFrame) -> pd.DataFrame:
    """One word's self-similarity (a core.analyses.anisotropy.WordDrilldown) beside the profile's average word, as
    profile_frame rows (frame: profile_frame of the shown profiles), so layer_chart draws both."""
    return pd.concat([
        pd.DataFrame({"model": f"“{drill.word}”", "measure": "self_similarity", "layer": profile.layers,
                      "value": drill.self_similarity}),
        frame[(frame["model"] == display_name(profile.model)) & (frame["measure"] == "self_similarity")].assign(model="average word"),
    ])


def layer_chart(frame: pd.DataFrame, measure: str, reference: pd.DataFrame | None = None, title: str | None = None,
                protocol: str | None = None) -> alt.LayerChart:
    """Line per model over layers for one measure; a published curve (reference_frame rows) dashed.

    frame: profile_frame(...) rows. protocol: the core.protocols name the profiles were measured with, written
    under the title so an exported image still says it. The chart's single dataset has columns series, kind
    (measured / published), layer, value."""
    data = frame[frame["measure"] == measure].assign(kind="measured")
    if reference is not None and len(reference):
        data = pd.concat([data, reference[reference["measure"] == measure].assign(kind="published")], ignore_index=True)
    data = data.rename(columns={"model": "series"})[["series", "kind", "layer", "value"]]
    hover = alt.selection_point(name="hover", on="pointerover", nearest=True, fields=["layer"], empty=False)
    encoding = dict(
        # scale padding: the first and last layer's points (and the highest value) are drawn inside the plot, not
        # cut at its edge or above the last tick
        x=alt.X("layer:Q", title="layer (0 = input embeddings)", scale=alt.Scale(padding=10, nice=False),
                axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("value:Q", title=MEASURES[measure], scale=alt.Scale(padding=10)),
        color=alt.Color("series:N", title="model", legend=alt.Legend(orient="bottom", columns=1, labelLimit=520)),
    )
    text = title or MEASURES[measure]
    heading = alt.Title(text, subtitle=f"Protocol: {protocols.PROTOCOLS[protocol].paper}") if protocol else text
    base = alt.Chart(data, title=heading).encode(**encoding)
    lines = base.mark_line()
    if (data["kind"] == "published").any():
        # on the lines alone, its legend drawing each dash (layout.dashed_lines says why not on the points too)
        lines = lines.encode(strokeDash=alt.StrokeDash(
            "kind:N", title="", scale=alt.Scale(domain=["measured", "published"], range=[[1, 0], [6, 4]]),
            legend=alt.Legend(orient="bottom", **layout.LINE_LEGEND),
        ))
    points = base.mark_point(filled=True, size=50).encode(
        opacity=alt.condition(hover, alt.value(1), alt.value(0.35)),
        tooltip=["series:N", "kind:N", "layer:Q", alt.Tooltip("value:Q", format=".3f")],
    ).add_params(hover)
    return layout.fixed_size(alt.layer(lines, points).properties(width=560, height=360))


def per_word_frame(profiles: Sequence[LayerProfile]) -> pd.DataFrame:
    """Per word (token) type, per layer: its contexts, self-similarity and, under the paper protocol, MEV — the
    table Ethayarajh's code writes per word (LayerProfile.word_rows), one row per (model, word, layer)."""
    rows = []
    for profile in profiles:
        model = display_name(profile.model)
        for entry in profile.word_rows():
            for layer, value in zip(profile.layers, entry["self_similarity"]):
                row = {"model": model, "word": entry["word"], "contexts": entry["contexts"], "layer": int(layer),
                       "self_similarity": value}
                if "mev" in entry:
                    row["mev"] = entry["mev"][int(layer)]
                rows.append(row)
    return pd.DataFrame(rows, columns=["model", "word", "contexts", "layer", "self_similarity", "mev"]).dropna(
        axis="columns", how="all")


def profile_charts(profile: LayerProfile, measure: str = "random_cosine") -> list[tuple[alt.LayerChart, str]]:
    """The analysis's charts (core.contract's `charts(result)`): the baseline cosine by layer, the curve the page
    opens on."""
    frame = profile_frame([profile])
    return [(layer_chart(frame, measure, protocol=profile.protocol),
             f"{MEASURES[measure]} by layer over {profile.corpus} ({profile.n_sentences} sentences).")]
