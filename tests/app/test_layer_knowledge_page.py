"""AppTest of "What each layer knows" (issue 49): Run the probes as a job, and the chart draws exactly the numbers
core.analyses.layer_knowledge.probes gives for the same model, tasks and treebanks; two tasks share one chart."""

from __future__ import annotations

import pytest

from core.analyses.layer_knowledge.probes import ANALYSIS, run_label_probes
from core.analyses.probe import probe_inputs
from core.model.loading import load_model
from tests.app.conftest import chart_rows_titled
from tests.app.test_anisotropy_page import run_until  # rerun until the worker's job is collected

PAGE = "app_pages/layer_knowledge.py"


def test_run_draws_the_probes_numbers_for_two_tasks(tiny_bert_dir, data_dir, make_app):
    at = make_app(str(tiny_bert_dir))
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any("Press **Run**" in i.value for i in at.info)
    at.multiselect(key="layer_knowledge.tasks").set_value(["upos", "morph:Number"])
    at.selectbox(key="layer_knowledge.corpus").set_value("ud:dev:100")
    at.selectbox(key="layer_knowledge.eval_corpus").set_value("ud:test:100")
    at.toggle(key="layer_knowledge.control").set_value(True).run()
    assert not at.exception
    at.button(key="layer_knowledge.job.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0, timeout=300)

    rows = chart_rows_titled(at, "What each layer knows")
    data = probe_inputs("ud:dev:100", "ud:test:100", 0)
    lm = load_model(str(tiny_bert_dir))
    for task in ("upos", "morph:Number"):
        expected = run_label_probes(lm, data, ANALYSIS.make({"task": task, "control": True}))
        for measure, key in (("accuracy", "accuracy"), ("control accuracy", "control_accuracy"),
                             ("selectivity", "selectivity")):
            drawn = sorted((r["layer"], r["value"]) for r in rows
                           if r["task"] == task and r["row"] == "layer" and r["measure"] == measure)
            assert [layer for layer, _ in drawn] == [s.layer for s in expected.layers]
            assert [value for _, value in drawn] == pytest.approx([getattr(s, key) for s in expected.layers], abs=1e-9)
        (majority,) = [r["value"] for r in rows if r["task"] == task and r["row"] == "majority"]
        assert majority == pytest.approx(expected.majority)
    assert not [r for r in rows if r["measure"] == "compression"]  # MDL off: no compression drawn
    assert at.get("download_button")  # the exports (CSV / JSON / image) of what the chart draws


def test_a_second_model_gets_its_own_chart_beside_the_first(tiny_bert_dir, minilm_dir, data_dir, make_app):
    at = make_app(str(tiny_bert_dir))
    at.switch_page(PAGE).run()
    second = at.selectbox(key="layer_knowledge.second")
    (other,) = [name for name in second.options if "MiniLM" in name][:1]  # the data folder's model, by its name
    second.set_value(other)
    at.selectbox(key="layer_knowledge.corpus").set_value("ud:dev:100")
    at.selectbox(key="layer_knowledge.eval_corpus").set_value("ud:test:100").run()
    assert not at.exception
    at.button(key="layer_knowledge.job.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) >= 2, timeout=300)
    first, beside = (chart_rows_titled(at, f"What each layer knows: {name}") for name in (tiny_bert_dir.name, other))
    assert len({r["model"] for r in first}) == 1 and len({r["model"] for r in beside}) == 1
    assert [r["layer"] for r in beside if r["row"] == "layer"] == list(range(7))  # MiniLM: 6 layers + embeddings
    expected = run_label_probes(load_model(str(minilm_dir)), probe_inputs("ud:dev:100", "ud:test:100", 0),
                                ANALYSIS.make({}))
    drawn = sorted((r["layer"], r["value"]) for r in beside if r["row"] == "layer" and r["measure"] == "accuracy")
    assert [v for _, v in drawn] == pytest.approx([s.accuracy for s in expected.layers], abs=1e-9)
