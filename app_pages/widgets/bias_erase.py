"""Erase gender: the bias page's expander for one finished run (call `render`). A LEACE eraser is fitted on the
run's own vectors of the swap list's words (female side / male side) at one layer, over the experiment's training
sentences, and the run scores the swapped test pairs again with that layer's output erased for every token
(core.bias.erase_gender; a core.jobs job). The eraser is saved, so `python -m core bias --corpus ... --erase NAME`
uses it too."""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import draw_chart, export_buttons, job_controls
from core import numbering, training
from core.bias import erase_gender
from core.charts.bias import erased_flip_chart, erased_flip_frame
from core.model.loading import ModelUnavailable, load_model, model_num_layers
from core.safe_text import markdown_text

P = "bias.erase."
FIT_SENTENCES = 4000  # training sentences read for the listed words (pairs give both sides)


def render(run: str, training_examples, test_examples, swaps, corpus: str) -> None:
    with st.expander("Erase gender"):
        st.markdown("Remove the direction that tells the swap list's female words from its male words out of one "
                    "layer of this run (LEACE), then score the swapped test pairs again. If the flips mostly go "
                    "away, the run's gender flips travel through that direction.")
        try:
            n_layers = model_num_layers(run)
        except (ModelUnavailable, ValueError, OSError) as err:
            st.caption(markdown_text(f"The run cannot be read here, so nothing can be erased: {err}"))
            return
        st.session_state.setdefault(P + "layer", n_layers - 1)
        index = st.selectbox("Layer to erase", list(range(n_layers)), key=P + "layer", format_func=numbering.label,
                             help="Layers numbered as on every chart: 1 = the first transformer layer.")
        texts = [t for e in training_examples for t in (e.text, e.text_b) if t][:FIT_SENTENCES]

        def make_work():
            lm = load_model(run)
            clf = training.load_classifier(run, attention="sdpa")

            def work(progress, should_stop):
                fit = erase_gender.fit_gender_eraser(lm, texts, index, swaps, progress=progress,
                                                     should_stop=should_stop)
                flips = erase_gender.erased_flips(clf, test_examples, fit.saved, swaps, should_stop=should_stop)
                return fit, flips

            return work

        done = job_controls(P + "job", "Erase and score", (run, corpus, tuple(swaps), index, len(texts)), make_work,
                            kind="bias_erase", unit="sentences")
        if done is None:
            return
        fit, flips = done
        k = st.columns(3)
        k[0].metric("Flip rate, as trained", f"{flips.flip_rate_before:.1%}")
        k[1].metric(f"Gender erased at layer {flips.layer}", f"{flips.flip_rate_after:.1%}",
                    f"{(flips.flip_rate_after - flips.flip_rate_before) * 100:+.1f} points", delta_color="inverse")
        k[2].metric("Probe on held-out listed words", f"{fit.probe_after:.1%}",
                    f"{(fit.probe_after - fit.probe_before) * 100:+.1f} points from {fit.probe_before:.1%}")
        frame = erased_flip_frame(run, flips)
        chart = erased_flip_chart(frame)
        draw_chart(chart, key=P + "chart")
        st.caption(markdown_text(
            f"Over {flips.swappable:,} swappable test pairs of {corpus}. Eraser {fit.saved.name} (rank "
            f"{fit.saved.eraser.rank}) fitted on {fit.n_words:,} listed words of the training sentences; a fresh "
            f"probe then tells the lists apart {fit.probe_after:.1%} of the time (always guessing the larger list: "
            f"{fit.majority:.1%})."))
        export_buttons(chart, frame, f"{run}_erase_gender", key=P + "export")
