"""What every page shares: the cached model and forward pass, the sidebar's state, and export buttons.

Not a page itself: the router lists the pages, one per view of the registry (core/views/).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field
from typing import Callable

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.logger import get_logger

try:  # where Streamlit keeps the running fragment (1.67); without it a fragment's chart is placed as the page's
    from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState
except ImportError:
    ThreadState = None

from app_pages.shell import page_report
from core import charts, jobs, settings
from core.model.budget import BudgetCache, display_encoding, nbytes_of, release_freed_memory
from core.charts import layout
from core.model.encoding import encode
from core.model.artefacts import head_warning
from core.model.loading import (LoadedModel, ModelUnavailable, availability, available_models, display_name,
                                display_names, load_model, model_version)
from core.shared import SharedResults
from core.validation import truncation_notice
from core.safe_text import markdown_text

_log = get_logger("bertlens.cache")

# Keys of the shared sidebar widgets (set in the router, read by every page).
MODEL_KEY, SENTENCE_A_KEY, SENTENCE_B_KEY = "model", "sentence_a", "sentence_b"
# Why the sidebar's model cannot load, as the sidebar showed it this run ("" when it can): a page does not repeat it.
MODEL_ERROR_KEY = "_model_error"


@st.cache_resource
def _model_store() -> BudgetCache:
    """Loaded models, one store per server: bounded by count and by parameter bytes (core.settings)."""
    return BudgetCache(settings.model_cache_bytes(), settings.model_cache_entries(), sizeof=lambda lm: nbytes_of(lm.model) + nbytes_of(lm.masked_lm))


@st.cache_resource
def shared_results(view: str) -> SharedResults:
    """A view's results for every session (e.g. the anisotropy profiles keyed by model, corpus and settings), written
    by job worker threads: a second user gets them free. 64 per view; an anisotropy profile is a few hundred KB."""
    return SharedResults(limit=64)


@st.cache_resource
def _encoding_store() -> BudgetCache:
    """Forward passes shared by every session, bounded in bytes (BERTLENS_ENCODING_CACHE_BYTES, default 1 GiB)."""
    return BudgetCache(settings.encoding_cache_bytes())


def cached_model(ref: str, *, show_spinner: bool = True) -> LoadedModel:
    """The shared loaded model. show_spinner=False: for the server's warm-up thread (app_pages.shell.launch), which has
    no page to show a spinner on."""
    def load() -> LoadedModel:
        _log.info("loading model %s", ref)  # the server log shows each load once (bench/classroom_load.py counts them)
        # masked_lm=True: a checkpoint with an MLM head is loaded once, as the masked-word model whose own encoder
        # every page uses (see core.model.loading.load_model).
        with st.spinner("Loading the model…") if show_spinner else contextlib.nullcontext():
            return load_model(ref, masked_lm=True)

    return _model_store().get_or_compute((ref, model_version(ref)), load)


def cached_encoding(ref: str, text_a: str, text_b: str | None):
    """One forward pass per (model, text), shared by all sessions and never copied (st.cache_data would unpickle
    ~85 MB per rerun at 512 tokens): attentions float16, arrays read-only (core.model.budget.display_encoding)."""
    def run():
        lm = cached_model(ref)
        _log.info("forward pass %s (%d characters)", ref, len(text_a) + len(text_b or ""))
        start = time.perf_counter()
        with st.spinner("Running the model…"):
            encoding = display_encoding(encode(lm, (text_a, text_b) if text_b else text_a, attention_dtype="float16"))
        # bench/app_latency.py reads this line to split a browser rerun into before / forward / after.
        _log.info("forward pass done in %.3f s (%d tokens)", time.perf_counter() - start, len(encoding.tokens))
        release_freed_memory()  # the forward's freed tensors go back to the OS: RSS stays at the budget (core.model.budget)
        return encoding

    return _encoding_store().get_or_compute((ref, model_version(ref), text_a, text_b or None), run)


def model_ref() -> str:
    return st.session_state.get(MODEL_KEY) or ""


def sentences() -> tuple[str, str | None]:
    text_a = (st.session_state.get(SENTENCE_A_KEY) or "").strip()
    text_b = (st.session_state.get(SENTENCE_B_KEY) or "").strip() or None
    return text_a, text_b


def slide_models() -> dict[str, str]:
    """{reference: display name} of the pretrained models on this computer that load now, for a slide whose model
    cannot (fine-tuned runs left out: their names are internal ids, and a step shows what BERT itself does)."""
    refs = [e.name for e in available_models() if e.source in ("hub-cache", "local", "fitted-head")
            and availability(e.name).loadable]
    return display_names(refs)


def use_model(ref: str) -> None:
    """Button callback: this session's model (in presenter mode, the step's until the step changes)."""
    st.session_state[MODEL_KEY] = ref


def offer_local_models(key: str) -> None:
    """Presenter mode's answer to a step whose model cannot load: one button per local model that can."""
    offered = slide_models()
    if not offered:
        st.info("No other model is on this computer: download one before class (`python -m core download NAME`).")
        return
    st.markdown("Show this step with a model that is here:")
    columns = st.columns(min(len(offered), 4))
    for i, (ref, name) in enumerate(offered.items()):
        columns[i % len(columns)].button(name, key=f"{key}.{i}", on_click=use_model, args=(ref,), width="stretch",
                                         icon=":material/swap_horiz:")


def show_model_error(err: ModelUnavailable) -> None:
    """A loading error on the page; one the sidebar already shows is only pointed at. In presenter mode (no
    sidebar): load_error's slide line and local models."""
    if SLIDE.get() is not None:
        load_error(err)
    elif str(err) == st.session_state.get(MODEL_ERROR_KEY):
        st.info("The model in the sidebar cannot be loaded now (the sidebar says why): pick another one there.")
    else:
        st.error(markdown_text(err))


def load_error(err: Exception, ref: str | None = None) -> None:
    """A page's error for a model `ref` (default: the session's) that cannot load. In presenter mode the slide says
    so in one line, once, and for the step's own model offers the local models that load (one click); the full
    reason, which may name folders and commands, goes to the speaker notes. Elsewhere the error itself."""
    slide = SLIDE.get()
    if slide is None:
        st.error(markdown_text(err))
        return
    ref = model_ref() if ref is None else ref
    if ref in slide.load_errors:
        return  # another tab of the same page met the same model: the slide said it once
    slide.load_errors.add(ref)
    to_speaker_notes(markdown_text(err))
    with on_slide():
        if ref == model_ref():
            st.warning(f"This step's model, “{markdown_text(display_name(ref))}”, cannot be loaded on this computer "
                       "now.", icon=":material/cloud_off:")
            offer_local_models("present.use_model")
        else:
            st.warning(f"“{markdown_text(display_name(ref))}” cannot be loaded on this computer now (the speaker "
                       "notes say why).", icon=":material/cloud_off:")


def warn_if_truncated(encodings) -> None:
    """The one warning of a page whose input was cut to the model's length (Encoding or Tokenized, one or many)."""
    notice = truncation_notice(encodings)
    if notice:
        st.warning(notice)


def warn_if_corpus_cut(cuts, model: str | None = None) -> None:
    """The one warning of a page whose corpus pass cut examples to the model's length: "K of N examples …"
    (cuts: a result's core.validation.CorpusCuts, e.g. core.model.encoding.Counted), after `model`'s name where a page
    shows several models' passes."""
    notice = cuts.truncation_notice() if cuts is not None else None
    if notice:  # numbers only; the model's name is escaped
        st.warning(f"{markdown_text(display_name(model))}: {notice}" if model else notice)


def current_model() -> LoadedModel:
    """The sidebar's model, or an error on the page (and the page stops; the app keeps working)."""
    try:
        return cached_model(model_ref())
    except ModelUnavailable as err:
        show_model_error(err)
        st.stop()


def model_or_error() -> LoadedModel | None:
    """The sidebar's model, or None with the loading error shown (the rest of the page still draws)."""
    try:
        return cached_model(model_ref())
    except ModelUnavailable as err:
        show_model_error(err)
        return None


def intro(what: str, how: str) -> None:
    """The two plain sentences every page opens with."""
    st.markdown(f"{what} {how}")


def flag_degenerate(degeneracy, run: str | None = None) -> None:
    """The "learned (almost) nothing" warning of a run (core.training.evaluation.Degeneracy; None: nothing to say).
    Run names and class labels come from users, so Markdown's special characters are shown as typed."""
    if degeneracy is None or not degeneracy.flagged:
        return
    text = f"{run}: {degeneracy.message}" if run else degeneracy.message
    st.warning(markdown_text(text), icon=":material/warning:")


def flag_weak_head(lm) -> None:
    """The warning of a fitted masked-word head under 1.5× the best constant guess (core.model.artefacts), where
    its guesses are shown; nothing for any other model. The head's name comes from a user: shown as typed."""
    notice = head_warning(lm.path)
    if notice:
        st.warning(markdown_text(notice), icon=":material/warning:")


def set_example(text_a: str, text_b: str | None) -> None:
    """Button callback: put an example into the shared sidebar sentences."""
    st.session_state[SENTENCE_A_KEY] = text_a
    st.session_state[SENTENCE_B_KEY] = text_b or ""


def example_buttons(examples: dict[str, tuple[str, str | None]], key: str) -> None:
    columns = st.columns(len(examples))
    for column, (label, (text_a, text_b)) in zip(columns, examples.items()):
        column.button(label, key=f"{key}.{label}", on_click=set_example, args=(text_a, text_b), width="stretch")


# Set by presenter mode (app_pages/present.py) while a slide's page runs: draw_chart then enlarges type and rows.
PRESENTING: contextvars.ContextVar[bool] = contextvars.ContextVar("presenting", default=False)


@dataclass
class Slide:
    """Presenter mode's slide while a step's page runs (the page itself draws inside its folded settings, under the
    slide): `area` takes the charts and what the class must see, first and full width; `waiting` holds the line
    shown there until a chart is drawn."""

    area: object
    waiting: object
    notes: object = None  # the speaker notes' expander: what only the presenter needs (commands, reasons, names)
    load_errors: set = field(default_factory=set)  # models whose loading error the slide has shown


SLIDE: contextvars.ContextVar[Slide | None] = contextvars.ContextVar("slide", default=None)


def on_slide():
    """Where what the class must see goes: the slide's area in presenter mode (above the page's folded settings),
    else the page's current place. Use as `with on_slide(): ...`."""
    slide = SLIDE.get()
    if slide is None:
        return contextlib.nullcontext()
    slide.waiting.empty()
    return slide.area


def to_speaker_notes(text: str) -> bool:
    """In presenter mode, a line for the presenter only (a command, a reason naming folders or runs) into the
    speaker notes; False elsewhere (the caller shows it on the page). `text` is Markdown the caller made safe."""
    slide = SLIDE.get()
    if slide is None or slide.notes is None:
        return False
    slide.notes.caption(text)
    return True


def _in_fragment() -> bool:
    """Whether a fragment is drawing: it reruns alone and draws in its own place (the player puts itself on the
    slide whole), so a chart in it stays there rather than jumping to the slide's area."""
    try:
        return ThreadState is not None and ThreadState.get().fragment_id is not None
    except (AttributeError, RuntimeError):
        return False


def sidebar_place() -> str:
    """Where the model and sentence boxes are, for a message that sends the user there: presenter mode hides the
    sidebar and puts them in the slide's settings, under the chart."""
    return "“Settings of this view” under the chart" if PRESENTING.get() else "the sidebar"


def draw_chart(chart: alt.TopLevelMixin, *, name: str | None = None, **options):
    """st.altair_chart for every page: a chart its builder sized (core.charts.layout.fixed_size) is drawn at that
    size (width="content"), not stretched or squeezed by the container (others as st.altair_chart draws them), its
    series in layout.CATEGORY_COLOURS; in presenter mode with larger type. The
    chart joins the page's PDF report under `name` (default: its key or title). Returns st.altair_chart's value."""
    page_report.collect(name or options.get("key") or _chart_title(chart) or "chart", chart)
    if layout.is_faceted(chart) and getattr(chart, "autosize", alt.Undefined) is alt.Undefined:
        # `fit` cannot size a grid of panels: the bias page's per-class F1 chart was drawn 0 px wide (blank)
        chart = layout.fixed_size(chart)
    if getattr(chart, "autosize", alt.Undefined) is not alt.Undefined:
        options["width"] = "content"  # stretching would widen the plot past the container: the right edge cut off
    elif isinstance(chart, (alt.Chart, alt.LayerChart)):
        # as wide as the column, as tall as the builder says plus axes and title: Streamlit's default `fit` would
        # fit those into the stated height and squeeze the plot (it keeps `pad` for concatenated and faceted charts)
        chart = chart.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    chart = layout.legible_colours(chart)  # not Streamlit's palette, whose second series is pale (issue 37)
    slide = SLIDE.get()
    if slide is not None and not _in_fragment():  # presenter mode: on the slide, above the page's folded settings
        slide.waiting.empty()
        if isinstance(chart, (alt.Chart, alt.LayerChart)) and not layout.is_faceted(chart):
            # One plot fills the slide's width (its builder's own width was for a page's column); its height stays.
            chart = chart.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
            options["width"] = "stretch"
        return slide.area.altair_chart(layout.for_presentation(chart), **options)
    return st.altair_chart(layout.for_presentation(chart) if PRESENTING.get() else chart, **options)


def _chart_title(chart: alt.TopLevelMixin) -> str:
    title = getattr(chart, "title", alt.Undefined)
    text = getattr(title, "text", title)
    return text if isinstance(text, str) else ""


def export_buttons(chart: alt.TopLevelMixin | None, table: pd.DataFrame | Callable[[], pd.DataFrame] | None, name: str, key: str) -> None:
    """PNG / SVG / offline interactive HTML of the chart and CSV of its table (a frame, or a function making it);
    the files are made only when clicked. The chart also joins the page's PDF report (app_pages.shell.page_report)."""
    columns = st.columns(4)
    if chart is not None:
        columns[0].download_button("PNG", lambda: charts.chart_png(chart), file_name=f"{name}.png", mime="image/png", key=f"{key}.png", icon=":material/image:")
        columns[1].download_button("SVG", lambda: charts.chart_svg(chart), file_name=f"{name}.svg", mime="image/svg+xml", key=f"{key}.svg", icon=":material/draw:")
        columns[2].download_button("HTML (interactive, offline)", lambda: charts.chart_html(chart), file_name=f"{name}.html", mime="text/html", key=f"{key}.html", icon=":material/code:", on_click="ignore")
        page_report.collect(name, chart)
    if table is not None:
        # built on click: a 512-token head view's table is 262k rows, too slow to write out on every rerun
        columns[3].download_button("CSV", lambda: charts.frame_csv(table() if callable(table) else table), file_name=f"{name}.csv", mime="text/csv", key=f"{key}.csv", icon=":material/table:")


# ---- long work: one runner (core.jobs), one set of controls ---------------------------------------------------

JOB_STATE_MESSAGES = {
    "cancelled": "Cancelled: nothing partial was kept.",
    "killed": "The job stopped without finishing (its process was killed or the server restarted): nothing partial was kept.",
}


def _ended_message(record: jobs.JobRecord, cancelled_note: str | None) -> str:
    """What a page says of its job that ended without a result, and when: in the session that ran it and, from
    the durable record, after a reload (issue 48: a reload showed nothing of a cancelled job)."""
    if record.state == "cancelled":
        text = cancelled_note or JOB_STATE_MESSAGES["cancelled"]
    else:
        text = JOB_STATE_MESSAGES.get(record.state) or record.error or record.state
    ended = record.finished_at or record.updated_at
    if not ended:
        return text
    day = "" if time.strftime("%Y-%m-%d") == time.strftime("%Y-%m-%d", time.localtime(ended)) else \
        time.strftime(" on %d %b %Y", time.localtime(ended))
    return f"{text} ({record.state} at {time.strftime('%H:%M', time.localtime(ended))}{day})"


def _job_slot(key: str) -> dict:
    """What the page remembers of its job `key`: the running job's id, the kept result and its params."""
    return st.session_state.setdefault(f"{key}.jobstate", {})


def _job_params(key: str, params) -> dict:
    """What a page's job records as its params: the page's key and its settings (repr: any value, compared as text)."""
    return {"page_key": key, "params": repr(params)}


def _finished_result(record: jobs.JobRecord, load_result: Callable[[dict], object] | None):
    """(True, result) of a done job whose result can still be had, else (False, None): in this server's memory
    (jobs.get, thread jobs), else its result.json read back through `load_result` (a job of a past server)."""
    handle = jobs.get(record.id)
    if handle is not None and not handle.process:
        return True, handle.result
    data = jobs.result_json(record.id) if load_result is not None else None
    if data is None:
        return False, None
    try:
        return True, load_result(data)
    except (KeyError, TypeError, ValueError):  # written by an older version: run again rather than fail the page
        return False, None


def _reattach(key: str, kind: str, params, load_result, cancelled_note: str | None) -> None:
    """Follow the newest job for exactly these settings, started in any session (another tab, before a reload):
    a running one shows its progress and Cancel, a finished one its result."""
    results = {}

    def usable(record: jobs.JobRecord) -> bool:
        if record.active:
            return True
        found, results[record.id] = _finished_result(record, load_result) if record.state == "done" else (False, None)
        return found

    slot = _job_slot(key)
    newest = jobs.latest(kind, _job_params(key, params), accept=lambda record: True)
    if newest is not None and not newest.active and newest.state != "done":  # cancelled, failed, killed: say so
        slot["message"], slot["last_id"] = _ended_message(newest, cancelled_note), newest.id
    record = jobs.latest(kind, _job_params(key, params), accept=usable)
    if record is None:
        return
    slot["last_id"], slot["params"], slot["cancelled_note"] = record.id, params, cancelled_note
    if record.active:
        slot["id"] = record.id
    else:
        slot["result"], slot["result_params"] = results[record.id], params


def _start_job(key: str, kind: str, params, make_work: Callable[[], Callable], unit: str, cancelled_note: str | None,
               keep_result: bool = False) -> None:
    """Button callback (the script thread, where st.cache_* is safe): build the work, then submit it."""
    slot = _job_slot(key)
    slot.pop("message", None)
    try:
        work = make_work()
    except (ModelUnavailable, ValueError, FileNotFoundError) as err:
        slot["message"] = str(err)
        return
    # last_id outlives the run (tests and the log find the record by it); id marks a job still to collect.
    slot["id"] = slot["last_id"] = jobs.submit(kind, _job_params(key, params), work, unit=unit, keep_result=keep_result).id
    slot["params"], slot["cancelled_note"] = params, cancelled_note


def _collect(key: str, load_result: Callable[[dict], object] | None = None) -> None:
    """Move a finished job's result (or its error) into the page state."""
    slot = _job_slot(key)
    job_id = slot.get("id")
    record = jobs.status(job_id) if job_id else None
    if job_id is None or (record is not None and record.active):
        return
    slot.pop("id")
    if record is not None and record.state == "done":
        slot["result"], slot["result_params"] = _finished_result(record, load_result)[1], slot.get("params")
    elif record is None:
        slot["message"] = JOB_STATE_MESSAGES["killed"]
    else:
        slot["message"] = _ended_message(record, slot.get("cancelled_note"))


def job_progress(record: jobs.JobRecord, cancel_key: str) -> None:
    """A running job's progress bar and Cancel button (any job: thread or process)."""
    st.progress(record.fraction, text=markdown_text(record.progress_text))
    if st.button("Cancel", key=cancel_key, icon=":material/cancel:"):
        jobs.cancel(record.id)


@st.fragment(run_every=1.0)
def _job_panel(key: str) -> None:
    job_id = _job_slot(key).get("id")
    record = jobs.status(job_id) if job_id else None
    if record is None or not record.active:
        st.rerun(scope="app")
    job_progress(record, cancel_key=f"{key}.cancel")


def job_controls(key: str, label: str, params, make_work: Callable[[], Callable], *, kind: str | None = None,
                 unit: str = "items", disabled: bool = False, cancelled_note: str | None = None,
                 autostart: bool = False, hide_stale: bool = False, load_result: Callable[[dict], object] | None = None):
    """Start / progress / cancel / result for one long piece of work on a page.

    `make_work()` runs in the button's callback and returns `work(progress, should_stop)` for core.jobs (load
    models there: errors are shown, not raised). While the job runs: a progress bar and Cancel, refreshed every
    second without rerunning the page. Returns the kept result, or None before the first one; when `params`
    differ from the ones the result was computed with, a caption says so (or, with `hide_stale`, None is
    returned). `autostart`: start at once when there is no result for `params` (not again after a cancel or error).

    Without a result or a job of its own for `params`, the page follows the newest job for the same settings from
    any session (core.jobs.latest over the durable records): a new tab or a reload shows a job started elsewhere,
    running or finished. A result lives in this server's memory; with `load_result` (the result type's from_json)
    it is also saved as result.json and read back after a server restart.
    """
    _collect(key, load_result)
    slot = _job_slot(key)
    if not slot.get("id") and not ("result" in slot and slot["result_params"] == params):
        _reattach(key, kind or key, params, load_result, cancelled_note)
    fresh = "result" in slot and slot["result_params"] == params
    if autostart and not fresh and not slot.get("id") and not slot.get("message"):
        _start_job(key, kind or key, params, make_work, unit, cancelled_note, load_result is not None)
    if slot.get("id"):
        _job_panel(key)
    else:
        st.button(label, key=f"{key}.run", type="primary", icon=":material/play_arrow:", disabled=disabled,
                  on_click=_start_job, args=(key, kind or key, params, make_work, unit, cancelled_note, load_result is not None))
    if slot.get("message"):
        st.warning(markdown_text(slot["message"]))
    if "result" not in slot or (hide_stale and not fresh):
        return None
    if not fresh:
        st.caption("The settings changed since this result was computed: press the button to update it.")
    return slot["result"]


def job_running(key: str) -> bool:
    """True while job `key` runs; a job that has ended is collected first, so this is False from then on."""
    _collect(key)
    return bool(_job_slot(key).get("id"))


def adopt_job(key: str, job_id: str, params, cancelled_note: str | None = None) -> None:
    """Make a job submitted elsewhere (presenter mode's prefetch) page `key`'s job for `params`: the page then
    shows its progress and Cancel, or collects its result or error, exactly as if its own button had started it."""
    slot = _job_slot(key)
    slot.pop("message", None)
    slot["id"] = slot["last_id"] = job_id
    slot["params"], slot["cancelled_note"] = params, cancelled_note
