"""Classification scores from predicted and true class indices, in plain numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EvalMetrics:
    """Scores of one evaluation.

    labels: class names, index i = class i.
    confusion [true class, predicted class]: counts (int).
    per_class_f1 [class]: F1 of each class taken as the positive one (0 when it is never true nor predicted).
    accuracy, macro_f1, majority_accuracy (share of the most frequent true class): floats in [0, 1].
    """

    labels: tuple[str, ...]
    confusion: np.ndarray
    per_class_f1: np.ndarray
    accuracy: float
    macro_f1: float
    majority_accuracy: float
    n: int

    def to_json(self) -> dict:
        return {
            "labels": list(self.labels),
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "majority_accuracy": self.majority_accuracy,
            "per_class_f1": {label: float(f) for label, f in zip(self.labels, self.per_class_f1)},
            "confusion": self.confusion.astype(int).tolist(),
            "eval_examples": self.n,
            "degenerate": self.degeneracy.to_json(),
        }

    @property
    def degeneracy(self) -> "Degeneracy":
        return degeneracy_from_confusion(self.confusion, self.labels)


def evaluate_predictions(true: np.ndarray, predicted: np.ndarray, labels: tuple[str, ...]) -> EvalMetrics:
    """true, predicted [n]: class indices in range(len(labels))."""
    true, predicted = np.asarray(true, dtype=int), np.asarray(predicted, dtype=int)
    if true.shape != predicted.shape or true.ndim != 1 or true.size == 0:
        raise ValueError(f"need two equal-length, non-empty 1-D index arrays, got {true.shape} and {predicted.shape}")
    k = len(labels)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (true, predicted), 1)
    tp = np.diag(confusion).astype(float)
    denominator = confusion.sum(axis=0) + confusion.sum(axis=1)  # predicted + true = 2tp + fp + fn
    f1 = np.divide(2 * tp, denominator, out=np.zeros(k), where=denominator > 0)
    return EvalMetrics(
        labels=tuple(labels),
        confusion=confusion,
        per_class_f1=f1,
        accuracy=float(tp.sum() / true.size),
        macro_f1=float(f1.mean()),
        majority_accuracy=float(np.bincount(true, minlength=k).max() / true.size),
        n=int(true.size),
    )


# ---- runs that learned (almost) nothing ------------------------------------------------------------------

DOMINANT_SHARE = 0.9  # predicting one class this often is flagged, whatever the accuracy
STANDARD_ERRORS = 2.0  # an accuracy this many standard errors or less above the majority baseline is flagged


@dataclass(frozen=True)
class Degeneracy:
    """Whether one evaluation shows a classifier that learned (almost) nothing.

    flagged when either holds:
      - one class is predicted for at least DOMINANT_SHARE (90 %) of the n examples (dominant_share), or
      - accuracy - majority_accuracy <= STANDARD_ERRORS * standard_error, with
        standard_error = sqrt(p (1 - p) / n), p = accuracy (the binomial standard error of the accuracy):
        the run is not two standard errors better than always answering the most frequent true class.
    reasons: the rules that hold, as short sentences (empty when not flagged).
    """

    n: int
    accuracy: float
    majority_accuracy: float
    majority_label: str
    standard_error: float
    dominant_label: str
    dominant_share: float
    reasons: tuple[str, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)

    @property
    def message(self) -> str:
        """One plain-text sentence for a page or a terminal ("" when not flagged)."""
        if not self.flagged:
            return ""
        return f"This run learned (almost) nothing: {'; '.join(self.reasons)}. Comparisons with it are not meaningful."

    @classmethod
    def from_json(cls, d: dict) -> "Degeneracy":
        return cls(int(d["n"]), float(d["accuracy"]), float(d["majority_accuracy"]), str(d["majority_label"]),
                   float(d["standard_error"]), str(d["dominant_label"]), float(d["dominant_share"]), tuple(d["reasons"]))

    def to_json(self) -> dict:
        return {"flagged": self.flagged, "reasons": list(self.reasons), "message": self.message, "n": self.n,
                "accuracy": self.accuracy, "majority_accuracy": self.majority_accuracy,
                "majority_label": self.majority_label, "standard_error": self.standard_error,
                "dominant_label": self.dominant_label, "dominant_share": self.dominant_share}


def degeneracy_from_confusion(confusion: np.ndarray, labels: tuple[str, ...]) -> Degeneracy:
    """The rule of Degeneracy from a confusion matrix [true class, predicted class] of counts."""
    confusion = np.asarray(confusion, dtype=np.int64)
    n = int(confusion.sum())
    if confusion.shape != (len(labels), len(labels)) or n == 0:
        raise ValueError(f"need a non-empty {len(labels)}x{len(labels)} confusion matrix, got shape {confusion.shape} "
                         f"with {n} examples")
    predicted, true = confusion.sum(axis=0), confusion.sum(axis=1)
    accuracy = float(np.trace(confusion) / n)
    majority, dominant = int(true.argmax()), int(predicted.argmax())
    majority_accuracy, dominant_share = float(true[majority] / n), float(predicted[dominant] / n)
    standard_error = float(np.sqrt(accuracy * (1 - accuracy) / n))
    reasons = []
    if dominant_share >= DOMINANT_SHARE:
        reasons.append(f"it predicts '{labels[dominant]}' for {dominant_share:.1%} of the {n} evaluation examples")
    if accuracy - majority_accuracy <= STANDARD_ERRORS * standard_error:
        reasons.append(f"its accuracy {accuracy:.1%} is not two standard errors (2 x {standard_error:.1%}) above always "
                       f"answering '{labels[majority]}' ({majority_accuracy:.1%})")
    return Degeneracy(n, accuracy, majority_accuracy, labels[majority], standard_error, labels[dominant],
                      dominant_share, tuple(reasons))


def degeneracy(true: np.ndarray, predicted: np.ndarray, labels: tuple[str, ...]) -> Degeneracy:
    """true, predicted [n]: class indices in range(len(labels)). See Degeneracy for the rule."""
    return degeneracy_from_confusion(evaluate_predictions(true, predicted, labels).confusion, tuple(labels))


def run_degeneracy(metrics: dict | None) -> Degeneracy | None:
    """The rule applied to a run's metrics.json (its confusion matrix); None for a run without one (contrastive,
    unfinished)."""
    metrics = metrics or {}
    if metrics.get("confusion") is None or not metrics.get("labels"):
        return None
    return degeneracy_from_confusion(np.array(metrics["confusion"]), tuple(metrics["labels"]))
