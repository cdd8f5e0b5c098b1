"""The bias page's "Erase gender" expander on a finished experiment, with the fit and the scoring stubbed (they are
tested on a real tiny run in tests/integration/test_bias_erase.py): the job gets the run, the experiment's training
sentences, its test set, its swaps and the chosen layer, and the page shows the flip rates as they are."""

from __future__ import annotations

import numpy as np

from core import bias, jobs, training
from core.analyses.layer_knowledge.erasure import SavedEraser, identity_eraser
from core.bias import erase_gender
from tests.app.conftest import chart_rows_titled
from tests.app.test_bias_page import open_page, write_finished_experiment


def test_flip_rates_before_and_after_erasing_gender(make_app, minilm_dir, data_dir, monkeypatch):
    from app_pages.widgets import bias_erase

    write_finished_experiment("bias-erase")
    calls = {}
    saved = SavedEraser("e", "/tmp/e", {"layer": 2}, identity_eraser(4))
    fit = erase_gender.GenderEraserFit(saved, 321, 0.55, 0.97, 0.56)
    flips = erase_gender.ErasedFlips("e", 2, erase_gender.TASK, 40, 10, 3)

    def fake_fit(lm, texts, index, swaps, **options):
        calls["fit"] = (lm, list(texts), index, tuple(swaps))
        return fit

    def fake_flips(clf, examples, fitted, swaps, **options):
        calls["flips"] = (clf, list(examples), fitted, tuple(swaps))
        return flips

    monkeypatch.setattr(bias_erase, "model_num_layers", lambda run: 6)
    monkeypatch.setattr(bias_erase, "load_model", lambda run: f"encoder of {run}")
    monkeypatch.setattr(training, "load_classifier", lambda run, **_: f"classifier of {run}")
    monkeypatch.setattr(erase_gender, "fit_gender_eraser", fake_fit)
    monkeypatch.setattr(erase_gender, "erased_flips", fake_flips)
    at = open_page(make_app, minilm_dir, train_limit=200, test_limit=120, flip_arm="full")
    assert at.selectbox(key="bias.erase.layer").value == 5  # the last layer by default, shown as 6
    at.selectbox(key="bias.erase.layer").set_value(1).run()
    at.button(key="bias.erase.job.run").click().run()
    assert not at.exception, at.exception
    assert jobs.wait(at.session_state["bias.erase.job.jobstate"]["last_id"], timeout=120).state == "done"
    at.run()
    assert not at.exception, at.exception

    spec = bias.experiment_status("bias-erase").spec
    data = bias.experiment_data(spec)
    lm, texts, index, swaps = calls["fit"]
    assert lm == "encoder of " + spec.run_name("full") and index == 1 and swaps == tuple(spec.swaps)
    assert texts == [t for e in data.sets.full for t in (e.text, e.text_b) if t][:bias_erase.FIT_SENTENCES]
    clf, examples, fitted, _ = calls["flips"]
    assert clf == "classifier of " + spec.run_name("full") and examples == list(data.test) and fitted is saved
    values = {m.label: m.value for m in at.metric}
    assert values["Flip rate, as trained"] == "25.0%" and values["Gender erased at layer 2"] == "7.5%"
    rows = chart_rows_titled(at, "Flip rate before and after erasing gender")
    np.testing.assert_allclose([r["flip_rate"] for r in rows], [0.25, 0.075])
    assert [r["condition"] for r in rows] == ["as trained", "gender erased"]
