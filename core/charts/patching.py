"""Activation patching (core.analyses.patching.Patching) as a heatmap of recovery: [layer, head] for heads, or
[layer, token] for positions / attn / mlp, tokens keyed by position (a repeated word keeps its own column)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.charts import layout
from core.charts.layout import fixed_size, token_axis


LAYER_ROW_PX = 24  # a layer's row: a short grid (6 layers) is still tall enough to read across a room
HEAD_SELECTION = "patched_head"  # a click on a [layer, head] cell selects {layer (1..L), cell} (the page opens that head)


def cell_labels(result) -> list[str]:
    """The columns of the grid: head numbers, or "i·token" per position."""
    if result.over == "heads":
        return [str(h) for h in range(result.patched.shape[1])]
    return [f"{i}·{t}" for i, t in enumerate(result.tokens)]


def patching_frame(result) -> pd.DataFrame:
    """One row per cell: layer (transformer layer 1..L, core.numbering: over positions, the residual stream after it),
    cell (head or i·token), patched metric, recovered."""
    layers, width = result.patched.shape
    return pd.DataFrame({"layer": numbering.shown(0) + np.repeat(np.arange(layers), width), "cell": np.tile(cell_labels(result), layers),
                         "patched": result.patched.ravel(), "recovered": result.recovered.ravel()})


def patching_chart(result, frame: pd.DataFrame | None = None, *, selectable: bool = False) -> alt.Chart:
    """Recovery per cell on a diverging scale around 0 (1 = the clean answer restored), layer 1 at the top.
    selectable (over="heads"): a click selects the cell through the point selection named HEAD_SELECTION."""
    frame = patching_frame(result) if frame is None else frame
    bound = float(np.nanmax(np.abs(frame["recovered"].to_numpy()))) if frame["recovered"].notna().any() else 1.0
    cell = "head" if result.over == "heads" else "token"
    kind = "approximated by gradients" if result.method == "attribution" else "patched"
    title = [f"Recovery with one {cell if result.over != 'positions' else 'residual stream cell'} {kind} "
             f"(over {result.over})", f"metric: {result.metric}"]
    labels = cell_labels(result)
    # at least MIN_CHART_PX wide: 12 heads of 16 px made a 190 px grid, 10 tokens a 160 px one
    step = layout.column_step(len(labels))
    layers = result.patched.shape[0]
    chart = alt.Chart(frame, title=title).mark_rect().encode(
        x=alt.X("cell:O", title=cell, sort=labels,
                axis=token_axis(angle=0 if cell == "head" else layout.column_label_angle(step))),
        y=alt.Y("layer:O", title=numbering.BLOCK_AXIS),
        color=alt.Color("recovered:Q", title="recovered",
                        scale=alt.Scale(scheme="redblue", domain=[-max(bound, 1.0), max(bound, 1.0)], domainMid=0),
                        legend=layout.gradient_legend(layers * LAYER_ROW_PX)),
        tooltip=["layer", alt.Tooltip("cell:O", title=cell), alt.Tooltip("patched:Q", format=".4f"),
                 alt.Tooltip("recovered:Q", format=".3f")],
    ).properties(width=step, height=alt.Step(LAYER_ROW_PX))
    if selectable:
        chart = chart.add_params(alt.selection_point(name=HEAD_SELECTION, fields=["layer", "cell"], on="click",
                                                     empty=False))
    return fixed_size(chart)


def patching_charts(result) -> list:
    """The `patch` analysis's charts as the registry asks for them (core.contract): the grid, its warnings in the
    caption."""
    return [(patching_chart(result), " ".join(["Warning: " + w.message for w in result.warnings]
                                              + [f"Recovered over {result.over}: 1 restores the clean answer."]))]
