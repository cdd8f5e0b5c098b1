"""Masked words: what the model guesses for a [MASK], layer by layer, and the attention that fed the guess."""

from functools import partial

import streamlit as st

from app_pages.widgets.common import (
    MODEL_KEY,
    cached_encoding,
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
from app_pages.widgets.common import flag_weak_head, on_slide, sidebar_place
from app_pages.widgets import ask_class
from app_pages.widgets.settings_form import setting_input
from core import numbering
from core.analyses.attention import attention_view
from core.charts import attention as attention_charts
from core.charts import masked as charts
from core.analyses.masked import (
    FILL_MASK,
    EXAMPLES,
    NoMask,
    masked_predictions,
    mlm_alternatives,
    no_head_message,
    normalise_masks,
    prepare_text,
    word_spans,
)
from core.model.loading import available_models, display_name
from core.safe_text import markdown_code, markdown_text
from core.data.corpus import CorpusError, resolve
from core.training.mlm_head import (DEFAULT_CORPUS, DEFAULT_PAIRS, DEFAULT_STEPS, PROBE_SENTENCES, FitEstimate,
                                    HeadFitError, fit_job, measure_rates)

st.title("Masked words")
intro(
    "BERT was trained by hiding words and guessing them back, so it can fill in a blank: write [MASK] in the "
    "sentence, or click words below it to hide them, and see its best guesses with their probabilities.",
    "Then watch the guess form layer by layer, and see which words the masked position attended to.",
)
example_buttons(EXAMPLES, key="masked.examples")


def use_model(name: str) -> None:
    st.session_state[MODEL_KEY] = name


def offer_models(offers) -> None:
    """One "Use …" button per model with an MLM head; one that cannot load now is disabled, with the reason."""
    weak = {e.name: e.warning for e in available_models() if e.warning}  # fitted heads under 1.5× the constant
    for offer in offers:
        # A model's name and reason come from folder names and the hub: shown as text, never as Markdown.
        st.button(f"Use {markdown_text(display_name(offer.ref))}", key=f"masked.use.{offer.ref}", on_click=use_model,
                  args=(offer.ref,), disabled=not offer.loadable, help=markdown_text(offer.reason) or None)
        if not offer.loadable:
            st.caption(markdown_text(offer.reason))
        if offer.ref in weak:
            st.caption(markdown_text(weak[offer.ref]))


def pick_words(lm, text: str, which: str) -> list[int]:
    """A row of word buttons under a sentence; the picked words are masked. Keyed by the text, so a new
    sentence starts with nothing picked."""
    shown = normalise_masks(text, lm.tokenizer.mask_token)
    words = [shown[a:b] for a, b in word_spans(lm.tokenizer, shown)]
    picked = st.pills(f"Click words of sentence {which} to mask them", list(range(len(words))),
                      selection_mode="multi", format_func=lambda i: markdown_text(words[i]), key=f"masked.pick.{which}.{text}")
    return list(picked or [])


@st.cache_data(show_spinner="Timing a few steps for the estimate…", max_entries=8, ttl=600)
def cached_fit_rates(ref: str, corpus: str, _lm) -> tuple[int, float, float]:
    """(sentences in the corpus, sentences encoded a second, head steps a second), measured on this machine; kept
    ten minutes (the machine's load changes)."""
    sentences = resolve(corpus, default_n=DEFAULT_PAIRS).sentences
    return (len(sentences), *measure_rates(_lm, sentences[:PROBE_SENTENCES]))


def fit_estimate(lm, corpus: str, steps: int) -> str:
    """The line a user reads before pressing Fit: how long it should take here, or why it cannot start."""
    try:
        count, encode_rate, step_rate = cached_fit_rates(lm.ref, corpus, lm)
    except (CorpusError, HeadFitError, ValueError) as err:
        return f"No estimate: {err}"
    return FitEstimate(count, steps, encode_rate, step_rate).text()


def fit_head_section(lm) -> None:
    """Fit a masked-word head on this encoder (frozen) as a job; when it is saved, a button opens it here."""
    st.subheader("Or fit a masked-word head for this model")
    st.caption("A head of the model's own family (dense + activation + LayerNorm + the word embeddings as decoder) "
               "is trained on its last layer with BERT's objective: 15 % of the words hidden, 80/10/10. The encoder "
               "stays as it is; the head is measured on held-out sentences against the best constant guess. "
               "Command line: python -m core fit-mlm-head.")
    form = st.columns([2, 1, 2])
    corpus = form[0].text_input("Corpus", DEFAULT_CORPUS, key="masked.fit_corpus",
                                help="a corpus spec: snli:train:20000, mrpc:train, ud, a .txt file, …")
    steps = form[1].number_input("Steps", 10, 20_000, DEFAULT_STEPS, step=100, key="masked.fit_steps")
    name = form[2].text_input("Save as", f"{display_name(lm.ref)}-mlm", key="masked.fit_name")
    st.caption(markdown_text(fit_estimate(lm, corpus, int(steps))))  # before it starts (issue 48)
    fit = job_controls("masked.fit_head", "Fit a head", (lm.ref, corpus, int(steps), name),
                       lambda: partial(fit_job, lm.ref, corpus, name, None, int(steps), 0), kind="fit-mlm-head",
                       unit="%")
    if fit is not None:
        st.success(markdown_text(
            f"Saved as {fit.name}: on {fit.held_out_words} held-out masked words it guesses {fit.top1_accuracy:.1%} "
            f"right, against {fit.constant_accuracy:.1%} for the best constant guess ('{fit.constant_word}')."))
        if fit.warning:
            st.warning(markdown_text(fit.warning), icon=":material/warning:")
        st.button(f"Use {markdown_text(fit.name)}", key="masked.use_fitted", on_click=use_model, args=(fit.name,))


def render() -> None:
    # The model first: a model that cannot load or guess is said before any sentence is typed.
    lm = model_or_error()
    if lm is None:
        return
    if lm.masked_lm is None:
        with on_slide():  # presenter mode: the class sees why there are no guesses, and the models that make them
            st.warning(markdown_text(no_head_message(lm)))
            offer_models(mlm_alternatives(lm))
        fit_head_section(lm)
        return
    flag_weak_head(lm)  # a fitted head that learned little more than one word says so above its guesses
    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} with [MASK] where a word should be guessed, or pick an example above.")
        return

    picked_a = pick_words(lm, text_a, "A")
    picked_b = pick_words(lm, text_b, "B") if text_b else []
    a = prepare_text(lm, text_a, picked_a)
    b = prepare_text(lm, text_b, picked_b) if text_b else None
    encoding = cached_encoding(model_ref(), a, b)
    warn_if_truncated(encoding)
    # Default, bounds and help: fill-mask's declaration (core.analyses.masked.FILL_MASK), as the CLI and core.lens.
    top_k = setting_input(FILL_MASK, "top_k", "Guesses per mask", key="masked.top_k", container=st.columns([1, 3])[0])
    try:
        pred = masked_predictions(lm, encoding, top_k=top_k)
    except NoMask:
        mask = lm.tokenizer.mask_token
        st.info(f"Nothing to guess yet: write {mask} in the sentence where a word should be, or click a word above "
                "to mask it.")
        return

    frame = charts.top_frame(pred)
    chart = charts.top_chart(pred, frame)
    if ask_class.render("masked", ask_class.masked_questions(lm, encoding), chart):
        return  # a class question is on screen: the guesses wait for its reveal
    st.subheader("The model's guesses")
    st.caption("Read as: " + " ".join(markdown_code(t) for t in encoding.tokens))
    draw_chart(chart, key="masked.top")
    export_buttons(chart, frame, "masked_guesses", key="masked.export_top")

    st.subheader("Layer by layer")
    st.caption(
        "The model's masked-word head applied to each layer's vector at the mask (layer 0 = the embeddings). Only the "
        "last layer was trained to feed this head: the earlier rows are a probe of what the vector already holds, "
        "not the model's output. The model's final guess is in bold."
    )
    m = 0
    if len(pred.positions) > 1:
        m = st.selectbox("Mask", list(range(len(pred.positions))), format_func=lambda i: charts.mask_label(pred, i),
                         key="masked.which")
    lens = charts.lens_frame(pred, m)
    lens_chart = charts.lens_chart(pred, m, lens)
    draw_chart(lens_chart, key="masked.lens")
    final = charts.final_frame(pred, m)
    final_chart = charts.final_chart(pred, m, final)
    draw_chart(final_chart, key="masked.final")
    export_buttons(lens_chart, lens, f"masked_layers_{m + 1}", key="masked.export_lens")

    st.subheader("Attention from the mask")
    n_layers, n_heads = encoding.attentions.shape[:2]
    controls = st.columns([1, 2])
    layer = controls[0].selectbox("Layer", list(range(n_layers)), index=n_layers - 1, key="masked.layer",
                                  format_func=numbering.label)
    heads = controls[1].multiselect("Heads (several are averaged)", list(range(n_heads)), default=list(range(n_heads)),
                                    key="masked.heads", placeholder="Pick heads")
    if not heads:
        st.info("Pick at least one head.")
        return
    view = attention_view(encoding, layer, heads)
    position = pred.positions[m]
    highlight = encoding.token_labels[position]
    st.caption(f"The lines of {markdown_text(highlight)} (in red) are shown first: how the masked position spread its attention "
               "in this layer. Point at another token to see its lines.")
    title = numbering.head_title(layer, heads)
    head_chart = attention_charts.head_view_lines(view, title, highlight=highlight)
    draw_chart(head_chart, key="masked.attention")
    st.caption(attention_charts.lines_note(view))
    table = attention_charts.view_frame(view)
    export_buttons(head_chart, table[table["query"] == highlight][["query", "key", "weight"]],
                   f"masked_attention_L{numbering.shown(layer)}", key="masked.export_attention")


render()
