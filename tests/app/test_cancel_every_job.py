"""Every long-running action of the app shows progress and a working Cancel through the one runner (core.jobs):
start it, see the progress bar, press Cancel, and find a cancelled job record and the page's message."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from core import jobs
from tests.app.conftest import _make_app


def _app(model: str, page: str, state: dict, text: str = "") -> AppTest:
    at = _make_app(model, text, timeout=240)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    return at.run()


def _cancel_while_running(at: AppTest, job_key: str, start: bool = True) -> jobs.JobRecord:
    if start:
        at.button(key=f"{job_key}.run").click().run()
    assert not at.exception, at.exception
    job_id = at.session_state[f"{job_key}.jobstate"]["last_id"]
    deadline = time.time() + 120
    while jobs.status(job_id).done == 0:  # real work has begun: the bar moves
        assert time.time() < deadline, "the job never reported progress"
        time.sleep(0.05)
    at.run()
    assert jobs.status(job_id).active, "the job ended before it could be cancelled: give it more work"
    assert at.get("progress"), "no progress bar while the job runs"
    at.button(key=f"{job_key}.cancel").click().run()
    record = jobs.wait(job_id, timeout=60)
    assert record.state == "cancelled"
    at.run()
    assert not at.exception, at.exception
    assert any("Cancelled" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not at.session_state[f"{job_key}.jobstate"].get("id")
    assert jobs.read_record(job_id).state == "cancelled"  # the durable record agrees
    return record


def test_anisotropy_pass(minilm_dir):
    at = _app(str(minilm_dir), "app_pages/anisotropy.py",
              {"anisotropy.source": "SNLI", "anisotropy.dataset_limit": 3000})
    _cancel_while_running(at, "anisotropy")
    assert at.button(key="anisotropy.run")  # ready to run again


@pytest.mark.parametrize("part, job_key", [("Statistics", "heads.survey"), ("Syntactic heads", "heads.syntax")])
def test_heads_over_a_dataset(minilm_dir, part, job_key):
    at = _app(str(minilm_dir), "app_pages/attention.py",
              {"attention.tab": "Heads over a dataset", "heads.part": part, "heads.source": "SNLI", "heads.limit": 3000, "heads.tb_limit": 2000})
    _cancel_while_running(at, job_key)


def test_inside_a_head_norm_shares(minilm_dir):
    at = _app(str(minilm_dir), "app_pages/attention.py", {"attention.tab": "Inside a head", "inside.source": "SNLI", "inside.limit": 3000})
    _cancel_while_running(at, "inside.shares")
    assert at.button(key="inside.shares.run")


def test_what_fine_tuning_changes(minilm_dir, tiny_bert_dir):
    at = _app(str(minilm_dir), "app_pages/finetune.py",
              {"changes.base": str(minilm_dir), "changes.others": ["all-MiniLM-L6-v2"], "changes.source": "SNLI",
               "changes.dataset_limit": 3000})
    _cancel_while_running(at, "changes.similarity")


def test_pca_background(minilm_dir):
    at = _make_app(str(minilm_dir), "She went to the bank.", timeout=240)
    at.switch_page("app_pages/pca.py").run()
    at.selectbox(key="pca.background").set_value("snli").run()  # the background encoding starts by itself
    _cancel_while_running(at, f"pca.background.{minilm_dir}", start=False)
    assert any("fitted on your sentences" in c.value for c in at.caption)


def test_training_run_on_the_finetune_page(tiny_bert_dir, data_dir):
    from core.training import Recipe, get_run, submit
    from core.training.runs import job_id, partial_dir

    submit(Recipe(model=str(tiny_bert_dir), task="snli", run_name="long-run", train_limit=500, eval_limit=50,
                  epochs=100, max_length=32, batch_size=8))
    deadline = time.time() + 120
    while (get_run("long-run").status.get("step") or 0) == 0:
        assert time.time() < deadline, get_run("long-run").log_tail
        time.sleep(0.2)
    runner_id = job_id(partial_dir("long-run"))
    at = _app(str(tiny_bert_dir), "app_pages/finetune.py", {})
    assert any("long-run" in p.proto.text for p in at.get("progress"))
    at.button(key="finetune.cancel.long-run").click().run()
    assert jobs.wait(runner_id, timeout=60).state == "cancelled"
    assert get_run("long-run").state == "cancelled"
