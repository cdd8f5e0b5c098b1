"""Reproduce charts: the paper's numbers beside the measured ones, for any study (core.studies.StudyResult).

Per-layer references are lines over layers (paper dashed, measured solid), one panel per measure; table
references (row names) are bars side by side. No streamlit here."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.charts import layout
from core.model.loading import display_name

# Panels per row of the small multiples: with their axes they stay inside the page's main column (~730 px).
PANELS_PER_ROW = 2
PANEL_WIDTH = 250
# Characters of a panel's name per line: about PANEL_WIDTH at the header's 11 px type.
PANEL_CHARS = 40

COLUMNS = ["reference", "label", "measure", "key", "layer", "paper", "measured", "tolerance", "within", "kind", "verdict"]


def comparison_frame(result) -> pd.DataFrame:
    """One row per number a paper gives: reference key and label, measure, key (layer or row name as text), layer (int or
    None), paper, measured (NaN when not measured), tolerance, within, overlay kind and the comparison's verdict."""
    rows = []
    for comparison in result.comparisons:
        for row in comparison.rows:
            rows.append({
                "reference": comparison.reference.key, "label": comparison.reference.title, "measure": row.measure, "key": str(row.key),
                "layer": row.key if isinstance(row.key, int) else None, "paper": row.paper,
                "measured": float("nan") if row.measured is None else row.measured, "tolerance": row.tolerance,
                "within": row.within, "kind": comparison.kind, "verdict": comparison.verdict,
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def measured_frame(result) -> pd.DataFrame:
    """Every measured series, long: series, key (as text), value."""
    rows = [{"series": name, "key": str(k), "value": float(v)} for name, series in result.measured.items() for k, v in series.items()]
    return pd.DataFrame(rows, columns=["series", "key", "value"])


def _long(frame: pd.DataFrame, model: str) -> pd.DataFrame:
    """comparison_frame rows -> one row per (source, number); source is 'paper' or 'measured (model)'."""
    paper = frame.assign(source="paper", value=frame["paper"])
    measured = frame.assign(source=f"measured ({display_name(model)})", value=frame["measured"]).dropna(subset=["value"])
    return pd.concat([paper, measured], ignore_index=True)[["reference", "label", "measure", "key", "layer", "source", "value", "tolerance"]]


def layer_comparison_chart(result, title: str | None = None) -> alt.FacetChart | None:
    """Paper vs measured over layers, one panel per per-layer reference (independent y scales); None if the study
    has no per-layer reference. Dataset columns: reference, label, measure, key, layer, source, value, tolerance."""
    frame = comparison_frame(result)
    frame = frame[frame["layer"].notna()]
    if frame.empty:
        return None
    tooltip = ["reference:N", "source:N", "layer:Q", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("tolerance:Q", format=".3f")]
    return _layer_panels(_long(frame, result.model), ["paper", f"measured ({display_name(result.model)})"], tooltip, title)


def _layer_panels(data: pd.DataFrame, sources: list[str], tooltip: list, title: str | None,
                  interval: bool = False) -> alt.FacetChart:
    """Lines over layers, paper (dashed) and measured (solid), one panel per reference label; with `interval`, the
    measured rows' low..high drawn as error bars."""
    data = data.assign(layer=data["layer"].astype(int))
    x = alt.X("layer:Q", title="layer (0 = input embeddings)", axis=alt.Axis(tickMinStep=1, format="d"))
    colour = alt.Color("source:N", title="", scale=alt.Scale(domain=sources, range=[layout.PAPER_COLOUR, layout.MEASURED_COLOUR]),
                       legend=alt.Legend(orient="bottom", labelLimit=400))
    base = alt.Chart().encode(
        x=x, y=alt.Y("value:Q", title=None), color=colour, tooltip=tooltip,
        strokeDash=alt.StrokeDash("source:N", title="", scale=alt.Scale(domain=sources, range=[[6, 4], [1, 0]]), legend=None),
    )
    marks = [base.mark_line(), base.mark_point(filled=True, size=40)]
    if interval:
        marks.append(alt.Chart().mark_rule(strokeWidth=2).encode(x=x, y="low:Q", y2="high:Q", color=colour, tooltip=tooltip)
                     .transform_filter("isValid(datum.low)"))
    layered = alt.layer(*marks).properties(width=PANEL_WIDTH, height=200)
    return layout.fixed_size(layered.facet(facet=alt.Facet("label:N", title=None, header=_panel_header(data["label"])),
                                           columns=PANELS_PER_ROW, data=data, title=title or "").resolve_scale(y="independent"))


def _panel_header(names) -> alt.Header:
    """A panel's name on as many lines as it takes (labelLimit alone cut "Ethayarajh 2019: MEV, anisotropy-adjusted —
    a…"; a header has no tooltip, so the cut words were lost)."""
    return alt.Header(labelLimit=PANEL_WIDTH, labelExpr=layout.wrapped_labels(names.unique(), PANEL_CHARS))


def table_comparison_chart(result, title: str | None = None) -> alt.FacetChart | None:
    """Paper vs measured as side-by-side bars for references keyed by row name; None if there are none."""
    frame = comparison_frame(result)
    frame = frame[frame["layer"].isna()]
    if frame.empty:
        return None
    tooltip = ["reference:N", "key:N", "source:N", alt.Tooltip("value:Q", format=".3f")]
    return _row_panels(_long(frame, result.model), ["paper", f"measured ({display_name(result.model)})"], tooltip, title)


def _row_panels(data: pd.DataFrame, sources: list[str], tooltip: list, title: str | None,
                interval: bool = False) -> alt.FacetChart:
    """Bars per row name, paper and measured side by side, one panel per reference label; with `interval`, the
    measured rows' low..high drawn as error bars."""
    y = alt.Y("key:N", title=None, sort=None, axis=layout.token_axis())
    offset = alt.YOffset("source:N", scale=alt.Scale(domain=sources))
    marks = [alt.Chart().mark_bar().encode(
        y=y, x=alt.X("value:Q", title=None), yOffset=offset, tooltip=tooltip,
        color=alt.Color("source:N", title="", scale=alt.Scale(domain=sources), legend=alt.Legend(orient="bottom", labelLimit=400)),
    )]
    if interval:
        marks.append(alt.Chart().mark_rule(color="black", strokeWidth=2).encode(
            y=y, yOffset=offset, x="low:Q", x2="high:Q", tooltip=tooltip).transform_filter("isValid(datum.low)"))
    layered = alt.layer(*marks).properties(width=PANEL_WIDTH, height=alt.Step(layout.MIN_ROW_PX // 2 + 2))
    return layout.fixed_size(layered.facet(facet=alt.Facet("label:N", title=None, header=_panel_header(data["label"])),
                                           columns=1, data=data, title=title or "").resolve_scale(x="independent", y="independent"))


def measured_chart(result, title: str | None = None) -> alt.FacetChart | None:
    """Every measured per-layer series (with or without a published number), one panel each; None if there are
    none. Dataset columns: series, layer, value."""
    rows = [{"series": name, "layer": k, "value": float(v)} for name, series in result.measured.items()
            for k, v in series.items() if isinstance(k, int)]
    if not rows:
        return None
    data = pd.DataFrame(rows, columns=["series", "layer", "value"])
    base = alt.Chart().encode(
        x=alt.X("layer:Q", title="layer (0 = input embeddings)", axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("value:Q", title=None),
        tooltip=["series:N", "layer:Q", alt.Tooltip("value:Q", format=".3f")],
    )
    layered = alt.layer(base.mark_line(), base.mark_point(filled=True, size=40)).properties(width=PANEL_WIDTH, height=180)
    return layout.fixed_size(layered.facet(facet=alt.Facet("series:N", title=None, header=_panel_header(data["series"])),
                                           columns=PANELS_PER_ROW, data=data,
                                           title=title or f"measured ({display_name(result.model)})").resolve_scale(y="independent"))


# ---- a study over several seeds (core.studies.seeds.SeedsResult) ---------------------------------------------------

SEEDS_COLUMNS = ["reference", "label", "measure", "key", "layer", "paper", "tolerance", "values", "mean", "low", "high",
                 "verdict"]


def seeds_frame(result) -> pd.DataFrame:
    """One row per number the paper reports, over the seeds: reference, label, measure, key (as text), layer (int or
    None), paper, tolerance, values (the seeds' values, text), mean, low, high (the interval; NaN when fewer than
    two seeds measured it) and the interval's verdict."""
    nan = float("nan")
    rows = [{
        "reference": n.reference, "label": n.label, "measure": n.measure, "key": str(n.key),
        "layer": n.key if isinstance(n.key, int) else None, "paper": n.paper, "tolerance": n.tolerance,
        "values": ", ".join("—" if v is None else f"{v:.3f}" for v in n.values),
        "mean": nan if n.mean is None else n.mean, "low": nan if n.low is None else n.low,
        "high": nan if n.high is None else n.high, "verdict": n.verdict,
    } for n in result.summary.numbers]
    return pd.DataFrame(rows, columns=SEEDS_COLUMNS)


def head_ranks_frame(result) -> pd.DataFrame:
    """One row per head the paper names: claim, head, its rank in each seed (a column "seed S" each), of (heads
    ranked) and "in top k" ("2 of 3")."""
    rows = [{"claim": h.claim, "head": h.head,
             **{f"seed {s}": (None if r is None else int(r)) for s, r in zip(result.seeds, h.ranks)},
             "of": h.of, f"in top {h.top_k}": f"{h.in_top_k} of {len(h.ranks)}"} for h in result.summary.heads]
    return pd.DataFrame(rows)


def _seeds_long(frame: pd.DataFrame, result) -> tuple[pd.DataFrame, list[str]]:
    """seeds_frame rows -> one row per (source, number): the paper's value, or the seeds' mean with its interval."""
    measured = f"mean of {len(result.seeds)} seeds ({display_name(result.model)})"
    paper = frame.assign(source="paper", value=frame["paper"], low=float("nan"), high=float("nan"))
    mean = frame.assign(source=measured, value=frame["mean"]).dropna(subset=["value"])
    columns = ["reference", "label", "key", "layer", "source", "value", "low", "high", "tolerance", "verdict"]
    return pd.concat([paper, mean], ignore_index=True)[columns], ["paper", measured]


def _interval_tooltip() -> list:
    return ["reference:N", "key:N", "source:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
            alt.Tooltip("high:Q", format=".3f"), alt.Tooltip("tolerance:Q", format=".3f"), "verdict:N"]


def seeds_layer_chart(result, title: str | None = None) -> alt.FacetChart | None:
    """Paper vs the seeds' mean over layers, the mean with its interval as an error bar, one panel per per-layer
    reference; None if the study has none. Dataset columns: reference, label, key, layer, source, value, low, high,
    tolerance, verdict."""
    frame = seeds_frame(result)
    frame = frame[frame["layer"].notna()]
    if frame.empty:
        return None
    return _layer_panels(*_seeds_long(frame, result), _interval_tooltip(), title, interval=True)


def seeds_table_chart(result, title: str | None = None) -> alt.FacetChart | None:
    """Paper vs the seeds' mean for references keyed by row name: bars side by side, the mean's interval as an
    error bar; None if there are none."""
    frame = seeds_frame(result)
    frame = frame[frame["layer"].isna()]
    if frame.empty:
        return None
    return _row_panels(*_seeds_long(frame, result), _interval_tooltip(), title, interval=True)
