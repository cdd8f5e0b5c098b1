"""Label probes per layer (issue 49, core.analyses.layer_knowledge.probes), each number checked against an
independent computation: scikit-learn's LogisticRegression for the probe, the papers' definitions written out here
in numpy for the control task, the online codelength and the expected layer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from core.analyses.layer_knowledge.probes import (ANALYSIS, SoftmaxProbe, control_task, encode_labels, expected_layer,
                                                  fit_probe, majority_accuracy, online_block_ends, online_codelength,
                                                  probe_layers, uniform_codelength)


def _words(seed: int, n: int, n_layers: int = 2, d: int = 12, k: int = 4):
    """Noisy vectors whose class is readable from a few directions (better at layer 1 than layer 0), labels,
    and word forms (a word type carries mostly one label, as in a treebank)."""
    rng = np.random.default_rng(seed)
    types = [f"w{i}" for i in range(60)]
    type_label = rng.integers(0, k, len(types))
    chosen = rng.integers(0, len(types), n)
    flip = rng.random(n) < 0.2
    y = np.where(flip, rng.integers(0, k, n), type_label[chosen])
    centres = rng.normal(size=(k, d))
    vectors = np.stack([centres[y] * (0.6 + 0.6 * layer) + rng.normal(scale=1.5, size=(n, d))
                        for layer in range(n_layers)]) * rng.uniform(0.2, 30, size=d)  # unequal feature scales
    labels = np.array([f"L{v}" for v in y], dtype=object)
    words = np.array([types[c] for c in chosen], dtype=object)
    return vectors.astype(np.float32), labels, words


def test_per_layer_accuracy_equals_an_independent_sklearn_fit():
    train_x, train_y, train_w = _words(0, 600)
    eval_x, eval_y, eval_w = _words(1, 400)
    result = probe_layers(train_x, train_y, train_w, eval_x, eval_y, eval_w, [0, 1], ANALYSIS.make({}))
    for k, score in enumerate(result.layers):
        scaler = StandardScaler().fit(train_x[k])
        reference = LogisticRegression(C=1.0, max_iter=2000).fit(scaler.transform(train_x[k]), train_y)
        expected = float((reference.predict(scaler.transform(eval_x[k])) == eval_y).mean())
        assert 0.3 < score.accuracy < 0.99  # a case where the probe is neither hopeless nor perfect
        assert score.accuracy == pytest.approx(expected, abs=0.02)
    assert result.layers[1].accuracy > result.layers[0].accuracy
    assert result.labels == ("L0", "L1", "L2", "L3") and result.n_train == 600 and result.n_eval == 400
    top = max(set(train_y), key=list(train_y).count)
    assert result.majority == pytest.approx(float((eval_y == top).mean()))


def test_the_fitted_probe_matches_sklearns_probabilities():
    x, y_text, _ = _words(2, 300, n_layers=1)
    _, y, _ = encode_labels(list(y_text), [])
    probe = fit_probe(x[0], y, 4, max_iter=500)
    scaler = StandardScaler().fit(x[0])
    reference = LogisticRegression(C=1.0, max_iter=5000, tol=1e-8).fit(scaler.transform(x[0]), y)
    np.testing.assert_allclose(np.exp(probe.log_probs(x[0])), reference.predict_proba(scaler.transform(x[0])),
                               atol=0.02)


def test_selectivity_is_accuracy_minus_control_accuracy_and_json_keys_are_the_issues():
    train_x, train_y, train_w = _words(3, 500)
    eval_x, eval_y, eval_w = _words(4, 300)
    result = probe_layers(train_x, train_y, train_w, eval_x, eval_y, eval_w, [0, 1],
                          ANALYSIS.make({"control": True, "mdl": True}))
    payload = result.to_json()
    assert set(payload) == {"task", "n_train", "n_eval", "labels", "majority", "layers", "expected_layer"}
    for row in payload["layers"]:
        assert set(row) == {"layer", "accuracy", "control_accuracy", "selectivity", "codelength_bits", "compression"}
        assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control_accuracy"], abs=1e-12)
        assert row["compression"] == pytest.approx(uniform_codelength(500, 4) / row["codelength_bits"])
    plain = probe_layers(train_x, train_y, train_w, eval_x, eval_y, eval_w, [0, 1], ANALYSIS.make({}))
    assert all(row["control_accuracy"] is None and row["selectivity"] is None and row["codelength_bits"] is None
               and row["compression"] is None for row in plain.to_json()["layers"])


def test_control_labels_are_fixed_per_word_type_and_follow_the_label_distribution():
    rng = np.random.default_rng(5)
    # skewed training labels over 3 classes; 4,000 word types so the drawn share is close to the distribution
    train_ids = rng.choice(3, size=20000, p=[0.6, 0.3, 0.1])
    train_words = [f"t{i}" for i in rng.integers(0, 4000, 20000)]
    eval_words = [f"t{i}" for i in rng.integers(0, 4500, 3000)]  # some types only in evaluation
    control = control_task(train_words, train_ids, eval_words, 3, seed=7)
    for words, labels in ((train_words, control.train), (eval_words, control.eval)):
        for word, label in zip(words, labels):
            assert control.by_type[word] == label  # every occurrence of a type carries its one label
    shares = np.bincount(list(control.by_type.values()), minlength=3) / len(control.by_type)
    np.testing.assert_allclose(shares, np.bincount(train_ids) / len(train_ids), atol=0.025)
    again = control_task(train_words, train_ids, eval_words, 3, seed=7)
    assert again.by_type == control.by_type  # seeded
    assert control_task(train_words, train_ids, eval_words, 3, seed=8).by_type != control.by_type


class _CountingModel(SoftmaxProbe):
    """A stand-in probe whose p(label) ignores x: add-one smoothed label counts of what it was trained on, so the
    online code can be written out by hand below."""

    def __init__(self, y, k):
        self.p = (np.bincount(y, minlength=k) + 1.0) / (len(y) + k)

    def log_probs(self, x):
        return np.log(np.tile(self.p, (len(x), 1)))


def test_online_codelength_equals_the_papers_definition_by_hand():
    k = 3
    y = np.array([0, 0, 1, 0, 2, 0, 0, 1, 0, 0])
    x = np.zeros((10, 1))
    ends = (1, 3, 6, 10)
    # Voita & Titov: t1·log2 K for the first block, then -log2 p(y_i) under the model trained on all before it.
    by_hand = 1 * math.log2(3)
    for start, stop in ((1, 3), (3, 6), (6, 10)):
        counts = np.bincount(y[:start], minlength=k)
        p = (counts + 1) / (start + k)
        by_hand += sum(-math.log2(p[label]) for label in y[start:stop])
    measured = online_codelength(x, y, k, lambda xs, ys: _CountingModel(ys, k), ends)
    assert measured == pytest.approx(by_hand, rel=1e-12)
    assert uniform_codelength(10, 3) == pytest.approx(10 * math.log2(3))


def test_online_blocks_are_the_papers_portions():
    assert online_block_ends(1000) == (1, 2, 4, 8, 16, 32, 62, 125, 250, 500, 1000)
    assert online_block_ends(10000)[:3] == (10, 20, 40) and online_block_ends(10000)[-1] == 10000
    assert online_block_ends(5) == (1, 2, 5)  # a tiny set merges blocks (int(5·50 %) = 2), never repeats an end


def test_expected_layer_by_hand():
    # Δ = 0.2, 0.1, 0.0 -> (1·0.2 + 2·0.1 + 3·0) / 0.3
    assert expected_layer([0, 1, 2, 3], [0.5, 0.7, 0.8, 0.8]) == pytest.approx(4 / 3)
    # a layer that falls back: the cumulative score keeps the best so far, Δ = 0.4, 0, 0.05
    assert expected_layer([0, 1, 2, 3], [0.5, 0.9, 0.7, 0.95]) == pytest.approx((0.4 + 3 * 0.05) / 0.45)
    assert expected_layer([3, 0, 1, 2], [0.8, 0.5, 0.7, 0.8]) == pytest.approx(4 / 3)  # any order given
    assert expected_layer([0, 1], [0.9, 0.6]) is None  # no gain above the first layer
    assert expected_layer([4], [0.9]) is None


def test_majority_and_unseen_eval_labels():
    labels, train_ids, eval_ids = encode_labels(["A", "B", "B"], ["B", "C", "A"])
    assert labels == ("A", "B") and list(eval_ids) == [1, -1, 0]
    assert majority_accuracy(train_ids, eval_ids) == pytest.approx(1 / 3)


def test_bad_settings_are_refused_by_the_declaration():
    with pytest.raises(ValueError, match="max_iter"):
        ANALYSIS.make({"max_iter": 0})


def test_progress_counts_layers_and_cancel_stops_between_them():
    from core.progress import Cancelled

    train_x, train_y, train_w = _words(6, 200, n_layers=3)
    eval_x, eval_y, eval_w = _words(7, 100, n_layers=3)
    seen = []
    probe_layers(train_x, train_y, train_w, eval_x, eval_y, eval_w, [0, 1, 2], ANALYSIS.make({"max_iter": 20}),
                 progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(Cancelled):
        probe_layers(train_x, train_y, train_w, eval_x, eval_y, eval_w, [0, 1, 2], ANALYSIS.make({"max_iter": 20}),
                     progress=lambda done, total: seen.append((done, total)), should_stop=lambda: len(seen) >= 4)
    assert len(seen) == 4  # stopped after the first layer of the second run


def test_a_probe_no_better_than_the_majority_is_said():
    from core.analyses.layer_knowledge.probes import LabelProbeResult, LayerScore

    def result(accuracies):
        return LabelProbeResult("m", "upos", "c", 10, 10, ("A", "B"), 0.6,
                                tuple(LayerScore(k, a) for k, a in enumerate(accuracies)), None)

    assert "majority baseline (0.600)" in result([0.5, 0.6]).below_majority_notice()
    assert result([0.5, 0.61]).below_majority_notice() is None
