"""The classifier checkpoint format and predictions live in core.model.classifier (issue 45: the analyses that read
a trained classifier import it from there, below core.training); these names stay importable from here for run
code and pages."""

from core.model.classifier import (HEAD_CONFIG, HEAD_WEIGHTS, Classifier, LoadedClassifier, classifier_batches, collate,
                                   is_classifier_folder, load_classifier, predict_logits, save_classifier, softmax,
                                   text_features)

__all__ = ["HEAD_CONFIG", "HEAD_WEIGHTS", "Classifier", "LoadedClassifier", "classifier_batches", "collate",
           "is_classifier_folder", "load_classifier", "predict_logits", "save_classifier", "softmax", "text_features"]
