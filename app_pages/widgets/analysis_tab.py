"""The tab of an analysis made from its declaration alone (core.contract: `inputs` and `tab`): the two plain
sentences (its title and summary), a widget per setting (settings_form.setting_input), its input (the sentences
of the sidebar, or a corpus picker and a Run button with progress and Cancel), its charts and exports. A page lists
its own tabs and `page_tabs` adds the declared ones, so a new tab-level analysis touches no page.

Session keys (and so URL parameters, core.views.declared_params) are `VIEW.ANALYSIS.SETTING`."""

from __future__ import annotations

from typing import Callable, Mapping

import streamlit as st

from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, job_controls, model_or_error, model_ref,
                                      sentences, warn_if_corpus_cut)
from app_pages.widgets.corpus_picker import corpus_picker
from app_pages.widgets.settings_form import setting_input
from core import views
from core.charts.export import drawn_frame
from core.contract import Analysis, Sentences
from core.safe_text import markdown_text


def page_tabs(view: str, own: Mapping[str, Callable[[], None]], *, key: str | None = None,
              only_open: bool = False) -> None:
    """The page's tabs: its own (title -> renderer, in order), then one per declared tab of the view's analyses.
    A key keeps the open tab across reruns (a job finishing in one tab must not reopen the first); `only_open`
    runs the open tab alone (the attention page: its tabs' forward passes would otherwise add up)."""
    declared = declared_tabs(view)
    titles = list(own) + [t for t in declared if t not in own]
    if len(titles) == 1:
        own[titles[0]]()
        return
    for title, tab in zip(titles, st.tabs(titles, key=key or f"{view}.tab", on_change="rerun")):
        if only_open and not tab.open:
            continue
        with tab:
            if title in own:
                own[title]()
            else:
                for analysis in declared[title]:
                    render(analysis)


def declared_tabs(view: str) -> dict[str, list[Analysis]]:
    """{tab title: its analyses} of the analyses of `view` declared with a tab, in their order."""
    tabs: dict[str, list[Analysis]] = {}
    for analysis in views.analyses_of(view):
        if analysis.tab:
            tabs.setdefault(analysis.tab, []).append(analysis)
    return tabs


def render(analysis: Analysis) -> None:
    """One declared analysis: its settings, input, Run, charts and exports."""
    prefix = views.declared_prefix(analysis)
    st.subheader(analysis.title)
    st.markdown(markdown_text(f"{analysis.summary[:1].upper()}{analysis.summary[1:]}."))
    st.caption(markdown_text(f"The same on the command line: python -m core {analysis.command}; in a notebook: "
                             f"lens.{analysis.lens}(…)."))
    shown = [f for f in analysis.fields if f.url_name is not None]
    columns = st.columns(3)
    values = {f.name: setting_input(analysis, f.name, f.meta.widget_label, key=prefix + f.name,
                                    container=columns[i % 3]) for i, f in enumerate(shown)}
    try:
        settings = analysis.make(values)
    except ValueError as err:
        st.warning(markdown_text(str(err)))
        return
    if analysis.inputs == ("text",):
        result = _on_sentences(analysis, settings)
    else:
        result = _on_corpus(analysis, settings, prefix)
    if result is None:
        return
    charts = analysis.charts_function()(result) if analysis.charts is not None else []
    for i, (chart, caption) in enumerate(charts):
        draw_chart(chart, key=f"{prefix}chart{i}")
        st.caption(markdown_text(caption))
    if charts:
        chart = charts[0][0]
        export_buttons(chart, drawn_frame(chart), analysis.name, key=prefix + "export")


def _on_sentences(analysis: Analysis, settings):
    lm = model_or_error()
    if lm is None:
        return None
    text_a, text_b = sentences()
    if not text_a.strip():
        st.info("Type a sentence first.")
        return None
    with st.spinner(f"{analysis.title}…"):
        return analysis.run_function()(lm, Sentences(text_a, text_b or None), settings)


def _on_corpus(analysis: Analysis, settings, prefix: str):
    corpus = corpus_picker(prefix)
    if corpus is None:
        return None
    ref = model_ref()

    def make_work():
        lm = cached_model(ref)  # in the script thread, where st.cache_* is safe

        def work(progress, should_stop):
            return analysis.run_function()(lm, corpus, settings, progress=progress, should_stop=should_stop)

        return work

    result = job_controls(prefix + "job", "Run", (ref, corpus.digest, settings), make_work, kind=analysis.name,
                          unit="sentences")
    if result is None:
        st.info("Press **Run** to pass the corpus through the model (nothing is computed until then).")
        return None
    if hasattr(result, "truncation_notice"):  # a corpus result that counted the word pieces it cut
        warn_if_corpus_cut(result)
    return result
