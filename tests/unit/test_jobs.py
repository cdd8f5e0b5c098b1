"""The one job runner: progress, cancel, result, error and a durable record, in a thread or a process."""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time

import pytest

from core import jobs
from core.progress import check_stop
from tests.unit import job_work


def test_thread_job_reports_progress_and_keeps_its_result():
    seen = []
    submitted = threading.Event()

    def work(progress, should_stop):
        submitted.wait(10)  # `job` below is bound only once submit() has returned (the thread may start first)
        for i in range(5):
            progress(i + 1, 5, "counting")
            seen.append(jobs.status(job.id).done)
        return "answer"

    job = jobs.submit("test", {"n": 5}, work, unit="steps")
    submitted.set()
    record = jobs.wait(job.id, timeout=30)
    assert record.state == "done" and (record.done, record.total, record.unit) == (5, 5, "steps")
    assert job.result == "answer"
    assert seen == [1, 2, 3, 4, 5]  # the live state is current even when the disk copy is throttled
    on_disk = json.loads((jobs.jobs_dir() / job.id / jobs.RECORD).read_text())
    assert on_disk["state"] == "done" and on_disk["params"] == {"n": 5} and on_disk["finished_at"] >= on_disk["started_at"]


def test_thread_job_cancel_stops_the_work_and_keeps_no_result():
    started = threading.Event()

    def work(progress, should_stop):
        started.set()
        while True:
            check_stop(should_stop)
            time.sleep(0.01)

    job = jobs.submit("test", {}, work)
    assert started.wait(10)
    assert jobs.cancel(job.id)
    record = jobs.wait(job.id, timeout=10)
    assert record.state == "cancelled" and "cancel" in record.error
    assert job.result is None
    assert not jobs.cancel(job.id)  # nothing left to cancel


def test_thread_job_error_is_recorded_not_raised():
    def work(progress, should_stop):
        raise ValueError("bad corpus")

    job = jobs.submit("test", {}, work)
    record = jobs.wait(job.id, timeout=10)
    assert record.state == "failed" and record.error == "ValueError: bad corpus"
    assert jobs.read_record(job.id).state == "failed"


def test_process_job_runs_in_a_child_and_saves_its_result():
    job = jobs.submit("test", {"n": 3}, functools.partial(job_work.count, 3, 0.01), process=True)
    record = jobs.wait(job.id, timeout=60)
    assert record.state == "done", (jobs.jobs_dir() / job.id / jobs.LOG).read_text()
    assert record.pid != os.getpid() and (record.done, record.total) == (3, 3)
    assert jobs.result_json(job.id) == {"counted": 3}


def test_process_job_failure_and_cancel():
    failed = jobs.submit("test", {}, functools.partial(job_work.fail, "broken data"), process=True)
    assert jobs.wait(failed.id, timeout=60).error == "RuntimeError: broken data"

    slow = jobs.submit("test", {}, functools.partial(job_work.count, 10_000, 0.01), process=True)
    _wait_until(lambda: jobs.status(slow.id).done > 0)
    assert jobs.cancel(slow.id)
    record = jobs.wait(slow.id, timeout=30)
    assert record.state == "cancelled"
    assert slow.popen.wait(timeout=10) == 130
    assert jobs.result_json(slow.id) is None


def test_a_killed_job_says_so_and_reading_never_writes():
    job = jobs.submit("test", {}, functools.partial(job_work.count, 10_000, 0.01), process=True)
    _wait_until(lambda: jobs.status(job.id).done > 0)
    os.killpg(job.popen.pid, signal.SIGKILL)
    job.popen.wait(timeout=10)
    path = jobs.jobs_dir() / job.id / jobs.RECORD
    before = path.read_bytes()
    record = jobs.read_record(job.id)
    assert record.state == "killed" and "ended without finishing" in record.error
    assert [r.state for r in jobs.list_records("test")] == ["killed"]
    assert path.read_bytes() == before and json.loads(before)["state"] == "running"


def test_process_work_must_be_importable_with_json_arguments():
    with pytest.raises(ValueError, match="module-level"):
        jobs.submit("test", {}, lambda progress, should_stop: None, process=True)
    with pytest.raises(ValueError, match="JSON"):
        jobs.submit("test", {}, functools.partial(job_work.count, object(), 0.0), process=True)


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_latest_finds_the_newest_usable_job_for_the_same_settings():
    """Issue 37: a page in a new tab finds the job for its settings among the durable records."""
    def value(v):
        return lambda progress, should_stop: v

    def fail(progress, should_stop):
        raise ValueError("no")

    older = jobs.submit("survey", {"page_key": "p", "params": "(1,)"}, value("old"))
    jobs.wait(older.id)
    time.sleep(1.1)  # ids carry the second: the newer job sorts after
    newer = jobs.submit("survey", {"page_key": "p", "params": "(1,)", "prefetch": "step 2"}, value("new"))
    jobs.wait(newer.id)
    other = jobs.submit("survey", {"page_key": "p", "params": "(2,)"}, value("other"))
    jobs.wait(other.id)
    time.sleep(1.1)
    failed = jobs.submit("survey", {"page_key": "p", "params": "(1,)"}, fail)
    assert jobs.wait(failed.id).state == "failed"

    found = jobs.latest("survey", {"page_key": "p", "params": "(1,)"})
    assert found.id == newer.id  # the failed one is newer but shows nothing; extra params (prefetch) do not matter
    assert jobs.latest("survey", {"page_key": "p", "params": "(1,)"}, accept=lambda r: r.id == older.id).id == older.id
    assert jobs.latest("survey", {"page_key": "p", "params": "(3,)"}) is None
    assert jobs.latest("other-kind", {"page_key": "p", "params": "(1,)"}) is None


def test_a_kind_holding_a_path_makes_one_flat_job_folder():
    """The PCA page's job key holds the model's folder path: its id made nested folders nobody could list."""
    job = jobs.submit("pca.background./data/models/mini", {"page_key": "k"}, lambda progress, should_stop: 1)
    jobs.wait(job.id)
    assert "/" not in job.id and (jobs.jobs_dir() / job.id / jobs.RECORD).is_file()
    assert [r.id for r in jobs.list_records("pca.background./data/models/mini")] == [job.id]
    assert jobs.latest("pca.background./data/models/mini", {"page_key": "k"}).id == job.id


def test_progress_text_says_starting_until_the_work_counts_something():
    def record(state, done=0, total=0, message=""):
        return jobs.JobRecord("id", "k", {}, state, done=done, total=total, unit="inputs", message=message)

    assert record("queued").progress_text == "waiting to start…"
    assert record("running").progress_text == "starting…"
    assert record("running", message="loading model").progress_text == "loading model…"
    assert record("running", 3, 10, "Scoring:").progress_text == "Scoring: 3 / 10 inputs"
    assert record("running", 3).progress_text == "3 / … inputs"
    assert record("done", 10, 10).progress_text == "10 / 10 inputs"


def test_at_most_max_jobs_run_at_once_the_rest_queue_with_their_place(monkeypatch):
    """BERTLENS_MAX_JOBS=2: a third and fourth job wait, say their place in line, start in order as places free
    up, and one cancelled while queued never runs (issue 44: ten sessions ran ten jobs at once)."""
    monkeypatch.setenv("BERTLENS_MAX_JOBS", "2")
    release = {name: threading.Event() for name in "abcd"}
    ran = []

    def blocking(name):
        def work(progress, should_stop):
            ran.append(name)
            while not release[name].wait(0.01):
                check_stop(should_stop)
            return name
        return work

    def state(job):
        record = jobs.status(job.id)
        return record.state, record.message

    def until(condition, timeout=10.0):
        deadline = time.time() + timeout
        while not condition():
            assert time.time() < deadline, "timed out"
            time.sleep(0.02)

    a, b = jobs.submit("test", {}, blocking("a")), jobs.submit("test", {}, blocking("b"))
    until(lambda: state(a)[0] == state(b)[0] == "running")
    c = jobs.submit("test", {}, blocking("c"))
    d = jobs.submit("test", {}, blocking("d"))
    until(lambda: state(d) == ("queued", "queued, 2nd in line"))
    assert state(c) == ("queued", "queued, 1st in line")
    assert jobs.status(c.id).progress_text == "queued, 1st in line…"  # what the page's progress bar says
    time.sleep(0.3)
    assert sorted(ran) == ["a", "b"]  # the other two have not started

    release["a"].set()
    until(lambda: state(c)[0] == "running")
    assert state(c)[1] == ""  # the place in line is gone once it runs
    until(lambda: state(d) == ("queued", "queued, 1st in line"))
    assert jobs.cancel(d.id)  # cancellable while queued
    assert jobs.wait(d.id, timeout=10).state == "cancelled"
    assert "d" not in ran

    release["b"].set()
    release["c"].set()
    assert [jobs.wait(j.id, timeout=10).state for j in (a, b, c)] == ["done"] * 3
    assert sorted(ran[:2]) == ["a", "b"] and ran[2:] == ["c"]  # a and b start together, in either order
    e = jobs.submit("test", {}, lambda progress, should_stop: "free again")
    assert jobs.wait(e.id, timeout=10).state == "done"  # every place was handed back


def test_ordinals():
    assert [jobs.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_a_job_of_several_phases_counts_the_whole_in_percent():
    """Issue 48: fitting a head read "step 1/1000 … 9851 / 10850 steps"; a "%" job's message counts its phase."""
    record = jobs.JobRecord("id", "k", {}, "running", done=64, total=100, unit="%",
                            message="training the head: step 200 of 1,000, loss 5.100; about 3 min left")
    assert record.progress_text == "training the head: step 200 of 1,000, loss 5.100; about 3 min left (64 % done)"
    assert record.fraction == 0.64
