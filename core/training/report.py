"""Runs as tables and altair charts for the fine-tuning page (no streamlit here)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.training.runs import RunInfo

# The CS4650 slides' "remove layer 12" experiment (bert-base, AdamW 5e-5, 2 epochs). The full model had
# a linear head, the 11-layer model a 768 -> 50 -> 3 MLP head: depth and head changed at once.
SLIDES_REFERENCE = pd.DataFrame(
    [
        {"experiment": "SNLI", "model": "BERT-base, 12 layers, linear head", "test accuracy %": 90.45, "train seconds": 6140.41},
        {"experiment": "SNLI", "model": "BERT-base without layer 12, MLP head", "test accuracy %": 90.33, "train seconds": 5623.56},
        {"experiment": "Drug reviews", "model": "BERT-base, 12 layers, linear head", "test accuracy %": 58.91, "train seconds": 2652.56},
        {"experiment": "Drug reviews", "model": "BERT-base without layer 12, MLP head", "test accuracy %": 58.67, "train seconds": 2447.34},
    ]
)


def _layers(run: RunInfo) -> int | None:
    return (run.metrics or {}).get("num_layers")


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    """One row per run: name, state, task, model, objective, layers, head, accuracy, train time, speed."""
    rows = []
    for r in runs:
        m, rec = r.metrics or {}, r.recipe
        rows.append(
            {
                "run": r.name,
                "state": r.state,
                "task": rec.get("task"),
                "model": rec.get("model"),
                "objective": rec.get("objective"),
                "layers": _layers(r),
                "dropped": rec.get("drop_last_layers"),
                "head": rec.get("head") if rec.get("objective") == "classify" else "—",
                "train examples": m.get("train_examples"),
                "epochs": rec.get("epochs"),
                "accuracy": m.get("accuracy"),
                "macro F1": m.get("macro_f1"),
                "train seconds": m.get("train_seconds"),
                "examples/s": m.get("examples_per_second"),
            }
        )
    return pd.DataFrame(rows)


def _cell(value) -> str:
    """Rows mix text and numbers, so the side-by-side table holds text (floats to 4 decimals)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def compare_table(runs: list[RunInfo]) -> pd.DataFrame:
    """Finished runs side by side, one column per run (text cells): recipe, scores and per-class F1."""
    columns = {}
    for r in runs:
        m, rec = r.metrics or {}, r.recipe
        column = {
            "task": rec.get("task"),
            "model": rec.get("model"),
            "layers": m.get("num_layers"),
            "head": rec.get("head"),
            "epochs": rec.get("epochs"),
            "train examples": m.get("train_examples"),
            "eval examples": m.get("eval_examples"),
            "eval split": m.get("eval_split"),
            "accuracy": m.get("accuracy"),
            "majority baseline": m.get("majority_accuracy"),
            "macro F1": m.get("macro_f1"),
            "train seconds": m.get("train_seconds"),
            "examples/s": m.get("examples_per_second"),
            "device": m.get("device"),
        }
        for label, f1 in (m.get("per_class_f1") or {}).items():
            column[f"F1 {label}"] = f1
        for key in ("positive_cosine", "negative_cosine", "margin", "random_cosine"):
            for when in ("before", "after"):
                value = (m.get(f"similarity_{when}") or {}).get(key)
                if value is not None:
                    column[f"{key.replace('_', ' ')} ({when})"] = value
        columns[r.name] = column
    return pd.DataFrame(columns).map(_cell)


def f1_frame(runs: list[RunInfo]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"run": r.name, "class": label, "F1": float(f1)}
            for r in runs
            for label, f1 in ((r.metrics or {}).get("per_class_f1") or {}).items()
        ]
    )


def f1_chart(runs: list[RunInfo]) -> alt.Chart:
    frame = f1_frame(runs)
    classes = list(dict.fromkeys(frame["class"])) if len(frame) else []
    return (
        alt.Chart(frame, title="F1 per class")
        .mark_bar()
        .encode(
            x=alt.X("class:N", sort=classes, title=None),
            xOffset=alt.XOffset("run:N", sort=[r.name for r in runs]),
            y=alt.Y("F1:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("run:N", sort=[r.name for r in runs]),
            tooltip=["run", "class", alt.Tooltip("F1:Q", format=".3f")],
        )
        .properties(height=260)
    )


def confusion_frame(run: RunInfo) -> pd.DataFrame:
    """Long table [true, predicted, count, share of the true class] of one run's confusion matrix."""
    m = run.metrics or {}
    labels, confusion = m.get("labels") or [], np.array(m.get("confusion") or [], dtype=float)
    rows = []
    for i, true in enumerate(labels):
        total = confusion[i].sum()
        for j, predicted in enumerate(labels):
            rows.append({"run": run.name, "true": true, "predicted": predicted, "count": int(confusion[i, j]),
                         "share": float(confusion[i, j] / total) if total else 0.0})
    return pd.DataFrame(rows)


def confusion_chart(runs: list[RunInfo]) -> alt.HConcatChart:
    """One confusion matrix per run, colour = share of the true class, text = count."""
    charts = []
    for r in runs:
        frame = confusion_frame(r)
        labels = (r.metrics or {}).get("labels") or []
        base = alt.Chart(frame, title=r.name).encode(
            x=alt.X("predicted:N", sort=labels), y=alt.Y("true:N", sort=labels)
        )
        rect = base.mark_rect().encode(
            color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="share of row"),
            tooltip=["true", "predicted", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        text = base.mark_text().encode(
            text="count:Q", color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black"))
        )
        charts.append((rect + text).properties(width=max(120, 45 * len(labels)), height=max(120, 45 * len(labels))))
    return alt.hconcat(*charts)


def loss_frame(status_or_metrics: dict, run: str) -> pd.DataFrame:
    points = status_or_metrics.get("losses") or status_or_metrics.get("loss_curve") or []
    return pd.DataFrame({"run": run, "step": [p[0] for p in points], "loss": [p[1] for p in points]})


def loss_chart(frame: pd.DataFrame, title: str = "Training loss") -> alt.Chart:
    return (
        alt.Chart(frame, title=title)
        .mark_line()
        .encode(x=alt.X("step:Q"), y=alt.Y("loss:Q"), color="run:N", tooltip=["run", "step", alt.Tooltip("loss:Q", format=".4f")])
        .properties(height=220)
    )


def probabilities_frame(run_names: list[str], labels: list[tuple[str, ...]], probabilities: list[np.ndarray]) -> pd.DataFrame:
    """[run, class, probability] rows for the runs' predictions of one input."""
    return pd.DataFrame(
        [
            {"run": name, "class": label, "probability": float(p)}
            for name, classes, probs in zip(run_names, labels, probabilities)
            for label, p in zip(classes, probs)
        ]
    )


def probabilities_chart(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame, title="Class probabilities")
        .mark_bar()
        .encode(
            y=alt.Y("run:N", title=None),
            x=alt.X("probability:Q", stack="normalize", title="probability"),
            color=alt.Color("class:N"),
            order=alt.Order("class:N"),
            tooltip=["run", "class", alt.Tooltip("probability:Q", format=".3f")],
        )
        .properties(height=max(80, 40 * frame["run"].nunique()))
    )
