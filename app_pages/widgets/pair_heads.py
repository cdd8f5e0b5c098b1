"""Paraphrase heads: the Attention page's section on MRPC pairs (call `render()`), after the bertviz MRPC report.

One batched pass over a seeded MRPC sample, run as a core.jobs job (progress and Cancel from `job_controls`); the
result is kept in st.session_state under "pairheads.run.jobstate".
"""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import (cached_encoding, cached_model, draw_chart, export_buttons, intro, job_controls, model_ref,
                                      set_example, warn_if_corpus_cut)
from core import numbering
from core.analyses.attention import attention_view
from core.charts import attention as attention_charts
from core.charts import pair_attention as charts
from core.model.encoding import run_counting_cuts
from core.model.loading import display_name
from core.analyses.heads import PAIR_DIRECTION_TITLES, PAIR_DIRECTIONS, PairHeads, mrpc_pairs, pair_heads
from core.analyses.heads.pairs import ANALYSIS, MRPC_LABELS as LABELS
from core.safe_text import markdown_text
from app_pages.widgets.settings_form import setting_input

P = "pairheads."
SPLITS = ("test", "validation", "train")
EXAMPLES = {
    "MRPC test · 200 pairs": {"split": "test", "limit": 200, "words_only": False},
    "Word pieces only · 200 pairs": {"split": "test", "limit": 200, "words_only": True},
}


def use_example(settings: dict) -> None:
    for name, value in settings.items():
        st.session_state[P + name] = value


def open_in_head_view(text_a: str, text_b: str, layer: int, head: int, direction: str) -> None:
    """Button callback: the pair into the sidebar and the head into the "One sentence" tab's head view."""
    set_example(text_a, text_b)
    st.session_state["attention.layer"] = layer
    st.session_state["attention.heads"] = [head]
    st.session_state["attention.mode"] = "Head view"
    st.session_state["attention.filter"] = PAIR_DIRECTION_TITLES[direction]
    st.session_state["attention.tab"] = "One sentence"  # only the open tab runs: switch to the head view's


def render() -> None:
    """The whole section: settings, the pass, the AUC grids, the top heads, one head's pairs, one pair's view."""
    st.subheader("Paraphrase heads (MRPC)")
    intro(
        "The bertviz MRPC report saw more attention between matching words of the two sentences in a paraphrase "
        "pair than in a non-paraphrase pair; here every head's share of attention from sentence A to B (and B to A) "
        "is measured on many MRPC pairs and split by the gold label.",
        "Red cells (AUC above 0.5) are heads that look across more in paraphrases, blue cells less; pick a head to "
        "see every pair's share and open any pair in the head view.",
    )
    st.session_state.setdefault(P + "split", "test")
    st.session_state.setdefault(P + "limit", 200)
    columns = st.columns(len(EXAMPLES))
    for column, (label, settings) in zip(columns, EXAMPLES.items()):
        column.button(label, key=f"{P}example.{label}", on_click=use_example, args=(settings,), width="stretch")
    c1, c2, c3 = st.columns(3)
    split = c1.selectbox("MRPC split", SPLITS, key=P + "split")
    limit = int(c2.number_input("Pairs (seeded sample)", 10, 5000, step=50, key=P + "limit"))
    words_only = setting_input(ANALYSIS, "words_only", "Word pieces only", key=P + "words_only", container=c3)
    ref = model_ref()
    spec = f"mrpc:{split}:{limit}"
    params = (ref, spec, words_only)

    def make_work():
        lm = cached_model(ref)
        pairs, gold, _ = mrpc_pairs(spec)

        def work(progress, should_stop):  # the result with its cuts (core.model.encoding.Counted), for the notice
            return run_counting_cuts(lambda: pair_heads(lm, pairs, gold, LABELS, words_only=words_only, corpus=spec,
                                                        progress=progress, should_stop=should_stop))

        return work

    kept = job_controls(P + "run", f"Measure {limit} MRPC pairs", params, make_work, kind="heads", unit="pairs")
    if kept is None:
        st.info("Press the button to run the model over the MRPC sample (MRPC data from the local data folder).")
        return
    result: PairHeads = kept.value
    warn_if_corpus_cut(kept)
    n = result.n_pairs
    chart, frame = charts.separation_chart(result)
    draw_chart(chart, key=P + "grid")
    st.caption(f"{n[0]} {LABELS[0]} and {n[1]} {LABELS[1]} pairs of {markdown_text(result.corpus)}, model {markdown_text(display_name(result.model))}; layers "
               "from 1, heads from 0. AUC: the chance that a random paraphrase pair has a larger share than a random "
               "non-paraphrase pair (0.5 = no difference).")
    export_buttons(chart, frame, "paraphrase-heads", P + "grid_export")

    top = result.top_heads(10)
    st.markdown("**The heads that separate the labels most**")
    st.dataframe([{**c, "direction": PAIR_DIRECTION_TITLES[c["direction"]], "layer": numbering.shown(c["layer"])}
                  for c in top], hide_index=True, key=P + "top")
    options = [(c["direction"], c["layer"], c["head"]) for c in top]
    picked = st.selectbox("Head", options, key=P + "head",
                          format_func=lambda o: f"{PAIR_DIRECTION_TITLES[o[0]]}, layer {numbering.shown(o[1])}, head {o[2]}")
    direction, layer, head = picked
    pairs_chart, pairs = charts.pairs_chart(result, direction, layer, head)
    draw_chart(pairs_chart, key=P + "pairs_chart")
    export_buttons(pairs_chart, pairs, f"pair-shares-{direction}-L{numbering.shown(layer)}-H{head}", P + "pairs_export")

    st.markdown("**Open a pair in the head view**")
    ordered = pairs.sort_values("share", ascending=False)
    index = st.selectbox("Pair", list(ordered["pair"]), key=P + "pair",
                         format_func=lambda i: f"#{i} · {result.labels[result.gold[i]]} · share "
                                               f"{result.shares[i, PAIR_DIRECTIONS.index(direction), layer, head]:.3f} · "
                                               f"{result.pairs[i][0][:60]}")
    text_a, text_b = result.pairs[index]
    st.markdown(f"A: {markdown_text(text_a)}  \nB: {markdown_text(text_b)}")
    try:
        encoding = cached_encoding(result.model, text_a, text_b)
    except Exception as err:  # the model may be gone since the pass (deleted run): say so, keep the page
        st.error(markdown_text(f"Could not encode the pair with {result.model}: {err}"))
        return
    view = attention_view(encoding, layer, [head], pair_filter=PAIR_DIRECTION_TITLES[direction])
    lines = attention_charts.head_view_lines(view, f"{numbering.head_title(layer, [head])}, {PAIR_DIRECTION_TITLES[direction]}")
    draw_chart(lines, key=P + "pair_view")
    export_buttons(lines, attention_charts.view_frame(view)[["query", "key", "weight"]],
                   f"pair-{index}-L{numbering.shown(layer)}-H{head}", P + "pair_view_export")
    st.button("Open in the “One sentence” tab", key=P + "open", icon=":material/open_in_new:",
              on_click=open_in_head_view, args=(text_a, text_b, layer, head, direction),
              help="Puts the pair in the sentence boxes and selects this head and filter in the head view.")
