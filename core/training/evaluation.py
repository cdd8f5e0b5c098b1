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
        }


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
