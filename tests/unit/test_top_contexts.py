"""The streaming top-k of core.analyses.top_contexts against a brute-force sort of every token."""

import numpy as np
import pytest
import torch

from core.analyses.top_contexts import EMPTY, TopKAccumulator


def brute_force(scores, example, position, k):
    """Each unit's k best (value desc, example asc, position asc) by sorting all tokens with Python's sort."""
    rows = []
    for u in range(scores.shape[1]):
        ranked = sorted(zip(scores[:, u].tolist(), example.tolist(), position.tolist()),
                        key=lambda t: (-t[0], t[1], t[2]))[:k]
        rows.append(ranked)
    return rows


def feed(acc, scores, example, position, cuts):
    start = 0
    for stop in list(cuts) + [len(scores)]:
        acc.add(scores[start:stop], example[start:stop], position[start:stop])
        start = stop


def assert_matches(top, expected):
    for u, ranked in enumerate(expected):
        n = len(ranked)
        assert top.values[u, :n].tolist() == pytest.approx([t[0] for t in ranked], abs=0)
        assert top.example[u, :n].tolist() == [t[1] for t in ranked]
        assert top.position[u, :n].tolist() == [t[2] for t in ranked]
        assert np.all(np.isneginf(top.values[u, n:]))
        assert np.all(top.example[u, n:] == EMPTY) and np.all(top.position[u, n:] == EMPTY)


@pytest.mark.parametrize("seed", range(4))
def test_equals_brute_force_over_random_batches_with_ties(seed):
    rng = np.random.default_rng(seed)
    n_tokens, n_units, k = 300, 17, 7
    # Values on a coarse grid (many ties) and ReLU-like zeros, in a shuffled token order.
    scores = np.maximum(rng.integers(-6, 6, size=(n_tokens, n_units)) / 2, 0).astype(np.float32)
    scores[:, 3] = 0.0                                           # a unit that never fires: all ties
    example = rng.integers(0, 40, size=n_tokens)
    position = rng.integers(0, 30, size=n_tokens)
    order = rng.permutation(n_tokens)
    scores, example, position = scores[order], example[order], position[order]
    cuts = sorted(rng.choice(np.arange(1, n_tokens), size=9, replace=False))
    acc = TopKAccumulator(n_units, k)
    feed(acc, scores, example, position, cuts)
    top = acc.result()
    assert top.n_tokens == n_tokens and top.values.shape == (n_units, k)
    assert_matches(top, brute_force(scores, example, position, k))


def test_batching_and_merging_do_not_change_the_result():
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(500, 9)).astype(np.float32)
    example, position = np.repeat(np.arange(50), 10), np.tile(np.arange(10), 50)
    whole = TopKAccumulator(9, 5)
    whole.add(scores, example, position)
    first, second = TopKAccumulator(9, 5), TopKAccumulator(9, 5)
    feed(first, scores[:230], example[:230], position[:230], [1, 2, 100])
    feed(second, scores[230:], example[230:], position[230:], [77])
    second.merge(first)
    a, b = whole.result(), second.result()
    assert np.array_equal(a.values, b.values) and np.array_equal(a.example, b.example)
    assert np.array_equal(a.position, b.position) and b.n_tokens == 500
    assert_matches(a, brute_force(scores, example, position, 5))


def test_fewer_tokens_than_k_leave_empty_slots_and_torch_input_is_read():
    acc = TopKAccumulator(2, 4)
    acc.add(torch.tensor([[1.0, -2.0], [3.0, -1.0]]), torch.tensor([5, 5]), torch.tensor([0, 1]))
    top = acc.result()
    assert top.values[0, :2].tolist() == [3.0, 1.0] and top.position[0, :2].tolist() == [1, 0]
    assert top.values[1, :2].tolist() == [-1.0, -2.0] and top.filled(1) == 2
    assert top.example[0, 2:].tolist() == [EMPTY, EMPTY]
    assert top.to_json()["values"][0] == [3.0, 1.0, None, None]


@pytest.mark.parametrize("scores, ids, pos, message", [
    (np.zeros((3, 4)), [0, 1, 2], [0, 0, 0], r"\[n_tokens, 2\]"),
    (np.zeros((3, 2)), [0, 1], [0, 0, 0], "example_ids has 2"),
    (np.array([[np.nan, 0.0]]), [0], [0], "NaN"),
    (np.zeros((1, 2)), [-1], [0], "≥ 0"),
])
def test_bad_input_is_named(scores, ids, pos, message):
    with pytest.raises(ValueError, match=message):
        TopKAccumulator(2, 3).add(scores, np.asarray(ids), np.asarray(pos))
