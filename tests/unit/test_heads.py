"""Head statistics, pattern types, attention cosine and the syntactic head finder on hand-made attention arrays,
each checked against plain Python loops or maps built to show one pattern."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.heads import (
    PATTERNS,
    STAT_NAMES,
    SyntaxTally,
    attention_cosine,
    example_patterns,
    example_stats,
    is_punctuation,
    token_roles,
)
from core.encoding import pool_attention
from core.treebank import parse_conllu

# A pair: [CLS] the cat sat . [SEP] a dog ran far away [SEP]
PAIR_TOKENS = ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "a", "dog", "ran", "far", "away", "[SEP]"]
PAIR_SPECIAL = np.array([t.startswith("[") for t in PAIR_TOKENS])
PAIR_SEGMENTS = np.array([0] * 6 + [1] * 6)


def _random_attention(rng, layers, heads, t):
    return rng.dirichlet(np.ones(t) * 0.5, size=(layers, heads, t))


def test_stats_match_plain_loops():
    rng = np.random.default_rng(0)
    a = _random_attention(rng, 2, 3, len(PAIR_TOKENS))
    roles = token_roles(PAIR_TOKENS, PAIR_SPECIAL, PAIR_SEGMENTS, is_pair=True)
    got = example_stats(a, roles)
    assert got.shape == (len(STAT_NAMES), 2, 3)
    t = len(PAIR_TOKENS)
    for layer in range(2):
        for head in range(3):
            m = a[layer, head]
            expected = {
                "cls": sum(m[q][0] for q in range(t)) / t,
                "sep": sum(m[q][5] + m[q][11] for q in range(t)) / t,  # both [SEP]s summed
                "punct": sum(m[q][4] for q in range(t)) / t,  # "." only
                "self": sum(m[q][q] for q in range(t)) / t,
                "prev": sum(m[q][q - 1] for q in range(1, t)) / t,
                "next": sum(m[q][q + 1] for q in range(t - 1)) / t,
                "entropy": sum(-sum(p * math.log(p) for p in m[q] if p > 0) for q in range(t)) / t,
            }
            for k, name in enumerate(STAT_NAMES):
                assert got[k, layer, head] == pytest.approx(expected[name], abs=1e-9), name


def test_stats_of_known_maps():
    t = len(PAIR_TOKENS)
    roles = token_roles(PAIR_TOKENS, PAIR_SPECIAL, PAIR_SEGMENTS, is_pair=True)
    all_to_cls = np.zeros((1, 1, t, t))
    all_to_cls[..., 0] = 1.0
    identity = np.eye(t)[None, None]
    stats = dict(zip(STAT_NAMES, example_stats(np.concatenate([all_to_cls, identity], axis=1), roles)))
    assert stats["cls"][0].tolist() == pytest.approx([1.0, 1 / t])
    assert stats["self"][0].tolist() == pytest.approx([1 / t, 1.0])
    assert stats["sep"][0].tolist() == pytest.approx([0.0, 2 / t])
    assert stats["entropy"][0].tolist() == pytest.approx([0.0, 0.0], abs=1e-9)


def test_punctuation_pieces():
    assert is_punctuation(".") and is_punctuation("##,") and is_punctuation("?!") and is_punctuation("Ġ.")
    assert not is_punctuation("cat") and not is_punctuation("##s") and not is_punctuation("3.5")


def _rows(fill):
    """A [T, T] map where each row q is fill(q) normalised."""
    t = len(PAIR_TOKENS)
    m = np.array([fill(q) for q in range(t)], dtype=float)
    return m / m.sum(axis=1, keepdims=True)


def _pattern_maps():
    t = len(PAIR_TOKENS)
    specials = np.flatnonzero(PAIR_SPECIAL)
    words = np.flatnonzero(~PAIR_SPECIAL)

    def vertical(q):
        row = np.full(t, 0.1 / t)
        row[specials] += 0.9 / len(specials)
        return row

    def diagonal(q):
        row = np.full(t, 0.02)
        for k in (q - 1, q + 1):
            if 0 <= k < t:
                row[k] += 1.0
        return row

    def mixed(q):
        return vertical(q) / vertical(q).sum() + diagonal(q) / diagonal(q).sum()

    def block(q):
        # Each word spreads over its own sentence's words but skips its neighbours, so no diagonal band.
        row = np.full(t, 0.001)
        same = [k for k in words if PAIR_SEGMENTS[k] == PAIR_SEGMENTS[q] and abs(k - q) > 1]
        row[same] += 1.0
        return row

    def heterogeneous(q):
        # Each word looks at a word of the *other* sentence, far from itself: no stripe, band nor block.
        row = np.full(t, 0.01)
        others = [k for k in words if PAIR_SEGMENTS[k] != PAIR_SEGMENTS[q]]
        row[others[q % len(others)]] += 1.0
        return row

    return {"vertical": vertical, "diagonal": diagonal, "vertical+diagonal": mixed, "block": block, "heterogeneous": heterogeneous}


def test_each_pattern_is_recognised():
    maps = _pattern_maps()
    stacked = np.stack([_rows(maps[p]) for p in PATTERNS])[None]  # [1 layer, 5 heads, T, T]
    roles = token_roles(PAIR_TOKENS, PAIR_SPECIAL, PAIR_SEGMENTS, is_pair=True)
    kinds = example_patterns(stacked, roles)
    assert [PATTERNS[k] for k in kinds[0]] == list(PATTERNS)


def test_block_needs_a_pair():
    roles = token_roles(PAIR_TOKENS, PAIR_SPECIAL, np.zeros(len(PAIR_TOKENS), dtype=int), is_pair=False)
    kinds = example_patterns(_rows(_pattern_maps()["block"])[None, None], roles)
    assert PATTERNS[kinds[0, 0]] == "heterogeneous"


def test_cosine_with_itself_is_one_and_matches_loops():
    rng = np.random.default_rng(1)
    a = _random_attention(rng, 2, 2, 5)
    b = _random_attention(rng, 2, 2, 5)
    np.testing.assert_allclose(attention_cosine(a, a), 1.0)
    for layer in range(2):
        for head in range(2):
            x, y = a[layer, head].ravel(), b[layer, head].ravel()
            expected = sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))
            assert attention_cosine(a, b)[layer, head] == pytest.approx(expected)
    with pytest.raises(ValueError, match="shapes differ"):
        attention_cosine(a, a[:, :1])


def test_word_attention_sums_to_and_averages_from():
    # [CLS] un ##happy cat [SEP]: word 0 = un+##happy, word 1 = cat
    rng = np.random.default_rng(2)
    a = _random_attention(rng, 1, 1, 5)
    word_ids = np.array([-1, 0, 0, 1, -1])
    got, _ = pool_attention(a, word_ids)
    got = got[0, 0]
    m = a[0, 0]
    expected = np.array([
        [(m[1, 1] + m[1, 2] + m[2, 1] + m[2, 2]) / 2, (m[1, 3] + m[2, 3]) / 2],
        [m[3, 1] + m[3, 2], m[3, 3]],
    ])
    np.testing.assert_allclose(got, expected)


SENTENCE = """1	Dogs	dog	NOUN	NNS	_	2	nsubj	_	_
2	chase	chase	VERB	VBP	_	0	root	_	_
3	small	small	ADJ	JJ	_	4	amod	_	_
4	cats	cat	NOUN	NNS	_	2	obj	_	_
5	.	.	PUNCT	.	_	2	punct	_	_
"""


def test_syntax_heads_on_a_hand_made_sentence():
    sentence = parse_conllu(SENTENCE)[0]
    w = len(sentence)
    # head 0 looks at each word's gold head (the root looks at word 0); head 1 always at the next word.
    att = np.full((1, 2, w, w), 0.01)
    for d, h in enumerate(sentence.heads):
        att[0, 0, d, (h - 1) if h else 0] = 1.0
        att[0, 1, d, min(d + 1, w - 1) if d + 1 < w else d - 1] = 1.0
    tally = SyntaxTally()
    tally.add(att, sentence.heads, sentence.deprels)
    result = tally.result("hand-made")
    row = {name: i for i, name in enumerate(result.relations)}
    assert result.relations[-1] == "all" and result.counts[row["all"]] == 4  # the root word is not a dependent
    assert result.accuracy[row["all"], 0].tolist() == [1.0, 0.5]  # the next word is the head of "Dogs" and "small"
    assert result.accuracy[row["amod"], 0, 1] == 1.0
    # Baseline: offsets (head - dependent) are nsubj +1, amod +1, obj -2, punct -3 -> +1 wins half the time.
    assert result.baseline_offset[row["all"]] == 1 and result.baseline_accuracy[row["all"]] == 0.5
    assert result.baseline_offset[row["obj"]] == -2 and result.baseline_accuracy[row["obj"]] == 1.0
    assert (result.best_layer[row["all"]], result.best_head[row["all"]]) == (0, 0)
    assert result.to_json()["relations"][-1]["accuracy"] == 1.0
