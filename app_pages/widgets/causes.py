"""What causes it? The Attention heads page's activation patching tab (call `render()`): a clean / corrupted pair,
the [layer, head] and [layer, position] recovery heatmaps (core.analyses.patching), a click on a head opening it in
the head view. Both grids of a pair are one core.jobs job (progress, Cancel): exact patching of bert-base takes
~20 s a pair on a busy CPU (bench/RESULTS.md), attribution patching a few seconds."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.widgets.common import (
    SENTENCE_A_KEY,
    SENTENCE_B_KEY,
    cached_model,
    draw_chart,
    export_buttons,
    job_controls,
    model_or_error,
    model_ref,
)
from core import numbering
from core.analyses import patching
from core.charts import patching as charts
from core.data.examples import PATCHING_EXAMPLES
from core.model.loading import ModelUnavailable
from core.safe_text import markdown_text
from core.training import is_classifier_folder, load_classifier
from core.views.attention import PATCH_METHODS, patching_work

P = "causes."
HEADS_CHART, JOB = P + "heads_chart", P + "patching"


@st.cache_resource(max_entries=2, show_spinner="Loading the run's classifier…")
def cached_classifier(ref: str):
    return load_classifier(ref)


def use_example(clean: str, corrupt: str, target: str) -> None:
    st.session_state[P + "clean"], st.session_state[P + "corrupt"], st.session_state[P + "target"] = clean, corrupt, target


def open_clicked_head() -> None:
    """A click on a [layer, head] cell: that head, on the clean sentence, in the "One sentence" tab's head view."""
    picked = st.session_state[HEADS_CHART].selection.get(charts.HEAD_SELECTION) or []
    if picked:
        st.session_state["attention.layer"] = numbering.index_of(picked[0]["layer"])  # the chart shows 1..L
        st.session_state["attention.heads"] = [int(picked[0]["cell"])]
        st.session_state["attention.mode"] = "Head view"
        st.session_state["attention.tab"] = "One sentence"
        st.session_state[SENTENCE_A_KEY], st.session_state[SENTENCE_B_KEY] = st.session_state[P + "clean"], ""


def render() -> None:
    st.markdown("Attention shows where a head looks, not what the model uses. Here one head (or one word's "
                "hidden state) at a time is copied from a clean sentence into a corrupted one, and the chart shows "
                "how much of the clean answer comes back.")
    columns = st.columns(len(PATCHING_EXAMPLES))
    for column, (label, pair) in zip(columns, PATCHING_EXAMPLES.items()):
        column.button(label, key=f"{P}example.{label}", on_click=use_example, args=pair, width="stretch")
    lm = model_or_error()
    if lm is None:
        return
    ref = model_ref()
    classifier = is_classifier_folder(Path(lm.path))
    for name, value in zip(("clean", "corrupt", "target"), next(iter(PATCHING_EXAMPLES.values()))):
        st.session_state.setdefault(P + name, value)
    top = st.columns(2)
    # Named by what it is: whether the model gets it right is measured below (a clean_not_top warning), not assumed.
    clean = top[0].text_input("Clean sentence", key=P + "clean")
    corrupt = top[1].text_input("Corrupted sentence (one word swapped, same length)", key=P + "corrupt")
    settings = st.columns(2)
    target = label = None
    if classifier:
        labels = tuple(cached_classifier(ref).labels)
        if st.session_state.get(P + "class") not in labels:
            st.session_state[P + "class"] = labels[0]
        label = settings[0].selectbox("Class whose logit is measured", labels, key=P + "class")
    else:
        target = settings[0].text_input("Target word (scored at the clean sentence's [MASK])", key=P + "target")
    st.session_state.setdefault(P + "method", "exact")
    method = settings[1].segmented_control("Method", tuple(PATCH_METHODS), format_func=PATCH_METHODS.get,
                                           key=P + "method", required=True) or "exact"
    if not clean or not corrupt:
        st.info("Type a clean and a corrupted sentence, or pick a pair above.")
        return
    try:
        subject = cached_classifier(ref) if classifier else cached_model(ref)
        work = patching_work(subject, clean, corrupt, label if classifier else target, method)
    except (patching.PatchingError, ModelUnavailable) as err:
        st.error(markdown_text(str(err)))
        return
    result = job_controls(JOB, "Patch", (ref, clean, corrupt, target, label, method), lambda: work, unit="cells",
                          autostart=True, hide_stale=True)
    if result is None:
        return
    heads, positions, *exact = result
    st.caption(f"Metric: {markdown_text(heads.metric)} — clean {heads.clean_metric:.4f}, corrupted "
               f"{heads.corrupt_metric:.4f}, gap {heads.gap:.4f}. Recovered = (patched − corrupted) / (clean − corrupted): 1 restores the "
               f"clean answer, 0 changes nothing." + (" Attribution: a gradient estimate, not a patched run."
                                                     if method != "exact" else ""))
    for warning in heads.warnings:  # above the grids they qualify; both grids share the pair's metrics
        st.warning(markdown_text(warning.message), icon=":material/warning:")
    if exact:
        r_heads, r_positions = (patching.correlation(e, a) for e, a in zip(exact, (heads, positions)))
        st.caption(f"Attribution patching against exact patching on this pair (Pearson r over the cells): heads "
                   f"{r_heads:.3f}, positions {r_positions:.3f}. The charts below show the attribution estimate.")
    heads_chart = charts.patching_chart(heads, selectable=True)
    draw_chart(heads_chart, key=HEADS_CHART, on_select=open_clicked_head, selection_mode=charts.HEAD_SELECTION)
    st.caption("Click a head to open it in the head view of the clean sentence.")
    export_buttons(heads_chart, lambda: charts.patching_frame(heads), "patching_heads", key=P + "export_heads")
    positions_chart = charts.patching_chart(positions)
    draw_chart(positions_chart, key=P + "positions_chart")
    export_buttons(positions_chart, lambda: charts.patching_frame(positions), "patching_positions",
                   key=P + "export_positions")

