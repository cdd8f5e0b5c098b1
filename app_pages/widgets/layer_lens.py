"""Read the layers: the Lens tab (call `render()`). The MLM head's top guess at every layer and token of the
sidebar's sentence (core.analyses.logit_lens) from the page's cached forward pass, one cell's top-k, KL to the final
layer for the logit and tuned lens, and fitting a tuned lens as a core.jobs job (progress, Cancel)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.widgets.common import (
    cached_encoding,
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
from app_pages.widgets.common import flag_weak_head, on_slide, sidebar_place
from app_pages.widgets.corpus_picker import corpus_picker
from app_pages.widgets.settings_form import setting_input
from core.analyses import logit_lens as lenses
from core.charts import layer_lens as charts
from core.model import artefacts
from core.model.loading import model_version
from core.safe_text import markdown_text

P = "layers.lens."
KIND, NAME, TOP_K, LAYER, TOKEN = P + "kind", P + "name", P + "top_k", P + "layer", P + "token"
FIT_JOB, GRID = P + "fit", P + "grid"
KIND_LABELS = {"logit": "Logit lens (the head as it is)", "tuned": "Tuned lens (a fitted translator per layer)"}


def _lens_stamp(name: str | None) -> float:
    """The saved lens's modification time: a lens fitted again under the same name is read again."""
    if not name:
        return 0.0
    try:
        return (Path(artefacts.find_artefact("tuned-lens", name).path) / lenses.LENS_FILE).stat().st_mtime
    except (OSError, ValueError):
        return 0.0


@st.cache_data(max_entries=16, show_spinner=False)
def cached_lens(ref: str, version, text_a: str, text_b: str | None, name: str | None, stamp: float, top_k: int):
    """The lens over the page's shared forward pass (cached_encoding): only the head runs here."""
    lm = cached_model(ref)
    encoding = cached_encoding(ref, text_a, text_b)
    translators = lenses.load_lens(name, lm) if name else None
    return lenses.read_layers(lm, encoding.hidden_states, encoding.special_mask, encoding.tokens,
                              translators=translators, top_k=top_k)


def pick_clicked_cell() -> None:
    """A click on a grid cell: its layer and token in the select boxes below, whose top-k chart follows."""
    picked = st.session_state[GRID].selection.get(charts.CELL_SELECTION) or []
    if picked:
        st.session_state[LAYER], st.session_state[TOKEN] = int(picked[0]["layer"]), int(picked[0]["position"])


def _fit_section(lm) -> None:
    with st.expander("Fit a tuned lens for this model", expanded=not lenses.lenses_for(lm.ref)):
        st.caption("The model stays frozen; one affine translator per layer is fitted so that layer's guesses match "
                   "the final layer's (KL). The last tenth of the corpus is held out and scored for both lenses.")
        corpus = corpus_picker(P + "fit.", default_n=500)
        columns = st.columns(2)
        # Default and help: fit-tuned-lens's declaration; the page keeps a fit under a few minutes (5000 steps).
        steps = int(setting_input(lenses.FIT_TUNED_LENS, "steps", "Steps", key=P + "fit.steps", container=columns[0],
                                  high=5000, step=50))
        st.session_state.setdefault(P + "fit.name", f"{Path(lm.ref).name}-lens")
        name = columns[1].text_input("Save as", key=P + "fit.name")
        if corpus is None:
            return
        try:
            name = lenses.check_name(name)
        except ValueError as err:
            st.error(markdown_text(err))
            return
        ref, items = lm.ref, corpus.sentences

        def make_work():
            model = cached_model(ref)
            return lambda progress, should_stop: lenses.fit_tuned_lens(
                model, items, name, corpus=corpus.name, steps=steps, progress=progress, should_stop=should_stop)

        fitted = job_controls(FIT_JOB, "Fit the tuned lens", (ref, corpus.name, len(items), steps, name), make_work,
                              unit="steps", load_result=lenses.FittedLens.from_json,
                              cancelled_note="Cancelled: no lens was saved.")
        if fitted is not None:
            st.success(markdown_text(f"Saved tuned lens '{fitted.name}' ({fitted.train_tokens} tokens, "
                                     f"{fitted.steps} steps). Held-out KL to the final layer, logit → tuned: ")
                       + ", ".join(f"layer {l}: {a:.3g} → {b:.3g}" for l, (a, b) in
                                   enumerate(zip(fitted.kl_logit_held_out[:-1], fitted.kl_tuned_held_out[:-1]))))


def render() -> None:
    intro("Each cell is the masked-word head's best guess for that token, read from that layer's vector: the logit "
          "lens reads it as it is, the tuned lens through a small translator fitted per layer.",
          "Watch where the guesses settle on the model's own output (the last layer), click a cell's layer and token "
          "below for its top guesses, and compare how far each layer is from the output.")
    example_buttons({label: (text, None) for label, text in lenses.EXAMPLES.items()}, key=P + "examples")
    lm = model_or_error()
    if lm is None:
        return
    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Write a sentence in {sidebar_place()} (or pick an example above) to read it layer by layer.")
        return
    if lm.masked_lm is None:
        with on_slide():  # presenter mode: on the slide, where the grid would be
            st.warning(markdown_text(lenses.no_head_message(lm)))
        return
    flag_weak_head(lm)
    saved = lenses.lenses_for(lm.ref)
    if st.session_state.get(NAME) not in saved:
        st.session_state[NAME] = saved[0] if saved else None
    columns = st.columns([2, 2, 1])
    # kind and top-k: the lens's declaration (core.analyses.logit_lens.LENS), as the CLI and core.lens offer them.
    kind = setting_input(lenses.LENS, "kind", "Lens", key=KIND, container=columns[0], format_func=KIND_LABELS.get)
    name = columns[1].selectbox("Tuned lens", saved, key=NAME, disabled=not saved,
                                placeholder="none fitted for this model yet")
    top_k = int(setting_input(lenses.LENS, "top_k", "Top-k", key=TOP_K, container=columns[2]))
    ref, version = model_ref(), model_version(model_ref())
    try:
        logit = cached_lens(ref, version, text_a, text_b, None, 0.0, top_k)
        tuned = cached_lens(ref, version, text_a, text_b, name, _lens_stamp(name), top_k) if name else None
    except ValueError as err:  # a lens that does not fit this model (refused with the reason)
        st.error(markdown_text(err))
        return
    warn_if_truncated(cached_encoding(ref, text_a, text_b))
    if kind == "tuned" and tuned is None:
        st.info("No tuned lens is fitted for this model yet: fit one below. Showing the logit lens.")
    shown = tuned if kind == "tuned" and tuned is not None else logit
    grid = charts.grid_chart(shown)
    draw_chart(grid, key=GRID, on_select=pick_clicked_cell, selection_mode=charts.CELL_SELECTION)
    export_buttons(grid, lambda: charts.grid_frame(shown), "layer-lens-grid", P + "grid.export")

    st.subheader("One cell's top guesses")
    st.caption("Click a cell of the grid, or pick its layer and token here.")
    n_layers, n_tokens = len(shown.layers), len(shown.tokens)
    if not 0 <= int(st.session_state.get(LAYER) or 0) < n_layers:
        st.session_state[LAYER] = n_layers - 1
    if not 0 <= int(st.session_state.get(TOKEN) or 0) < n_tokens:
        st.session_state[TOKEN] = min(1, n_tokens - 1)
    st.session_state.setdefault(LAYER, n_layers - 1)
    st.session_state.setdefault(TOKEN, min(1, n_tokens - 1))
    pick = st.columns(2)
    layer = pick[0].selectbox("Layer", list(shown.layers), key=LAYER)
    token = pick[1].selectbox("Token", list(range(n_tokens)), key=TOKEN,
                              format_func=lambda i: charts.token_labels(shown.tokens)[i])
    cell = charts.cell_chart(shown, layer, token)
    draw_chart(cell, key=P + "cell")
    export_buttons(cell, lambda: charts.cell_frame(shown, layer, token), "layer-lens-cell", P + "cell.export")

    st.subheader("How far is each layer from the output?")
    kl = charts.kl_chart(logit, tuned)
    draw_chart(kl, key=P + "kl")
    export_buttons(kl, lambda: charts.kl_frame(logit, tuned), "layer-lens-kl", P + "kl.export")
    _fit_section(lm)
