"""The URL is the view: each page's settings go into the query string and come back from it (core/views/).

The router (app_pages/shell/router.py) calls restore(page) before the page runs and sync(page) after it, so a page needs no code of its own:
a new page only lists its params in its view module (core/views/). Streamlit has already put a changed widget's value into
st.session_state when the rerun starts, so writing the URL before or after the page both see the same values.

A page that ends in st.stop() gets no after-run sync: once a stop is asked for, Streamlit raises StopException on
every session-state read, the router's `finally` included. So a page that must put a value into the URL before it
may stop calls write_now(page), never st.query_params directly: restore() takes a URL that differs from what this
session last wrote for a new link, and a write it did not record would be applied over the user's next change.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app_pages.widgets.common import MODEL_KEY, PRESENTING, SENTENCE_A_KEY, SENTENCE_B_KEY
from core import views
from core.safe_text import markdown_code, markdown_text

_LAST = "_url_state.last"  # {page: the query (as sorted items) this session last wrote or applied}
_NOTICES = "_url_state.notices"
_APPLIED = "_url_state.applied"  # {session key: value} the URL set in this run, checked after the page ran
_PAGE = "_url_state.page"  # the page the previous run of this session showed
_SKIPPING = "_url_state.skipping"  # this run only passes a page switch's extra history entry: it writes no URL

# Browser history (issue 48: Attention's Model view → Masked words → Back landed in Head view, a second Back did
# nothing). Streamlit's front end pushes a history entry for every query-string message a run sends, and one
# for every page switch (the new page's bare URL, before the run writes its settings). So: a run writes the
# URL in one message, and only when it changes (_write); a page entered (a switch, Back or Forward from another
# page) takes its settings from the URL even when this session wrote that URL before, since Streamlit dropped the
# page's widget state when the user left it; and Back onto the extra entry of a page switch goes one step further
# (skip_switch_entry), as does Forward. A switch from page P to Q leaves, besides Q's own entry, one of two
# extra entries (which one depends on when the browser handles the switch): Q's bare URL, or P's path with Q's
# shared params (the model and sentences, none of P's settings). Back reaches the bare one from Q's own entry
# (the page already on screen) and the other one from Q (another page); Forward reaches them the other way
# round: so "bare" and "entered from another page" differ for Back and agree for Forward.
GO_BACK, GO_FORWARD = ("<script>window.parent.history.back()</script>",
                       "<script>window.parent.history.forward()</script>")


def _page_query(page: str) -> dict[str, str]:
    return {k: st.query_params[k] for k in st.query_params if k not in views.SHARED}


def apply(page: str, query: dict[str, str], *, shared: bool = True) -> tuple[str, ...]:
    """Put a view's params into session state; the notices of what was ignored.

    The page's settings missing from the query go back to the page's own defaults, so a link or a lesson step
    shows its view, not a mix with what was on screen before. A registered default is assigned, not left to the
    widget: the browser keeps the value a widget already shows unless the run assigns one, so a dropped key
    drew the default while the widget still showed the previous step's value. A param without a registered
    default (the page picks it) is dropped. With `shared`, the sidebar's model and sentences come from the query
    too (a sentence it lacks is emptied; no model: keep).
    """
    for param in views.params_of(page) if views.is_view(page) else ():
        if param.default is not None and param.key in st.session_state:
            st.session_state[param.key] = param.default
        else:
            st.session_state.pop(param.key, None)
    if shared:
        if query.get("model"):
            st.session_state[MODEL_KEY] = query["model"]
        st.session_state[SENTENCE_A_KEY] = query.get("a", "")
        st.session_state[SENTENCE_B_KEY] = query.get("b", "")
    restored = views.parse(page, {k: v for k, v in query.items() if k not in views.SHARED})
    for key, value in restored.values.items():
        st.session_state[key] = value
    return restored.notices


def restore(page: str) -> None:
    """Apply the URL's settings when they are new to this session (a pasted link, a lesson step); show notices."""
    page = page.strip("/")
    # Left by a run that stopped before its after-run check: it is about a value the user may have changed since.
    st.session_state.pop(_APPLIED, None)
    st.session_state.pop(_SKIPPING, None)
    entered = st.session_state.get(_PAGE) != page  # every page counts: a view left for Lessons is entered again
    st.session_state[_PAGE] = page
    if not views.is_view(page):
        return
    query = _page_query(page)
    signature = tuple(sorted(query.items()))
    last = st.session_state.setdefault(_LAST, {})
    if not query and page in last and _history_navigation():
        # A page's entry without its settings, in a session that has shown the page: the extra entry of a page
        # switch (above). The user meant the entry beyond it, in the direction they went.
        bare = not any(name in st.query_params for name in views.SHARED)
        skip_switch_entry(back=bare != entered)
        # Written now, the entry would become a full one of this page, and the way back over it would stop there.
        st.session_state[_SKIPPING] = True
    if query and (entered or last.get(page) != signature):
        st.session_state[_NOTICES] = apply(page, query, shared=False)  # the router restores those
        st.session_state[_APPLIED] = {p.key: st.session_state[p.key] for p in views.params_of(page)
                                      if p.key in st.session_state}
    last[page] = signature
    notices = st.session_state.pop(_NOTICES, ())
    if notices:
        st.caption("Some settings in the link were ignored: " + markdown_text(" ".join(notices)))


def _history_navigation() -> bool:
    """Whether this run is the browser's Back or Forward (Streamlit knows; it has no public API for it)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and getattr(ctx, "is_history_navigation", False))


def skip_switch_entry(*, back: bool) -> None:
    """Back or Forward landed on the extra entry of a page switch: one more step the same way. The step is the
    browser's own (history.back / forward from the component's same-origin frame), so the history stays one list
    and Back and Forward keep working from wherever it lands. 1 px: the smallest frame Streamlit draws. A
    Streamlit without st.iframe (before 1.52) skips nothing: there the user presses Back once more."""
    if not hasattr(st, "iframe"):
        return
    if back:
        st.iframe(GO_BACK, height=1)
    else:
        st.iframe(GO_FORWARD, height=1)


def _shared_params() -> dict[str, str]:
    """The sidebar's model and sentences as URL params (an empty one left out)."""
    params = {name: str(st.session_state.get(key) or "") for name, key in views.SHARED.items()}
    return {k: v for k, v in params.items() if v}


def current_params(page: str) -> dict[str, str]:
    """The view on screen as URL params: model, sentences and the page's own settings."""
    return _shared_params() | views.encode(page.strip("/"), st.session_state)


def sync(page: str, *, after_run: bool = True) -> None:
    """Write the page's settings into the URL (dropping other pages' params); remember what was written.

    The router calls it before the page runs too (after_run=False): a page that calls st.stop() ends the run, and
    Streamlit then drops the URL change a later sync would send.
    """
    page = page.strip("/")
    if not views.is_view(page):
        if not after_run:
            _write(page)  # the sidebar's model and sentences; the page's own params are its business
        return
    if not after_run:
        _write(page)
        return
    # A value that parsed but that the page could not use (a run deleted since, a layer the model lacks): the
    # widget fell back to another value; say so rather than leave the link silently different.
    applied = st.session_state.pop(_APPLIED, {})
    stale = [markdown_code(f"{p.name}={p.encode(applied[p.key])}") for p in views.params_of(page)
             if p.key in applied and p.key in st.session_state and st.session_state[p.key] != applied[p.key]]
    if stale:
        st.caption("Not available now, so the page chose instead: " + ", ".join(stale) + ".")
    _write(page)


def write_now(page: str) -> None:
    """Write the page's settings into the URL now, from inside the page (before a possible st.stop()). Not on a
    presenter slide: there the URL is the lesson's (lesson, step), written by the slide before the page runs."""
    if PRESENTING.get():
        return
    _write(page.strip("/"))


def _write(page: str) -> None:
    """The URL of what is on screen: the sidebar's model and sentences, and a view's settings (another page keeps
    its own params). One message, and none when nothing changed: each message is a browser history entry."""
    if st.session_state.get(_SKIPPING):
        return
    if views.is_view(page):
        own = views.encode(page, st.session_state)
        st.session_state.setdefault(_LAST, {})[page] = tuple(sorted(own.items()))
    else:
        own = {k: st.query_params[k] for k in st.query_params if k not in views.SHARED}
    wanted = _shared_params() | own
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)
