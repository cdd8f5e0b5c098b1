"""A class opening one shared link at once (issue 18, point 6).

    python bench/classroom_load.py [--sessions 30] [--spread 3] [--model bert-base-random|minilm|PATH] [--tokens 128] [--quick]

One `streamlit run app.py` on localhost, one Debian Chromium, `--sessions` browser contexts (each a Streamlit
session) that open the same /attention?model=…&a=… link, started evenly over `--spread` seconds (a teacher's
link, a class of students). Bounded: at most 60 sessions, each given `--timeout` seconds, localhost only.
Prints time-to-chart of the first and the last session to start (and min / median / max over all), how many
sessions were served, how many times the server loaded the model and ran the forward pass (its log), and the
server's peak RSS (sampled every 0.2 s with psutil, children included) beside the budget: the encoding cache
budget (BERTLENS_ENCODING_CACHE_BYTES) plus the model's bytes. Baseline: the raw forward on the same text.
--quick: 6 sessions. Model: see bench/_app.py (bert-base cannot be downloaded here; a random-init stand-in).

--driver websocket: each session is a bare client of Streamlit's own websocket protocol (/_stcore/stream, the
BackMsg / ForwardMsg protobufs the browser sends and receives) instead of a Chromium context, so the figures are the
server's alone: time to the head view's chart message and to the end of the run, for every session. In a
classroom every student's browser draws on their own machine; with --driver browser all the renderers share this
machine's cores with the server, which is what the browser figures measure on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from urllib.parse import quote

import _app

MAX_SESSIONS = 60


def sample_rss(pid: int, stop: threading.Event, peak: list) -> None:
    import psutil

    process = psutil.Process(pid)
    while not stop.is_set():
        try:
            rss = process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
            peak[0] = max(peak[0], rss)
        except psutil.Error:
            pass
        time.sleep(0.2)


def _blank(spec: str) -> bool:
    """app.py's 1x1 chart, sent while the server still imports so the browser loads the chart code: not a chart."""
    parsed = json.loads(spec or "{}")
    return parsed.get("width") == 1 and parsed.get("height") == 1


def browser_sessions(base_url: str, model: str, text: str, sessions: int, spread: float, timeout: float):
    """`sessions` Chromium contexts open the link, started evenly over `spread` s; (start, chart drawn) times."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_FLAGS, chromium_path

    url = f"{base_url}/attention?model={quote(model)}&a={quote(text)}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        contexts = [browser.new_context(viewport={"width": 1200, "height": 900}) for _ in range(sessions)]
        pages = [c.new_page() for c in contexts]
        started, done = [None] * sessions, [None] * sessions
        t0 = time.perf_counter()
        # Playwright's sync API is single-threaded: start every navigation, then poll them all.
        for i, page in enumerate(pages):
            while time.perf_counter() - t0 < i * spread / max(sessions - 1, 1):
                time.sleep(0.02)
            started[i] = time.perf_counter()
            page.evaluate(f"window.location.href = {json.dumps(url)}")
        deadline = time.perf_counter() + timeout
        check = ("() => !!document.querySelector('" + _app.CHART_DRAWN.replace("'", "\\'") + "')"
                 " && !document.querySelector('[data-testid=\"stStatusWidget\"]')")
        while None in done and time.perf_counter() < deadline:
            for i, page in enumerate(pages):
                if done[i] is None:
                    try:
                        if page.evaluate(check):
                            done[i] = time.perf_counter()
                    except Exception:  # the page is still navigating
                        pass
            time.sleep(0.1)
        browser.close()
    return started, done


def rerun_message(query: dict | None = None, page_name: str = "", widgets=(), fragment_id: str = "") -> bytes:
    """A browser's rerun request as bytes: the page's query string and name, widget states (WidgetState protos; a
    button press is one with trigger_value=True) and, for a widget inside a fragment, the fragment's id."""
    from urllib.parse import urlencode

    from streamlit.proto.BackMsg_pb2 import BackMsg

    message = BackMsg()
    message.rerun_script.query_string = urlencode(query or {})
    message.rerun_script.page_name = page_name
    message.rerun_script.widget_states.widgets.extend(widgets)
    message.rerun_script.fragment_id = fragment_id
    return message.SerializeToString()


def button_press(element):
    """The widget state a click on a button element sends."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=element.button.id, trigger_value=True)


def connect(base_url: str, timeout: float, local_address: str | None = None):
    """A bare websocket client of Streamlit's own protocol (/_stcore/stream), as `async with`; `local_address`
    (e.g. 127.0.0.2) sets the address the server sees the connection come from."""
    import websockets

    uri = base_url.replace("http://", "ws://") + "/_stcore/stream"
    extra = {"local_addr": (local_address, 0)} if local_address else {}
    return websockets.connect(uri, subprotocols=["streamlit"], max_size=None, open_timeout=timeout, **extra)


async def read_run(ws, on_element=None) -> list:
    """The new-element deltas of one script (or fragment) run, read until its script_finished message: each has
    `.new_element` (an Element proto) and `.fragment_id` (what a press of a button inside a fragment sends back);
    on_element(element) is called as each arrives."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    deltas = []
    while True:
        message = ForwardMsg()
        message.ParseFromString(await ws.recv())
        kind = message.WhichOneof("type")
        if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            deltas.append(message.delta)
            if on_element is not None:
                on_element(message.delta.new_element)
        if kind == "script_finished":
            return deltas


def websocket_sessions(base_url: str, model: str, text: str, sessions: int, spread: float, timeout: float):
    """`sessions` websocket clients ask for the same Attention page, started evenly over `spread` s, as a browser
    does on opening the link (one rerun_script BackMsg with the link's query string); (start, chart message,
    run finished) times per session."""
    import asyncio

    started, done, finished = [None] * sessions, [None] * sessions, [None] * sessions
    hello = rerun_message({"model": model, "a": text}, "attention")

    async def one(i: int) -> None:
        await asyncio.sleep(i * spread / max(sessions - 1, 1))
        async with connect(base_url, timeout) as ws:
            started[i] = time.perf_counter()
            await ws.send(hello)

            def seen(element) -> None:
                if (element.WhichOneof("type") == "vega_lite_chart" and done[i] is None
                        and not _blank(element.vega_lite_chart.spec)):
                    done[i] = time.perf_counter()

            await read_run(ws, seen)
            finished[i] = time.perf_counter()

    async def all_sessions() -> None:
        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(sessions)), return_exceptions=True), timeout)

    try:
        asyncio.run(all_sessions())
    except TimeoutError:
        pass
    return started, done, finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--spread", type=float, default=3.0)
    parser.add_argument("--model", default="bert-base-random")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--driver", choices=("browser", "websocket"), default="browser")
    args = parser.parse_args()
    sessions = min(6 if args.quick else args.sessions, MAX_SESSIONS)
    model = _app.resolve_model(args.model)

    from core import settings
    from core.model.budget import nbytes_of
    from core.model.loading import load_model

    lm = load_model(model, masked_lm=True)
    text = _app.long_text(lm.tokenizer, args.tokens, seed=11)
    raw = _app.raw_forward_seconds(lm, text)
    model_bytes = nbytes_of(lm.masked_lm or lm.model)
    del lm

    with _app.served(model) as (server, http_200):
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=sample_rss, args=(server.process.pid, stop, peak), daemon=True)
        sampler.start()
        if args.driver == "websocket":
            started, done, finished = websocket_sessions(server.url, model, text, sessions, args.spread, args.timeout)
        else:
            started, done = browser_sessions(server.url, model, text, sessions, args.spread, args.timeout)
            finished = None
        stop.set()
        sampler.join()
        log = server.log.read_text()
    waits = [d - s for s, d in zip(started, done) if d is not None]
    result = {
        "model": args.model, "driver": args.driver, "tokens": args.tokens, "sessions": sessions, "spread_s": args.spread,
        "served": len(waits), "raw_forward_s": raw, "http_200_s": http_200,
        "first_session_chart_s": (done[0] - started[0]) if done[0] else None,
        "last_session_chart_s": (done[-1] - started[-1]) if done[-1] else None,
        "min_s": min(waits, default=None), "median_s": statistics.median(waits) if waits else None,
        "max_s": max(waits, default=None),
        "run_finished_max_s": max((f - s0 for s0, f in zip(started, finished) if f and s0), default=None) if finished else None,
        "model_loads": log.count("loading model "), "forward_passes": log.count("forward pass ") - log.count("forward pass done"),
        "server_peak_rss_mib": peak[0] / 2**20,
        "budget_mib": (settings.encoding_cache_bytes() + model_bytes) / 2**20,
        "encoding_budget_mib": settings.encoding_cache_bytes() / 2**20, "model_mib": model_bytes / 2**20,
        "load": _app.load_line(),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
