"""Work done once when the server starts, before any browser connects (issue 18, point 4: cold start).

A first visitor otherwise waits for ~6 s of imports (2 CPU cores) (torch, transformers' BERT code, which pulls in torch._dynamo,
sympy and scipy.optimize, then pandas and altair), the model load and a first slow forward pass, all after their
browser has connected. `streamlit run app.py` finds the st.App in app.py; its lifespan starts `warm_up` in a thread
as soon as the server is up, so that work overlaps Streamlit's own start and the browser loading the frontend:
  1. the modules the router and the Attention page need;
  2. the model a new session opens on (BERTLENS_MODEL, or the local model chosen when that one needs a
     download: core.model.loading.start_model), only when it is on disk (no download at launch), into the
     same store every session reads (app_pages.widgets.common.cached_model);
  3. one short forward pass and one chart serialised (first-call costs: kernel setup, altair's schema) while no
     session has started; once one has, only the chart (altair's schema validator, ~0.15 s on 2 cores): built
     here while that session's own forward pass runs in torch, outside the GIL, instead of after it (issue 47).
It starts when `streamlit run` imports app.py (`start()` there), before the server is up: the lifespan started it
~0.2-1 s later (after the server's own start), all of it on a first visitor's way to the first chart.
A session's script waits for step 1 only (`session_started`, `wait_for_imports`), with a spinner, so two threads
never import the same modules; once CHART_MODULES are in (`wait_for_chart_modules`) it shows a blank chart that
makes the browser load Streamlit's chart code during the wait (app.py).
BERTLENS_WARM_UP=0 turns it off. Light on purpose: app.py imports this module before the server starts.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from contextlib import asynccontextmanager

from streamlit.logger import get_logger

from core.model.loading import resolve, start_model

# app_pages.widgets.common, core.charts.attention (pandas, altair) and core.model.encoding,
# core.analyses.attention (numpy) imported in functions: app.py imports this module before the server starts, and the
# warm-up thread imports them in MODULES' order while the server already answers.
_log = get_logger("bertlens.launch")

# All that Streamlit's own chart element needs (app.py's chart-code prefetch waits for them only).
CHART_MODULES = ("pandas", "pyarrow")
# What a first session's script imports on the way to its first chart (the router, app_pages.widgets.common, the
# Attention page): CHART_MODULES first, then the heaviest; transformers' BERT modelling is otherwise imported
# inside load_model.
MODULES = (
    *CHART_MODULES,
    "torch",
    "transformers.models.bert.modeling_bert",
    "altair",
    "app_pages.widgets.common",
    "app_pages.shell.url_state",
    "app_pages.shell.lesson_bar",
    "app_pages.shell.page_report",
    "app_pages.shell.presenter",
    "core.analyses.attention",
    "core.charts.attention",
    "core.data.examples",
    "app_pages.widgets.attention_dataset",
    "app_pages.widgets.inside_head",
    "app_pages.widgets.pair_heads",
)
THREAD_NAME = "bertlens-warm-up"
WARM_UP_SENTENCE = "The teacher opened the book and read the first page aloud."

_imports_done = threading.Event()
_chart_modules_done = threading.Event()
_session_started = threading.Event()
_started = False
timings: dict[str, float] = {}  # phase -> seconds of the last warm-up (read by tests and the server log)


def enabled() -> bool:
    return os.environ.get("BERTLENS_WARM_UP", "1").strip().lower() not in ("0", "false", "no", "off")


def start() -> bool:
    """Start the warm-up thread (once per process); False when turned off."""
    global _started
    if _started or not enabled():
        return False
    _started = True
    threading.Thread(target=warm_up, name=THREAD_NAME, daemon=True).start()
    return True


@asynccontextmanager
async def lifespan(_app):
    """st.App's lifespan: start the warm-up (when app.py's import has not already) and serve at once (the server
    does not wait for it). What killed writers left is cleaned at the end of the warm-up, or here when there is no
    warm-up."""
    start()
    if not _started:
        clean_leftovers()
    yield


def clean_leftovers() -> None:
    from core.training.runs import clean_leftovers as clean  # core.training imports torch

    try:
        removed = clean()
        if removed:
            _log.info("removed %d leftover(s) of killed writers: %s", len(removed), ", ".join(p.name for p in removed))
    except Exception:  # never stops the server: the next start tries again
        _log.exception("cleaning leftovers of killed writers failed")


def session_started() -> bool:
    """Called first by every session's script. True while the warm-up is still importing: the script then shows a
    spinner and calls wait_for_imports (only the first visitors of a fresh server wait)."""
    _session_started.set()
    return _started and not _imports_done.is_set()


def wait_for_imports(timeout_s: float = 120.0) -> None:
    _imports_done.wait(timeout_s)


def wait_for_chart_modules(timeout_s: float = 30.0) -> bool:
    """Until CHART_MODULES are imported (~0.3 s after the launch); False if that did not happen in time."""
    return _chart_modules_done.wait(timeout_s)


class _WarmUpThreadFilter(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warning for this thread: it has no session by design."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD_NAME


_THREAD_FILTER = _WarmUpThreadFilter()  # one instance: adding it again is a no-op


def warm_up() -> None:
    """The three steps above; a failure is logged and never stops the server (a session then does the work)."""
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_THREAD_FILTER)
    start_time = time.perf_counter()
    _log.info("warm-up started")
    try:
        for name in MODULES:
            importlib.import_module(name)
            if name == CHART_MODULES[-1]:
                _chart_modules_done.set()
    except Exception:
        _log.exception("warm-up: an import failed; sessions will import on their own")
    finally:
        timings["imports_s"] = time.perf_counter() - start_time
        _chart_modules_done.set()
        _imports_done.set()
        _log.info("warm-up: imports done in %.2f s", timings["imports_s"])
    try:
        _warm_default_model()
    except Exception as err:  # a broken default model is reported to the session that opens it, in its page
        _log.warning("warm-up: default model not warmed: %s", err)
    clean_leftovers()  # after the first forward, which a waiting visitor needs sooner
    timings["total_s"] = time.perf_counter() - start_time
    _log.info("warm-up done in %.2f s (%s)", timings["total_s"], ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))


def _warm_default_model() -> None:
    from app_pages.widgets.common import cached_model
    from core.analyses.attention import attention_view
    from core.charts.attention import head_view_lines
    from core.model.encoding import encode

    ref = start_model().model  # the model a new session opens on: the default, or a local one when offline
    source, _ = resolve(ref)
    if source == "hub":
        _log.info("warm-up: default model %s is not on disk; not downloaded at launch", ref)
        return
    phase = time.perf_counter()
    lm = cached_model(ref, show_spinner=False)
    timings["model_s"] = time.perf_counter() - phase
    phase = time.perf_counter()
    if _session_started.is_set():
        _warm_chart_library()  # beside the session's forward pass (module docstring, step 3)
        timings["chart_library_s"] = time.perf_counter() - phase
        return
    encoding = encode(lm, WARM_UP_SENTENCE, attention_dtype="float16")
    head_view_lines(attention_view(encoding, 0, [0])).to_dict()
    timings["first_forward_and_chart_s"] = time.perf_counter() - phase


def _warm_chart_library() -> None:
    """altair's first to_dict (it builds the Vega-Lite schema's validator) on a one-point chart."""
    import altair as alt

    alt.Chart(alt.Data(values=[{"x": 0}])).mark_point().encode(x="x:Q").to_dict()
