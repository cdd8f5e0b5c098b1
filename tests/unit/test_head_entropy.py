"""One head entropy (issue 45 item 5): core.analyses.attention.head_entropy, used by the model view and by the heads
survey (Clark et al.'s smoothing as its parameter), checked against scipy.stats.entropy row by row."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import entropy

from core.analyses.attention import head_entropy
from core.analyses.heads.roles import token_roles
from core.analyses.heads.survey import CLARK_SMOOTHING, STAT_NAMES, example_stats

TOKENS = ["[CLS]", "the", "cat", ".", "[SEP]", "it", "sat", "[SEP]"]


def _attention(seed: int = 0, layers: int = 2, heads: int = 3, t: int = len(TOKENS)) -> np.ndarray:
    """Random rows that sum to 1, some with exact zeros (a head that ignores keys), one one-hot row."""
    rng = np.random.default_rng(seed)
    a = rng.random((layers, heads, t, t)) ** 4
    a[a < 0.05] = 0.0
    a[0, 0, 0] = np.eye(t)[2]
    return a / a.sum(-1, keepdims=True)


def _scipy(a: np.ndarray, smoothing: float) -> np.ndarray:
    a = a.astype(np.float64)
    rows = (1 - smoothing) * a + smoothing / a.shape[-1] if smoothing else a
    return np.apply_along_axis(entropy, -1, rows).mean(axis=-1)  # scipy counts 0·log 0 as 0


@pytest.mark.parametrize("smoothing", [0.0, CLARK_SMOOTHING, 0.3])
def test_head_entropy_is_scipys_mean_row_entropy(smoothing):
    a = _attention()
    got = head_entropy(a, smoothing=smoothing)
    assert got.shape == (2, 3) and got.dtype == np.float64
    np.testing.assert_allclose(got, _scipy(a, smoothing), rtol=1e-9, atol=1e-9)


def test_uniform_rows_give_log_t_and_one_hot_rows_zero():
    t = 5
    assert head_entropy(np.full((1, 1, t, t), 1 / t))[0, 0] == pytest.approx(np.log(t))
    assert head_entropy(np.eye(t)[None, None])[0, 0] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("protocol", ["bertlens", "clark"])
def test_the_survey_entropy_is_head_entropy(protocol):
    a = _attention(seed=3)
    special = np.array([t in ("[CLS]", "[SEP]") for t in TOKENS])
    segments = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    roles = token_roles(TOKENS, special, segments, is_pair=True, protocol=protocol)
    stats = example_stats(a, roles, protocol)
    smoothing = CLARK_SMOOTHING if protocol == "clark" else 0.0
    np.testing.assert_array_equal(stats[STAT_NAMES.index("entropy")], head_entropy(a, smoothing=smoothing))
    np.testing.assert_allclose(stats[STAT_NAMES.index("entropy")], _scipy(a, smoothing), rtol=1e-9, atol=1e-9)
