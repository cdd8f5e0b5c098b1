"""The "Erase a concept" tab of the "What each layer knows" page (issue 49; core.analyses.layer_knowledge.erasure):
a task, a layer and two treebanks (fit on one, check on the other), Run as a job with progress and Cancel, then
the probe bars (before / after / majority) and the effect bars (before / after / a random subspace of the same
rank) with their exports. The page adds it with `page_tabs(..., own={"Erase a concept": erase_tab.render})`.

Session keys start with `layer_knowledge.erase.` (core.views.declared_prefix), as a declared tab's would."""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import cached_model, draw_chart, export_buttons, job_controls, model_ref
from app_pages.widgets.corpus_picker import cached_resolve
from app_pages.widgets.settings_form import setting_input
from core import views
from core.analyses.layer_knowledge import erasure
from core.charts import erasure as erasure_charts
from core.charts.export import drawn_frame
from core.data.corpus import CorpusError
from core.model.loading import ModelUnavailable, model_num_layers
from core.safe_text import markdown_text

TASKS = ("upos", "xpos", "deprel", "morph:Number", "morph:Tense", "morph:Person", "morph:Gender", "morph:VerbForm")
SPLITS = ("dev", "test", "train")
DEFAULT_TRAIN, DEFAULT_EVAL = ("dev", 2000), ("test", 500)


def _split_and_size(prefix: str, which: str, label: str, default: tuple[str, int], column) -> str:
    """A UD English EWT split and a seeded number of its sentences, as a corpus spec (ud:SPLIT:N)."""
    split = column.selectbox(f"{label}: UD English EWT split", SPLITS, index=SPLITS.index(default[0]),
                             key=f"{prefix}{which}_split")
    size = column.number_input(f"{label}: sentences (seeded)", min_value=20, max_value=20000, value=default[1],
                               step=100, key=f"{prefix}{which}_n")
    return f"ud:{split}:{int(size)}"


def render() -> None:
    analysis = erasure.ANALYSIS
    prefix = views.declared_prefix(analysis)
    st.subheader(analysis.title)
    st.markdown("Remove one concept, such as part of speech, from a layer's word vectors with LEACE, the least "
                "change that leaves no straight-line trace of it. Then see whether the rest of the model still "
                "does its job: if it gets much worse than after erasing a random direction set of the same size, "
                "the model was using that concept.")
    st.caption(markdown_text(f"The same on the command line: python -m core {analysis.command}; in a notebook: "
                             f"lens.{analysis.lens}(…)."))
    ref = model_ref()
    try:
        n_layers = model_num_layers(ref)
    except (ModelUnavailable, ValueError, OSError) as err:
        st.error(markdown_text(str(err)))
        return
    st.session_state.setdefault(prefix + "layer", erasure.middle_layer(n_layers))
    left, middle, right = st.columns(3)
    task = left.selectbox("Concept (treebank task)", TASKS, key=prefix + "task",
                          help="A word's label from UD English EWT; a word's vector is the mean of its word pieces.")
    values = {"layer": setting_input(analysis, "layer", "Layer to erase", key=prefix + "layer", container=middle,
                                   high=n_layers - 1),
              "seed": setting_input(analysis, "seed", "Seed", key=prefix + "seed", container=right),
              "effect_limit": setting_input(analysis, "effect_limit", "Sentences the effect is measured on",
                                            key=prefix + "effect_limit", container=right)}
    fit_column, check_column = st.columns(2)
    train_spec = _split_and_size(prefix, "train", "Fit on", DEFAULT_TRAIN, fit_column)
    eval_spec = _split_and_size(prefix, "eval", "Check on", DEFAULT_EVAL, check_column)
    try:
        settings = analysis.make(values)
        inputs = erasure.inputs_of(task, cached_resolve(train_spec), cached_resolve(eval_spec))
    except (ValueError, CorpusError) as err:
        st.warning(markdown_text(str(err)))
        return

    def make_work():
        lm = cached_model(ref)  # in the script thread, where st.cache_* is safe

        def work(progress, should_stop):
            return analysis.run_function()(lm, inputs, settings, progress=progress, should_stop=should_stop)

        return work

    result = job_controls(prefix + "job", "Run", (ref, task, train_spec, eval_spec, settings), make_work,
                          kind=analysis.name, unit="steps")
    if result is None:
        st.info("Press **Run** to fit the eraser and measure it (nothing is computed until then).")
        return
    show(result, prefix)


def show(result: erasure.EraseResult, prefix: str) -> None:
    """The result's charts with their captions and exports, the effect's message when it could not be measured."""
    st.caption(markdown_text(f"Saved as {result.name} ({result.path}): {result.task} erased from layer "
                             f"{result.layer}, rank {result.rank}, fitted on {result.n_train} words."))
    for i, (chart, caption) in enumerate(erasure_charts.erase_charts(result)):
        draw_chart(chart, key=f"{prefix}chart{i}")
        st.caption(markdown_text(caption))
        export_buttons(chart, drawn_frame(chart), f"erase-{i}", key=f"{prefix}export{i}")
    if result.effect.get("kind") == "none":
        st.info(markdown_text(result.effect["message"]))
