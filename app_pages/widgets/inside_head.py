"""Inside a head: the "Inside a head" section of the attention page (call `render()`), and the "weights"
control the head view and model view share (`weights_control`, `matrix_to_draw`).

The neuron view and the norms of the sidebar's sentence are cached per (model, text, layer/head/query); the
dataset shares run as a core.jobs job started by their button (progress and Cancel from `job_controls`).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app_pages.widgets.common import (
    cached_model,
    draw_chart,
    example_buttons,
    export_buttons,
    intro,
    job_controls,
    model_or_error,
    model_ref,
    sentences,
    warn_if_truncated,
)
from app_pages.widgets.common import sidebar_place
from app_pages.widgets.corpus_picker import corpus_picker
from core import numbering
from core.analyses import inside_head as ih
from core.analyses.attention import pair_masks
from app_pages.widgets.settings_form import setting_input
from core.analyses.explain import rollout
from core.charts import inside_head as charts
from core.data.examples import EXAMPLES
from core.model.loading import display_name
from core.safe_text import markdown_text
from core.model.encoding import read_input

P = "inside."
WEIGHTS_KEY = "attention.weights"
RAW, NORM, ROLLOUT = "raw attention", "norm-weighted (Kobayashi et al. 2020)", "attention rollout (Abnar & Zuidema 2020)"
WEIGHT_OPTIONS = (RAW, NORM, ROLLOUT)
FINDING = (
    "Kobayashi et al. (2020) found that in BERT-base, contrary to the weight-based analyses (Clark et al. 2019: "
    "much attention on [SEP] and [CLS]), the norm-based analysis shows little attention to special tokens: their "
    "transformed vectors f(x) are small, so the heavy weight carries little. The paper's per-layer numbers could "
    "not be read here, so no published line is drawn; and the paper sums ‖α f(x)‖ per category without rescaling "
    "each row, where this chart shows shares; their code (emnlp2020/exp1_bert/re-examine.py) counts only periods "
    "and commas as punctuation, where this chart counts every punctuation mark."
)


@st.cache_data(show_spinner="Computing ‖α f(x)‖…", max_entries=16)
def cached_norms(ref: str, text_a: str, text_b: str | None) -> ih.AttentionNorms:
    return ih.attention_norms(cached_model(ref), text_a, text_b)


NEURON = ih.ANALYSES[0]  # the neuron view's declaration: its defaults, bounds and choices


@st.cache_data(show_spinner="Reading q and k…", max_entries=64)
def cached_neuron(ref: str, text_a: str, text_b: str | None, layer: int, head: int, query: int,
                  pair_filter: str = "all") -> ih.NeuronView:
    return ih.neuron_view(cached_model(ref), text_a, text_b, layer, head, query, pair_filter)


def weights_control(container=st) -> str:
    """The head view's and model view's "weight by vector norm" choice (key `attention.weights`)."""
    st.session_state.setdefault(WEIGHTS_KEY, RAW)
    return container.selectbox("Weights", WEIGHT_OPTIONS, key=WEIGHTS_KEY,
                               help="Norm-weighted: each attention α_ij times the length of what token j actually "
                                    "passes on, ‖f(x_j)‖ (value vector through the output projection), each row "
                                    "rescaled to sum to 1.")


def matrix_to_draw(choice: str, encoding, text_a: str, text_b: str | None) -> tuple[np.ndarray, str | None]:
    """The [layer, head, query, key] matrix for the head view / model view, and a caption (None for raw)."""
    if choice == ROLLOUT:
        flow = rollout(encoding.attentions)  # [L, T, T]; heads are averaged first, so every head shows the same
        note = ("Attention rollout (Abnar & Zuidema 2020): each layer's head-averaged attention mixed with the identity "
                "(0.5·A + 0.5·I, rows renormalised) and multiplied through the layers up to this one, so a row shows "
                "how much of each input token has reached that token. It is one matrix per layer: every head shows it.")
        return np.repeat(flow[:, None], encoding.attentions.shape[1], axis=1), note
    if choice != NORM:
        return encoding.attentions, None
    norms = cached_norms(model_ref(), text_a, text_b)
    note = ("Norm-weighted: ‖α_ij f(x_j)‖ (Kobayashi et al. 2020), each row rescaled to sum to 1, so a key with a "
            "big weight but a short transformed vector f(x) fades.")
    return ih.row_shares(norms.norms).astype(np.float32), note


def _in_range(key: str, size: int, default: int) -> int:
    st.session_state.setdefault(key, min(default, size - 1))
    st.session_state[key] = min(int(st.session_state[key]), size - 1)
    return st.session_state[key]


def render() -> None:
    intro(
        "Why does a head look where it does? Each token's query vector q is multiplied dimension by dimension with "
        "every key vector k; the sums, scaled and passed through a softmax, are the head view's attention.",
        "Pick a layer, a head and a query token, then point at a dimension of q⊙k to see it across all keys; below, "
        "compare raw attention with attention weighted by the size of what each token passes on.",
    )
    example_buttons(EXAMPLES, key=P + "examples")
    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} (and optionally a second one), or pick an example above.")
    else:
        sentence_part(text_a, text_b)
    st.divider()
    dataset_part()


def sentence_part(text_a: str, text_b: str | None) -> None:
    lm = model_or_error()
    if lm is None:
        return
    ref = model_ref()
    item = read_input(lm, text_a, text_b)
    warn_if_truncated(item)
    try:
        norms = cached_norms(ref, text_a, text_b)
    except ih.InsideHeadError as err:
        st.error(markdown_text(err))
        return
    labels = [f"{i}·{t}" for i, t in enumerate(norms.tokens)]
    n_layers, n_heads = norms.norms.shape[:2]
    _in_range(P + "layer", n_layers, numbering.default_head_layer(n_layers))
    _in_range(P + "head", n_heads, NEURON.field("head").default)
    _in_range(P + "query", len(labels), NEURON.field("query").default)
    cols = st.columns(4 if text_b else 3)
    layer = setting_input(NEURON, "layer", "Layer", key=P + "layer", container=cols[0], high=n_layers - 1)
    head = cols[1].selectbox("Head", list(range(n_heads)), key=P + "head")
    pair_filter = "all"
    if text_b:  # bertviz's neuron view filter: a query of one sentence against the keys of the other
        pair_filter = setting_input(NEURON, "pair_filter", "Sentence filter", key=P + "filter", container=cols[3])
    rows, _ = pair_masks(item.segment_ids[:len(labels)], pair_filter)
    queries = [i for i in range(len(labels)) if rows[i]]
    if st.session_state[P + "query"] not in queries:
        st.session_state[P + "query"] = queries[0]
    query = cols[2].selectbox("Query token", queries, key=P + "query", format_func=lambda i: labels[i])
    try:
        view = cached_neuron(ref, text_a, text_b, layer, head, query, pair_filter)
    except ih.InsideHeadError as err:
        st.error(markdown_text(err))
        return
    st.subheader("Neuron view")
    chart = charts.neuron_chart(view)
    draw_chart(chart, key=P + "neuron_chart")
    top = view.positions()[int(np.argmax(view.attention))]  # a token position (the filter may keep some keys)
    bias_note = " plus the model's relative position bias" if view.bias.any() else ""
    if view.terms:  # DeBERTa's disentangled attention
        terms = round(view.scale ** 2 / view.query.shape[0])  # DeBERTa divides by √(d · its number of terms)
        score_note = (f"Score = c2c (the sum of the q⊙k row / {view.scale:.2f}, i.e. √(d·{terms})) + c2p (the query's "
                      "content against where each key sits relative to it) + p2c (where the query sits relative to "
                      "each key, against the key's content); the terms panel beside the scores draws the three apart")
    else:
        score_note = f"Score = sum of the q⊙k row / √{view.query.shape[0]}{bias_note}"
    st.caption(f"{score_note}; its softmax is row {markdown_text(labels[query])} of "
               f"the head view. This head's query looks most at {markdown_text(labels[top])} ({view.attention.max():.2f}).")
    if view.visible is not None and not view.visible.all():
        st.caption(f"Layer {numbering.shown(layer)} is a local (sliding-window) layer: this query sees only "
                   f"{int(view.visible.sum())} nearby keys; the grey ones get no attention whatever their score.")
    if view.rotated:
        st.caption("q and k are shown after the rotary position embedding, as the score uses them: the same word "
                   "gives other vectors at other positions.")
    table = charts.neuron_table(view)
    export_buttons(chart, table, f"neuron_L{numbering.shown(layer)}_H{head}_Q{query}", key=P + "neuron_export")

    st.subheader("Does a big weight mean a big effect?")
    frame = charts.row_frame(norms, layer, head, query)
    row = charts.row_chart(frame, f"Row {labels[query]}: raw vs norm-weighted (layer {numbering.shown(layer)}, head {head})")
    draw_chart(row, key=P + "row_chart")
    st.caption("Norm-weighted: α_ij·‖f(x_j)‖ with f the head's value projection followed by its slice of the output "
               "projection (Kobayashi et al. 2020), rescaled so the row sums to 1. Hover a bar for ‖f(x)‖.")
    export_buttons(row, frame, f"norm_row_L{numbering.shown(layer)}_H{head}_Q{query}", key=P + "row_export")


def dataset_part() -> None:
    st.subheader("Over a dataset: raw vs norm-weighted attention to [CLS], [SEP], punctuation and other tokens")
    ref = model_ref()
    corpus = corpus_picker(P, label="Sample", n_key=P + "limit", n_label="Examples")
    if corpus is None:
        return
    inputs = corpus.inputs
    params = (ref, corpus.name, corpus.digest)

    def make_work():
        lm = cached_model(ref)

        def work(progress, should_stop):
            return ih.norm_shares(lm, inputs, corpus=corpus.name, progress=progress, should_stop=should_stop)

        return work

    kept = job_controls(P + "shares", f"Run {display_name(ref)} over {len(inputs)} examples", params, make_work,
                        kind="attention-norms", unit="examples")
    if kept is None:
        st.info("Press the button to pass the sample through the model (nothing is computed until then).")
        return
    chart, frame = charts.shares_chart(kept)
    draw_chart(chart, key=P + "shares_chart")
    if notice := kept.truncation_notice():  # numbers only: safe as Markdown
        st.warning(notice)
    st.caption("Per input: each query's attention row (raw, or ‖α f(x)‖ rescaled to sum to 1) summed over the "
               "category's keys, averaged over queries and heads, then over inputs. [CLS]/[SEP] are the tokenizer's "
               "own (<s>/</s> for RoBERTa); punctuation is any punctuation-only piece. " + FINDING)
    export_buttons(chart, frame, "norm_shares", key=P + "shares_export")
