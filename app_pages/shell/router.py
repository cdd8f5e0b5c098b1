"""The router and the shared sidebar: what app.py runs for every session, on every rerun (`main`).

The sidebar's widgets live here, not in a page, so their values (model, sentence A and B) are kept
when the user moves between pages. The URL carries them too (?model=…&a=…&b=…) so a view can be shared.
Page paths are relative to app.py's folder (the main script's), like every st.Page path.
"""

from pathlib import Path

import streamlit as st

from app_pages.shell import classroom, lesson_bar, page_report, presenter, url_state
from app_pages.widgets.common import MODEL_ERROR_KEY, MODEL_KEY, SENTENCE_A_KEY, SENTENCE_B_KEY
from core import settings, views
from core.model.loading import (FAMILY_NAMES, availability, available_models, choose_start_model, display_name_among,
                                pick_device, start_model)
from core.safe_text import markdown_text

START_NOTICE_KEY = "_start_model"  # the StartModel a fresh session opened on, when it is not the default


def pages() -> list[st.Page]:
    """The navigation, one entry per registered view (core/views/). Built per run: a page object is per session
    (st.navigation marks the one it runs)."""
    return [st.Page(view.page, title=view.title, icon=view.icon, url_path=view.url_path or None,
                    default=view.url_path == "") for view in views.all_views()]


QUERY_PARAMS = {MODEL_KEY: "model", SENTENCE_A_KEY: "a", SENTENCE_B_KEY: "b"}


def restore_from_url() -> None:
    """On a fresh session, take the model and sentences from the URL (once, before the widgets exist)."""
    # Also when the model key is gone: st.switch_page (Dataset explorer's "Open in …") drops the sidebar's widget
    # state; the explorer passes model and sentences in the URL, so they are taken from there again.
    if st.session_state.get("_restored_from_url") and MODEL_KEY in st.session_state:
        return
    st.session_state["_restored_from_url"] = True
    for key, param in QUERY_PARAMS.items():
        if param in st.query_params and key not in st.session_state:
            st.session_state[key] = st.query_params[param]
    if MODEL_KEY not in st.session_state:
        # No network and the default not on disk: open on the best local model rather than on an error.
        start = start_model()
        st.session_state[MODEL_KEY] = start.model
        if start.fell_back:
            st.session_state[START_NOTICE_KEY] = start
    st.session_state.setdefault(SENTENCE_A_KEY, "")
    st.session_state.setdefault(SENTENCE_B_KEY, "")


# While a rerun computes, the page stays at full opacity: Streamlit fades stale elements, and re-compositing a
# tall chart through the fade took ~0.4 s of CPU from the forward pass on 2 cores (issue 18, bench/app_latency.py).
# The running indicator and the spinners still say the page is working.
KEEP_STALE_OPAQUE = '<style>[data-stale="true"] {opacity: 1 !important; transition: none !important;}</style>'


def sidebar(where=None) -> None:
    """The shared model and sentence boxes, in the sidebar (`where`: another container, e.g. a presenter-mode
    slide's settings, which has no sidebar)."""
    with where if where is not None else st.sidebar:
        if where is None:
            st.header("BERT Lens")
        # A style element in the sidebar: as a style-only st.html (Streamlit's event container) it saved less.
        st.markdown(KEEP_STALE_OPAQUE, unsafe_allow_html=True)
        current = st.session_state[MODEL_KEY]
        # A local model the box already holds by its folder is not listed again by name: both would show one name.
        here = Path(current).expanduser().resolve()
        entries = available_models()
        names = [e.name for e in entries if Path(e.path).resolve() != here]
        options = list(dict.fromkeys([current, settings.default_model(), *names]))
        weak = {e.name for e in entries if e.warning}  # fitted heads under 1.5× the constant guess (issue 47)
        shown = display_name_among(options)
        # The box shows short names, but its options (and so its value) stay the references: the name shown is
        # mapped back to its reference, and the model is not loaded again under a new name.
        st.selectbox(
            "Model",
            options,
            key=MODEL_KEY,
            accept_new_options=True,
            format_func=lambda ref: f"{shown(ref)} (weak head)" if ref in weak else shown(ref),
            help="Models saved on this computer, or type any Hugging Face id (needs internet the first time) of an "
                 f"encoder of these families: {FAMILY_NAMES}."
                 + ("" if where is not None else f" Now: {markdown_text(current)}"),
        )
        if where is None:  # a slide says itself when its model cannot load, and offers the local ones
            model_status(st.session_state[MODEL_KEY])
        st.caption(f"Runs on: **{pick_device().upper()}**")
        st.text_area("Sentence A", key=SENTENCE_A_KEY, height=100, placeholder="Type a sentence…")
        st.text_area("Sentence B (optional)", key=SENTENCE_B_KEY, height=80, placeholder="A second sentence makes a pair")


def use_model(name: str) -> None:
    st.session_state[MODEL_KEY] = name


def model_status(current: str) -> None:
    """Under the model box, before any sentence is typed: why the model cannot load, or the one-line notice of a
    first run that opened on a local model instead of the default, with a button back to the default."""
    start = st.session_state.get(START_NOTICE_KEY)
    if start is not None and current == start.model:
        st.info(markdown_text(start.notice), icon=":material/wifi_off:")
        st.button(f"Use {markdown_text(start.default)}", key="router.use_default", on_click=use_model, args=(start.default,),
                  help="Back to the default model; it cannot load now, and the sidebar will say why.")
    checked = availability(current)
    if not checked.loadable:
        st.error(markdown_text(checked.summary or checked.reason))
        local = [e for e in available_models() if availability(e.name).loadable]
        instead = choose_start_model(current, checked, local)
        if instead.fell_back:
            st.button(f"Use {markdown_text(instead.model)}", key="router.use_local", on_click=use_model, args=(instead.model,),
                      help="The best model on this computer.")
    st.session_state[MODEL_ERROR_KEY] = checked.reason


def main() -> None:
    if classroom.student_gate():  # a student's device: the student view only, before any page code runs
        return
    # A local icon file, not ":material/…": Streamlit turns a material page icon into a favicon fetched from
    # fonts.gstatic.com on every page load (issue 20, point 7); the file is served by the app itself.
    st.set_page_config(page_title="BERT Lens", page_icon="app_pages/assets/icon.png", layout="wide")
    restore_from_url()
    page = st.navigation(pages())
    url_state.restore(page.url_path)
    slides = page.url_path == "present" and presenter.has_slides()
    if slides:
        presenter.prepare()  # a step sets the sidebar's model and sentences: before those widgets exist
    else:  # presenter mode has no sidebar: its slide draws these boxes in its own settings (app_pages/present.py)
        sidebar()
    classroom.teacher_panel()
    lesson_bar.sidebar_button(page.url_path, page.title)
    url_state.sync(page.url_path, after_run=False)  # the sidebar's model and sentences and the page's settings
    try:
        with page_report.page_report(page.title):
            page.run()
    finally:  # also after st.stop(): the URL keeps the settings on screen
        url_state.sync(page.url_path)
