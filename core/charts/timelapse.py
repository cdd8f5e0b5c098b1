"""The fine-tuning time-lapse player's charts: one frame of a run's `timelapse.json` (core.training.timelapse) as
RSA/CKA per layer, attention change per head, anisotropy per layer, and the loss / dev-accuracy curve with a
marker at the frame's step (both measured on the time-lapse's dev sample). No streamlit here.

Every scale is fixed from all the frames of the time-lapse (`Scales`), not from the frame shown, so the axes and
the colour ramp stay still while the player moves: only the marks move. A frame is picked by its index in
`timelapse.frames` (a cancelled run has fewer frames than planned steps)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.charts import attention as attention_charts
from core.charts import layout

MEASURES = {"rsa": "RSA", "cka": "linear CKA"}
# A frame's loss is measured on the same dev examples as its accuracy (core.training.timelapse.Frame).
CURVES = {"loss": "dev loss", "dev_accuracy": "dev accuracy"}
LOSS_COLOUR, ACCURACY_COLOUR = "#d55e00", layout.MEASURED_COLOUR
# Scales snap outwards to this grid: the axis ends on round numbers.
GRID = 0.05


@dataclass(frozen=True)
class Scales:
    """The fixed domains of a time-lapse's charts, each (low, high) over every frame: `similarity` (RSA and CKA),
    `attention` (cosine of each head's maps with the starting model's), `anisotropy`, `loss`, and `steps` (0 to the
    last planned step, so a run still training or cancelled keeps the axis of the whole run)."""

    similarity: tuple[float, float]
    attention: tuple[float, float]
    anisotropy: tuple[float, float]
    loss: tuple[float, float]
    steps: tuple[int, int]


def _snapped(values, *, high: float | None = None, low_at_most: float | None = None) -> tuple[float, float]:
    """(low, high) around `values` on the GRID; `high` fixed where the measure has a ceiling (1 = unchanged), and
    the low end at most `low_at_most`, so a time-lapse of frame 0 alone (all ones) still has a span."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if not len(finite):
        return (0.0, 1.0)
    lo = math.floor(finite.min() / GRID) * GRID
    hi = high if high is not None else math.ceil(finite.max() / GRID) * GRID
    if low_at_most is not None:
        lo = min(lo, low_at_most)
    if hi - lo < GRID:
        lo = hi - GRID
    return (round(lo, 6), round(hi, 6))


def _flat(rows) -> list[float]:
    return [float(v) for row in rows for v in np.ravel(np.asarray(row, dtype=float))]


def scales(timelapse) -> Scales:
    """The domains of every chart, from all frames (see Scales)."""
    frames = timelapse.frames
    similarity = _flat([f.rsa for f in frames] + [f.cka for f in frames])
    attention = _flat([f.attention_change for f in frames])
    losses = [f.loss for f in frames]
    last = max([*timelapse.steps, *(f.step for f in frames), 1])
    return Scales(
        similarity=_snapped(similarity, high=1.0, low_at_most=1 - 2 * GRID),
        attention=_snapped(attention, high=1.0, low_at_most=1 - 2 * GRID),
        anisotropy=_snapped(_flat([f.anisotropy for f in frames])),
        loss=(0.0, _snapped(losses)[1]),
        steps=(0, int(last)),
    )


def frame_index(timelapse, step: int | None) -> int:
    """The index of the frame shown for a requested step (a link's `frame`): that step's, else the closest measured
    one's (the earlier of two as close); the last frame for None."""
    steps = [f.step for f in timelapse.frames]
    if not steps:
        raise ValueError("the time-lapse has no frames yet")
    if step is None:
        return len(steps) - 1
    return min(range(len(steps)), key=lambda i: (abs(steps[i] - step), steps[i]))


def _layer_title(values, attention_layers: int) -> str:
    """Hidden-state measures have one value more than the encoder has layers: the embeddings, layer 0."""
    return numbering.HIDDEN_AXIS if len(values) == attention_layers + 1 else "layer"


# ---- frames: the data of each chart ------------------------------------------------------------------------


def similarity_frame(timelapse, index: int) -> pd.DataFrame:
    """layer, measure (RSA / linear CKA), value: frame `index` against the starting model."""
    frame = timelapse.frames[index]
    return pd.DataFrame([{"layer": layer, "measure": title, "value": float(v)}
                         for measure, title in MEASURES.items() for layer, v in enumerate(getattr(frame, measure))])


def attention_frame(timelapse, index: int) -> pd.DataFrame:
    """layer, head, cosine: each head's attention at frame `index` against the starting model's (1 = unchanged)."""
    return attention_charts.grid_frame(np.asarray(timelapse.frames[index].attention_change, dtype=float), "cosine")


def anisotropy_frame(timelapse, index: int) -> pd.DataFrame:
    """layer, anisotropy at frame `index`."""
    values = timelapse.frames[index].anisotropy
    return pd.DataFrame({"layer": range(len(values)), "anisotropy": [float(v) for v in values]})


def curve_frame(timelapse) -> pd.DataFrame:
    """step, measure (dev loss / dev accuracy), value: every frame's (a measure a frame lacks adds no row)."""
    return pd.DataFrame([{"step": int(f.step), "measure": title, "value": float(getattr(f, field))}
                         for f in timelapse.frames for field, title in CURVES.items()
                         if getattr(f, field) is not None],
                        columns=["step", "measure", "value"])


# ---- charts ------------------------------------------------------------------------------------------------


def similarity_chart(timelapse, index: int) -> alt.Chart:
    frame, fixed = timelapse.frames[index], scales(timelapse)
    data = similarity_frame(timelapse, index)
    return (
        alt.Chart(data, title=f"Similarity to the starting model at step {frame.step} (1 = unchanged)")
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:Q", axis=alt.Axis(tickMinStep=1, format="d"), scale=alt.Scale(domain=[0, len(frame.rsa) - 1]),
                    title=_layer_title(frame.rsa, len(frame.attention_change))),
            y=alt.Y("value:Q", scale=alt.Scale(domain=list(fixed.similarity), clamp=True), title="similarity"),
            color=alt.Color("measure:N", sort=list(MEASURES.values()), title="measure"),
            tooltip=["measure", "layer", alt.Tooltip("value:Q", format=".4f")],
        )
        .properties(width="container", height=240)
    )


def attention_chart(timelapse, index: int) -> alt.Chart:
    frame, fixed = timelapse.frames[index], scales(timelapse)
    title = alt.TitleParams(f"Attention change per head at step {frame.step}",
                            subtitle=["cosine with the starting model's maps (1 = unchanged);",
                                      "layers numbered as in the line charts (1 = first transformer layer)"])
    return layout.fixed_size(attention_charts.grid_chart(attention_frame(timelapse, index), "cosine", title,
                                                         fmt=".4f", domain=fixed.attention))


def anisotropy_chart(timelapse, index: int) -> alt.Chart:
    frame, fixed = timelapse.frames[index], scales(timelapse)
    data = anisotropy_frame(timelapse, index)
    return (
        alt.Chart(data, title=f"Anisotropy per layer at step {frame.step}")
        .mark_line(point=True, color=layout.MEASURED_COLOUR)
        .encode(
            x=alt.X("layer:Q", axis=alt.Axis(tickMinStep=1, format="d"), scale=alt.Scale(domain=[0, len(frame.anisotropy) - 1]),
                    title=_layer_title(frame.anisotropy, len(frame.attention_change))),
            y=alt.Y("anisotropy:Q", scale=alt.Scale(domain=list(fixed.anisotropy), clamp=True), title="anisotropy"),
            tooltip=["layer", alt.Tooltip("anisotropy:Q", format=".4f")],
        )
        .properties(width="container", height=240)
    )


def curve_chart(timelapse, index: int) -> alt.LayerChart:
    """Dev loss (left axis) and dev accuracy (right axis) at every frame, a rule at frame `index`'s step."""
    frame, fixed = timelapse.frames[index], scales(timelapse)
    data = curve_frame(timelapse)
    x = alt.X("step:Q", scale=alt.Scale(domain=list(fixed.steps)), axis=alt.Axis(format="d"), title="training step")
    base = alt.Chart(data).encode(x=x, tooltip=["measure", "step", alt.Tooltip("value:Q", format=".4f")])
    loss = base.transform_filter(alt.datum.measure == CURVES["loss"]).mark_line(point=True, color=LOSS_COLOUR).encode(
        y=alt.Y("value:Q", scale=alt.Scale(domain=list(fixed.loss)),
                axis=alt.Axis(title="dev loss", titleColor=LOSS_COLOUR)))
    accuracy = base.transform_filter(alt.datum.measure == CURVES["dev_accuracy"]).mark_line(
        point=True, color=ACCURACY_COLOUR).encode(
        y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(title="dev accuracy", titleColor=ACCURACY_COLOUR, orient="right")))
    marker = alt.Chart(pd.DataFrame({"step": [int(frame.step)]})).mark_rule(color="black", strokeDash=[4, 3]).encode(
        x=x, tooltip=["step"])
    return (
        alt.layer(loss, accuracy, marker)
        .resolve_scale(y="independent")
        .properties(width="container", height=220,
                    title=alt.TitleParams("Loss and accuracy on the dev sample",
                                          subtitle=f"the dashed line is step {frame.step}"))
    )


def frame_charts(timelapse, index: int) -> dict[str, tuple[alt.TopLevelMixin, pd.DataFrame]]:
    """The player's four charts of frame `index` with the data of each (its CSV): curve, similarity, attention,
    anisotropy."""
    return {
        "curve": (curve_chart(timelapse, index), curve_frame(timelapse)),
        "similarity": (similarity_chart(timelapse, index), similarity_frame(timelapse, index)),
        "attention": (attention_chart(timelapse, index), attention_frame(timelapse, index)),
        "anisotropy": (anisotropy_chart(timelapse, index), anisotropy_frame(timelapse, index)),
    }
