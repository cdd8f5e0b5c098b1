"""Charts of the Read-the-layers page's Neurons tab (core.analyses.neurons): the list of neurons, one neuron's top
contexts as keyword-in-context lines, and its activation shaded over a sentence."""

from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.analyses.neurons import NeuronChanges, NeuronIndex, NeuronSentence
from core.charts import layout

# Each context line shows this many characters either side of its word.
CONTEXT_CHARS = 40
AXIS_TITLES = {"max activation": "highest activation over the corpus", "change": "change after fine-tuning (Cohen's d)"}


def neurons_frame(index: NeuronIndex, neurons: Sequence[int], changes: NeuronChanges | None = None) -> pd.DataFrame:
    """One row per neuron shown, in the order given: its highest activation, mean and firing rate (and, with
    `changes`, the change after fine-tuning)."""
    rows = []
    for rank, n in enumerate(neurons):
        row = {"rank": rank + 1, "neuron": int(n), "label": f"neuron {int(n)}",
               "max activation": float(index.max_activation[n]), "mean": float(index.mean[n]),
               "firing rate": float(index.firing_rate[n])}
        if changes is not None:
            row.update({"change": float(changes.effect[n]), "mean in B": float(changes.mean_b[n]),
                        "firing rate in B": float(changes.firing_b[n])})
        rows.append(row)
    return pd.DataFrame(rows)


def neurons_chart(frame: pd.DataFrame, measure: str, title: str) -> alt.Chart:
    """A bar per neuron of `frame` (neurons_frame), in its order, of column `measure` ("max activation" or, with
    changes, "change": Cohen's d of B against A)."""
    return layout.fixed_size(alt.Chart(frame, title=title).mark_bar().encode(
        x=alt.X(f"{measure}:Q", title=AXIS_TITLES.get(measure, measure)),
        y=alt.Y("label:N", sort=list(frame["label"]), title=None, axis=layout.token_axis()),
        color=alt.condition(alt.datum[measure] < 0, alt.value(layout.CATEGORY_COLOURS[1]),
                            alt.value(layout.CATEGORY_COLOURS[0])),
        tooltip=["neuron", *(alt.Tooltip(f"{c}:Q", format=".4f") for c in frame.columns
                             if c not in ("rank", "neuron", "label"))],
    ).properties(width=320, height=layout.token_step()))


def contexts_frame(index: NeuronIndex, neuron: int, k: int | None = None) -> pd.DataFrame:
    """One row per top context of `neuron`, best first: activation, left words, the word (its piece when the
    word has several), right words, and where in the corpus it is."""
    return pd.DataFrame([{"rank": r + 1, "activation": c.value, "left": c.left, "word": c.word, "token": c.token,
                          "right": c.right, "example": c.example, "position": c.position}
                         for r, c in enumerate(index.contexts(neuron, k))],
                        columns=["rank", "activation", "left", "word", "token", "right", "example", "position"])


def _line(rank: int, left: str, word: str, token: str, right: str) -> str:
    left = left if len(left) <= CONTEXT_CHARS else "…" + left[-CONTEXT_CHARS:]
    right = right if len(right) <= CONTEXT_CHARS else right[:CONTEXT_CHARS] + "…"
    marked = f"[{word}]" if token.removeprefix("##").lower() == word.lower() else f"[{word} : {token}]"
    return f"{rank}. {left} {marked} {right}".replace("  ", " ")


def contexts_chart(index: NeuronIndex, neuron: int, k: int | None = None) -> alt.Chart:
    """Keyword-in-context lines of the neuron's top contexts (the token's word in brackets, with the piece when
    the word has several), each with a bar of its activation."""
    frame = contexts_frame(index, neuron, k)
    frame["context"] = [_line(r, l, w, t, rt) for r, l, w, t, rt in
                        zip(frame["rank"], frame["left"], frame["word"], frame["token"], frame["right"])]
    return layout.fixed_size(alt.Chart(
        frame, title=f"Top contexts of neuron {neuron}, layer {index.layer} ({index.corpus})").mark_bar().encode(
        x=alt.X("activation:Q", title="activation (after GELU)"),
        y=alt.Y("context:N", sort=list(frame["context"]), title=None, axis=layout.token_axis(labelLimit=560)),
        tooltip=["rank", alt.Tooltip("activation:Q", format=".4f"), "word", "token", "example", "position"],
    ).properties(width=260, height=alt.Step(22)))


def sentence_frame(sentence: NeuronSentence, neuron: int) -> pd.DataFrame:
    """One row per token: its label (position·token, unique), the neuron's activation, whether it is special."""
    values = sentence.of(neuron)
    return pd.DataFrame({"position": np.arange(len(values)), "token": list(sentence.tokens),
                         "label": [f"{i}·{t}" for i, t in enumerate(sentence.tokens)],
                         "activation": values.astype(float), "special": sentence.special_mask.astype(bool)})


def sentence_chart(sentence: NeuronSentence, neuron: int, reach: float | None = None) -> alt.LayerChart:
    """The neuron's activation shaded over the sentence: one cell per token, red above 0 and blue below, on a
    scale symmetric around 0 so equal shades mean equal magnitudes. `reach`: the scale's end (e.g. the neuron's
    highest activation over a corpus, so the shades compare with its top contexts); default the sentence's own
    largest |activation|."""
    frame = sentence_frame(sentence, neuron)
    reach = max(float(reach or 0.0), float(np.abs(frame["activation"]).max())) or 1.0
    order = list(frame["label"])
    x = alt.X("label:N", sort=order, title=None, axis=layout.token_axis(angle=-45))
    cells = alt.Chart(frame).mark_rect().encode(
        x=x, color=alt.Color("activation:Q", scale=alt.Scale(scheme="redblue", reverse=True, domain=[-reach, reach]),
                             legend=alt.Legend(title="activation", orient="right")),
        tooltip=["position", "token", alt.Tooltip("activation:Q", format=".4f")],
    )
    text = alt.Chart(frame).mark_text(fontSize=11).encode(
        x=x, text=alt.Text("activation:Q", format=".2f"),
        color=alt.condition(f"abs(datum.activation) > {0.6 * reach}", alt.value("white"), alt.value("black")))
    return layout.fixed_size(alt.layer(cells, text, title=f"Neuron {neuron} of layer {sentence.layer} on your "
                                                             "sentence").properties(width=alt.Step(max(44, layout.column_step(len(order)).step)),
                                                                        height=44))


SHOWN = 20  # neurons a chart of the list draws (the page's count)


def index_charts(index: NeuronIndex) -> list:
    """The neurons analysis's charts (core.contract): the neurons with the highest activation, then the first's
    top contexts."""
    order = index.by_max()
    frame = neurons_frame(index, order[:SHOWN])
    return [(neurons_chart(frame, "max activation", f"Neurons of layer {index.layer}, highest activation first"),
             f"The {len(frame)} neurons of layer {index.layer} with the highest activation over {index.corpus}."),
            (contexts_chart(index, int(order[0])), f"Neuron {int(order[0])}'s top contexts.")]


def changes_charts(shown) -> list:
    """The neurons-diff analysis's chart: the neurons that changed most (core.analyses.neurons.ChangesShown)."""
    changes = shown.changes
    frame = neurons_frame(shown.index_a, shown.shown, changes)
    title = f"Neurons of layer {changes.layer} that changed most in {changes.model_b}"
    return [(neurons_chart(frame, "change", title), f"Cohen's d of B ({changes.model_b}) against A "
                                                    f"({changes.model_a}) over {changes.corpus}.")]
