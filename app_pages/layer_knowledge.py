"""What each layer knows (issue 49): label probes per layer with control tasks, MDL and the expected layer.

Thin: the probes are core.analyses.layer_knowledge.probes (declared once, `probe-labels`), the charts
core.charts.layer_knowledge; this page picks models, tasks and treebanks and runs one core.jobs job for all of them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, intro, job_controls, model_ref,
                                      sidebar_place)
from app_pages.widgets import erase_tab
from app_pages.widgets.settings_form import setting_input
from core.analyses.layer_knowledge.probes import ANALYSIS, run_label_probes
from core.analyses.probe import probe_inputs
from core.charts.layer_knowledge import accuracy_chart, compression_chart, probe_frame
from core.model.loading import ModelUnavailable, available_models, display_name, display_name_among
from core.safe_text import markdown_text
from core.views import layer_knowledge as view

P = view.P
NO_SECOND = ""
TRAIN_SPECS = {"ud:dev": "EWT dev, 500 sentences", "ud:dev:2000": "EWT dev, 2,000 sentences",
               "ud:dev:100": "EWT dev, 100 (quick)"}
EVAL_SPECS = {"ud:test": "EWT test, 500 sentences", "ud:test:all": "EWT test, all sentences",
              "ud:test:100": "EWT test, 100 (quick)"}


@st.cache_data(show_spinner="Reading the treebanks…", max_entries=8)
def treebanks(train: str, evaluation: str, seed: int):
    return probe_inputs(train, evaluation, seed)


def _spec_label(options: dict):
    return lambda spec: options.get(spec, spec)


def probes_tab() -> None:
    st.markdown("A probe is a small linear classifier that tries to read a word's part of speech, its relation to "
                "its head or a grammatical feature off one layer's vector of that word. The control task gives each "
                "word a random but fixed label: a probe that does as well there has memorised words, not read the "
                "layer.")
    names = list(dict.fromkeys(n for n in [model_ref(), *(e.name for e in available_models())] if n))
    st.session_state.setdefault(P + "tasks", ["upos"])
    row = st.columns([3, 2, 2])
    tasks = row[0].multiselect("Tasks (one line each)", view.TASKS, key=P + "tasks", accept_new_options=True,
                               help="upos: part of speech; xpos: the treebank's Penn tags; deprel: the word's "
                                    "relation to its head; morph:FEAT: one grammatical feature. A word's vector is "
                                    "the mean of its word pieces.")
    model = model_ref()
    row[1].markdown(f"**Model (A)**  \n{markdown_text(display_name(model))} (from {sidebar_place()})")
    second = row[2].selectbox("Second model (B), e.g. a fine-tuned run", [NO_SECOND, *[n for n in names if n != model]],
                              key=P + "second", format_func=lambda n: "none" if n == NO_SECOND else
                              display_name_among(names)(n), accept_new_options=True,
                              help="Pretrained beside fine-tuned (Merchant et al. 2020): does fine-tuning keep "
                                   "what the layers knew?")
    row = st.columns([3, 3, 2, 2])
    train = row[0].selectbox("Train the probes on (UD English EWT)", list(TRAIN_SPECS), key=P + "corpus", accept_new_options=True,
                             format_func=_spec_label(TRAIN_SPECS), help="ud[:SPLIT[:N]] or a .conllu path")
    evaluation = row[1].selectbox("Score them on", list(EVAL_SPECS), key=P + "eval_corpus", accept_new_options=True,
                                  format_func=_spec_label(EVAL_SPECS), help="ud[:SPLIT[:N]] or a .conllu path")
    control = setting_input(ANALYSIS, "control", "Control task", key=P + "control", container=row[2])
    mdl = setting_input(ANALYSIS, "mdl", "Online code", key=P + "mdl", container=row[3])
    if not tasks:
        st.info("Pick at least one task.")
        return
    try:
        data = treebanks(train, evaluation, 0)
        settings_of = {task: ANALYSIS.make({"task": task, "control": control, "mdl": mdl}) for task in tasks}
    except ValueError as err:
        st.warning(markdown_text(str(err)))
        return
    models = tuple(m for m in (model, second) if m)
    params = (models, tuple(tasks), train, evaluation, control, mdl)

    def make_work():
        loaded = [cached_model(ref) for ref in models]  # in the script thread, where st.cache_* is safe
        steps = len(loaded) * len(tasks)

        def work(progress, should_stop):
            results = []
            for i, lm in enumerate(loaded):
                for j, task in enumerate(tasks):
                    done = i * len(tasks) + j
                    report = None if progress is None else (
                        lambda k, total, done=done: progress(done * 1000 + int(1000 * k / max(total, 1)), steps * 1000))
                    results.append(run_label_probes(lm, data, settings_of[task], progress=report,
                                                    should_stop=should_stop))
            return results

        return work

    try:
        results = job_controls(P + "job", "Run", params, make_work, kind=ANALYSIS.name, unit="‰ of the work")
    except ModelUnavailable as err:
        st.warning(markdown_text(str(err)))
        return
    if results is None:
        st.info("Press **Run** to encode both treebanks and train a probe per layer and task (about a minute per "
                "task for a small model on 500 + 500 sentences).")
        return
    show(results)


def show(results: list) -> None:
    by_model: dict[str, list] = {}
    for result in results:
        by_model.setdefault(result.model, []).append(result)
    columns = st.columns(len(by_model))
    for column, (model, group) in zip(columns, by_model.items()):
        with column:
            draw_chart(accuracy_chart(group, title=f"What each layer knows: {display_name(model)}"),
                       key=f"{P}acc.{model}")
            compression = compression_chart(group, title=f"Online code compression: {display_name(model)}")
            if compression is not None:
                draw_chart(compression, key=f"{P}mdl.{model}")
    summary = pd.DataFrame([{
        "model": display_name(r.model), "task": r.task, "labels": len(r.labels), "training words": r.n_train,
        "evaluation words": r.n_eval, "majority": round(r.majority, 3),
        "best accuracy": round(max(s.accuracy for s in r.layers), 3),
        "best layer": max(r.layers, key=lambda s: s.accuracy).layer,
        "expected layer": None if r.expected_layer is None else round(r.expected_layer, 2)} for r in results])
    st.dataframe(summary, hide_index=True)
    st.caption("Expected layer (Tenney et al. 2019): the layers' gains in accuracy weighted by layer number; "
               "lower means the task is learnt earlier. Tenney found part of speech below dependencies in BERT-base. "
               "Differs from the paper: the gain here is in the best single-layer probe up to each layer, where "
               "Tenney trained one probe on a learnt mix of layers 0 to l (a layer worse than an earlier one adds "
               "nothing, rather than a negative gain).")
    for result in results:
        if result.below_majority_notice():
            st.warning(markdown_text(f"{display_name(result.model)}: {result.below_majority_notice()}."))
    first = next(iter(by_model.values()))
    export_buttons(accuracy_chart(first), probe_frame(results), "probe-labels", key=P + "export")


st.title("What each layer knows")
intro(
    "Which layer of the model holds part of speech, dependency relations or grammatical features: a linear probe "
    "per layer, checked against a control task, the online codelength and Tenney's expected layer.",
    "Pick tasks and treebanks, optionally a second model (a fine-tuned run), press Run and compare the lines.",
)
# The page's tabs (core.views.layer_knowledge.TABS): the probes, and LEACE erasure (app_pages/widgets/erase_tab).
RENDERERS = {"Probes per layer": probes_tab, "Erase a concept": erase_tab.render}
if len(view.TAB_TITLES) > 1:
    tab = st.segmented_control("View", view.TAB_TITLES, key=P + "tab", label_visibility="collapsed") or view.TAB_TITLES[0]
else:
    tab = view.TAB_TITLES[0]
RENDERERS[tab]()
