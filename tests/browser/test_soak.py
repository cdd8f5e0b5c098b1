"""Soak (issue 32): 30 websocket sessions at a time for 2 minutes against one server, every session served, the
server's RSS within the memory budget at the end. The driver is bench/classroom_load.py's (Streamlit's own
websocket protocol, as a browser opening the Attention link speaks it), imported, not copied.

Bounded: rounds of 30 sessions start only while SOAK_SECONDS are left (BERTLENS_SOAK_SECONDS to change it), each
round has its own timeout. Every round opens a new text, so every round runs a forward pass and, under the small
encoding cache budget the soak server gets (ENCODING_BUDGET), the cache fills and evicts within the two minutes.
The budget at the end: the server's RSS (children included) after the first round (Python, Streamlit, torch, the
model, one session round) plus the encoding cache budget plus SESSION_SLACK for what is not cached forward
passes (Streamlit's state of the sessions, allocator fragmentation). Without eviction, 30 distinct 128-token
MiniLM forwards would hold ~100 MiB on their own, more than the budget allows."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from tests.browser.conftest import REPO, StreamlitServer
from tests.own_thread import in_own_thread

sys.path.insert(0, str(REPO / "bench"))
import _app  # noqa: E402  (bench/ is a folder of scripts, not a package)
import classroom_load  # noqa: E402

SESSIONS = 30
SOAK_SECONDS = float(os.environ.get("BERTLENS_SOAK_SECONDS", 120))
MAX_ROUNDS = 1000  # a bound for a fast machine; time ends the loop long before
ROUND_TIMEOUT = 240.0
TOKENS = 128
ENCODING_BUDGET = 32 * 2**20
SESSION_SLACK = 96 * 2**20


@pytest.fixture(scope="module")
def soak_server(browser_model, tmp_path_factory):
    """Its own server (not the shared app_server), so the RSS measured is this soak's alone."""
    saved = dict(os.environ)
    os.environ["BERTLENS_ENCODING_CACHE_BYTES"] = str(ENCODING_BUDGET)
    try:
        server = StreamlitServer(browser_model, tmp_path_factory.mktemp("soak-cache"))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield server
    server.stop()


def _rss(pid: int) -> int:
    import psutil

    process = psutil.Process(pid)
    return process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))


def test_thirty_sessions_for_two_minutes_all_served_within_the_memory_budget(soak_server, browser_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(browser_model)
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=classroom_load.sample_rss, args=(soak_server.process.pid, stop, peak), daemon=True)
    sampler.start()
    rounds, after_first = 0, None
    begin = time.perf_counter()
    try:
        while time.perf_counter() - begin < SOAK_SECONDS and rounds < MAX_ROUNDS:
            text = _app.long_text(tokenizer, TOKENS, seed=rounds)
            started, charted, finished = in_own_thread(
                classroom_load.websocket_sessions, soak_server.url, browser_model, text, SESSIONS, spread=3.0,
                timeout=ROUND_TIMEOUT)
            rounds += 1
            served = sum(s is not None and c is not None and f is not None for s, c, f in zip(started, charted, finished))
            assert served == SESSIONS, (f"round {rounds}: {served}/{SESSIONS} sessions got their chart and finished; "
                                        f"server log: {soak_server.log.read_text()[-1500:]}")
            if after_first is None:
                after_first = _rss(soak_server.process.pid)
    finally:
        stop.set()
        sampler.join()
    elapsed = time.perf_counter() - begin
    end = _rss(soak_server.process.pid)
    budget = after_first + ENCODING_BUDGET + SESSION_SLACK
    print(f"soak: {rounds} rounds x {SESSIONS} sessions in {elapsed:.0f} s; RSS after round 1 "
          f"{after_first / 2**20:.0f} MiB, at the end {end / 2**20:.0f} MiB, peak {peak[0] / 2**20:.0f} MiB; budget "
          f"{budget / 2**20:.0f} MiB (+ {ENCODING_BUDGET >> 20} MiB encoding cache + {SESSION_SLACK >> 20} MiB sessions)")
    assert elapsed >= SOAK_SECONDS and rounds >= 2
    assert end <= budget, f"server RSS {end / 2**20:.0f} MiB above the budget {budget / 2**20:.0f} MiB"
    assert "Traceback" not in soak_server.log.read_text()
