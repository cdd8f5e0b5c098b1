"""Charts of the Bias experiment page: one builder per figure, each taking a frame from core.bias.tables
(or the result and a frame) and returning an altair chart. No streamlit here."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.bias import ARMS, SLICE_ORDER, accuracy_frame, flip_frame, slice_title
from core import numbering
from core.charts import layout
from core.charts.classification import CELL_PX
from core.protocols import PROTOCOLS

# Each over 3:1 on white (the third arm was tableau10's teal, 2.2:1).
ARM_COLOURS = alt.Scale(domain=list(ARMS), range=["#4c78a8", "#e45756", "#00838f"])
_SLICE_SORT = [slice_title(s) for s in SLICE_ORDER]


def _present(titles: pd.Series) -> list[str]:
    """The slice order, limited to the slices a result has (a sort list naming absent slices draws nothing for
    them, but readers of the spec, such as the layout test, take them for labels)."""
    have = set(titles)
    return [t for t in _SLICE_SORT if t in have] + sorted(have - set(_SLICE_SORT))


def _title(text: str, protocol: str) -> alt.TitleParams:
    """The chart's title with the protocol it was computed under as subtitle (core.protocols)."""
    return alt.TitleParams(text, subtitle=f"protocol: {PROTOCOLS[protocol].paper}")


def word_count_chart(per_word: pd.DataFrame, protocol: str = "bertlens") -> alt.Chart:
    """per_word: core.bias.word_count_frame (word, training pairs), bars in the list's order; protocol: the filter."""
    return (
        alt.Chart(per_word, title=_title("Training pairs containing each word", protocol))
        .mark_bar(color="#e45756")
        .encode(x=alt.X("training pairs:Q"), y=alt.Y("word:N", sort=list(per_word["word"]), axis=layout.token_axis()),
                tooltip=["word", "training pairs"])
        .properties(height=alt.Step(22))
    )


def accuracy_chart(table: pd.DataFrame, protocol: str = "bertlens") -> alt.LayerChart:
    """table: core.bias.accuracy_frame; bars of accuracy in percent per slice and run, rules for the 95 % intervals;
    protocol: the experiment's (ExperimentResult.protocol)."""
    frame = table.assign(slice_title=table["slice"].map(slice_title), percent=table["accuracy"] * 100,
                         low=table["ci_low"] * 100, high=table["ci_high"] * 100)
    base = alt.Chart(frame).encode(
        x=alt.X("slice_title:N", title=None, sort=_present(frame["slice_title"]), axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("run:N", sort=list(ARMS)),
        color=alt.Color("run:N", scale=ARM_COLOURS, sort=list(ARMS), title="run"),
    )
    return alt.layer(
        base.mark_bar(opacity=0.85).encode(
            y=alt.Y("percent:Q", title="test accuracy (%)"),
            tooltip=["run", "slice", "n", alt.Tooltip("percent:Q", format=".2f"), alt.Tooltip("low:Q", format=".2f"),
                     alt.Tooltip("high:Q", format=".2f")],
        ),
        base.mark_rule(color="black", strokeWidth=1.5).encode(y=alt.Y("low:Q", title="test accuracy (%)"), y2="high:Q"),
    ).properties(title=_title("Accuracy by run and test slice (bars: 95 % bootstrap intervals)", protocol), height=320)


def f1_chart(f1: pd.DataFrame, labels) -> alt.Chart:
    """f1: core.bias.f1_frame (run, slice, class, F1); one panel per slice, classes in `labels` order."""
    f1 = f1.assign(slice_title=f1["slice"].map(slice_title))
    return (
        alt.Chart(f1)
        .mark_bar()
        .encode(
            x=alt.X("class:N", sort=list(labels), title=None, axis=layout.token_axis(angle=-30)),
            xOffset=alt.XOffset("run:N", sort=list(ARMS)),
            y=alt.Y("F1:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("run:N", scale=ARM_COLOURS, sort=list(ARMS)),
            column=alt.Column("slice_title:N", title=None, sort=_present(f1["slice_title"])),
            tooltip=["run", "slice", "class", alt.Tooltip("F1:Q", format=".3f")],
        )
        .properties(width=220, height=220)
    )


def confusion_chart(confusion: pd.DataFrame, labels, slice_name: str) -> alt.FacetChart:
    """confusion: core.bias.confusion_frame rows of one slice; one matrix per run, shaded by row share."""
    cells = alt.Chart(confusion).encode(
        x=alt.X("predicted:N", sort=list(labels), scale=alt.Scale(domain=list(labels)), axis=layout.token_axis(angle=-30)),
        y=alt.Y("true:N", sort=list(labels), scale=alt.Scale(domain=list(labels)), axis=layout.token_axis()),
    )
    return (
        alt.layer(
            cells.mark_rect().encode(color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="share of row"),
                                     tooltip=["run", "true", "predicted", "count", alt.Tooltip("share:Q", format=".1%")]),
            cells.mark_text().encode(text="count:Q", color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black"))),
            data=confusion,
        )
        .properties(width=alt.Step(CELL_PX), height=alt.Step(CELL_PX))  # three runs side by side fit the page
        .facet(column=alt.Column("run:N", sort=list(ARMS), title=None))
        .properties(title=f"Rows: gold label; columns: prediction — {slice_title(slice_name)}")
    )


def flip_chart(flips: pd.DataFrame) -> alt.Chart:
    """flips: core.bias.flip_frame (run, flip_rate, flips, swapped); flip rate in percent per run."""
    return (
        alt.Chart(flips.assign(percent=flips["flip_rate"] * 100), title="Predictions that change when gendered words are swapped")
        .mark_bar()
        .encode(x=alt.X("percent:Q", title="flip rate (%)"), y=alt.Y("run:N", sort=list(ARMS), title=None),
                color=alt.Color("run:N", scale=ARM_COLOURS, legend=None),
                tooltip=["run", "flips", "swapped", alt.Tooltip("percent:Q", format=".2f")])
        .properties(height=alt.Step(28))
    )


ERASE_CONDITIONS = ("as trained", "gender erased")


def erased_flip_frame(run: str, erased) -> pd.DataFrame:
    """A core.bias.erase_gender.ErasedFlips as rows run, condition (as trained / gender erased), flip_rate, flips,
    swapped, layer (1..L), eraser."""
    return pd.DataFrame([
        {"run": run, "condition": condition, "flip_rate": rate, "flips": flips, "swapped": erased.swappable,
         "layer": erased.layer, "eraser": erased.eraser}
        for condition, rate, flips in zip(ERASE_CONDITIONS, (erased.flip_rate_before, erased.flip_rate_after),
                                          (erased.flips_before, erased.flips_after))])


def erased_flip_chart(frame: pd.DataFrame) -> alt.Chart:
    """erased_flip_frame's two bars: the flip rate in percent as trained and with gender erased at one layer."""
    layer = int(frame["layer"].iloc[0]) if len(frame) else 0
    return (
        alt.Chart(frame.assign(percent=frame["flip_rate"] * 100),
                  title=alt.Title("Flip rate before and after erasing gender",
                                  subtitle=f"LEACE eraser applied to every token at layer {layer}"))
        .mark_bar()
        .encode(x=alt.X("percent:Q", title="flip rate (%)"),
                y=alt.Y("condition:N", sort=list(ERASE_CONDITIONS), title=None),
                color=alt.Color("condition:N", sort=list(ERASE_CONDITIONS),
                                scale=alt.Scale(domain=list(ERASE_CONDITIONS), range=["#4c78a8", "#e45756"]),
                                legend=None),
                tooltip=["condition", "flips", "swapped", alt.Tooltip("percent:Q", format=".2f")])
        .properties(width=460, height=alt.Step(28))
    )


def experiment_charts(result) -> list[tuple[alt.TopLevelMixin, str]]:
    """The bias analysis's charts (core.contract): accuracy per run and slice, and the flip rate per run."""
    return [(accuracy_chart(accuracy_frame(result), result.protocol), "Accuracy per run and slice, 95% intervals."),
            (flip_chart(flip_frame(result)), "Predictions that change when gendered words are swapped.")]


def head_ranking_frame(result) -> pd.DataFrame:
    """Every head of a core.bias.heads.BiasHeads, highest mean recovery first (layers 1..L, core.numbering), the
    disabled top k marked."""
    return pd.DataFrame([{"rank": rank + 1, "layer": numbering.shown(layer), "head": head,
                          "mean recovery": float(result.recovery[layer, head]), "disabled": rank < result.top_k}
                         for rank, (layer, head) in enumerate(result.ranking)])


def head_recovery_chart(result) -> alt.Chart:
    """The mean recovery of every head (layers 1..L down, heads across); the disabled top k outlined."""
    frame = head_ranking_frame(result)
    base = alt.Chart(frame, title=f"Heads behind {result.run}'s flips: mean recovery (top {result.top_k} disabled)")
    cells = base.mark_rect().encode(
        x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"),
        color=alt.Color("mean recovery:Q", scale=alt.Scale(scheme="blues")),
        tooltip=["layer", "head", "rank", alt.Tooltip("mean recovery:Q", format=".3f"), "disabled"])
    outline = base.transform_filter(alt.datum.disabled).mark_rect(fill=None, stroke="#d62728", strokeWidth=2).encode(
        x="head:O", y="layer:O")
    return layout.fixed_size(alt.layer(cells, outline))
