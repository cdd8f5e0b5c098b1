"""The bias page's "Which heads carry the flips?" expander on a finished experiment, with core.bias.heads stubbed
(the patching itself is tested in tests/integration/test_bias_heads.py): the job gets the run, the experiment's
test set and its swaps, and the page shows the stub's ranking and flip rates as they are."""

from __future__ import annotations

import numpy as np

from core import bias, jobs, training
from core.bias import heads as bias_heads
from core.safe_text import markdown_text
from tests.app.test_bias_page import open_page, write_finished_experiment


def test_ranked_heads_and_flip_rates_of_a_finished_run(make_app, minilm_dir, data_dir, monkeypatch):
    write_finished_experiment("bias-heads")
    recovery = np.array([[0.1, 0.7, -0.2], [0.4, 0.05, 0.9]])
    stub = bias_heads.BiasHeads("c", "bias-heads-full", ("e", "n", "c"), 40, 8, 7, 1, recovery,
                                ((1, 2), (0, 1), (1, 0), (0, 0), (1, 1), (0, 2)), 2, "mask", 0.2, 0.075,
                                small_gaps=3)
    calls = []
    monkeypatch.setattr(training, "load_classifier", lambda run, **_: f"classifier of {run}")

    def fake_bias_heads(clf, examples, swaps, **options):
        calls.append((clf, examples, swaps, options))
        options["progress"](1, 1)
        return stub

    monkeypatch.setattr(bias_heads, "bias_heads", fake_bias_heads)
    at = open_page(make_app, minilm_dir, train_limit=200, test_limit=120, flip_arm="full")
    at.number_input(key="bias.heads.top_k").set_value(2).run()  # a changed widget reruns before the click
    at.button(key="bias.heads.job.run").click().run()
    assert not at.exception, at.exception
    assert jobs.wait(at.session_state["bias.heads.job.jobstate"]["last_id"], timeout=120).state == "done"
    at.run()
    assert not at.exception, at.exception

    clf, examples, swaps, options = calls[0]
    spec = bias.experiment_status("bias-heads").spec
    assert clf == "classifier of " + spec.run_name("full")
    assert list(examples) == list(bias.experiment_data(spec).test) and tuple(swaps) == tuple(spec.swaps)
    assert options["top_k"] == 2 and options["limit"] == bias_heads.DEFAULT_PAIRS
    assert options["run"] == spec.run_name("full")

    values = {m.label: m.value for m in at.metric}
    assert values["Flip rate, model intact"] == "20.0%" and values["Top 2 heads disabled"] == "7.5%"
    assert values["Flipping pairs patched"] == "7 of 8"
    table = next(d.value for d in at.dataframe if "mean recovery" in d.value.columns)
    # layers shown 1..L (core.numbering)
    assert [tuple(r) for r in table[["layer", "head"]].to_numpy()] == [(l + 1, h) for l, h in stub.ranking]
    np.testing.assert_allclose(table["mean recovery"], [recovery[h] for h in stub.ranking])
    assert list(table["disabled"]) == [True, True, False, False, False, False]
    assert any("1 flipping pairs were left out" in c.value for c in at.caption)
    # issue 48: pairs the model barely tells apart are said to be noise in the mean, above the ranking
    assert [w.value for w in at.warning if "patched pairs" in w.value] == [markdown_text(stub.warnings[0].message)]
    assert stub.warnings[0].message.startswith("3 of the 7 patched pairs differ by under 0.5")


def test_finding_the_heads_shows_progress_and_cancels(make_app, minilm_dir, data_dir, monkeypatch):
    import time

    from core.progress import check_stop
    from tests.app.test_cancel_every_job import _cancel_while_running

    write_finished_experiment("bias-heads-cancel")

    def slow_bias_heads(clf, examples, swaps, *, progress, should_stop, **options):
        progress(1, 100)
        for _ in range(2400):
            check_stop(should_stop)
            time.sleep(0.05)
        raise AssertionError("never cancelled")

    monkeypatch.setattr(training, "load_classifier", lambda run, **_: run)
    monkeypatch.setattr(bias_heads, "bias_heads", slow_bias_heads)
    at = open_page(make_app, minilm_dir, train_limit=200, test_limit=120, flip_arm="full",
                   experiment="bias-heads-cancel")
    _cancel_while_running(at, "bias.heads.job")
    assert at.button(key="bias.heads.job.run")


def test_a_run_without_a_recorded_accuracy_shows_as_done(make_app, minilm_dir, tiny_bert_dir, data_dir):
    """The page raised TypeError (None formatted as a percentage) for a run whose metrics.json has "accuracy": null."""
    from tests.app.test_attention_dataset import _classifier_run

    write_finished_experiment("bias-heads-unscored")
    _classifier_run(tiny_bert_dir, name=bias.experiment_status("bias-heads-unscored").spec.run_name("full"))
    at = open_page(make_app, minilm_dir, experiment="bias-heads-unscored")
    assert [p.proto.text for p in at.get("progress") if "full (all data)" in p.proto.text] == [
        "full (all data) — done, no accuracy recorded"]
