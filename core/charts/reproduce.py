"""Reproduce charts: the paper's numbers beside the measured ones, for any study (core.studies.StudyResult).

Per-layer references are lines over layers (paper dashed, measured solid), one panel per measure, each panel with
the measure as its axis title; where the measured model's depth differs from the paper's, both curves are drawn over
relative depth (layer / number of layers) and the chart says so. Table references (row names) are bars side by
side. No streamlit here."""

from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from core.charts import layout
from core.model.loading import display_name

# Panels per row of the small multiples: with their axes and y titles two stay inside the page's main column
# (~730 px); each is large enough to read a 13-point curve (issue 48: 250 x 200 px panels without y titles).
PANELS_PER_ROW = 2
PANEL_WIDTH = 270
PANEL_HEIGHT = 230
# Characters of a panel's name per line: about PANEL_WIDTH at the title's 11 px type.
PANEL_CHARS = 44
LAYER_TITLE = "layer (0 = input embeddings)"
DEPTH_TITLE = "relative depth (layer / number of layers)"

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


def _depths(comparisons) -> dict[str, tuple[int, int]]:
    """{reference key: (paper's layers, measured model's layers)} of the comparisons that know both depths."""
    return {c.reference.key: tuple(c.layers) for c in comparisons if c.layers is not None}


def _on_depth_axis(data: pd.DataFrame, comparisons, measured: str) -> tuple[pd.DataFrame, str | None]:
    """(data with an "x" column, the chart's note on its x axis or None). Where a measured model's depth differs from
    the paper's (a 6-layer MiniLM beside 12-layer BERT-base), layer k of a model with L layers is drawn at k / L for
    both curves, so the same relative depth lines up; otherwise x is the layer."""
    depths = _depths(comparisons)
    differing = {key: d for key, d in depths.items() if d[0] != d[1]}
    if not differing:
        return data.assign(x=data["layer"].astype(float)), None
    paper_rows = data["source"] == "paper"
    layers = [depths.get(r, (12, 12))[0 if p else 1] for r, p in zip(data["reference"], paper_rows)]
    note = "; ".join(sorted({f"the paper's model has {p} layers, {measured} has {m}" for p, m in differing.values()}))
    return (data.assign(x=data["layer"].astype(float) / pd.Series(layers, index=data.index)),
            f"Depths differ ({note}): each layer is drawn at layer / number of layers, so equal depths line up.")


def _measured_curves(frame: pd.DataFrame, comparisons, source: str) -> pd.DataFrame:
    """The measured rows of a depth-matched comparison come from its whole measured curve (a shallower model's
    layers are not the paper's keys); the others stay the rows beside the paper's keys."""
    rows = []
    for c in comparisons:
        if c.relative_depth:
            rows += [{"reference": c.reference.key, "label": c.reference.title, "measure": c.reference.measure,
                      "key": str(k), "layer": k, "source": source, "value": v, "tolerance": c.reference.tolerance}
                     for k, v in sorted(c.measured_layers.items())]
    if not rows:
        return frame
    replaced = {r["reference"] for r in rows}
    keep = ~((frame["source"] == source) & frame["reference"].isin(replaced))
    return pd.concat([frame[keep], pd.DataFrame(rows, columns=frame.columns)], ignore_index=True)


def layer_comparison_chart(result, title: str | None = None) -> alt.ConcatChart | None:
    """Paper vs measured over layers, one panel per per-layer reference, each with its own y scale and y title (the
    measure); over relative depth where the measured model's depth differs from the paper's. None if the study has
    no per-layer reference. Dataset columns: reference, label, measure, key, layer, source, value, tolerance, x."""
    frame = comparison_frame(result)
    frame = frame[frame["layer"].notna()]
    if frame.empty:
        return None
    measured = f"measured ({display_name(result.model)})"
    data = _measured_curves(_long(frame, result.model), result.comparisons, measured)
    data, note = _on_depth_axis(data, result.comparisons, display_name(result.model))
    tooltip = ["reference:N", "source:N", "layer:Q", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("tolerance:Q", format=".3f")]
    return _layer_panels(data, ["paper", measured], tooltip, title, note=note)


def _panel_title(name: str) -> alt.TitleParams:
    """A panel's name on as many lines as it takes (a cut name loses words: a title has no tooltip)."""
    return alt.TitleParams(textwrap.wrap(name, PANEL_CHARS) or [""], fontSize=11, fontWeight="normal", anchor="start",
                           limit=0)


def _y_title(measure: str) -> list[str]:
    return textwrap.wrap(str(measure).replace("_", " "), 28)


def _panels(data: pd.DataFrame, by: str, panel, title, columns: int = PANELS_PER_ROW) -> alt.ConcatChart:
    """One panel per value of `by` (in order of appearance), each drawn by panel(chart filtered to it, its rows)
    over the one shared dataset, `columns` a row."""
    charts = [panel(alt.Chart().transform_filter(alt.FieldEqualPredicate(field=by, equal=name)), data[data[by] == name])
              .properties(title=_panel_title(name)) for name in data[by].unique()]
    return layout.fixed_size(alt.concat(*charts, columns=columns, data=data, title=title)
                             .resolve_scale(x="independent", y="independent", color="shared", strokeDash="shared"))


def _layer_panels(data: pd.DataFrame, sources: list[str], tooltip: list, title: str | None,
                  interval: bool = False, note: str | None = None) -> alt.ConcatChart:
    """Lines over layers (x: the data's "x" column, layer or relative depth), paper (dashed) and measured (solid),
    one panel per reference label, the measure as each panel's y title; with `interval`, the measured rows'
    low..high drawn as error bars. note: said under the title (why x is a relative depth)."""
    data = data.assign(layer=data["layer"].astype(int))
    depth = note is not None
    x = alt.X("x:Q", title=DEPTH_TITLE if depth else LAYER_TITLE,
              axis=alt.Axis(format=".2f", tickCount=5) if depth else alt.Axis(tickMinStep=1, format="d"))
    colour = alt.Color("source:N", title="", scale=alt.Scale(domain=sources, range=[layout.PAPER_COLOUR, layout.MEASURED_COLOUR]),
                       legend=alt.Legend(orient="bottom", labelLimit=400))
    dash = alt.StrokeDash("source:N", title="", scale=alt.Scale(domain=sources, range=[[6, 4], [1, 0]]), legend=None)

    def panel(base: alt.Chart, rows: pd.DataFrame) -> alt.LayerChart:
        y_title = _y_title(rows["measure"].iloc[0])
        lines = base.encode(x=x, y=alt.Y("value:Q", title=y_title), color=colour, tooltip=tooltip, strokeDash=dash)
        marks = [lines.mark_line(), lines.mark_point(filled=True, size=40)]
        if interval:
            marks.append(base.mark_rule(strokeWidth=2).encode(x=x, y=alt.Y("low:Q", title=y_title), y2="high:Q",
                                                              color=colour, tooltip=tooltip)
                         .transform_filter("isValid(datum.low)"))
        return alt.layer(*marks).properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)

    # Vega draws no subtitle under an empty title: the depth note gets a title of its own when the caller gave none
    heading = (alt.TitleParams(title or "Paper vs measured at the same relative depth", anchor="start",
                               subtitle=textwrap.wrap(note, 100), subtitleFontSize=12) if depth else (title or ""))
    return _panels(data, "label", panel, heading)


def table_comparison_chart(result, title: str | None = None) -> alt.ConcatChart | None:
    """Paper vs measured as side-by-side bars for references keyed by row name; None if there are none."""
    frame = comparison_frame(result)
    frame = frame[frame["layer"].isna()]
    if frame.empty:
        return None
    tooltip = ["reference:N", "key:N", "source:N", alt.Tooltip("value:Q", format=".3f")]
    return _row_panels(_long(frame, result.model), ["paper", f"measured ({display_name(result.model)})"], tooltip, title)


def _row_panels(data: pd.DataFrame, sources: list[str], tooltip: list, title: str | None,
                interval: bool = False) -> alt.ConcatChart:
    """Bars per row name, paper and measured side by side, one panel per reference label, the measure as each
    panel's x title; with `interval`, the measured rows' low..high drawn as error bars."""
    y = alt.Y("key:N", title=None, sort=None, axis=layout.token_axis())
    offset = alt.YOffset("source:N", scale=alt.Scale(domain=sources))
    colour = alt.Color("source:N", title="", scale=alt.Scale(domain=sources), legend=alt.Legend(orient="bottom", labelLimit=400))

    def panel(base: alt.Chart, rows: pd.DataFrame) -> alt.LayerChart:
        x_title = _y_title(rows["measure"].iloc[0])
        marks = [base.mark_bar().encode(y=y, x=alt.X("value:Q", title=x_title), yOffset=offset, tooltip=tooltip,
                                        color=colour)]
        if interval:
            marks.append(base.mark_rule(color="black", strokeWidth=2).encode(
                y=y, yOffset=offset, x=alt.X("low:Q", title=x_title), x2="high:Q", tooltip=tooltip)
                .transform_filter("isValid(datum.low)"))
        return alt.layer(*marks).properties(width=PANEL_WIDTH, height=alt.Step(layout.MIN_ROW_PX // 2 + 2))

    return _panels(data, "label", panel, title or "", columns=1)


def measured_chart(result, title: str | None = None) -> alt.ConcatChart | None:
    """Every measured per-layer series (with or without a published number), one panel each, its name as its y
    title; None if there are none. Dataset columns: series, layer, value."""
    rows = [{"series": name, "layer": k, "value": float(v)} for name, series in result.measured.items()
            for k, v in series.items() if isinstance(k, int)]
    if not rows:
        return None
    data = pd.DataFrame(rows, columns=["series", "layer", "value"])

    def panel(base: alt.Chart, rows: pd.DataFrame) -> alt.LayerChart:
        lines = base.encode(x=alt.X("layer:Q", title=LAYER_TITLE, axis=alt.Axis(tickMinStep=1, format="d")),
                            y=alt.Y("value:Q", title=_y_title(rows["series"].iloc[0])),
                            tooltip=["series:N", "layer:Q", alt.Tooltip("value:Q", format=".3f")])
        return alt.layer(lines.mark_line(), lines.mark_point(filled=True, size=40)).properties(
            width=PANEL_WIDTH, height=PANEL_HEIGHT)

    return _panels(data, "series", panel, title or f"measured ({display_name(result.model)})")


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
    columns = ["reference", "label", "measure", "key", "layer", "source", "value", "low", "high", "tolerance", "verdict"]
    return pd.concat([paper, mean], ignore_index=True)[columns], ["paper", measured]


def _interval_tooltip() -> list:
    return ["reference:N", "key:N", "source:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
            alt.Tooltip("high:Q", format=".3f"), alt.Tooltip("tolerance:Q", format=".3f"), "verdict:N"]


def seeds_layer_chart(result, title: str | None = None) -> alt.ConcatChart | None:
    """Paper vs the seeds' mean over layers, the mean with its interval as an error bar, one panel per per-layer
    reference, over relative depth where the model's depth differs from the paper's; None if the study has none.
    Dataset columns: reference, label, measure, key, layer, source, value, low, high, tolerance, verdict, x."""
    frame = seeds_frame(result)
    frame = frame[frame["layer"].notna()]
    if frame.empty:
        return None
    data, sources = _seeds_long(frame, result)
    data, note = _on_depth_axis(data, result.per_seed[0].comparisons, display_name(result.model))
    return _layer_panels(data, sources, _interval_tooltip(), title, interval=True, note=note)


def seeds_table_chart(result, title: str | None = None) -> alt.ConcatChart | None:
    """Paper vs the seeds' mean for references keyed by row name: bars side by side, the mean's interval as an
    error bar; None if there are none."""
    frame = seeds_frame(result)
    frame = frame[frame["layer"].isna()]
    if frame.empty:
        return None
    return _row_panels(*_seeds_long(frame, result), _interval_tooltip(), title, interval=True)
