"""Fine-tuning comparison: training runs side by side, what fine-tuning changes inside, and head studies."""

import shlex

from core.analyses import changes
from core.views import Param, View, analysis_params, corpus_params

RUNS, CHANGES, STUDIES = "Runs", "What fine-tuning changes", "Head studies"
# The page's tabs, each with the analyses (core.contract, by registry name) it shows, in the page's order: the page
# draws its tabs from this (app_pages/finetune.py), and tests/unit/test_analysis_contract.py checks every analysis of
# this view sits in one tab.
TABS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (RUNS, ("finetune", "contrastive")),
    (CHANGES, ("compare", "probe")),
    (STUDIES, ("head-features", "cls-attention", "aspect-heads", "head-map", "pattern-shares")),
)
TAB_TITLES = tuple(title for title, _ in TABS)

# The lesson's time-lapse ("Watch the top layers move"): made with this when it is not on the computer.
LESSON_TIMELAPSE = dict(task="snli", train_limit=2000, epochs=1, frames=10)


def timelapse_command(run: str, model: str) -> str:
    """The one command that makes the time-lapse run `run` of `model` (the page shows it when a link or a lesson
    names a run that is not on this computer)."""
    t = LESSON_TIMELAPSE
    return (f"python -m core finetune --model {shlex.quote(model)} --task {t['task']} --run {shlex.quote(run)} "
            f"--train-limit {t['train_limit']} --epochs {t['epochs']} --timelapse {t['frames']}")


def timelapse_step(lens, model, a, b, params) -> list:
    """A lesson step's charts: the frame of the time-lapse run it names ([] when that run is not here: the step's
    notes say how to make it); without one, the page's comparison of the finished runs (those the step names, else
    the newest two; [] before any run has finished)."""
    if not params.get("timelapse"):
        return lens.finetune_runs([r for r in str(params.get("runs") or "").split(",") if r] or None)
    try:
        return lens.timelapse_charts(params["timelapse"], int(params["frame"]) if params.get("frame") else None)
    except ValueError:
        return []


VIEW = View(
    name="finetune",
    title="Fine-tuning comparison",
    url_path="finetune",
    icon=":material/model_training:",
    page="app_pages/finetune.py",
    order=50,
    summary="Train BERT further on a task (inference pairs, paraphrases, drug reviews, restaurant aspects or your own "
            "file), with or without its last layer. Then compare the runs' accuracy and mistakes, see what changed "
            "inside each layer, and let each run classify your sentences.",
    params=(
        Param("protocol", "finetune.paper_protocol", "bool"),
        Param("runs", "finetune.compare", "strs"),
        Param("timelapse", "finetune.timelapse", "str"),
        Param("frame", "finetune.frame", "int", low=0, high=10**9),  # a training step of that run's time-lapse
        Param("base", "changes.base", "str"),
        Param("compared", "changes.others", "strs"),
        *corpus_params("changes.", None, "changes_"),
        # max_words and the sample seed (sample_seed): made from the compare declaration (core.analyses.changes)
        *analysis_params(changes.COMPARE, "changes.", only=("max_words", "seed"), keys={"seed": "changes.sample_seed"}),
        Param("similarity_protocol", "changes.similarity_protocol", "bool"),
        Param("cross_model", "changes.cross_model", "str"),
        Param("cross_measure", "changes.cross_measure", "str"),
        Param("probe_protocol", "changes.protocol", "bool"),
        Param("treebank", "changes.treebank", "str"),
        Param("study_a", "studies.base", "str"),
        Param("study_b", "studies.other", "str"),
        Param("study", "studies.part", "str", None,
              ("Linguistic features", "[CLS] by token type", "[CLS] by feature", "Aspect heads", "Head map",
               "Label patterns")),
        *corpus_params("studies.tb.", "studies.tb_limit", "study_tb_"),
        Param("study_n", "studies.limit", "int", low=1, high=10_000),
        Param("study_split", "studies.split", "str", None, ("test", "train")),
        Param("study_reviews", "studies.reviews", "int", low=10, high=3044),
        *corpus_params("studies.lab.", "studies.lab.limit", "label_"),
    ),
    charts=timelapse_step,
    declared_tabs=True,  # app_pages/finetune.py draws page_tabs: an analysis declared with a tab here gets one
)

