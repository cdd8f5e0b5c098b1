"""Issue 44: at most BERTLENS_MAX_JOBS jobs run per server; a page's job controls show a queued job's place in line
and cancel it there."""

from __future__ import annotations

import threading
import time

from streamlit.testing.v1 import AppTest

from core import jobs
from core.progress import check_stop
from tests.markdown_text import plain

def _page():
    from app_pages.widgets.common import job_controls

    def make_work():
        return lambda progress, should_stop: "page result"

    job_controls("queue.test", "Run", ("settings",), make_work, kind="queue-test")


def _occupy(release: threading.Event):
    def work(progress, should_stop):
        while not release.wait(0.01):
            check_stop(should_stop)
    return work


def test_a_queued_job_shows_its_place_and_is_cancelled_from_the_page(monkeypatch):
    monkeypatch.setenv("BERTLENS_MAX_JOBS", "2")
    release = threading.Event()
    busy = [jobs.submit("other", {}, _occupy(release)) for _ in range(2)]  # two sessions' jobs fill both places
    try:
        at = AppTest.from_function(_page, default_timeout=60)
        at.run()
        at.button(key="queue.test.run").click().run()
        job_id = at.session_state["queue.test.jobstate"]["id"]
        deadline = time.time() + 10
        while jobs.status(job_id).message != "queued, 1st in line":
            assert time.time() < deadline, jobs.status(job_id)
            time.sleep(0.05)
        at.run()
        texts = [plain(p.proto.text) for p in at.get("progress")]
        assert texts == ["queued, 1st in line…"], texts
        at.button(key="queue.test.cancel").click().run()
        assert jobs.wait(job_id, timeout=10).state == "cancelled"
    finally:
        release.set()
        for job in busy:
            jobs.wait(job.id, timeout=10)
