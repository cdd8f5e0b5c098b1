"""Soak (issue 32): 30 websocket sessions at a time for 2 minutes against one server, every session served, the
server's RSS within the memory budget at the end. The driver is bench/classroom_load.py's (Streamlit's own
websocket protocol, as a browser opening the Attention link speaks it), imported, not copied.

Bounded: rounds of 30 sessions start only while SOAK_SECONDS are left (BERTLENS_SOAK_SECONDS to change it), each
round has its own timeout, and each round opens a new text so every round runs a forward pass. The budget is
bench/RESULTS.md's for the classroom: the encoding cache budget (BERTLENS_ENCODING_CACHE_BYTES, default 1G) plus
the model's bytes, against the server's RSS (children included); and the RSS growth from the end of the first
round to the end stays within the encoding budget (the caches are bounded, nothing else accumulates)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from tests.browser.conftest import REPO, StreamlitServer

sys.path.insert(0, str(REPO / "bench"))
import classroom_load  # noqa: E402  (bench/ is a folder of scripts, not a package)

SESSIONS = 30
SOAK_SECONDS = float(os.environ.get("BERTLENS_SOAK_SECONDS", 120))
ROUND_TIMEOUT = 240.0
TOKENS = 128


@pytest.fixture(scope="module")
def soak_server(browser_model, tmp_path_factory):
    """Its own server (not the shared app_server): the RSS measured is this soak's alone."""
    server = StreamlitServer(browser_model, tmp_path_factory.mktemp("soak-cache"))
    yield server
    server.stop()


def _rss(pid: int) -> int:
    import psutil

    process = psutil.Process(pid)
    return process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))


def test_thirty_sessions_for_two_minutes_all_served_within_the_memory_budget(soak_server, browser_model):
    sys.path.insert(0, str(REPO / "bench"))
    import _app

    from core.budget import nbytes_of
    from core.models import load_model
    from core.settings import encoding_cache_bytes

    lm = load_model(browser_model)
    model_bytes = nbytes_of(lm.model)
    tokenizer = lm.tokenizer
    texts = (_app.long_text(tokenizer, TOKENS, seed=seed) for seed in range(1000))
    del lm  # only the server's copy of the model counts
    budget = encoding_cache_bytes() + model_bytes  # the server has this process's environment

    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=classroom_load.sample_rss, args=(soak_server.process.pid, stop, peak), daemon=True)
    sampler.start()
    rounds, after_first = [], None
    begin = time.perf_counter()
    try:
        while time.perf_counter() - begin < SOAK_SECONDS and len(rounds) < 50:
            started, charted, finished = classroom_load.websocket_sessions(
                soak_server.url, browser_model, next(texts), SESSIONS, spread=3.0, timeout=ROUND_TIMEOUT)
            rounds.append((started, charted, finished))
            served = sum(s is not None and c is not None and f is not None for s, c, f in zip(started, charted, finished))
            assert served == SESSIONS, (f"round {len(rounds)}: {served}/{SESSIONS} sessions got their chart and "
                                        f"finished; server log: {soak_server.log.read_text()[-1500:]}")
            if after_first is None:
                after_first = _rss(soak_server.process.pid)
    finally:
        stop.set()
        sampler.join()
    elapsed = time.perf_counter() - begin
    end = _rss(soak_server.process.pid)
    print(f"soak: {len(rounds)} rounds x {SESSIONS} sessions in {elapsed:.0f} s; RSS after round 1 "
          f"{after_first / 2**20:.0f} MiB, at the end {end / 2**20:.0f} MiB, peak {peak[0] / 2**20:.0f} MiB; budget "
          f"{budget / 2**20:.0f} MiB (encoding cache {encoding_cache_bytes() / 2**20:.0f} + model {model_bytes / 2**20:.0f})")
    assert elapsed >= SOAK_SECONDS and len(rounds) >= 2
    assert end <= budget, f"server RSS {end / 2**20:.0f} MiB above the budget {budget / 2**20:.0f} MiB"
    assert end - after_first <= encoding_cache_bytes(), "RSS grew by more than the encoding cache budget"
    assert "Traceback" not in soak_server.log.read_text()
