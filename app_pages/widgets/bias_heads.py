"""Which heads carry the flips? The bias page's expander for one finished run (call `render`): core.bias.heads
patches every flipping swap head by head (a core.jobs job: one [layer, head] grid per pair), ranks the heads by mean
recovery and disables the top k to score the flip rate again."""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import export_buttons, job_controls
from app_pages.widgets.settings_form import setting_input
from core import training
from core.bias import heads as bias_heads
from core.bias_settings import BIAS_HEADS
from core.charts.bias import head_ranking_frame
from core.safe_text import markdown_text

P = "bias.heads."
SHOWN = 10  # heads listed; the CSV holds every head


def render(run: str, examples, swaps, corpus: str) -> None:
    with st.expander("Which heads carry the flips?"):
        st.markdown("Each swap that flips this run's prediction is patched head by head from the original into the "
                    "swapped input; a head's recovery is how much of the original prediction it brings back. The top "
                    "heads are then disabled to see whether the flips go away.")
        settings = st.columns(2)
        # Defaults, bounds and help from the declaration (core.bias_settings.BiasHeadsSettings), as the CLI's.
        top_k = int(setting_input(BIAS_HEADS, "top_k", "Heads to disable (top k)", key=P + "top_k",
                                  container=settings[0]))
        limit = int(setting_input(BIAS_HEADS, "limit", "Flipping pairs patched at most", key=P + "limit",
                                  container=settings[1]))

        def make_work():
            clf = training.load_classifier(run)

            def work(progress, should_stop):
                return bias_heads.bias_heads(clf, examples, swaps, top_k=top_k, limit=limit, corpus=corpus, run=run,
                                             progress=progress, should_stop=should_stop)

            return work

        result = job_controls(P + "job", "Find the heads", (run, corpus, tuple(swaps), top_k, limit), make_work,
                              kind="bias_heads", unit="pairs")
        if result is None:
            return
        k = st.columns(3)
        k[0].metric("Flip rate, model intact", f"{result.flip_rate_before:.1%}")
        k[1].metric(f"Top {result.top_k} heads disabled", f"{result.flip_rate_after:.1%}",
                    f"{(result.flip_rate_after - result.flip_rate_before) * 100:+.1f} points", delta_color="inverse")
        k[2].metric("Flipping pairs patched", f"{result.patched_pairs:,} of {result.flips:,}")
        if result.skipped:
            st.caption(f"{result.skipped:,} flipping pairs were left out: the swap changed their number of word "
                       "pieces, so they cannot be patched position by position.")
        st.caption(f"Over {result.swappable:,} swappable test pairs; heads disabled by zeroing their output "
                   f"(mode {result.mode}).")
        for warning in result.warnings:  # above the ranking it qualifies
            st.warning(markdown_text(warning.message), icon=":material/warning:")
        frame = head_ranking_frame(result)
        st.dataframe(frame.head(SHOWN).style.format({"mean recovery": "{:.3f}"}), hide_index=True, width="stretch")
        export_buttons(None, frame, f"{run}_bias_heads", key=P + "export")
