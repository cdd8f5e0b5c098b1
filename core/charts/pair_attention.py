"""Charts of core.analyses.heads.PairHeads: per-head AUC grids (A→B and B→A side by side), and the per-pair shares
of one head split by gold label. No streamlit here."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.analyses.heads import PAIR_DIRECTION_TITLES, PAIR_DIRECTIONS


def separation_frame(result) -> pd.DataFrame:
    """One row per (direction, layer, head): auc, separation |auc - 0.5|, mean share per label, difference."""
    first, second = result.labels
    rows = []
    for d, name in enumerate(PAIR_DIRECTIONS):
        for layer, head in np.ndindex(*result.auc.shape[1:]):
            a, b = result.mean[0, d, layer, head], result.mean[1, d, layer, head]
            rows.append({"direction": PAIR_DIRECTION_TITLES[name], "layer": numbering.shown(layer), "head": int(head),
                         "auc": float(result.auc[d, layer, head]),
                         "separation": float(abs(result.auc[d, layer, head] - 0.5)),
                         f"mean {first}": float(a), f"mean {second}": float(b), "difference": float(a - b)})
    return pd.DataFrame(rows)


def separation_chart(result) -> tuple[alt.Chart, pd.DataFrame]:
    """Layer x head AUC grids, one per direction (red: higher share on the first label's pairs, blue: lower)."""
    frame = separation_frame(result)
    first, second = result.labels
    keys = "the other sentence's word pieces" if result.words_only else "bertviz's slices"
    chart = alt.Chart(frame).mark_rect().encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        color=alt.Color("auc:Q", scale=alt.Scale(scheme="redblue", reverse=True, domain=[0, 1], domainMid=0.5),
                        title=f"AUC ({first} > {second})"),
        tooltip=["direction", "layer", "head", alt.Tooltip("auc:Q", format=".3f"),
                 alt.Tooltip(f"mean {first}:Q", format=".3f"), alt.Tooltip(f"mean {second}:Q", format=".3f")],
    ).properties(width=alt.Step(26), height=alt.Step(22)).facet(
        column=alt.Column("direction:N", title=None, sort=[PAIR_DIRECTION_TITLES[d] for d in PAIR_DIRECTIONS]),
        title=f"How well each head's cross-sentence attention share tells {first} from {second} pairs ({keys})",
    )
    return chart, frame


def separation_charts(result) -> list:
    """The pair-attention analysis's charts (core.contract): the AUC grids."""
    return [(separation_chart(result)[0], "Each head's AUC: how well its A→B / B→A share separates paraphrases "
                                          "from non-paraphrases (0.5 = no difference).")]


def pairs_frame(result, direction: str, layer: int, head: int) -> pd.DataFrame:
    """One row per pair: index, gold label, the head's share in `direction`, sentence A, sentence B."""
    d = PAIR_DIRECTIONS.index(direction)
    return pd.DataFrame({
        "pair": np.arange(len(result.pairs)),
        "label": [result.labels[g] for g in result.gold],
        "share": result.shares[:, d, layer, head],
        "sentence A": [a for a, _ in result.pairs],
        "sentence B": [b for _, b in result.pairs],
    })


def pairs_chart(result, direction: str, layer: int, head: int) -> tuple[alt.Chart, pd.DataFrame]:
    """Each pair's share for one head as a dot, one row per gold label, with the label's mean as a tick."""
    frame = pairs_frame(result, direction, layer, head)
    title = f"{PAIR_DIRECTION_TITLES[direction]} share of layer {numbering.shown(layer)}, head {head}, per pair"
    dots = alt.Chart(frame).mark_circle(size=40, opacity=0.5).encode(
        x=alt.X("share:Q", title=f"{PAIR_DIRECTION_TITLES[direction]} attention share"),
        y=alt.Y("label:N", title=None, sort=list(result.labels)),
        color=alt.Color("label:N", sort=list(result.labels), legend=None),
        tooltip=["pair", "label", alt.Tooltip("share:Q", format=".3f"), "sentence A", "sentence B"],
    )
    means = alt.Chart(frame).mark_tick(color="black", thickness=3, size=30).encode(
        x="mean(share):Q", y=alt.Y("label:N", sort=list(result.labels)))
    return alt.layer(dots, means, title=title).properties(width=520, height=alt.Step(60)), frame
