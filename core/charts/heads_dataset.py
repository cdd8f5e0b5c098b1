"""The "Heads over a dataset" analyses' charts as the registry asks for them (core.contract: `charts(result) ->
[(chart, caption), ...]`), drawn with core.charts.attention's builders, and the statistics table the page exports
and core.lens.heads returns."""

from __future__ import annotations

import pandas as pd

from core.analyses.heads import STAT_NAMES, STAT_TITLES
from core.charts import attention as attention_charts

DEFAULT_STAT = "sep"  # the statistic a lesson step or a notebook shows first: Clark's headline ([SEP] in layers 6-10)


def statistic_title(survey, name: str) -> str:
    """A statistic's title as the charts say it (under the Clark protocol "punct" is periods and commas only)."""
    return "attention to . and ," if name == "punct" and survey.protocol == "clark" else STAT_TITLES[name]


def statistics_table(survey) -> pd.DataFrame:
    """One row per head: layer (from 1), head (from 1 under the Clark protocol) and every statistic."""
    frame = attention_charts.grid_frame(survey.stat(STAT_NAMES[0]), STAT_NAMES[0],
                                        attention_charts._first(survey.protocol))
    return pd.DataFrame({"layer": frame["layer"], "head": frame["head"],
                         **{n: survey.stat(n).ravel() for n in STAT_NAMES}})


def survey_charts(survey, stat: str = DEFAULT_STAT) -> list:
    chart, _ = attention_charts.statistic_chart(survey, stat, f"Mean {statistic_title(survey, stat)} per head")
    return [(chart, f"Mean {statistic_title(survey, stat)} per head over {survey.n_examples} inputs (Clark et al. 2019)."),
            (attention_charts.pattern_chart(survey), "Each head's dominant pattern type (Kovaleva et al. 2019).")]


def ablation_charts(result) -> list:
    chart, _ = attention_charts.ablation_chart(result)
    return [(chart, f"Accuracy change with each head, then each whole layer, disabled ({result.mode}); "
                    f"intact accuracy {result.base_accuracy:.3f}.")]


def change_charts(change) -> list:
    chart, _ = attention_charts.change_chart(change)
    return [(chart, f"Cosine of each head's attention maps in the two models, over {change.n_examples} inputs: "
                    "lower = changed more.")]


def syntax_table(result) -> pd.DataFrame:
    """The per-relation table (core.analyses.heads.SyntaxHeads.to_json's relations) with the "best head" column."""
    table = pd.DataFrame(result.to_json()["relations"])
    table["best head"] = table["label"]
    return table


def syntax_charts(result) -> list:
    return [(attention_charts.syntax_chart(syntax_table(result), result.protocol),
             attention_charts.syntax_note(result.protocol))]
