"""Head statistics, pattern types, attention cosine and the syntactic head finder on hand-made attention arrays,
each checked against plain Python loops or maps built to show one pattern."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.analyses.heads import (
    PATTERNS,
    STAT_NAMES,
    SyntaxTally,
    attention_cosine,
    example_patterns,
    example_stats,
    token_roles,
)
from core.model.encoding import is_punctuation, pool_attention
from core.data.treebank import parse_conllu

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


# ---- the Clark protocol, against a port of his notebook written here with plain loops ------------------------
#
# The reference below follows Syntax_Analysis.ipynb (clarkkev/attention-analysis): attention maps over
# [CLS] words [SEP]; attn_head_predictor zeroes the diagonal, drops [CLS]/[SEP] and takes each row's argmax
# (+1: 0 is ROOT), on the map or its transpose; offset_predictor clamps i + offset + 1 into 0..n;
# evaluate_predictor scores every word (roots included) and applies the poss rule. Plain Python, no numpy
# tricks, so a slip in core.analyses.heads' vectorised version cannot hide in it.

TREEBANK = """# text = John 's dog saw her cat , and Mary 's friends ran far .
1	John	John	PROPN	NNP	_	3	nmod:poss	_	_
2	's	's	PART	POS	_	1	case	_	_
3	dog	dog	NOUN	NN	_	4	nsubj	_	_
4	saw	see	VERB	VBD	_	0	root	_	_
5	her	she	PRON	PRP$	_	6	nmod:poss	_	_
6	cat	cat	NOUN	NN	_	4	obj	_	_
7	,	,	PUNCT	,	_	12	punct	_	_
8	and	and	CCONJ	CC	_	12	cc	_	_
9	Mary	Mary	PROPN	NNP	_	11	nmod:poss	_	_
10	's	's	PART	POS	_	9	case	_	_
11	friends	friend	NOUN	NNS	_	12	nsubj	_	_
12	ran	run	VERB	VBD	_	4	conj	_	_
13	far	far	ADV	RB	_	12	advmod	_	_
14	.	.	PUNCT	.	_	4	punct	_	_

# text = The cats were fed quickly today .
1	The	the	DET	DT	_	2	det	_	_
2	cats	cat	NOUN	NNS	_	4	nsubj:pass	_	_
3	were	be	AUX	VBD	_	4	aux:pass	_	_
4	fed	feed	VERB	VBN	_	0	root	_	_
5	quickly	quickly	ADV	RB	_	4	advmod	_	_
6	today	today	NOUN	NN	_	4	obl:tmod	_	_
7	.	.	PUNCT	.	_	4	punct	_	_

# text = Tom 's .
1	Tom	Tom	PROPN	NNP	_	0	root	_	_
2	's	's	PART	POS	_	1	case	_	_
3	.	.	PUNCT	.	_	1	punct	_	_
"""


def _clark_evaluate(examples, prediction_fn):
    """evaluate_predictor: relation -> [n_correct, n_total]; every word counts, roots included."""
    tally = {}
    for example in examples:
        words = example["words"]
        predictions = prediction_fn(example)
        for i, (p, y, r) in enumerate(zip(predictions, example["heads"], example["relns"])):
            is_correct = p == y
            if r in ("poss", "nmod:poss") and p < len(words):
                if i + 1 < len(words) and (words[i + 1] == "'s" or words[i + 1] == "s'"):
                    is_correct = predictions[i + 1] == y
            for key in (r, "all"):
                counts = tally.setdefault(key, [0, 0])
                counts[0] += int(is_correct)
                counts[1] += 1
    return tally


def _clark_head_predictor(layer, head, mode):
    def predict(example):
        full = example["attns"][layer][head]
        t = len(full)
        attn = [[full[j][i] if mode == "transpose" else full[i][j] for j in range(t)] for i in range(t)]
        for i in range(t):
            attn[i][i] = 0.0
        inner = [row[1:-1] for row in attn[1:-1]]
        return [max(range(len(row)), key=lambda j: (row[j], -j)) + 1 for row in inner]
    return predict


def _clark_offset_predictor(offset):
    def predict(example):
        n = len(example["words"])
        return [max(0, min(i + offset + 1, n)) for i in range(n)]
    return predict


def _clark_examples(rng, layers=3, heads=4):
    examples = []
    for sentence in parse_conllu(TREEBANK):
        t = len(sentence.words) + 2
        attns = rng.dirichlet(np.ones(t) * 0.3, size=(layers, heads, t))
        examples.append({"words": list(sentence.words), "heads": list(sentence.heads),
                         "relns": list(sentence.deprels), "attns": attns})
    return examples


def _tally_clark(examples):
    tally = SyntaxTally(protocol="clark")
    for e in examples:
        tally.add(e["attns"][:, :, 1:-1, 1:-1], e["heads"], e["relns"], e["words"])
    return tally.result("synthetic")


def test_clark_both_directions_roots_and_poss_match_his_evaluation():
    rng = np.random.default_rng(5)
    examples = _clark_examples(rng)
    result = _tally_clark(examples)
    layers, heads = examples[0]["attns"].shape[:2]
    expected = {}  # relation -> [direction, layer, head] accuracy
    for d, mode in enumerate(("normal", "transpose")):
        for layer in range(layers):
            for head in range(heads):
                for rel, (right, total) in _clark_evaluate(examples, _clark_head_predictor(layer, head, mode)).items():
                    expected.setdefault(rel, np.zeros((2, layers, heads)))[d, layer, head] = right / total
    assert set(result.relations) == set(expected)
    for r, rel in enumerate(result.relations):
        np.testing.assert_allclose(result.directional[r], expected[rel], err_msg=rel)
        # Per relation and head, the better direction is kept; the best head is the best over both.
        np.testing.assert_allclose(result.accuracy[r], expected[rel].max(axis=0))
        assert result.best_accuracy[r] == pytest.approx(expected[rel].max())
    assert result.counts[result.relations.index("all")] == sum(len(e["words"]) for e in examples)
    assert result.protocol == "clark" and result.to_json()["protocol"] == "clark"


def test_clark_roots_count_as_misses():
    sentence = parse_conllu(TREEBANK)[1]
    w = len(sentence)
    att = np.full((1, 1, w, w), 0.01)
    for d, h in enumerate(sentence.heads):
        att[0, 0, d, (h - 1) if h else (d + 1) % w] = 1.0  # every gold head found; the root looks anywhere
    clark = SyntaxTally(protocol="clark")
    clark.add(att, sentence.heads, sentence.deprels, sentence.words)
    ours = SyntaxTally()
    ours.add(att, sentence.heads, sentence.deprels)
    c, o = clark.result("x"), ours.result("x")
    assert c.accuracy[c.relations.index("root"), 0, 0] == 0.0
    assert c.accuracy[c.relations.index("all"), 0, 0] == pytest.approx((w - 1) / w)  # the root is the one miss
    assert o.accuracy[o.relations.index("all"), 0, 0] == 1.0 and "root" not in o.relations


def test_clark_poss_is_scored_by_the_following_s():
    sentence = parse_conllu(TREEBANK)[0]
    w = len(sentence)
    poss = [i for i, r in enumerate(sentence.deprels) if r == "nmod:poss"]  # John (0), her (4), Mary (8)
    att = np.full((1, 3, w, w), 0.01)
    for d in range(w):
        att[0, :2, d, (d + 3) % w] = 1.0  # a wrong guess everywhere...
        att[0, 2, d, (d + 5) % w] = 1.0
    for d in poss:
        gold = sentence.heads[d] - 1
        att[0, 0, d, gold] = 2.0          # head 0: the possessor itself finds its head
        att[0, 1:, d + 1, gold] = 2.0     # heads 1, 2: the word after it ('s, or "cat" after "her") does
    tally = SyntaxTally(protocol="clark")
    tally.add(att, sentence.heads, sentence.deprels, sentence.words)
    result = tally.result("x")
    forward = result.directional[result.relations.index("nmod:poss"), 0, 0]
    # John and Mary are followed by 's and scored by the 's: head 0 misses them, head 1 gets them. "her" is
    # followed by "cat" (not 's): scored by itself, right in head 0 only. Head 2: Mary's own guess is the last
    # word (8 + 5 = 13), and his code applies the rule only when p < len(words): Mary is scored by herself.
    assert forward.tolist() == pytest.approx([1 / 3, 2 / 3, 1 / 3])
    example = {"words": list(sentence.words), "heads": list(sentence.heads), "relns": list(sentence.deprels)}
    for head in range(3):
        right, total = _clark_evaluate([example], lambda e: list(att[0, head].argmax(axis=-1) + 1))["nmod:poss"]
        assert forward[head] == pytest.approx(right / total)


def test_clark_baseline_offsets_are_minus_three_to_plus_two():
    rng = np.random.default_rng(6)
    examples = _clark_examples(rng, layers=1, heads=1)
    result = _tally_clark(examples)
    scores = {o: _clark_evaluate(examples, _clark_offset_predictor(o)) for o in range(-3, 3)}
    for r, rel in enumerate(result.relations):
        best_score, best_offset = max((scores[o][rel][0] / scores[o][rel][1], o) for o in scores)
        assert (result.baseline_offset[r], result.baseline_accuracy[r]) == (best_offset, pytest.approx(best_score)), rel
    assert set(result.baseline_offset.tolist()) <= set(range(-3, 3))
    # The root of sentence 3 ("Tom", the first word) is found by any negative offset: it clamps to ROOT.
    root = result.relations.index("root")
    assert result.baseline_accuracy[root] == pytest.approx(1 / 3)


def test_clark_offset_predictor_clamps_to_root_and_last_word():
    from core.analyses.heads import clark_offset_guess

    assert clark_offset_guess(4, -3).tolist() == [-1, -1, -1, 0]
    assert clark_offset_guess(4, 2).tolist() == [2, 3, 3, 3]


def test_bertlens_baseline_is_unrestricted_and_skips_roots():
    sentence = parse_conllu(TREEBANK)[0]
    att = np.random.default_rng(0).dirichlet(np.ones(len(sentence)), size=(1, 1, len(sentence)))
    tally = SyntaxTally()
    tally.add(att, sentence.heads, sentence.deprels)
    result = tally.result("x")
    # "and" -> "ran" is 4 to the right: only the unrestricted baseline can pick it (Clark's stops at +2).
    assert result.baseline_offset[result.relations.index("cc")] == 4
    clark = SyntaxTally(protocol="clark")
    clark.add(att, sentence.heads, sentence.deprels, sentence.words)
    c = clark.result("x")
    assert c.baseline_offset[c.relations.index("cc")] in range(-3, 3)
    assert c.baseline_accuracy[c.relations.index("cc")] == 0.0
    assert result.counts[result.relations.index("all")] == len(sentence) - 1


def test_clark_punctuation_is_periods_and_commas():
    tokens = ["[CLS]", "wait", "!", "yes", ",", "ok", ";", "done", ".", "[SEP]"]
    special = np.array([t.startswith("[") for t in tokens])
    segments = np.zeros(len(tokens), dtype=int)
    rng = np.random.default_rng(3)
    a = _random_attention(rng, 2, 2, len(tokens))
    clark = example_stats(a, token_roles(tokens, special, segments, False, "clark"), "clark")
    ours = example_stats(a, token_roles(tokens, special, segments, False), "bertlens")
    n = len(tokens)
    punct = STAT_NAMES.index("punct")
    for layer in range(2):
        for head in range(2):
            # General_Analysis.ipynb: puncts marks token == "." or ","; sum(attn * selector) / n_tokens.
            selector = [1.0 if t in (".", ",") else 0.0 for t in tokens]
            expected = sum(a[layer, head, q, k] * selector[k] for q in range(n) for k in range(n)) / n
            assert clark[punct, layer, head] == pytest.approx(expected)
            anything = sum(a[layer, head, q, k] for q in range(n) for k in (2, 4, 6, 8)) / n
            assert ours[punct, layer, head] == pytest.approx(anything)
            # His entropy smooths the rows first: 0.9999 a + 0.0001 / T.
            smooth = 0.9999 * a[layer, head] + 0.0001 / n
            h = sum(-sum(p * math.log(p) for p in smooth[q]) for q in range(n)) / n
            assert clark[STAT_NAMES.index("entropy"), layer, head] == pytest.approx(h)


def test_head_labels_are_one_based_under_clark():
    from core.analyses.heads import head_label

    assert head_label(7, 9, "clark") == "8-10"
    assert head_label(7, 9) == "L8 H9"  # layers shown from 1 as on every chart (core.numbering), heads from 0


def test_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="Unknown protocol"):
        SyntaxTally(protocol="ethayarajh")


# ---- Kovaleva's claim and bertviz's sentence-pair slices --------------------------------------------------


def test_last_layers_change_most():
    from core.analyses.heads import change_ranks, last_layers_change_most

    cosine = np.array([[0.99, 0.97], [0.95, 0.97], [0.80, 0.90], [0.60, 0.70]])  # layer means .98 .96 .85 .65
    assert change_ranks(cosine).tolist() == [4, 3, 2, 1]
    assert last_layers_change_most(cosine, 2) and last_layers_change_most(cosine, 1)
    swapped = cosine[[0, 2, 1, 3]]  # layer 1 (0-based) now changes more than layer 2
    assert not last_layers_change_most(swapped, 2) and last_layers_change_most(swapped, 1)
    # Independent: the two largest (1 - mean cosine) by plain sorting.
    change = [1 - sum(row) / len(row) for row in swapped.tolist()]
    top = sorted(range(len(change)), key=lambda i: -change[i])[:2]
    assert set(top) == {1, 3}


def test_pair_slices_match_loops():
    from core.analyses.heads import pair_example

    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]", "the", "cat", "ran", "[SEP]"]
    special = np.array([t.startswith("[") for t in tokens])
    segments = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])
    a = _random_attention(np.random.default_rng(4), 2, 3, len(tokens))
    values, n_twin, n_query = pair_example(a, tokens, special, segments)
    assert (n_twin, n_query) == (2, 3)  # "the" and "cat" have twins in B, "sat" has none
    for layer in range(2):
        for head in range(3):
            m = a[layer, head]
            to_b = sum(sum(m[q][k] for k in range(5, 9)) for q in (1, 2, 3)) / 3
            to_sep = sum(m[q][8] for q in (1, 2, 3)) / 3
            to_twin = (m[1][5] + m[2][6]) / 3
            assert values[:, layer, head].tolist() == pytest.approx([to_b, to_sep, to_twin])
