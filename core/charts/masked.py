"""Masked words charts: the top-k guesses per mask (bars), the guesses layer by layer (a table-like heat map) and
the rank and probability of the model's final guess at each layer. Built from core.analyses.masked.MaskedPredictions."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.charts import layout


def mask_label(pred, m: int) -> str:
    """"mask 1 (token 3)": unique per mask, readable on a chart."""
    return f"mask {m + 1} (token {pred.positions[m]})"


def top_frame(pred) -> pd.DataFrame:
    """The model's own guesses (last layer): rows mask, rank (1 = top), token, probability."""
    n = len(pred.layers) - 1
    rows = [
        {"mask": mask_label(pred, m), "rank": r + 1, "token": pred.top_tokens[m][n][r],
         "probability": float(pred.top_probabilities[m, n, r])}
        for m in range(len(pred.positions))
        for r in range(pred.top_ids.shape[-1])
    ]
    return pd.DataFrame(rows)


LENS_ROW_PX = 22  # a layer's row of the layer-by-layer guesses
GUESS_ROW_PX = 26  # one guess per row, thicker than a token row: the bars are read from across a room


def top_chart(pred, frame: pd.DataFrame | None = None) -> alt.VConcatChart:
    """One bar list per mask, one under the other (side by side, two lists of 220 px made each a 270 × 100 px
    sliver), most probable guess on top."""
    frame = top_frame(pred) if frame is None else frame
    charts = []
    for m in range(len(pred.positions)):
        label = mask_label(pred, m)
        part = frame[frame["mask"] == label]
        charts.append(
            alt.Chart(part, title=label).mark_bar(color="#2b6cb0").encode(
                y=alt.Y("token:N", sort=list(part.sort_values("rank")["token"]), title=None, axis=layout.token_axis()),
                x=alt.X("probability:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
                tooltip=["mask", "rank", "token", alt.Tooltip("probability:Q", format=".2%")],
            ).properties(width=layout.MIN_CHART_PX, height=alt.Step(GUESS_ROW_PX))
        )
    return alt.vconcat(*charts)


def lens_frame(pred, m: int) -> pd.DataFrame:
    """Mask m's guesses at every layer shown: rows layer, rank, token, probability, final (the model's own top-1)."""
    rows = [
        {"layer": int(layer), "rank": r + 1, "token": pred.top_tokens[m][n][r],
         "probability": float(pred.top_probabilities[m, n, r]),
         "final": pred.top_tokens[m][n][r] == pred.final_tokens[m]}
        for n, layer in enumerate(pred.layers)
        for r in range(pred.top_ids.shape[-1])
    ]
    return pd.DataFrame(rows)


def lens_chart(pred, m: int, frame: pd.DataFrame | None = None) -> alt.LayerChart:
    """Layers down, ranks across; each cell names the guess and is shaded by its probability; the model's final
    guess is written in bold wherever it appears."""
    frame = lens_frame(pred, m) if frame is None else frame
    base = alt.Chart(frame).encode(
        x=alt.X("rank:O", title="rank (1 = most probable)", axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("layer:O", title="layer (0 = embeddings; last = the model's output)"),
        tooltip=["layer", "rank", "token", alt.Tooltip("probability:Q", format=".2%")],
    )
    cells = base.mark_rect().encode(color=alt.Color("probability:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                                                    title="probability",
                                                    legend=layout.gradient_legend(len(pred.layers) * LENS_ROW_PX,
                                                                                  values=layout.SHARE_TICKS, format="%")))
    colour = alt.condition("datum.probability > 0.5", alt.value("white"), alt.value("black"))
    # Bold is a mark property, not a channel: the final guess gets a text layer of its own.
    plain = base.mark_text(fontSize=12).encode(text="token:N", color=colour).transform_filter("!datum.final")
    bold = base.mark_text(fontSize=12, fontWeight="bold").encode(text="token:N", color=colour).transform_filter("datum.final")
    return alt.layer(cells, plain, bold, title=f"{mask_label(pred, m)}: top guesses layer by layer").properties(
        width=alt.Step(max(90, layout.column_step(pred.top_ids.shape[-1]).step)), height=alt.Step(LENS_ROW_PX))


def final_frame(pred, m: int) -> pd.DataFrame:
    """The model's final guess for mask m at each layer: rows layer, token, rank, probability."""
    return pd.DataFrame({"layer": list(pred.layers), "token": pred.final_tokens[m],
                         "rank": pred.final_rank[m].tolist(), "probability": pred.final_probability[m].tolist()})


def final_chart(pred, m: int, frame: pd.DataFrame | None = None) -> alt.HConcatChart:
    """Probability and rank (log scale, 1 at the top) of the final guess, layer by layer: the guess forming."""
    frame = final_frame(pred, m) if frame is None else frame
    token = pred.final_tokens[m]
    x = alt.X("layer:O", axis=alt.Axis(labelAngle=0))
    tooltip = ["layer", "token", "rank", alt.Tooltip("probability:Q", format=".2%")]
    probability = alt.Chart(frame, title=f"P(“{token}”) by layer").mark_line(point=True).encode(
        x=x, y=alt.Y("probability:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")), tooltip=tooltip,
    ).properties(width=layout.MIN_CHART_PX, height=180)
    rank = alt.Chart(frame, title=f"Rank of “{token}” by layer").mark_line(point=True, color="#c05621").encode(
        x=x, y=alt.Y("rank:Q", scale=alt.Scale(type="log", reverse=True, domainMin=1), title="rank (1 = top)"),
        tooltip=tooltip,
    ).properties(width=layout.MIN_CHART_PX, height=180)
    return alt.hconcat(probability, rank)


def prediction_charts(pred) -> list:
    """The fill-mask analysis's charts (core.contract): the final guesses at each mask, then the first mask's guesses
    layer by layer."""
    return [(top_chart(pred), "The model's top guesses at each [MASK]."),
            (lens_chart(pred, 0), "The masked-word head on every layer's vector at the first mask (only the last "
                                  "layer feeds it).")]
