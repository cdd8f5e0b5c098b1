"""Classification scores and the Degeneracy rule live in core.model.evaluation (issue 45: the analyses import them
from there, below core.training); these names stay importable from here for run code and pages."""

from core.model.evaluation import (DOMINANT_SHARE, STANDARD_ERRORS, Degeneracy, EvalMetrics, degeneracy,
                                   degeneracy_from_confusion, evaluate_predictions, run_degeneracy)

__all__ = ["DOMINANT_SHARE", "STANDARD_ERRORS", "Degeneracy", "EvalMetrics", "degeneracy", "degeneracy_from_confusion",
           "evaluate_predictions", "run_degeneracy"]
