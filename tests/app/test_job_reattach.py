"""Issue 37: a job's result reattaches in any tab and after a reload. A page finds the newest job for its settings
among the durable job records (core.jobs.latest through app_pages.widgets.common.job_controls), so a fresh session (a new
tab, a reload) with the same settings shows the job started elsewhere: its result, or its progress and Cancel."""

from __future__ import annotations

import numpy as np

from core import jobs
from tests import fake_study
from tests.app.conftest import _make_app
from tests.app.test_reproduce_page import _open, start_slow
from tests.integration.test_explain import make_seq_classifier

SENTENCES = "the cat sat on the mat\na dog ran in the park\nthe bird sang"


def _explain_session(folder) -> object:
    at = _make_app(str(folder), "the cat sat on the mat")
    at.session_state["explain.faith.source"] = "Paste text"
    at.session_state["explain.faith.text"] = SENTENCES
    at.session_state["explain.size"] = 5
    at.session_state["explain.fsteps"] = 5
    at.switch_page("app_pages/explain.py")
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_finished_faithfulness_result_appears_in_a_new_tab_and_after_a_restart(tmp_path, monkeypatch):
    folder = make_seq_classifier(tmp_path / "seqcls")
    first = _explain_session(folder)
    assert first.session_state["explain.faith.jobstate"].get("result") is None
    first.button(key="explain.faith.run").click().run()
    job_id = first.session_state["explain.faith.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=120).state == "done"
    first.run()
    computed = first.session_state["explain.faith.jobstate"]["result"]

    second = _explain_session(folder)  # a new tab: its own session, nothing clicked
    slot = second.session_state["explain.faith.jobstate"]
    assert slot["last_id"] == job_id and slot["result"] is computed
    assert len(second.dataframe) == len(first.dataframe) and second.get("vega_lite_chart")

    monkeypatch.delitem(jobs._live, job_id)  # a server restart: only the job's folder is left
    after_restart = _explain_session(folder)
    restored = after_restart.session_state["explain.faith.jobstate"]["result"]
    assert restored.methods == computed.methods
    np.testing.assert_allclose(restored.comprehensiveness, computed.comprehensiveness)
    assert after_restart.dataframe[0].value.equals(first.dataframe[0].value)

    second.session_state["explain.fsteps"] = 6  # other settings: that job is not theirs
    second.run()
    assert not second.session_state["explain.faith.jobstate"].get("id")
    assert any("settings changed" in c.value for c in second.caption)


def _reproduce_session(monkeypatch, **state):
    at = _open(_make_app, monkeypatch, **state)
    assert not at.exception, at.exception
    return at


def test_a_running_study_shows_its_progress_after_a_reload_and_cancels_from_there(monkeypatch):
    monkeypatch.setattr(fake_study, "STEP_SECONDS", 0.05)
    job_id = start_slow(_reproduce_session(monkeypatch, **{"reproduce.fake.limit": 400}))

    reloaded = _reproduce_session(monkeypatch, **{"reproduce.fake.limit": 400})
    assert reloaded.get("progress"), "the running job's progress is not shown after the reload"
    assert not [b for b in reloaded.button if b.key == "reproduce.fake.run"]  # no second Run for the same settings
    reloaded.button(key="reproduce.fake.cancel").click().run()
    assert jobs.wait(job_id, timeout=30).state == "cancelled"
    reloaded.run()
    assert any("Cancelled" in w.value for w in reloaded.warning)

    other = _reproduce_session(monkeypatch, **{"reproduce.fake.limit": 3})  # other settings: nothing attached
    assert any("Press **Run the study**" in i.value for i in other.info)


def test_a_finished_study_appears_in_a_fresh_session_with_the_same_settings(monkeypatch):
    first = _reproduce_session(monkeypatch)
    first.button(key="reproduce.fake.run").click().run()
    job_id = first.session_state["reproduce.fake.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=60).state == "done"

    fresh = _reproduce_session(monkeypatch)
    assert any(s.value.startswith("**Reproduced**") for s in fresh.success)
    assert fresh.session_state["reproduce.fake.jobstate"]["last_id"] == job_id


def test_a_study_finished_before_a_server_restart_is_read_back_from_its_record(monkeypatch):
    first = _reproduce_session(monkeypatch)
    first.button(key="reproduce.fake.run").click().run()
    job_id = first.session_state["reproduce.fake.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=60).state == "done"
    assert jobs.result_json(job_id)["verdict"] == "reproduced"
    monkeypatch.delitem(jobs._live, job_id)  # a new server: nothing of the job left in memory, only its folder

    fresh = _reproduce_session(monkeypatch)
    assert fresh.session_state["reproduce.fake.jobstate"]["last_id"] == job_id
    assert any(s.value.startswith("**Reproduced**") for s in fresh.success)
    assert fresh.get("vega_lite_chart")


def test_a_cancelled_job_says_so_and_when_after_a_reload(monkeypatch):
    """Issue 48: after a reload a cancelled job said nothing (the page looked as if it had never run)."""
    import time

    from tests.markdown_text import plain

    monkeypatch.setattr(fake_study, "STEP_SECONDS", 0.05)
    job_id = start_slow(_reproduce_session(monkeypatch, **{"reproduce.fake.limit": 400}))
    assert jobs.cancel(job_id)
    record = jobs.wait(job_id, timeout=30)
    assert record.state == "cancelled" and record.finished_at

    reloaded = _reproduce_session(monkeypatch, **{"reproduce.fake.limit": 400})
    when = time.strftime("%H:%M", time.localtime(record.finished_at))
    shown = [plain(w.value) for w in reloaded.warning]
    assert any("Cancelled" in w and f"cancelled at {when}" in w for w in shown), shown
    assert reloaded.button(key="reproduce.fake.run")  # and it can be run again from there
    other = _reproduce_session(monkeypatch, **{"reproduce.fake.limit": 3})  # other settings: not their job
    assert not [w for w in other.warning if "Cancelled" in w.value]
