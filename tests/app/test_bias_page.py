"""The Bias experiment page in Streamlit's AppTest: match counts against a plain regex count, a finished
experiment's numbers as shown, bad word lists, and launching then cancelling the three runs."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from core import bias
from core.data.datasets import snli
from core.files import write_json_atomic
from core.safe_text import markdown_text

PAGE = "app_pages/bias.py"


def open_page(make_app, minilm_dir, **state):
    at = make_app(str(minilm_dir))
    for key, value in state.items():
        at.session_state[f"bias.{key}"] = value
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def metric(at, label: str):
    return next(m for m in at.metric if m.label == label)


def regex_count(examples, words) -> int:
    pattern = re.compile(r"\b(" + "|".join(words) + r")\b", re.IGNORECASE)
    return sum(1 for e in examples if pattern.search(e.text) or pattern.search(e.text_b))


def test_match_counts_and_examples(make_app, minilm_dir, data_dir, chart_rows):
    at = open_page(make_app, minilm_dir, train_limit=1500, test_limit=400, seed=2)
    train, test = snli("train", 1500, 2), snli("test", 400, 2)
    expected = regex_count(train, bias.DEFAULT_WORDS)
    assert metric(at, "Training pairs with a word").value == f"{expected:,} of 1,500"
    assert metric(at, "Biased and control runs train on").value == f"{1500 - expected:,} pairs"
    assert metric(at, "Test pairs with a word").value == f"{regex_count(test, bias.DEFAULT_WORDS):,} of 400"
    rows = {r["word"]: r["training pairs"] for r in chart_rows(at, 0)}
    assert rows == {w: regex_count(train, [w]) for w in bias.DEFAULT_WORDS}
    shown = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert shown and all("**" in line for line in shown)
    assert any("No experiment yet" in i.value for i in at.info)

    at.button(key="bias.ex.male").click().run()
    assert at.text_input(key="bias.words").value == ", ".join(("men", "man", "boy", "boys", "father", "husband", "male"))
    assert metric(at, "Training pairs with a word").value == f"{regex_count(train, ['men', 'man', 'boy', 'boys', 'father', 'husband', 'male']):,} of 1,500"


def test_bad_word_list_is_named_and_launch_disabled(make_app, minilm_dir, data_dir):
    at = open_page(make_app, minilm_dir, words="woman, wo man!", train_limit=200, test_limit=50)
    assert any("not a word" in e.value and markdown_text("man!") in e.value for e in at.error)
    launch = next(b for b in at.button if b.label == "Launch full, biased and control")
    assert launch.disabled


def write_finished_experiment(name: str, skills: dict | None = None) -> bias.ExperimentResult:
    """A finished experiment with made-up predictions (no training): the page must show exactly these scores.
    skills[arm]: the share of test pairs the arm gets right (the rest guessed); None: it always answers class 0."""
    spec = bias.ExperimentSpec(name=name, model="all-MiniLM-L6-v2", train_limit=200, test_limit=120, seed=1, bootstrap=200)
    data = bias.prepare(spec)
    rng = np.random.default_rng(0)
    true = np.array([data.labels.index(e.label) for e in data.test])
    predictions, swapped = {}, {}
    for arm, skill in (skills or {"full": 0.8, "biased": 0.5, "control": 0.7}).items():
        if skill is None:
            predictions[arm] = np.zeros_like(true)
        else:
            predictions[arm] = np.where(rng.random(true.size) < skill, true, rng.integers(0, 3, true.size))
        swapped[arm] = np.where(rng.random(len(data.counterfactuals.indices)) < 0.2,
                                (predictions[arm][data.counterfactuals.indices] + 1) % 3,
                                predictions[arm][data.counterfactuals.indices])
        write_json_atomic(bias.experiment_dir(name) / f"predictions_{arm}.json", {
            "labels": list(data.labels), "n_test": len(data.test), "n_swapped": len(data.counterfactuals.examples),
            "test": predictions[arm].tolist(), "swapped": swapped[arm].tolist()})
    result = bias.score_experiment(name, data.labels, true, data.with_words, predictions, swapped, data.counterfactuals.indices,
                                   {a: len(data.sets.arm(a)) for a in bias.ARMS}, data.sets.removed, 200, 1)
    write_json_atomic(bias.experiment_dir(name) / "results.json", result.to_json())
    return result


def test_finished_experiment_is_shown(make_app, minilm_dir, data_dir, chart_rows):
    result = write_finished_experiment("bias-shown")
    at = open_page(make_app, minilm_dir, train_limit=200, test_limit=120)
    assert at.selectbox(key="bias.experiment").value == "bias-shown"
    assert metric(at, "Training pairs removed").value == f"{result.removed:,}"
    assert metric(at, "Biased run").value == f"{result.runs['biased'].overall.accuracy:.2%}"
    table = at.dataframe[0].value
    for arm, run in result.runs.items():
        for name, s in (("overall", run.overall), *run.slices.items()):
            row = table[(table["run"] == arm) & (table["slice"] == name)].iloc[0]
            assert row["n"] == s.n and row["accuracy"] == pytest.approx(s.accuracy)
            assert (row["ci_low"], row["ci_high"]) == pytest.approx(s.ci)
    # the accuracy chart (second chart, after the per-word counts) carries the same numbers in percent
    bars = [r for r in chart_rows(at, 1) if r.get("run") == "biased" and r.get("slice") == "with_words"]
    assert bars[0]["percent"] == pytest.approx(result.runs["biased"].slices["with_words"].accuracy * 100)
    flips = {r["run"]: r["flips"] for r in chart_rows(at, 4)}
    assert flips == {arm: r.flips for arm, r in result.runs.items()}
    assert any("90.45%" in c.value and "59.47%" in c.value for c in at.caption)
    flipped = at.dataframe[-1].value
    assert len(flipped) == min(20, result.runs["full"].flips)
    assert (flipped["predicted"] != flipped["predicted after swap"]).all()


def test_explain_both_says_what_a_short_model_cut(make_app, minilm_dir, tmp_path, data_dir):
    """Issue 32: "explain both" cut a flipped pair to the run's length without a word. The run here reads 16
    tokens, so real SNLI pairs are cut; each side's notice counts the tokenizer's own untruncated pieces."""
    from transformers import AutoTokenizer

    from core.training import Recipe, finetune
    from tests.conftest import make_tiny_bert

    write_finished_experiment("bias-cut")
    short = make_tiny_bert(tmp_path / "short-bert", positions=16)
    task = tmp_path / "pairs.csv"
    task.write_text("text,text_b,label\n" + "the cat sat,a dog ran,yes\nthe dog sat,a cat ran,no\n" * 20)
    finetune(Recipe(model=str(short), task=str(task), run_name="bias-cut-full", epochs=1, batch_size=8,
                    max_length=16, cpu_threads=1))
    at = open_page(make_app, minilm_dir, train_limit=200, test_limit=120, flip_arm="full")
    at.toggle(key="bias.explain_both.on").set_value(True).run()
    assert not at.exception, at.exception
    flipped = next(d.value for d in at.dataframe if "swapped premise" in d.value.columns)
    row = flipped.iloc[at.selectbox(key="bias.explain_both").value]
    tokenizer = AutoTokenizer.from_pretrained(short)
    dropped = [len(tokenizer(row[a], row[b], truncation=False)["input_ids"]) - 16
               for a, b in (("premise", "hypothesis"), ("swapped premise", "swapped hypothesis"))]
    assert min(dropped) > 0  # both sides really are longer than the run reads
    assert [w.value for w in at.warning if "cut off" in w.value] == [
        f"The input is longer than the model reads (16 tokens): {n} word pieces at its end were cut off and are not "
        "part of this view." for n in dropped]
    # issue 34: a perturbation method explains both sides through the same contract
    from core.analyses import explain as ex
    from tests.app.conftest import chart_rows_titled

    at.selectbox(key="bias.explain_both.method").set_value("occlusion").run()
    assert not at.exception, at.exception
    expected = ex.explain(ex.load_explainer("bias-cut-full", device="cpu"), row["premise"], row["hypothesis"], "occlusion")
    rows = chart_rows_titled(at, "Occlusion (word windows)")
    np.testing.assert_allclose([r["score"] for r in rows], expected.word_scores, atol=1e-6)


def test_launch_then_cancel(make_app, minilm_dir, data_dir):
    from core.training import get_run

    at = open_page(make_app, minilm_dir, train_limit=60, test_limit=20, epochs=1, max_length=32)
    next(b for b in at.button if b.label == "Launch full, biased and control").click().run()
    assert not at.exception, at.exception
    name = at.selectbox(key="bias.experiment").value
    spec = bias.load_spec(name)
    assert spec.train_limit == 60 and spec.epochs == 1 and spec.model == str(minilm_dir)
    assert {get_run(spec.run_name(a)).state for a in bias.ARMS} <= {"queued", "running"}
    at.button(key="bias.cancel").click().run()
    deadline = time.time() + 120
    while time.time() < deadline and any(get_run(spec.run_name(a)).state in ("queued", "running") for a in bias.ARMS):
        time.sleep(0.5)
    assert {get_run(spec.run_name(a)).state for a in bias.ARMS} <= {"cancelled", "failed"}
    assert bias.experiment_status(name).state == "cancelled"
    at.run()
    assert any("cancelled" in e.value for e in at.error)


def test_unknown_model_is_refused_before_any_run(make_app, minilm_dir, data_dir):
    from core import settings

    at = open_page(make_app, "no-such-model-here", train_limit=60, test_limit=20)
    next(b for b in at.button if b.label == "Launch full, biased and control").click().run()
    assert not at.exception, at.exception
    assert any(markdown_text("no-such-model-here") in e.value for e in at.error)
    assert bias.list_experiments() == [] and not any(settings.runs_dir().glob("*"))


def test_killed_scorer_shows_as_killed_and_reading_writes_nothing(make_app, minilm_dir, tiny_bert_dir, data_dir):
    import os
    import signal

    from core import jobs, training

    spec = bias.ExperimentSpec(name="bias-killed", model=str(tiny_bert_dir), train_limit=60, test_limit=20, epochs=1,
                               max_length=32, seed=1)
    record = bias.launch(spec)
    deadline = time.time() + 60
    while jobs.status(record.id).state != "running" and time.time() < deadline:
        time.sleep(0.1)  # the child writes its own pid when it starts running
    running = jobs.status(record.id)
    assert running.state == "running" and running.pid != os.getpid()
    os.killpg(running.pid, signal.SIGKILL)  # no handler runs: the record stays "running" on disk
    while jobs.status(record.id).state == "running" and time.time() < deadline:
        time.sleep(0.1)
    try:
        folders = (bias.experiment_dir(spec.name), jobs.jobs_dir() / record.id)
        before = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in f.rglob("*") if p.is_file()}
        assert '"running"' in (jobs.jobs_dir() / record.id / "record.json").read_text()

        status = bias.experiment_status(spec.name)
        assert status.state == "killed" and not status.active and status.job.id == record.id
        at = open_page(make_app, minilm_dir)
        assert at.selectbox(key="bias.experiment").value == spec.name
        assert any("killed" in e.value for e in at.error)
        assert not [b for b in at.button if b.key == "bias.cancel"]  # nothing left to cancel on the page

        after = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in f.rglob("*") if p.is_file()}
        assert after == before
    finally:
        bias.cancel_experiment(spec.name)
        for arm in bias.ARMS:
            training.wait(spec.run_name(arm), timeout=120)


def test_paper_protocol_switch_uses_the_slides_filter_and_recipe(make_app, minilm_dir, data_dir, chart_rows, monkeypatch):
    at = open_page(make_app, minilm_dir, train_limit=1500, test_limit=400, seed=2, paper_protocol=True)
    train, test = snli("train", 1500, 2), snli("test", 400, 2)
    # Independent count: the slides' words as whole space-separated tokens of the premise, exact case.
    removed = sum(any(w in e.text.split() for w in bias.DEFAULT_WORDS) for e in train)
    assert removed != regex_count(train, bias.DEFAULT_WORDS)
    assert metric(at, "Training pairs with a word").value == f"{removed:,} of 1,500"
    assert metric(at, "Test pairs with a word").value == f"{sum(any(w in e.text.split() for w in bias.DEFAULT_WORDS) for e in test):,} of 400"
    assert any(c.value.startswith("Protocol: CS4650 slides") for c in at.caption)
    assert at.number_input(key="bias.lr").disabled and at.number_input(key="bias.epochs").disabled
    assert "CS4650" in str(at.get("vega_lite_chart")[0].proto.spec)  # the word chart names its protocol

    launched = []
    monkeypatch.setattr(bias, "launch", lambda spec: launched.append(spec))
    at.session_state["bias.lr"] = 1e-3  # ignored under the paper protocol
    next(b for b in at.button if b.label == "Launch full, biased and control").click().run()
    assert not at.exception and not at.error
    (spec,) = launched
    assert (spec.protocol, spec.lr, spec.epochs, spec.batch_size) == ("slides", 5e-5, 2, 32)
    assert spec.recipe("full").weight_decay == 0.0


def test_reopened_form_shows_the_settings_of_the_results_shown(make_app, minilm_dir, data_dir):
    """Issue 37: reopened, the form said 2,000 / 1,000 pairs beside results computed with 1,000 / 500."""
    older = bias.ExperimentSpec(name="bias-older", model=str(minilm_dir), train_limit=300, test_limit=100, seed=4,
                                epochs=3, max_length=96, created_at=time.time() - 60)
    quick = bias.ExperimentSpec(name="bias-quick", model=str(minilm_dir), words=("woman", "girl"), train_limit=1000,
                                test_limit=500, seed=3, epochs=1, max_length=64, lr=3e-5, batch_size=16, head="mlp")
    for spec in (older, quick):
        bias.prepare(spec)

    at = open_page(make_app, minilm_dir)  # a fresh session: nothing typed yet
    assert at.selectbox(key="bias.experiment").value == "bias-quick"
    shown = {key: at.session_state[f"bias.{key}"] for key in ("train_limit", "test_limit", "seed", "epochs",
                                                              "max_length", "lr", "batch_size", "head", "words")}
    assert shown == {"train_limit": 1000, "test_limit": 500, "seed": 3, "epochs": 1, "max_length": 64, "lr": 3e-5,
                     "batch_size": 16, "head": "mlp", "words": "woman, girl"}
    assert at.number_input(key="bias.train_limit").value == 1000 and at.number_input(key="bias.epochs").value == 1
    # one wording for freezing with the fine-tuning form: "Freeze layers", numbered as on every chart (issue 48)
    assert at.number_input(key="bias.freeze_layers").label == "Freeze layers 1 to N"

    at.selectbox(key="bias.experiment").set_value("bias-older").run()
    assert not at.exception, at.exception
    assert (at.number_input(key="bias.train_limit").value, at.number_input(key="bias.test_limit").value,
            at.number_input(key="bias.epochs").value) == (300, 100, 3)
    assert at.text_input(key="bias.words").value == ", ".join(bias.DEFAULT_WORDS)

    linked = open_page(make_app, minilm_dir, train_limit=1500)  # a setting the session (or a link) holds is kept
    assert linked.number_input(key="bias.train_limit").value == 1500
    assert linked.number_input(key="bias.test_limit").value == 500
