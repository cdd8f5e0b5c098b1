"""Presenter mode prepares each step's corpus pass ahead (issue 20, point 3): when a lesson opens, every step whose
view has a `plan` (core/views/: a view whose chart needs a Run-button job) gets that job submitted now, built by the
same core code the page's button uses, so the slide finds it finished, or running with its progress, and draws
without a click.

The jobs are plain core.jobs jobs (cancellable from the start-of-lesson list or the slide); a page adopts one
(`adopt`) only when its params equal the job's, i.e. for exactly the settings on screen.
"""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import adopt_job, cached_model, shared_results
from app_pages.widgets.corpus_picker import cached_resolve
from core import jobs, lessons, views
from core.model.loading import ModelUnavailable
from core.safe_text import markdown_text

STATE = "present.prefetch"  # {"lesson": (name, lesson), "entries": [entry per prepared step]}


def caches() -> views.Caches:
    """The app's shared caches, for a view's plan: a prepared pass loads and reads exactly what the page would."""
    return views.Caches(load_model=cached_model, resolve_corpus=cached_resolve, shared_results=shared_results)


def _entries() -> list[dict]:
    return st.session_state.get(STATE, {}).get("entries", [])


def cancel_all() -> None:
    """Stop every prefetch job still running (a lesson closed or switched): their half passes are dropped by the
    jobs themselves (a profile is stored only when complete) and the list says "cancelled", never "ready"."""
    for entry in _entries():
        record = jobs.status(entry["job_id"]) if entry.get("job_id") else None
        if record is not None and record.active:
            jobs.cancel(entry["job_id"])


def start(name: str, lesson: lessons.Lesson) -> None:
    """Submit the corpus pass of every step that needs one, once per lesson opened (a step already measured, or a
    second step with the same settings, submits nothing). A different lesson first cancels the previous one's."""
    if st.session_state.get(STATE, {}).get("lesson") == (name, lesson):
        return
    cancel_all()
    entries, submitted = [], {}
    for index, step in enumerate(lesson.steps):
        plan = views.get(step.page).plan if views.is_view(step.page) else None
        if plan is None:
            continue
        entry = {"step": index, "title": step.title, "page": step.page}
        try:
            planned = plan(step.params, caches())
            if planned is None:
                continue  # this step's view needs no corpus pass (e.g. the attention page's one-sentence tab)
            entry |= {"key": planned.key, "params": planned.params}
            if planned.make_work is not None:
                marker = (planned.key, repr(planned.params))
                if marker not in submitted:
                    work = planned.make_work()
                    submitted[marker] = jobs.submit(planned.kind, {"page_key": planned.key, "params": repr(planned.params),
                                                                   "prefetch": f"{name} step {index + 1}"},
                                                    work, unit=planned.unit).id
                entry["job_id"] = submitted[marker]
        except (ModelUnavailable, ValueError, FileNotFoundError) as err:  # missing model or dataset: say why
            entry["error"] = str(err)
        entries.append(entry)
    st.session_state[STATE] = {"lesson": (name, lesson), "entries": entries}


def state_of(entry: dict) -> tuple[str, str]:
    """(ready / running / queued / failed / cancelled, a line for the list)."""
    if entry.get("error"):
        return "failed", entry["error"]
    if not entry.get("job_id"):
        return "ready", "ready (measured before)"
    record = jobs.status(entry["job_id"])
    if record is None:
        return "failed", "the job stopped without finishing (server restarted?): nothing partial was kept"
    if record.state == "done":
        return "ready", "ready"
    if record.active:
        return record.state, f"{record.state}: {record.done} / {record.total or '…'} {record.unit}"
    if record.state == "cancelled":
        return "cancelled", "cancelled: nothing partial was kept; the slide offers Run"
    return "failed", record.error or record.state


def any_active() -> bool:
    return any(state_of(e)[0] in ("running", "queued") for e in _entries())


def adopt(page_key: str, params) -> None:
    """Called by a page before its job_controls: if presenter mode prefetched this page's job for exactly these
    params and the page has no job of its own, take it over (once) so the slide shows its progress or result."""
    for entry in _entries():
        if entry.get("key") != page_key or not entry.get("job_id") or entry.get("params") != params:
            continue
        if entry.get("adopted") == entry["job_id"]:
            return
        if st.session_state.get(f"{page_key}.jobstate", {}).get("id"):
            return  # the page is already following a job of its own
        entry["adopted"] = entry["job_id"]
        adopt_job(page_key, entry["job_id"], params)
        return


STATE_ICONS = {"ready": ":material/check_circle:", "running": ":material/hourglass_top:",
               "queued": ":material/hourglass_top:", "cancelled": ":material/stop_circle:"}


def _draw_list() -> None:
    for entry in _entries():
        state, line = state_of(entry)
        # Streamlit's bundled Material Symbols, not emoji: a machine without an emoji font drew those as □
        icon = STATE_ICONS.get(state, ":material/warning:")
        what = views.get(entry["page"]).title if views.is_view(entry["page"]) else entry["page"]
        st.markdown(f"{icon} Step {entry['step'] + 1}, **{markdown_text(entry['title'])}** ({markdown_text(what)}): "
                    f"{markdown_text(line)}")
    if any_active():
        st.button("Cancel preparation", key="present.prefetch.cancel", on_click=cancel_all, icon=":material/cancel:")


@st.fragment(run_every=1.0)
def _live_list() -> None:
    _draw_list()


def status_list() -> None:
    """The start-of-lesson list: each prepared step's state, refreshed every second while a pass runs."""
    if not _entries():
        return
    st.markdown("**Long work prepared ahead**")
    _live_list() if any_active() else _draw_list()


def step_state(index: int) -> tuple[str, str] | None:
    """state_of the pass prepared for step `index` (0-based), None when it needs none."""
    for entry in _entries():
        if entry["step"] == index:
            return state_of(entry)
    return None


def step_line(index: int) -> str | None:
    """The preparation state of step `index` (0-based) for the speaker notes, None when it needs no pass."""
    found = step_state(index)
    return None if found is None else f"Prepared ahead: {found[1]}"
