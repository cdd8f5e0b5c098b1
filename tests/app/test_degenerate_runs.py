"""A run that learned (almost) nothing is flagged where it is shown (fine-tuning, explain, bias pages), and the
explain page's faithfulness form starts on the run's own task with one count field.

Whether a run is degenerate is worked out here from its confusion matrix with plain arithmetic (one class
predicted for >= 90 %, or accuracy within 2 sqrt(p (1 - p) / n) of the majority class), independently of
core.training.evaluation."""

from __future__ import annotations

import math

import pytest

from core.training import Recipe, finetune
from tests.app.test_bias_page import open_page as open_bias_page
from tests.app.test_bias_page import write_finished_experiment
from tests.markdown_text import plain
from tests.task_files import learned_and_noise

FLAG = "learned (almost) nothing"


def learned_nothing(confusion: list[list[int]]) -> bool:
    n = sum(map(sum, confusion))
    accuracy = sum(confusion[i][i] for i in range(len(confusion))) / n
    predicted_most = max(sum(row[j] for row in confusion) for j in range(len(confusion))) / n
    majority = max(sum(row) for row in confusion) / n
    return predicted_most >= 0.9 or accuracy - majority <= 2 * math.sqrt(accuracy * (1 - accuracy) / n)


def shown(messages) -> list[str]:
    """Message texts as read (the page escapes run names and labels)."""
    return [plain(m.value) for m in messages]


@pytest.fixture
def runs(tiny_bert_dir, tmp_path) -> dict[str, dict]:
    """'tiny-learned': the animal named in the text (learnable); 'tiny-noise': a label that ignores the text,
    70 % of them 'a' (nothing to learn). Tiny random BERT, seconds each."""
    learned_and_noise(tmp_path, seed=0)
    base = Recipe(model=str(tiny_bert_dir), task=str(tmp_path / "learned.csv"), run_name="tiny-learned", epochs=5,
                  lr=3e-3, batch_size=16, max_length=16, cpu_threads=1)
    metrics = {"tiny-learned": finetune(base),
               "tiny-noise": finetune(base.replace(run_name="tiny-noise", task=str(tmp_path / "noise.csv")))}
    # the premise of the tests below, checked by hand
    assert not learned_nothing(metrics["tiny-learned"]["confusion"])
    assert learned_nothing(metrics["tiny-noise"]["confusion"])
    return metrics


def test_finetune_page_flags_only_the_run_that_learned_nothing(make_app, tiny_bert_dir, runs):
    at = make_app(str(tiny_bert_dir), "the cat sat on the mat")
    at.session_state["finetune.compare"] = ["tiny-learned", "tiny-noise"]
    at.switch_page("app_pages/finetune.py")
    at.run()
    assert not at.exception, at.exception
    flagged = [w for w in shown(at.warning) if FLAG in w]
    assert len(flagged) == 1 and flagged[0].startswith("tiny-noise: ") and "not meaningful" in flagged[0]
    table = next(d.value for d in at.dataframe if "learned (almost) nothing" in d.value.index)
    assert table.loc["learned (almost) nothing"].to_dict() == {"tiny-learned": "no", "tiny-noise": "yes"}


def test_explain_page_flags_the_run_and_its_faithfulness_form_has_one_count(make_app, runs):
    for run, flagged in (("tiny-noise", True), ("tiny-learned", False)):
        at = make_app(run, "the cat sat on the mat")
        at.switch_page("app_pages/explain.py")
        at.run()
        assert not at.exception, at.exception
        assert any(FLAG in w and w.startswith(run) for w in shown(at.warning)) == flagged, run
        # a single-sentence file task: the built-in sentences, and one count field
        assert at.radio(key="explain.faith.source").value == "Built-in sentences"
        assert [n.label for n in at.number_input if "Examples" in n.label] == ["Examples to score (the first N)"]


def test_explain_page_starts_an_snli_run_on_snli_pairs(make_app, tiny_bert_dir, data_dir):
    finetune(Recipe(model=str(tiny_bert_dir), task="snli", run_name="tiny-snli", epochs=1, train_limit=32,
                    eval_limit=16, batch_size=16, max_length=32, cpu_threads=1, data_source="local"))
    at = make_app("tiny-snli", "A man plays a guitar.", "Someone makes music.")
    at.switch_page("app_pages/explain.py")
    at.run()
    assert not at.exception, at.exception
    assert at.radio(key="explain.faith.source").value == "SNLI"
    assert at.selectbox(key="explain.faith.split").value == "dev"
    # the picker's seeded sample size is the only count (no second "Examples to score (at most)")
    assert [n.label for n in at.number_input if "Examples" in n.label or "Items" in n.label] == [
        "Examples to score (a seeded sample)"]


def test_bias_page_flags_an_arm_that_always_answers_one_class(make_app, minilm_dir, data_dir):
    result = write_finished_experiment("bias-flat", {"full": None, "biased": 0.9, "control": 0.9})
    confusions = {arm: result.runs[arm].overall.confusion.tolist() for arm in result.runs}
    assert learned_nothing(confusions["full"]) and not learned_nothing(confusions["biased"])
    at = open_bias_page(make_app, minilm_dir, train_limit=200, test_limit=120)
    flagged = [w for w in shown(at.warning) if FLAG in w]
    assert len(flagged) == 1 and flagged[0].startswith("The full (all data) run: ")
    assert f"'{result.labels[0]}' for 100.0%" in flagged[0]


def test_reproduce_page_flags_a_measured_run_once(make_app, runs, monkeypatch):
    from core import jobs
    from tests import fake_study

    fake_study.install(monkeypatch)
    at = make_app("tiny-noise")
    at.session_state["reproduce.fake.model"] = "tiny-noise"
    at.switch_page("app_pages/reproduce.py")
    at.run()
    assert not at.exception, at.exception
    assert [w for w in shown(at.warning) if FLAG in w and w.startswith("tiny-noise: ")]
    at.button(key="reproduce.fake.run").click().run()
    assert jobs.wait(at.session_state["reproduce.fake.jobstate"]["last_id"], timeout=60).state == "done"
    at.run()
    assert not at.exception, at.exception
    result = at.session_state["reproduce.fake.jobstate"]["result"]
    assert result.degenerate["tiny-noise"]["flagged"] is True
    assert len([w for w in shown(at.warning) if FLAG in w]) == 1  # beside the model's choice, not twice


def test_ablation_flags_a_run_that_learned_nothing(minilm_dir, tiny_bert_dir, data_dir):
    """A tiny random classifier (random head) on 20 SNLI dev pairs, whose own predictions meet the rule (worked out
    here): the page warns after the sweep."""
    import numpy as np

    from core.analyses.ablation import load_for_ablation
    from core.training.runs import run_eval_sample
    from tests.app.test_attention_dataset import _app, _classifier_run, _finish

    run = _classifier_run(tiny_bert_dir)
    clf = load_for_ablation(run)
    sample = run_eval_sample(clf)
    predicted = clf.predict_proba([(e.text, e.text_b) for e in sample.examples]).argmax(1)
    truth = [clf.labels.index(e.label) for e in sample.examples]
    confusion = np.zeros((3, 3), dtype=int)
    np.add.at(confusion, (truth, predicted), 1)
    assert learned_nothing(confusion.tolist())  # the premise: a random head learned nothing
    at = _app(str(minilm_dir))
    at.session_state["heads.part"] = "Ablation"
    at.session_state["heads.ablation_limit"] = 0
    at.run()
    at.button(key="heads.ablation.run").click().run()
    _finish(at, "ablation")
    assert any(FLAG in w and w.startswith(run) for w in shown(at.warning))
