"""The erase panel's charts (core.analyses.layer_knowledge.erasure): what a fresh linear probe reads before and after
the erasure beside the majority label, and what the rest of the model does before, after, and after erasing a random
subspace of the same rank. No streamlit here."""

from __future__ import annotations

import altair as alt
import pandas as pd

EFFECT_WHAT = {"masked_word": "masked-word top-1", "classification": "accuracy on the run's evaluation set"}
CONDITIONS = ("before", "after", "random control")
COLOURS = ("#4c78a8", "#e45756", "#9d9d9d")


def probe_frame(result) -> pd.DataFrame:
    """Rows condition, accuracy: the probe on the vectors as they are, on the erased ones, and the majority label."""
    return pd.DataFrame({"condition": ["probe before", "probe after", "majority label"],
                         "accuracy": [result.probe_before, result.probe_after, result.majority]})


def effect_frame(result) -> pd.DataFrame:
    """Rows condition, score of the effect (empty when the model has no head to measure it with)."""
    effect = result.effect
    if effect.get("kind") not in EFFECT_WHAT:
        return pd.DataFrame(columns=["condition", "score"])
    return pd.DataFrame({"condition": list(CONDITIONS),
                         "score": [effect["before"], effect["after"], effect["random_control"]]})


def _bars(frame: pd.DataFrame, value: str, title: str, subtitle: str, axis: str) -> alt.Chart:
    order = list(frame["condition"])
    return alt.Chart(frame, title=alt.Title(title, subtitle=subtitle)).mark_bar().encode(
        y=alt.Y("condition:N", sort=order, title=None, axis=alt.Axis(labelLimit=200)),
        x=alt.X(f"{value}:Q", title=axis, scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("condition:N", sort=order, scale=alt.Scale(domain=order, range=list(COLOURS[:len(order)])),
                        legend=None),
        tooltip=["condition", alt.Tooltip(f"{value}:Q", format=".3f")],
    ).properties(width=460, height=alt.Step(28))


def erase_charts(result) -> list[tuple[alt.Chart, str]]:
    """[(chart, caption)]: the probe bars, then the effect bars where the model has a head to measure it with."""
    out = [(_bars(probe_frame(result), "accuracy", f"Can a linear probe still read {result.task}?",
                  f"layer {result.layer}, {result.n_eval} held-out words; erased subspace of rank {result.rank}",
                  "probe accuracy"),
            "A fresh logistic-regression probe trained and scored on the erased vectors should fall to the majority "
            "label: LEACE leaves no linear trace of the labels.")]
    effect = result.effect
    if effect.get("kind") in EFFECT_WHAT:
        what = EFFECT_WHAT[effect["kind"]]
        out.append((_bars(effect_frame(result), "score", f"Does the model use it? {what[:1].upper() + what[1:]}",
                          f"{effect['n']} held-out items, layer {result.layer} erased for every token", what),
                    "If erasing the concept hurts far more than erasing a random subspace of the same rank, the "
                    "model was using it (amnesic probing's control)."))
    return out
