"""Read the layers: the Neurons tab (call `render()`).

Pick a layer and a corpus; one corpus pass (a core.jobs job with progress and Cancel) indexes every neuron of the
layer (core.analyses.neurons, kept on disk per model, corpus and layer). Then a list of neurons, by highest
activation or by change after fine-tuning (a second model's pass over the same corpus), one neuron's top contexts
as keyword-in-context lines, and its activation shaded over the sidebar's sentence.
"""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, intro, job_controls, model_ref,
                                      sentences, warn_if_corpus_cut)
from app_pages.widgets.common import load_error, sidebar_place
from app_pages.widgets.corpus_picker import corpus_picker
from core.analyses import neurons as nr
from core.charts import neurons as charts
from core.model.loading import ModelUnavailable, available_models, display_name, display_name_among
from core.safe_text import markdown_text

P = "neurons."
SHOWN = 20  # neurons listed
BY = {"max": "highest activation", "change": "change after fine-tuning"}


@st.cache_data(show_spinner="Reading the neurons on your sentence…", max_entries=16)
def cached_sentence(ref: str, text_a: str, text_b: str | None, layer: int) -> nr.NeuronSentence:
    return nr.neuron_sentence(cached_model(ref), text_a, layer, text_b)


def index_job(key: str, ref: str, corpus, layer: int) -> nr.NeuronIndex | None:
    """The Run button / progress / Cancel of one model's corpus pass; its index once done."""
    def make_work():
        model = cached_model(ref)
        return lambda progress, should_stop: nr.build_neuron_index(model, corpus, layer, progress=progress,
                                                                   should_stop=should_stop)

    label = f"Read the neurons of {markdown_text(display_name(ref))} over the corpus"
    return job_controls(P + key, label, (ref, corpus.digest, layer), make_work, kind="neurons-index",
                        unit="sentences", hide_stale=True)


def render() -> None:
    intro("A feed-forward neuron is one of the few thousand units inside a layer's feed-forward block; each one "
          "fires on some pattern in the text, and its top-activating words over a corpus hint at which.",
          "Pick a layer and a corpus and read its neurons once; then pick a neuron to see its top contexts, its "
          "activation over your sentence, or list the neurons that fine-tuning changed most.")
    ref = model_ref()
    try:
        lm = cached_model(ref)
    except ModelUnavailable as err:
        load_error(err, ref)
        return
    st.session_state.setdefault(P + "layer", max(1, lm.num_layers // 2))
    if not 1 <= int(st.session_state[P + "layer"]) <= lm.num_layers:
        st.session_state[P + "layer"] = lm.num_layers
    layer = int(st.slider("Layer", 1, lm.num_layers, key=P + "layer",
                          help="Layer l's neurons write into the layer's output (hidden_states[l])."))
    corpus = corpus_picker(P, label="Corpus", default_n=300)
    if corpus is None:
        return
    index = index_job("index", ref, corpus, layer)
    if index is None:
        st.caption("The pass keeps each neuron's top 20 activations with their contexts, its mean and its firing "
                   "rate, on disk (models_cache/neuron_index) for later sessions.")
        return
    warn_if_corpus_cut(index)
    st.caption(f"{index.n_neurons:,} neurons over {index.n_tokens:,} word pieces of {markdown_text(index.corpus)}.")

    st.session_state.setdefault(P + "by", "max")
    by = st.radio("List neurons by", list(BY), format_func=BY.get, key=P + "by", horizontal=True)
    changes = None
    if by == "change":
        changes = changes_part(ref, corpus, layer, index)
    order = index.by_max() if changes is None else changes.order
    frame = charts.neurons_frame(index, order[:SHOWN], changes)
    measure = "max activation" if changes is None else "change"
    title = (f"The {SHOWN} neurons of layer {layer} with the highest activation" if changes is None else
             f"The {SHOWN} neurons of layer {layer} that changed most")
    listed = charts.neurons_chart(frame, measure, title)
    draw_chart(listed)
    export_buttons(listed, frame, f"neurons-layer{layer}-by-{by}", P + "list_export")

    if st.session_state.get(P + "neuron") is None or not 0 <= int(st.session_state[P + "neuron"]) < index.n_neurons:
        st.session_state[P + "neuron"] = int(order[0])
    neuron = int(st.number_input(f"Neuron (0–{index.n_neurons - 1}; the list's first: {int(order[0])})", 0,
                                 index.n_neurons - 1, key=P + "neuron"))
    contexts = charts.contexts_chart(index, neuron)
    draw_chart(contexts)
    table = charts.contexts_frame(index, neuron)
    with st.expander("The contexts as a table (left words, the word, its word piece, right words)"):
        st.dataframe(table[["rank", "activation", "left", "word", "token", "right"]], hide_index=True,
                     column_config={"activation": st.column_config.NumberColumn(format="%.3f")})
    export_buttons(contexts, table, f"neuron-{neuron}-layer{layer}-contexts", P + "contexts_export")
    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} to see this neuron's activation over it.")
        return
    try:
        sentence = cached_sentence(ref, text_a, text_b, layer)
    except ValueError as err:
        st.error(markdown_text(err))
        return
    if sentence.truncated:
        st.warning(f"Your sentence was cut to the model's length ({sentence.truncated} word pieces dropped).")
    st.caption("Shaded on the scale of the neuron's highest activation over the corpus: the darkest red is as "
               "strong as its top context.")
    shaded = charts.sentence_chart(sentence, neuron, reach=float(index.max_activation[neuron]))
    draw_chart(shaded)
    export_buttons(shaded, charts.sentence_frame(sentence, neuron), f"neuron-{neuron}-layer{layer}-sentence",
                   P + "sentence_export")


def changes_part(ref: str, corpus, layer: int, index: nr.NeuronIndex) -> nr.NeuronChanges | None:
    """Model B's pass over the same corpus and the ranking by change; None (after saying why) until there is one."""
    names = [e.name for e in available_models() if e.name != ref]
    runs = [e.name for e in available_models() if e.source == "run" and e.name != ref]
    if not names:
        st.info("No other model to compare with: fine-tune a run on the Fine-tuning comparison page first.")
        return None
    if st.session_state.get(P + "b") not in names:
        st.session_state[P + "b"] = (runs or names)[0]
    other = st.selectbox("Fine-tuned model (B)", names, key=P + "b", format_func=display_name_among(names),
                         help="A run fine-tuned from the model you picked; its neurons are read over the same corpus.")
    st.caption(f"Measure: {nr.CHANGE_MEASURE}.")
    other_index = index_job("index_b", other, corpus, layer)
    if other_index is None:
        return None
    try:
        return nr.neuron_changes(index, other_index)
    except nr.NeuronError as err:
        st.error(markdown_text(err))
        return None
