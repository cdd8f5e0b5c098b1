"""The class's answers to one question as a bar chart, drawn beside the view's own chart at the reveal: one bar per
choice in the order the students saw them (a choice nobody picked is a bar of 0, not a missing row), the model's
right answer in green and named in the legend. Typed (free-text) answers are grouped ignoring case and spaces; the
most frequent MAX_TYPED_BARS are drawn and the rest summed as "(other answers)"."""

from __future__ import annotations

from collections import Counter
from typing import Mapping

import altair as alt
import pandas as pd

from core.charts import layout

RIGHT_COLOUR, OTHER_COLOUR = "#2a8a3e", "#5f5f5f"
RIGHT, OTHER = "the model's answer", "another answer"
MAX_TYPED_BARS = 12
OTHER_ANSWERS = "(other answers)"
BAR_PX = 26  # one bar per row, thicker than a token row: it is read from across a room
CHOICE_LABEL_PX = 160  # a longer choice ends in "…" (its tooltip has it whole)
BAR_END_ROOM = 1.35  # the x axis runs this far past the most answers: the count and "✓" fit after the bar


def _typed_key(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def answers_frame(question, counts: Mapping[str, int]) -> pd.DataFrame:
    """Rows choice, answers (how many students gave it), share (of all answers, 0 when none), right (bool), kind and
    label (the legend's and the bar end's words), in the order drawn. `counts`: answer text -> number of students (the store's counts for this question)."""
    if question.free_text:
        grouped: Counter = Counter()
        spelling: dict[str, str] = {}
        for text, n in counts.items():
            key = _typed_key(text)
            grouped[key] += int(n)
            spelling.setdefault(key, " ".join(str(text).split()))
        right = _typed_key(question.correct) if question.correct else None
        top = [k for k, _ in sorted(grouped.items(), key=lambda kv: (-kv[1], kv[0])) if k != right][:MAX_TYPED_BARS]
        rows = [(question.correct, grouped.get(right, 0), True)] if right is not None else []
        rows += [(spelling[k], grouped[k], False) for k in top]
        rest = sum(n for k, n in grouped.items() if k != right and k not in top)
        if rest:
            rows.append((OTHER_ANSWERS, rest, False))
    else:
        unknown = set(counts) - set(question.choices)
        if unknown:
            raise ValueError(f"Answers {sorted(unknown)} are not among the question's choices {list(question.choices)}.")
        rows = [(c, int(counts.get(c, 0)), c == question.correct) for c in question.choices]
    total = sum(n for _, n, _ in rows)
    return pd.DataFrame({
        "choice": [c for c, _, _ in rows],
        "answers": [n for _, n, _ in rows],
        "share": [n / total if total else 0.0 for _, n, _ in rows],
        "right": [r for _, _, r in rows],
        "kind": [RIGHT if r else OTHER for _, _, r in rows],
        # written at the bar's end: the right answer is marked even when nobody picked it (a bar of 0 has no colour);
        # "✓" alone: the legend says what it means, and the words after a long bar ran off the chart
        "label": [f"{n} ✓" if r else str(n) for _, n, r in rows],
    })


def answers_chart(frame: pd.DataFrame, title: str = "The class's answers") -> alt.LayerChart:
    """Horizontal bars, one per choice (every label drawn), the count written at each bar's end. As wide as its
    column (it is drawn beside the view's chart at the reveal): at a fixed 300 px plot beside 220 px of labels it
    ran past the column's edge and cut its own bar-end text ("1 ✓ the model's answ…")."""
    total = int(frame["answers"].sum())
    order = list(frame["choice"])
    most = max(1, int(frame["answers"].max()) if len(frame) else 1)
    base = alt.Chart(frame).encode(
        y=alt.Y("choice:N", sort=order, title=None, axis=layout.token_axis(labelLimit=CHOICE_LABEL_PX)),
        # room right of the longest bar for the words at its end
        x=alt.X("answers:Q", title="students", axis=alt.Axis(tickMinStep=1, format="d"),
                scale=alt.Scale(domain=[0, most * BAR_END_ROOM], nice=False)),
        tooltip=["choice", "answers", alt.Tooltip("share:Q", format=".0%"), "kind"],
    )
    bars = base.mark_bar().encode(color=alt.Color(
        "kind:N", scale=alt.Scale(domain=[RIGHT, OTHER], range=[RIGHT_COLOUR, OTHER_COLOUR]),
        legend=alt.Legend(title=None, orient="bottom", direction="vertical")))  # side by side: wider than a column
    labels = base.mark_text(align="left", dx=4, fontSize=13).encode(
        text="label:N", color=alt.condition("datum.right", alt.value(RIGHT_COLOUR), alt.value("#31333f")))
    subtitle = f"{total} answer{'s' if total != 1 else ''}"
    return alt.layer(bars, labels, title=alt.Title(title, subtitle=subtitle)).properties(
        width="container", height=alt.Step(BAR_PX))
