"""Which heads carry the flips? The bias page's expander for one finished run (call `render`): core.bias.heads
patches every flipping swap head by head (a core.jobs job: one [layer, head] grid per pair), ranks the heads by mean
recovery and disables the top k to score the flip rate again."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.widgets.common import export_buttons, job_controls
from core import numbering, training
from core.bias import heads as bias_heads
from core.safe_text import markdown_text

P = "bias.heads."
SHOWN = 10  # heads listed; the CSV holds every head


def ranking_frame(result: bias_heads.BiasHeads) -> pd.DataFrame:
    """Every head, highest mean recovery first, the disabled ones marked."""
    return pd.DataFrame([{"rank": rank + 1, "layer": numbering.shown(layer), "head": head,
                          "mean recovery": float(result.recovery[layer, head]), "disabled": rank < result.top_k}
                         for rank, (layer, head) in enumerate(result.ranking)])


def render(run: str, examples, swaps, corpus: str) -> None:
    with st.expander("Which heads carry the flips?"):
        st.markdown("Each swap that flips this run's prediction is patched head by head from the original into the "
                    "swapped input; a head's recovery is how much of the original prediction it brings back. The top "
                    "heads are then disabled to see whether the flips go away.")
        settings = st.columns(2)
        top_k = int(settings[0].number_input("Heads to disable (top k)", 1, 50, bias_heads.DEFAULT_TOP_K, key=P + "top_k"))
        limit = int(settings[1].number_input("Flipping pairs patched at most", 1, 1000, bias_heads.DEFAULT_PAIRS,
                                             key=P + "limit"))

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
        frame = ranking_frame(result)
        st.dataframe(frame.head(SHOWN).style.format({"mean recovery": "{:.3f}"}), hide_index=True, width="stretch")
        export_buttons(None, frame, f"{run}_bias_heads", key=P + "export")
