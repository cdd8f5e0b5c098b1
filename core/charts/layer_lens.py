"""The Lens tab's charts: a tokens × layers grid of top guesses (core.analyses.logit_lens.LayerLens), one cell's
top-k, and KL to the final layer per layer for the logit and tuned lens."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.charts import layout

GRID_COLUMN_MAX_PX, GRID_COLUMN_MIN_PX, GRID_WIDTH_PX = 84, 56, 640
LENS_NAMES = {"logit": "logit lens", "tuned": "tuned lens"}
CELL_SELECTION = "lens_cell"  # a click on a grid cell selects {layer, position} (the page shows its top-k)


def token_labels(tokens) -> list[str]:
    """Rows keyed by position ("3·the"), so equal tokens keep rows of their own in the sentence's order."""
    return [f"{i}·{t}" for i, t in enumerate(tokens)]


def grid_frame(result) -> pd.DataFrame:
    """One row per (layer, token): position, token (its row label), layer, guess (top-1), p, special."""
    labels = token_labels(result.tokens)
    return pd.DataFrame([
        {"position": i, "token": labels[i], "layer": int(layer), "guess": result.top_tokens[n][i][0],
         "p": float(result.top_probabilities[n, i, 0]), "special": bool(result.special_mask[i])}
        for n, layer in enumerate(result.layers) for i in range(len(result.tokens))
    ])


def grid_chart(result, frame: pd.DataFrame | None = None) -> alt.LayerChart:
    """Tokens down (every one labelled, in order), layers across; each cell names the layer's top guess there and
    is shaded by its probability. A click selects the cell through the point selection named CELL_SELECTION."""
    frame = grid_frame(result) if frame is None else frame
    column = max(GRID_COLUMN_MIN_PX, min(GRID_COLUMN_MAX_PX, GRID_WIDTH_PX // max(len(result.layers), 1)),
                 layout.column_step(len(result.layers)).step)
    what = f"tuned lens '{result.lens}'" if result.kind == "tuned" else "logit lens"
    base = alt.Chart(frame).encode(
        x=alt.X("layer:O", title="layer (0 = embeddings; last = the model's output)",
                axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("token:N", sort=token_labels(result.tokens), title=None, axis=layout.token_axis()),
        tooltip=["token", "layer", "guess", alt.Tooltip("p:Q", format=".1%", title="probability")],
    )
    cells = base.mark_rect().encode(color=alt.Color("p:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                                                    title="probability",
                                                    legend=layout.gradient_legend(len(result.tokens) * layout.MIN_ROW_PX,
                                                                                  format="%", values=layout.SHARE_TICKS))).add_params(
        alt.selection_point(name=CELL_SELECTION, fields=["layer", "position"], on="click", empty=False))
    colour = alt.condition("datum.p > 0.5", alt.value("white"), alt.value("black"))
    text = base.mark_text(fontSize=11, limit=column - 6).encode(text="guess:N", color=colour)
    return alt.layer(cells, text, title=f"Top guess at every layer and token ({what})").properties(
        width=alt.Step(column), height=layout.token_step())


def cell_frame(result, layer: int, position: int) -> pd.DataFrame:
    """The top-k at one layer and token: rank, guess, p."""
    n = list(result.layers).index(int(layer))
    k = result.top_ids.shape[-1]
    return pd.DataFrame({"rank": list(range(1, k + 1)), "guess": list(result.top_tokens[n][position]),
                         "p": [float(v) for v in result.top_probabilities[n, position]]})


def cell_chart(result, layer: int, position: int, frame: pd.DataFrame | None = None) -> alt.Chart:
    """Bars of the top-k guesses at one cell, most probable first."""
    frame = cell_frame(result, layer, position) if frame is None else frame
    token = result.tokens[position]
    return alt.Chart(frame, title=f"Layer {layer}, token {position} “{token}”: top {len(frame)} guesses").mark_bar().encode(
        y=alt.Y("guess:N", sort=None, title=None, axis=layout.token_axis()),
        x=alt.X("p:Q", title="probability", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        tooltip=["rank", "guess", alt.Tooltip("p:Q", format=".2%", title="probability")],
    ).properties(width=360, height=layout.token_step())


def kl_frame(*results) -> pd.DataFrame:
    """KL to the final layer per layer of each lens given (None skipped): layer, lens, kl."""
    return pd.DataFrame([
        {"layer": int(layer), "lens": LENS_NAMES[r.kind] + (f" '{r.lens}'" if r.lens else ""), "kl": float(kl)}
        for r in results if r is not None for layer, kl in zip(r.layers, r.kl_to_final)
    ])


def kl_chart(*results, frame: pd.DataFrame | None = None) -> alt.Chart:
    """One line per lens: KL(final ‖ lens) in nats at each layer, 0 at the last."""
    frame = kl_frame(*results) if frame is None else frame
    return alt.Chart(frame, title="KL to the final layer's guesses (nats; lower = closer to the output)").mark_line(
        point=True).encode(
        x=alt.X("layer:O", axis=alt.Axis(labelAngle=0), title="layer (0 = embeddings)"),
        y=alt.Y("kl:Q", title="KL(final ‖ lens), nats"),
        color=alt.Color("lens:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["lens", "layer", alt.Tooltip("kl:Q", format=".3f")],
    ).properties(width=420, height=220)


def lens_charts(result) -> list:
    """The lens analysis's charts (core.contract): the grid of top guesses, then KL to the final layer."""
    return [(grid_chart(result), "The head's top guess at every layer and token."),
            (kl_chart(result), "How far each layer's guesses are from the model's output (KL, nats).")]


def fitted_frame(fitted) -> pd.DataFrame:
    """A fitted tuned lens's held-out KL to the final layer, beside the logit lens's: layer, lens, kl."""
    return pd.DataFrame([{"layer": layer, "lens": LENS_NAMES[kind], "kl": float(kl)}
                         for kind, values in (("logit", fitted.kl_logit_held_out), ("tuned", fitted.kl_tuned_held_out))
                         for layer, kl in enumerate(values)])


def fitted_charts(fitted) -> list:
    """The fit-tuned-lens analysis's chart: held-out KL per layer of both lenses."""
    frame = fitted_frame(fitted)
    return [(kl_chart(frame=frame), f"Held-out KL to the final layer of the logit lens and of the tuned lens "
                                    f"'{fitted.name}' ({fitted.held_out_tokens} tokens).")]
