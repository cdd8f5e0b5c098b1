"""The "learned (almost) nothing" rule (core.training.evaluation.degeneracy), against numbers worked out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.training.evaluation import degeneracy, degeneracy_from_confusion, evaluate_predictions, run_degeneracy

LABELS = ("entailment", "neutral", "contradiction")


def predictions_with(correct: int, n_per_class: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Two balanced classes, n_per_class each; `correct` right answers split evenly, the rest swapped, so both
    classes are predicted equally often and only the accuracy moves."""
    true = np.repeat([0, 1], n_per_class)
    predicted = true.copy()
    wrong = 2 * n_per_class - correct
    predicted[: wrong // 2] = 1
    predicted[n_per_class: n_per_class + wrong - wrong // 2] = 0
    return true, predicted


def test_a_run_that_always_answers_one_class_is_flagged_by_both_rules():
    true = np.array([0] * 40 + [1] * 35 + [2] * 25)
    result = degeneracy(true, np.zeros(100, dtype=int), LABELS)
    assert result.flagged and len(result.reasons) == 2
    assert (result.dominant_label, result.dominant_share) == ("entailment", 1.0)
    assert (result.accuracy, result.majority_accuracy, result.majority_label) == (0.4, 0.4, "entailment")
    assert result.standard_error == pytest.approx(math.sqrt(0.4 * 0.6 / 100))
    assert "learned (almost) nothing" in result.message and "not meaningful" in result.message
    assert "'entailment' for 100.0% of the 100" in result.message


def test_the_two_standard_error_boundary_matches_the_formula():
    """n = 400, majority 0.5: flagged exactly while c/n - 0.5 <= 2 sqrt(p (1 - p) / n), p = c/n."""
    n = 400
    expected_threshold = next(c for c in range(200, 401) if c / n - 0.5 > 2 * math.sqrt((c / n) * (1 - c / n) / n))
    assert 210 < expected_threshold < 230  # about 0.5 + 2 * 0.025
    for correct in (expected_threshold - 1, expected_threshold):
        result = degeneracy(*predictions_with(correct), ("a", "b"))
        assert result.dominant_share < 0.51 and result.accuracy == correct / n
        assert result.flagged == (correct < expected_threshold), correct


def test_a_run_below_the_majority_baseline_is_flagged():
    result = degeneracy(*predictions_with(120), ("a", "b"))  # 30 % on a 50 % baseline
    assert result.flagged and result.reasons == (
        "its accuracy 30.0% is not two standard errors (2 x 2.3%) above always answering 'a' (50.0%)",)


def test_predicting_one_class_for_ninety_percent_is_flagged_even_when_accurate():
    true = np.array([0] * 92 + [1] * 8)
    at_threshold = np.array([0] * 90 + [1] * 10)  # 98 % right, class 0 predicted for exactly 90 %
    result = degeneracy(true, at_threshold, ("a", "b"))
    assert result.dominant_share == 0.9 and result.accuracy == 0.98
    assert result.reasons == ("it predicts 'a' for 90.0% of the 100 evaluation examples",)
    true = np.array([0] * 80 + [1] * 20)
    below = np.array([0] * 89 + [1] * 11)  # 89 % one class: 91 % right, 11 points above the 80 % baseline
    assert not degeneracy(true, below, ("a", "b")).flagged


def test_a_run_that_learned_is_not_flagged():
    rng = np.random.default_rng(0)
    true = rng.integers(0, 3, 300)
    predicted = np.where(rng.random(300) < 0.7, true, (true + 1) % 3)
    result = degeneracy(true, predicted, LABELS)
    assert not result.flagged and result.message == "" and result.to_json()["flagged"] is False


def test_confusion_and_run_metrics_give_the_same_answer():
    true = np.array([0, 1, 2, 0, 1, 2, 0, 0])
    predicted = np.array([0, 0, 0, 0, 0, 0, 0, 1])
    metrics = evaluate_predictions(true, predicted, LABELS)
    direct = degeneracy(true, predicted, LABELS)
    assert degeneracy_from_confusion(metrics.confusion, LABELS) == direct
    saved = metrics.to_json()  # what metrics.json holds
    assert saved["degenerate"] == direct.to_json()
    assert run_degeneracy(saved) == direct
    assert run_degeneracy({"similarity_after": {}}) is None and run_degeneracy(None) is None


def test_an_empty_or_misshapen_confusion_is_refused():
    with pytest.raises(ValueError, match="non-empty 3x3"):
        degeneracy_from_confusion(np.zeros((3, 3)), LABELS)
    with pytest.raises(ValueError, match="non-empty 3x3"):
        degeneracy_from_confusion(np.ones((2, 2)), LABELS)
