"""Attention heads: every head of every layer for the sidebar's sentence (or pair)."""

import streamlit as st

from app_pages.widgets.common import (
    cached_encoding,
    draw_chart,
    model_or_error,
    example_buttons,
    export_buttons,
    intro,
    model_ref,
    sentences,
    warn_if_truncated,
)
from app_pages.widgets.common import sidebar_place
from core import numbering
from core.charts import attention as charts
from core.analyses import attention as head_view
from core.analyses import model_view as model_views
from core.analyses.attention import attention_view
from core.analyses.model_view import SCALES, model_view
from app_pages.widgets.attention_dataset import render as render_heads_over_dataset
from app_pages.widgets import ask_class, causes, inside_head
from app_pages.widgets import pair_heads
from app_pages.widgets.analysis_tab import page_tabs
from app_pages.widgets.settings_form import setting_input
from core.data.examples import EXAMPLES, MRPC_REPORT_EXAMPLES
from core.views.attention import CAUSES, DATASET, INSIDE, ONE_SENTENCE, tab_renderers

st.title("Attention heads")
intro(
    "Each layer of BERT has several attention heads; each head decides, for every word piece, which other pieces "
    "to look at, and the lines and squares below show how strongly.",
    "Pick a layer and heads for a close look, or open the model view to see all heads at once and click one.",
)


def render_one_sentence() -> None:
    """The "One sentence" tab: head view and model view of the sidebar's sentence (or pair)."""
    example_buttons(EXAMPLES, key="attention.examples")
    example_buttons(MRPC_REPORT_EXAMPLES, key="attention.mrpc_report")  # the two pairs report 004 viewed

    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} (and optionally a second one), or pick an example above.")
        return

    if model_or_error() is None:
        return
    encoding = cached_encoding(model_ref(), text_a, text_b)
    warn_if_truncated(encoding)

    n_layers, n_heads = encoding.attentions.shape[:2]
    st.session_state.setdefault("attention.layer", numbering.default_head_layer(n_layers))
    st.session_state.setdefault("attention.heads", list(head_view.ANALYSIS.field("heads").default))
    # A model with fewer layers/heads than the last one: keep the choice in range.
    st.session_state["attention.layer"] = min(st.session_state["attention.layer"], n_layers - 1)
    st.session_state["attention.heads"] = [h for h in st.session_state["attention.heads"] if h < n_heads] or [0]


    def open_clicked_head() -> None:
        """Model view click: show that head in the head view."""
        picked = st.session_state["attention.model_view"].selection.get(charts.MODEL_VIEW_SELECTION) or []
        if picked:
            st.session_state["attention.layer"] = numbering.index_of(picked[0]["layer"])  # the chart shows 1..L
            st.session_state["attention.heads"] = [int(picked[0]["head"])]
            st.session_state["attention.mode"] = "Head view"


    st.session_state.setdefault("attention.mode", "Head view")
    top = st.columns([1, 1])
    with top[0]:
        mode = st.segmented_control("View", ["Head view", "Model view"], key="attention.mode") or "Head view"
    matrix, weights_note = inside_head.matrix_to_draw(inside_head.weights_control(top[1]), encoding, text_a, text_b)
    if weights_note:
        st.caption(weights_note)

    if mode == "Model view":
        render_model_view(encoding, matrix, open_clicked_head)
        return

    controls = st.columns([1, 2, 1])
    # layer, filter and the two switches: default, choices and help from the declaration (core.analyses.attention)
    layer = setting_input(head_view.ANALYSIS, "layer", "Layer", key="attention.layer", container=controls[0],
                          high=n_layers - 1)
    heads = controls[1].multiselect(
        "Heads (several are averaged)", list(range(n_heads)), key="attention.heads", placeholder="Pick heads"
    )
    pair_filter = "all"
    if encoding.is_pair:
        pair_filter = setting_input(head_view.ANALYSIS, "pair_filter", "Sentence filter", key="attention.filter",
                                    container=controls[2])
    options = st.columns(3)
    hide_special = setting_input(head_view.ANALYSIS, "hide_special", "Hide [CLS]/[SEP]", key="attention.hide_special",
                                 container=options[0])
    word_level = setting_input(head_view.ANALYSIS, "word_level", "Whole words", key="attention.word_level",
                               container=options[1])
    style = options[2].radio("Draw as", ["Lines", "Heatmap"], key="attention.style", horizontal=True)

    if not heads:
        st.info("Pick at least one head.")
        return

    view = attention_view(encoding, layer, heads, pair_filter=pair_filter, hide_special=hide_special, word_level=word_level,
                          attentions=matrix)
    notes = []
    if len(heads) > 1:
        notes.append(f"average of heads {', '.join(map(str, heads))}")
    if hide_special:
        notes.append("special tokens hidden and each row rescaled to sum to 1 over the tokens left")
    if word_level:
        notes.append("word pieces merged: attention *to* a word is summed over its pieces, *from* a word averaged")
    if pair_filter != "all":
        notes.append(f"only {pair_filter} shown, not rescaled (a row's sum is the share that goes to that sentence)")
    if notes:
        st.caption("; ".join(notes).capitalize() + ".")

    title = numbering.head_title(layer, heads)
    if style == "Lines":
        show_all = st.session_state.get("attention.show_all", False)
        limits = {"threshold": 0.0, "top_k": None} if show_all else {}
        chart = charts.head_view_lines(view, title, **limits)
    else:
        chart = charts.attention_heatmap(view, title)
    if ask_class.render("attention", ask_class.attention_questions(encoding, layer, heads, matrix), chart):
        return  # a class question is on screen: the head's lines wait for its reveal
    draw_chart(chart, key="attention.chart")
    if style == "Lines":
        st.caption(charts.lines_note(view, **limits))
        st.toggle("Show all lines", key="attention.show_all", help="Every (query, key) pair, however faint: slow past ~200 tokens.")
    elif view.weights.size > charts.HEATMAP_IMAGE_CELLS:
        st.caption("A long input: the heatmap is drawn as one image; point at a row for its query's strongest keys, "
                   "or download the CSV for every weight.")
    export_buttons(chart, lambda: charts.view_frame(view)[["query", "key", "weight"]], f"attention_L{numbering.shown(layer)}", key="attention.export")


SCALE_NAMES = {"head": "Per head", "shared": "Shared"}


def render_model_view(encoding, matrix, on_select) -> None:
    """Every head as a thumbnail of `matrix` [layer, head, query, key], with the colour scale and pair filter."""
    n_layers, n_heads = matrix.shape[:2]
    controls = st.columns([1, 1])
    scale_setting = model_views.ANALYSIS.field("scale")
    st.session_state.setdefault("attention.scale", scale_setting.default)
    # The page's own segmented control (required: a colour scale is always chosen); choices from the declaration.
    scale = controls[0].segmented_control(
        "Colour scale", SCALES, key="attention.scale", format_func=SCALE_NAMES.get, required=True,
        help="Per head: each square darkest at its own largest weight. Shared: one maximum over all heads, so "
             "stronger heads (and layers) look darker.") or scale_setting.default
    pair_filter = "all"
    if encoding.is_pair:
        pair_filter = setting_input(model_views.ANALYSIS, "pair_filter", "Sentence filter", key="attention.filter",
                                    container=controls[1])
    view = model_view(matrix, encoding.tokens, encoding.segment_ids, scale=scale, pair_filter=pair_filter)
    shown = "" if pair_filter == "all" else f" Only {pair_filter}: rows of one sentence, columns of the other."
    darkest = (f"darkest = {float(view.scale_max.max()):.3f}, one scale for every head" if scale == "shared"
               else "each square darkest at its own largest weight")
    st.caption(
        f"All {n_layers} layers × {n_heads} heads. Each square is one head's attention (rows: from, columns: to; "
        f"{darkest}); a pixel shows the largest weight of the cells it covers, so no token's column is lost at "
        f"any length.{shown} Point at a square for its top keys. Click a square to open it in the head view."
    )
    grid = charts.model_view_grid(view)
    draw_chart(grid, key="attention.model_view", on_select=on_select, selection_mode=charts.MODEL_VIEW_SELECTION)
    export_buttons(grid, None, "model_view", key="attention.export_grid")


def render_dataset_tab() -> None:
    render_heads_over_dataset()
    pair_heads.render()


# The tabs in the order the view lists them (core.views.attention.TABS); a tab drawn here but not listed there, or
# listed and not drawn, stops the page with the difference named.
TABS = tab_renderers({ONE_SENTENCE: render_one_sentence, DATASET: render_dataset_tab, INSIDE: inside_head.render,
                      CAUSES: causes.render})
# Then one tab per analysis declared with a tab on this view (core.contract). Only the open tab runs
# (on_change="rerun"): the Inside-a-head tab's own forward passes would otherwise double the cost of every new
# sentence in the head view.
page_tabs("attention", dict(TABS), key="attention.tab", only_open=True)
