"""AppTest of the "Erase a concept" tab (app_pages/widgets/erase_tab.render in a small script; the page that holds
it comes with the probe-labels branch): a tiny masked-word model erased at one layer on UD EWT, run as a job; the
bars drawn are the numbers the analysis returns for the same inputs."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core import jobs
from tests.app.conftest import chart_rows_titled
from tests.tiny_mlm import make_tiny_mlm

P = "layer_knowledge.erase."


def script():
    from app_pages.widgets.erase_tab import render

    render()


def test_the_tab_runs_the_job_and_draws_the_analysis_numbers(tmp_path, data_dir):
    from core.analyses.layer_knowledge import erasure
    from core.model.loading import load_model

    model = str(make_tiny_mlm(tmp_path / "tiny-mlm"))
    at = AppTest.from_function(script, default_timeout=180)
    at.session_state["model"] = model
    at.run()
    assert not at.exception, at.exception
    assert at.subheader[0].value == "Erase a concept"
    assert "LEACE" in at.markdown[0].value and at.markdown[0].value.count(". ") >= 1  # two plain sentences
    at.number_input(key=P + "train_n").set_value(80)
    at.number_input(key=P + "eval_n").set_value(40)
    at.number_input(key=P + "effect_limit").set_value(20)
    layer = at.selectbox(key=P + "layer")
    assert layer.value == 1 and layer.options == ["1", "2"]  # the middle layer by default, shown 1..L
    at.run()
    at.button(key=P + "job.run").click().run()
    record = jobs.wait(at.session_state[P + "job.jobstate"]["last_id"], timeout=300)
    assert record.state == "done", record.error
    at.run()
    assert not at.exception, at.exception

    settings = erasure.ANALYSIS.make({"layer": 1, "effect_limit": 20})  # array index 1: layer 2 as shown
    inputs = erasure.erase_inputs("upos", "ud:dev:80", "ud:test:40")
    expected = erasure.ANALYSIS.run_function()(load_model(model), inputs, settings)
    probe = {r["condition"]: r["accuracy"] for r in chart_rows_titled(at, "Can a linear probe still read upos?")}
    assert probe == pytest.approx({"probe before": expected.probe_before, "probe after": expected.probe_after,
                                   "majority label": expected.majority}, abs=1e-9)
    effect = {r["condition"]: r["score"] for r in chart_rows_titled(at, "Does the model use it?")}
    assert effect == pytest.approx({"before": expected.effect["before"], "after": expected.effect["after"],
                                    "random control": expected.effect["random_control"]}, abs=1e-9)
    assert len(at.get("download_button")) + len(at.button) >= 4  # the exports


def test_the_tab_shows_progress_and_cancels_leaving_nothing_saved(minilm_dir, data_dir):
    from core.analyses.layer_knowledge.erasure import list_erasers
    from tests.app.test_cancel_every_job import _cancel_while_running

    at = AppTest.from_function(script, default_timeout=180)
    at.session_state["model"] = str(minilm_dir)
    at.session_state[P + "train_n"] = 2000
    at.run()
    assert not at.exception, at.exception
    _cancel_while_running(at, P + "job")
    assert list_erasers() == []
