"""Charts of the "Why this prediction?" page: coloured words, a bar per word, token flow, faithfulness."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core import numbering
from core.charts import layout
from core.analyses.explain import METHOD_TITLES
from core.safe_text import html_markdown_text


def word_frame(explanation) -> pd.DataFrame:
    """One row per word: position, word, score, and the score scaled to [-1, 1] for colouring."""
    scores = np.asarray(explanation.word_scores, dtype=np.float64)
    scale = float(np.abs(scores).max()) or 1.0
    return pd.DataFrame({"position": np.arange(len(scores)), "word": [f"{i}·{w}" for i, w in enumerate(explanation.words)],
                         "text": list(explanation.words), "score": scores, "scaled": scores / scale})


def coloured_text(explanation) -> str:
    """HTML: each word on a background whose colour is its score (red supports the class, blue opposes)."""
    spans = []
    for word, value in zip(explanation.words, word_frame(explanation)["scaled"]):
        spans.append(f'<span style="background:rgba({"214, 39, 40" if value >= 0 else "31, 119, 180"}, {abs(value):.2f});'
                     f'padding:2px 3px;margin:1px;border-radius:3px" title="{value:+.3f}">{html_markdown_text(word)}</span>')
    return " ".join(spans)


def word_bars(explanation) -> alt.Chart:
    frame = word_frame(explanation)
    title = METHOD_TITLES[explanation.method] + (f" for {explanation.target}" if explanation.target else "")
    return layout.fixed_size(alt.Chart(frame, title=title).mark_bar().encode(
        y=alt.Y("word:N", sort=list(frame["word"]), title=None, axis=layout.token_axis()),
        x=alt.X("score:Q", title="word score"),
        color=alt.Color("score:Q", scale=alt.Scale(scheme="redblue", reverse=True, domainMid=0), legend=None),
        tooltip=["text", alt.Tooltip("score:Q", format="+.4f")],
    ).properties(width=320, height=layout.token_step()))


def flow_matrix(explanation, layer: int = -1) -> alt.Chart:
    """Heatmap of a [T, T] flow matrix (rollout / value zeroing) of one layer (`layer` indexes the matrix: its title
    shows transformer layer layer + 1, core.numbering)."""
    matrix = explanation.matrix[layer]
    labels = [f"{i}·{t}" for i, t in enumerate(explanation.tokens)]
    frame = pd.DataFrame([(labels[i], labels[j], float(matrix[i, j])) for i in range(len(labels)) for j in range(len(labels))],
                         columns=["query", "key", "share"])
    return layout.fixed_size(alt.Chart(frame, title=f"{METHOD_TITLES[explanation.method]}: token flow into layer {numbering.shown(layer % len(explanation.matrix))}").mark_rect().encode(
        x=alt.X("key:N", sort=labels, title="from input token", axis=layout.token_axis(angle=-60)),
        y=alt.Y("query:N", sort=labels, title="to token", axis=layout.token_axis()),
        color=alt.Color("share:Q", scale=alt.Scale(scheme="greens")), tooltip=["query", "key", alt.Tooltip("share:Q", format=".3f")],
    ).properties(width=layout.column_step(len(labels)), height=layout.column_step(len(labels))))


def faithfulness_frame(result) -> pd.DataFrame:
    rows = []
    for m, method in enumerate(result.methods):
        for k, fraction in enumerate(result.fractions):
            rows.append({"method": method, "top words removed / kept": fraction,
                         "comprehensiveness": float(result.comprehensiveness[m, k]), "sufficiency": float(result.sufficiency[m, k])})
    return pd.DataFrame(rows)


def faithfulness_chart(result) -> alt.Chart:
    frame = faithfulness_frame(result).melt(["method", "top words removed / kept"], var_name="measure", value_name="probability drop")
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("top words removed / kept:Q", axis=alt.Axis(format="%")),
        y=alt.Y("probability drop:Q", title="p(class | x) − p(class | perturbed)"),
        color="method:N", strokeDash=alt.condition(alt.datum.method == "random", alt.value([4, 3]), alt.value([1, 0])),
        column=alt.Column("measure:N", title=None), tooltip=["method", "measure", alt.Tooltip("probability drop:Q", format=".3f")],
    ).properties(width=300, height=220)


def explanation_charts(explanation) -> list[tuple[alt.TopLevelMixin, str]]:
    """The explain analysis's charts (core.contract): the word bars, and the token flow of a flow method."""
    out = [(word_bars(explanation), f"{METHOD_TITLES[explanation.method]}: one bar per word.")]
    if explanation.matrix is not None:
        out.append((flow_matrix(explanation), "Token flow into the last layer."))
    return out


def faithfulness_charts(result) -> list[tuple[alt.TopLevelMixin, str]]:
    """The explain-faithfulness analysis's chart (core.contract)."""
    return [(faithfulness_chart(result), "Comprehensiveness (higher is more faithful) and sufficiency (lower is).")]
