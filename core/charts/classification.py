"""Charts of a classifier's results, shared by every page that has one (fine-tuning runs, ablation, bias).

Each builder takes a tidy DataFrame, so a page only has to bring its numbers into these columns:

    confusion      run, true, predicted, count, share    (share = count / the true class's row total)
    F1             run, class, F1
    probabilities  <series>, class, probability          (series: "run" by default, any column naming the bars)

Row order is display order: classes and runs are drawn in the order they first appear.
"""

from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.charts import layout

# NLI labels get colours that read apart at a glance (agree green, undecided grey, disagree red), each over 3:1 on
# white (the grey was #9d9d9d, 2.7:1); any other class takes the next of layout.CATEGORY_COLOURS not already used.
KNOWN_CLASS_COLOURS = {"entailment": "#2a8a3e", "neutral": "#767676", "contradiction": "#e45756"}
# A confusion-matrix cell is at least this many pixels wide and tall: room for its count.
CELL_PX = 44

def _order(values) -> list:
    return list(dict.fromkeys(values))


def class_colours(classes: Sequence[str]) -> alt.Scale:
    """A colour per class, in `classes` order: the NLI labels' fixed colours, then layout.CATEGORY_COLOURS."""
    others = iter(c for c in layout.CATEGORY_COLOURS if c not in KNOWN_CLASS_COLOURS.values())
    return alt.Scale(domain=list(classes), range=[KNOWN_CLASS_COLOURS.get(str(c).lower()) or next(others)
                                                  for c in classes])


def confusion_frame(confusion: np.ndarray, labels: Sequence[str], run: str = "") -> pd.DataFrame:
    """[C, C] counts (rows: true class, columns: predicted) -> one row per cell; an empty row has share 0."""
    confusion = np.asarray(confusion, dtype=float)
    rows = []
    for i, true in enumerate(labels):
        total = confusion[i].sum()
        for j, predicted in enumerate(labels):
            rows.append({"run": run, "true": true, "predicted": predicted, "count": int(confusion[i, j]),
                         "share": float(confusion[i, j] / total) if total else 0.0})
    return pd.DataFrame(rows, columns=["run", "true", "predicted", "count", "share"])


def confusion_chart(frame: pd.DataFrame) -> alt.HConcatChart:
    """One matrix per run, side by side, titled by the run: colour = share of the true class, text = count. Every
    class gets its row and column, also one a run never predicts."""
    charts = []
    runs = _order(frame["run"])
    for run in runs:
        part = frame[frame["run"] == run]
        labels = _order([*part["true"], *part["predicted"]])
        # square cells, the row of matrices at least MIN_CHART_PX wide: one run of 2 classes was 247 px
        cell = max(CELL_PX, layout.column_step(len(labels) * len(runs)).step)
        base = alt.Chart(part, title=run).encode(
            x=alt.X("predicted:N", sort=labels, scale=alt.Scale(domain=labels), axis=layout.token_axis(angle=-30)),
            y=alt.Y("true:N", sort=labels, scale=alt.Scale(domain=labels), axis=layout.token_axis()))
        rect = base.mark_rect().encode(
            color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="share of row"),
            tooltip=["true", "predicted", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        text = base.mark_text().encode(
            text="count:Q", color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black"))
        )
        charts.append((rect + text).properties(width=alt.Step(cell), height=alt.Step(cell)))
    return layout.fixed_size(alt.hconcat(*charts))


def f1_chart(frame: pd.DataFrame, runs: Sequence[str] | None = None, title: str = "F1 per class") -> alt.Chart:
    """Grouped bars: per class, one bar per run. `runs` fixes the colour order (default: order in the frame)."""
    classes = _order(frame["class"]) if len(frame) else []
    runs = list(runs) if runs is not None else (_order(frame["run"]) if len(frame) else [])
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X("class:N", sort=classes, title=None, axis=layout.token_axis(angle=-30)),
            xOffset=alt.XOffset("run:N", sort=runs),
            y=alt.Y("F1:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("run:N", sort=runs, legend=alt.Legend(labelLimit=layout.LABEL_LIMIT_PX * 2)),
            tooltip=["run", "class", alt.Tooltip("F1:Q", format=".3f")],
        )
        .properties(height=260)
    )


def probabilities_frame(names: Sequence[str], labels: Sequence[Sequence[str]], probabilities: Sequence[np.ndarray],
                        series: str = "run") -> pd.DataFrame:
    """[series, class, probability] rows: names[i]'s probabilities[i] over its classes labels[i]."""
    return pd.DataFrame(
        [
            {series: name, "class": label, "probability": float(p)}
            for name, classes, probs in zip(names, labels, probabilities)
            for label, p in zip(classes, probs)
        ],
        columns=[series, "class", "probability"],
    )


def probabilities_chart(frame: pd.DataFrame, series: str = "run", title: str = "Class probabilities") -> alt.Chart:
    """One stacked bar (summing to 1) per series value, a segment per class in the frame's class order, each class
    in its class_colours colour."""
    classes = _order(frame["class"])
    rank = {c: i for i, c in enumerate(classes)}
    return layout.fixed_size(
        alt.Chart(frame.assign(class_rank=frame["class"].map(rank)), title=title)
        .mark_bar()
        .encode(
            y=alt.Y(f"{series}:N", title=None, sort=_order(frame[series]), axis=layout.token_axis()),
            x=alt.X("probability:Q", stack="normalize", title="probability"),
            color=alt.Color("class:N", sort=classes, scale=class_colours(classes)),
            order=alt.Order("class_rank:Q"),
            tooltip=[series, "class", alt.Tooltip("probability:Q", format=".3f")],
        )
        .properties(width=420, height=alt.Step(28))
    )
