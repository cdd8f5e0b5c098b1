"""Why this prediction? Word attributions of a fine-tuned classifier, whole-model token flow, and faithfulness."""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import (draw_chart, example_buttons, export_buttons, flag_degenerate, intro, job_controls, model_ref,
                               sentences, warn_if_truncated)
from app_pages.widgets.common import load_error, sidebar_place
from app_pages.widgets.explain_view import cached_explainer, cached_explanation, show
from app_pages.widgets.corpus_picker import BUILTIN, DATASETS, corpus_picker
from core import numbering
from core.charts import explain as charts
from app_pages.widgets.settings_form import setting_input
from core.analyses.explain import (ANALYSIS as EXPLAIN, METHOD_TITLES, METHODS, PERTURBATION_METHODS, WORD_RULE,
                                   NoClassifierHead, available_methods, prepare)
from core.analyses.faithfulness import (ANALYSIS as FAITHFULNESS, QUICK_EXAMPLES, QUICK_METHODS, Faithfulness,
                                        default_dataset, faithfulness)
from core.model.loading import ModelUnavailable
from core.safe_text import markdown_text
from core.training.runs import saved_degeneracy

K = "explain."
EXAMPLES = {
    "Contradiction": ("A man is playing a guitar on stage.", "Nobody is playing an instrument."),
    "Entailment": ("Two dogs run through a snowy field.", "Animals are outside."),
    "Neutral": ("A woman is reading in a park.", "The woman is waiting for a friend."),
}


st.title("Why this prediction?")
intro("Which words made the model predict what it predicts? Ten explanation methods answer side by side, and a "
      "faithfulness test over a dataset shows which answer the model's own behaviour supports.",
      f"Pick a fine-tuned classification run in {sidebar_place()}; gradient and perturbation methods (occlusion, Shapley, "
      "KernelSHAP, LIME) need its classifier head, attention rollout and value zeroing work on any model.")
example_buttons(EXAMPLES, key=K + "ex")
ref = model_ref()
try:
    explainer = cached_explainer(ref)
except ModelUnavailable as err:
    load_error(err)
    st.stop()
if not explainer.has_head:
    st.warning(markdown_text(explainer.head_message))
flag_degenerate(saved_degeneracy(ref), ref)
text_a, text_b = sentences()
methods = available_methods(explainer)
columns = st.columns(3)
chosen = columns[0].multiselect("Methods", methods, default=[m for m in ("ig", "rollout") if m in methods],
                                format_func=METHOD_TITLES.get, key=K + "methods")
target = columns[1].selectbox("Class to explain", ["predicted", *(explainer.labels or ())], key=K + "target",
                              disabled=not explainer.has_head)
# Defaults, bounds and help of these widgets are the declaration's (ExplainSettings), as the CLI's and core.lens's.
steps = setting_input(EXPLAIN, "steps", "Integrated-gradients steps", key=K + "steps", container=columns[2], step=10)
samples, window = None, 1
if PERTURBATION_METHODS & set(chosen):
    columns = st.columns(2)
    samples = setting_input(EXPLAIN, "samples", "Samples (Shapley: word orders; KernelSHAP, LIME: coalitions)",
                            key=K + "samples", container=columns[0])
    window = setting_input(EXPLAIN, "window", "Occlusion window (words)", key=K + "window", container=columns[1])
    st.caption("Perturbation methods replace words by [PAD] and explain the class's probability: a score is how much "
               "the probability owes to that word.")
st.caption(f"Words: {WORD_RULE}.")
if not text_a:
    st.info(f"Type sentence A in {sidebar_place()}, or press an example.")
else:
    try:
        warn_if_truncated(prepare(explainer, text_a, text_b))
        results = [cached_explanation(ref, text_a, text_b, m, None if target == "predicted" else target, steps,
                                      samples=samples, window=window) for m in chosen]
    except (ValueError, NoClassifierHead) as err:
        st.error(markdown_text(err))
        results = []
    if results and results[0].predicted:
        probs = markdown_text(", ".join(f"{l} {p:.2f}" for l, p in zip(results[0].labels, results[0].probabilities)))
        st.markdown(f"**Predicted: {markdown_text(results[0].predicted)}** ({probs})")
    for row in range(0, len(results), 2):
        for column, result in zip(st.columns(2), results[row:row + 2]):
            with column:
                st.subheader(METHOD_TITLES[result.method])
                show(result, f"{K}{result.method}")
    flows = [r for r in results if r.matrix is not None]
    if flows:
        with st.expander("Whole-model token flow (the full token × token matrix)"):
            # the slider shows layers 1..L as every chart does (core.numbering); matrix[i] is layer i + 1's output
            last = numbering.shown(len(flows[0].matrix) - 1)
            layer = st.slider("Layer", numbering.shown(0), last, last, key=K + "layer")
            for result in flows:
                draw_chart(charts.flow_matrix(result, numbering.index_of(layer)))

def choose_all_methods() -> None:
    st.session_state[K + "faith.methods"] = list(METHODS)


st.header("How faithful is each explanation?")
st.markdown("Comprehensiveness: how much the predicted class's probability drops when a method's top 10 %, 20 %, … "
            "of words are deleted (higher is better). Sufficiency: how much it drops when only those words are kept "
            "(lower is better). A random ranking is the control (DeYoung et al. 2020). Human rationales (e-SNLI) are "
            "not available offline, so plausibility is not scored.")
if not explainer.has_head:
    st.info("Faithfulness needs a prediction: pick a classification run.")
else:
    if st.session_state.get(K + "faith.default_for") != ref:
        # Another model starts on its own task's pairs (SNLI / MRPC dev for a pair run), not on single sentences;
        # on the first visit a source already chosen (a link, a test) is kept.
        first_visit = K + "faith.default_for" not in st.session_state
        st.session_state[K + "faith.default_for"] = ref
        if not (first_visit and K + "faith.source" in st.session_state):
            dataset = default_dataset(explainer)
            st.session_state[K + "faith.source"] = next((s for s, d in DATASETS.items() if d == dataset), BUILTIN)
    corpus = corpus_picker(K + "faith.", label="Dataset (SNLI / MRPC pairs, the built-in sentences, or your own CSV / JSONL / text)",
                           n_label="Examples to score (a seeded sample)", default_n=QUICK_EXAMPLES)
    columns = st.columns(2)
    if st.session_state[K + "faith.source"] in DATASETS:
        size, steps_column = None, columns[0]  # the picker's sample is the one count
    else:
        size, steps_column = (columns[0].number_input("Examples to score (the first N)", 5, 1000, QUICK_EXAMPLES,
                                                      key=K + "size"), columns[1])
    fsteps = setting_input(FAITHFULNESS, "steps", "IG steps", key=K + "fsteps", container=steps_column)
    # The quick four by default (a lesson waits for it); all ten one click away.
    st.session_state.setdefault(K + "faith.methods", list(QUICK_METHODS))
    columns = st.columns([4, 1], vertical_alignment="bottom")
    scored = columns[0].multiselect("Methods to score", METHODS, format_func=METHOD_TITLES.get, key=K + "faith.methods",
                                    help="By default the four quick ones: one gradient, one perturbation and two "
                                         "attention methods.")
    columns[1].button(f"All {len(METHODS)} methods", key=K + "faith.all", on_click=choose_all_methods,
                      disabled=len(scored) == len(METHODS), help="Adds integrated gradients, saliency, Shapley, "
                      "KernelSHAP, LIME and value zeroing: many times longer.")
    if {"shapley", "kernel-shap", "lime"} & set(scored):
        st.caption("Shapley, KernelSHAP and LIME each run about 200 perturbed inputs per example (the samples above): "
                   "on a CPU they take most of the time; leave them out for a quick look.")
    params = (ref, corpus.digest if corpus is not None else None, None if size is None else int(size), int(fsteps), samples,
              tuple(scored))

    def make_work():
        items = corpus.items if size is None else corpus.items[: int(size)]
        return lambda progress, should_stop: faithfulness(cached_explainer(ref), items, methods=tuple(scored), steps=int(fsteps),
                                                          samples=samples, corpus=corpus.name, progress=progress,
                                                          should_stop=should_stop)

    result = job_controls(K + "faith", "Score the methods", params, make_work, unit="inputs",
                          disabled=corpus is None or not scored,
                          load_result=Faithfulness.from_json)
    if result is not None:
        table = result.table()
        st.dataframe(table, hide_index=True, height="content")  # eleven rows with the control: all on screen
        if notice := result.truncation_notice():  # numbers only: safe as Markdown
            st.warning(notice)
        chart = charts.faithfulness_chart(result)
        draw_chart(chart)
        export_buttons(chart, charts.faithfulness_frame(result), "faithfulness", K + "faith.export")
