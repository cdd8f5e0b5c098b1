"""Runs as tables for the fine-tuning page (no streamlit here); their charts are in core/charts/finetune.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from core import numbering, references
from core.model.evaluation import run_degeneracy
from core.training.recipe import format_layer_set
from core.training.runs import RunInfo
from core.training.tasks import is_user_file



def slides_reference() -> pd.DataFrame:
    """The CS4650 slides' "remove layer 12" table (bert-base, AdamW 5e-5, 2 epochs, test split), read from
    core.references. The full model had a linear head, the 11-layer model a 768 -> 50 -> 3 MLP head: depth and
    head changed at once."""
    rows = []
    for experiment, key in (("SNLI", "slides-layer12-snli"), ("Drug reviews", "slides-layer12-drugs")):
        accuracy, seconds = references.get(key), references.get(f"{key}-seconds")
        for model, value in accuracy.values.items():
            rows.append({"experiment": experiment, "model": f"BERT-base, {model}", "eval split": "test",
                         "test accuracy %": round(100 * value, 2), "train seconds": seconds.values[model],
                         "source": accuracy.source.split(", ", 1)[0]})
    return pd.DataFrame(rows)


SLIDES_REFERENCE = slides_reference()


def _layers(run: RunInfo) -> int | None:
    return (run.metrics or {}).get("num_layers")


def frozen_description(recipe: dict) -> str:
    """What a recipe kept fixed, e.g. "layers 12, embeddings" (layers 1..L as on every chart, core.numbering; the
    recipe stores array indices); "" when nothing."""
    layers = set(range(int(recipe.get("freeze_layers") or 0))) | set(recipe.get("frozen_layers") or ())
    parts = [f"layers {format_layer_set(numbering.shown(i) for i in layers)}"] if layers else []
    if recipe.get("freeze_embeddings"):
        parts.append("embeddings")
    return ", ".join(parts)


# status.json's phase as a person reads it; "loading" is the engine's first word, before it knows what it loads.
PHASE_TITLES = {"loading": "starting", "queued": "starting"}


def phase(run: RunInfo) -> str:
    """Where a run is, in one word or two: the runs table's state column, the progress line and the CLI all say
    this. queued (not started), starting, loading data, loading model, tokenizing, training, evaluating, saving
    while it runs; done, failed or cancelled after."""
    if run.state != "running":
        return run.state
    status_phase = run.status.get("phase") or "starting"
    return PHASE_TITLES.get(status_phase, status_phase)


def progress_text(run: RunInfo, queue_position: int | None = None) -> str:
    """The line under an active run's progress bar. Loss and speed only once a training step is done: before it
    they are no numbers yet (the line said "loss nan, 0.0 examples/s" while the model loaded)."""
    if run.state == "queued" and queue_position:
        return f"queued, waiting (position {queue_position} in the queue)"
    if run.state == "queued":
        return "queued, waiting for the run before it"
    now = phase(run)
    s = run.status
    step = int(s.get("step") or 0)
    if now != "training" or not step or s.get("loss") is None:
        return f"{now}…"
    eta = s.get("eta_seconds")
    return (f"training, step {step}/{s.get('total_steps') or '?'}, epoch {s.get('epoch', 1)}/"
            f"{s.get('epochs') or run.recipe.get('epochs') or '?'}, loss {s['loss']:.4f}, "
            f"{s.get('examples_per_second') or 0:.1f} examples/s" + (f", about {eta:.0f} s left" if eta is not None else ""))


def task_label(task: str | None) -> str | None:
    """A run's task as its tables show it: a built-in task's name, a user file's own name (not where it is kept)."""
    return Path(task).name if task and is_user_file(task) else task


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    """One row per run: name, state (`phase`: the same words as the progress line), task, model, objective, layers,
    head, accuracy, train time, speed."""
    rows = []
    for r in runs:
        m, rec = r.metrics or {}, r.recipe
        rows.append(
            {
                "run": r.name,
                "state": phase(r),
                "task": task_label(rec.get("task")),
                "model": rec.get("model"),
                "objective": rec.get("objective"),
                "protocol": rec.get("protocol", "bertlens"),
                "layers": _layers(r),
                "dropped": rec.get("drop_last_layers"),
                "frozen": frozen_description(rec),
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


def _learned_nothing(metrics: dict) -> str | None:
    """"yes" / "no" by core.training.evaluation's rule; None for a run without a confusion matrix."""
    found = run_degeneracy(metrics)
    return None if found is None else ("yes" if found.flagged else "no")


def _split(metrics: dict) -> str | None:
    """'test (9824 examples)': which split the accuracy is on, so a dev score is never read as a test score."""
    split = metrics.get("eval_split")
    if split is None:
        return None
    n = metrics.get("eval_examples")
    return f"{split} ({n} examples)" if n is not None else str(split)


def compare_table(runs: list[RunInfo]) -> pd.DataFrame:
    """Finished runs side by side, one column per run (text cells): recipe, scores and per-class F1."""
    columns = {}
    for r in runs:
        m, rec = r.metrics or {}, r.recipe
        column = {
            "task": task_label(rec.get("task")),
            "model": rec.get("model"),
            "layers": m.get("num_layers"),
            "head": rec.get("head"),
            "frozen": frozen_description(rec),
            "layer-wise lr decay": rec.get("lr_decay", 1.0),  # runs saved before the field had one rate
            "epochs": rec.get("epochs"),
            "train examples": m.get("train_examples"),
            "protocol": rec.get("protocol", "bertlens"),
            "eval examples": m.get("eval_examples"),
            "eval split": _split(m),
            "accuracy": m.get("accuracy"),
            "majority baseline": m.get("majority_accuracy"),
            "learned (almost) nothing": _learned_nothing(m),
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
