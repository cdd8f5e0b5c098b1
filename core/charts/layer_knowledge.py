"""Charts of "What each layer knows" (issue 49): label-probe accuracy, control accuracy and selectivity per layer
with the majority line and the expected-layer marker; the online code's compression per layer.

Each chart is one layered chart on one frame (core.charts.export.drawn_frame reads it back for the CSV and the
tests): `row` says what a row draws ("layer" a point of a line, "majority" the majority line of a task,
"expected" the expected-layer marker of a task). Several tasks of one model share a chart (colour); a second model
gets its own chart beside it (the page's columns)."""

from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd

from core.charts import layout

MEASURES = ("accuracy", "control accuracy", "selectivity")
_COLUMNS = ["model", "task", "row", "layer", "measure", "value", "majority", "expected_layer"]
MAJORITY_DASH = [10, 3, 2, 3]  # dash-dot: told apart from the dotted selectivity lines


def probe_frame(results: Sequence) -> pd.DataFrame:
    """Every number of some LabelProbeResults: per layer each measure asked for, each task's majority line and
    expected layer (NaN when undefined)."""
    rows = []
    for result in results:
        common = {"model": result.model, "task": result.task, "majority": result.majority,
                  "expected_layer": result.expected_layer}
        for score in result.layers:
            values = {"accuracy": score.accuracy, "control accuracy": score.control_accuracy,
                      "selectivity": score.selectivity, "compression": score.compression,
                      "codelength (bits)": score.codelength_bits}
            for measure, value in values.items():
                if value is not None:
                    rows.append({**common, "row": "layer", "layer": score.layer, "measure": measure, "value": value})
        rows.append({**common, "row": "majority", "layer": None, "measure": "majority", "value": result.majority})
        if result.expected_layer is not None:
            rows.append({**common, "row": "expected", "layer": result.expected_layer, "measure": "expected layer",
                         "value": result.expected_layer})
    frame = pd.DataFrame(rows, columns=_COLUMNS)
    # Each task's expected-layer label on its own line from the top: two tasks' markers a layer apart overprinted.
    expected = frame["row"] == "expected"
    frame["label_y"] = None
    frame.loc[expected, "label_y"] = [0.97 - 0.06 * k for k in range(int(expected.sum()))]
    return frame


def _layer_axis(frame: pd.DataFrame) -> alt.X:
    return alt.X("layer:Q", axis=alt.Axis(tickMinStep=1, format="d"), title="layer (0 = embeddings)",
                 scale=alt.Scale(domain=[0, float(frame.loc[frame["row"] == "layer", "layer"].max() or 1)], nice=False))


def _colour() -> alt.Color:
    return alt.Color("task:N", title="task", legend=alt.Legend(labelLimit=layout.LEGEND_LABEL_PX))


def accuracy_chart(results: Sequence, title: str | None = None) -> alt.LayerChart:
    """Accuracy (solid), control accuracy (dashed) and selectivity (dotted) per layer of one model's tasks, each
    task's majority line (a dash-dot rule in its colour) and its expected layer (a vertical rule, labelled)."""
    frame = probe_frame(results)
    frame = frame[frame["measure"].isin((*MEASURES, "majority", "expected layer"))].reset_index(drop=True)
    low = min(0.0, float(frame.loc[frame["measure"] == "selectivity", "value"].min())) \
        if (frame["measure"] == "selectivity").any() else 0.0
    y = alt.Y("value:Q", scale=alt.Scale(domain=[low, 1]), title="accuracy on the evaluation words")
    lines = alt.Chart().transform_filter(alt.datum.row == "layer").encode(
        x=_layer_axis(frame), y=y, color=_colour(),
        tooltip=["task", "measure", "layer", alt.Tooltip("value:Q", format=".3f")])
    dash = alt.StrokeDash("measure:N", title="measure", sort=list(MEASURES),
                          scale=alt.Scale(domain=list(MEASURES), range=[[1, 0], [6, 4], [2, 2]]))
    parts = layout.dashed_lines(lines, dash)
    majority = alt.Chart().transform_filter(alt.datum.row == "majority")
    parts.append(majority.mark_rule(strokeDash=MAJORITY_DASH, size=1.5, opacity=0.8).encode(
        y="value:Q", color=_colour(), tooltip=["task", alt.Tooltip("value:Q", title="majority", format=".3f")]))
    expected = alt.Chart().transform_filter(alt.datum.row == "expected")
    parts.append(expected.mark_rule(size=2, opacity=0.6).encode(
        x="layer:Q", color=_colour(), tooltip=["task", alt.Tooltip("value:Q", title="expected layer", format=".2f")]))
    parts.append(expected.mark_text(align="left", dx=4, baseline="middle", fontWeight="bold").encode(
        x="layer:Q", y="label_y:Q", color=_colour(), text=alt.Text("label:N")).transform_calculate(
        label="'E[layer] ' + format(datum.value, '.2f')"))
    model = results[0].model if results else ""
    heading = alt.TitleParams(title or f"What each layer knows: {_short(model)}", anchor="start",
                              subtitle=["solid: probe accuracy; dashed: control task; dotted: selectivity;",
                                        "dash-dot rule: always the most frequent label; vertical rule: expected layer (E[layer])"])
    return alt.layer(*parts, data=frame).properties(width="container", height=320, title=heading)


def compression_chart(results: Sequence, title: str | None = None) -> alt.LayerChart | None:
    """The online code's compression (uniform codelength / online codelength) per layer, one line per task; None
    when no result measured it (--mdl off)."""
    frame = probe_frame(results)
    frame = frame[frame["measure"] == "compression"].reset_index(drop=True)
    if frame.empty:
        return None
    base = alt.Chart().encode(
        x=_layer_axis(frame), y=alt.Y("value:Q", title="compression (uniform / online bits)",
                                      scale=alt.Scale(zero=True)),
        color=_colour(), tooltip=["task", "layer", alt.Tooltip("value:Q", title="compression", format=".2f")])
    parts = [base.mark_line(), base.mark_point(filled=True, size=40)]
    model = results[0].model if results else ""
    heading = alt.TitleParams(title or f"Online code compression: {_short(model)}", anchor="start",
                              subtitle="higher: the labels are easier to learn from this layer (Voita & Titov 2020)")
    return alt.layer(*parts, data=frame).properties(width="container", height=260, title=heading)


def _short(model: str) -> str:
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def probe_charts(result) -> list:
    """probe-labels: the declared analysis's charts (one model, one task)."""
    charts = [(accuracy_chart([result]), f"{result.task}: accuracy of a linear probe at each layer on "
                                         f"{result.n_eval} evaluation words ({len(result.labels)} labels).")]
    compression = compression_chart([result])
    if compression is not None:
        charts.append((compression, "How many times shorter the online code of the training labels is than "
                                    "sending them with no model."))
    return charts
