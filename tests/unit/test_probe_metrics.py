"""Structural-probe metrics and training on hand-made data, checked against scipy and hand counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.stats import spearmanr

from core.probe import (
    ProbeError,
    ProbeSettings,
    dspr,
    evaluate_probe,
    predict_distances,
    probe_data,
    spanning_tree_edges,
    train_probe,
    uuas,
)
from core.treebank import Sentence, parse_conllu, tree_distances

# "The cat sat on the mat ." with UD heads: The->cat, cat->sat, sat=root, on->mat, the->mat, mat->sat, .->sat
CONLLU = """# sent_id = toy-1
# text = The cat sat on the mat.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_
4\ton\ton\tADP\t_\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\t_\t_\t6\tdet\t_\t_
6\tmat\tmat\tNOUN\t_\t_\t3\tobl\t_\tSpaceAfter=No
7\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

"""


def toy() -> Sentence:
    return parse_conllu(CONLLU)[0]


def test_tree_distances_from_conllu_heads():
    d = tree_distances(toy().heads)
    # by hand: The-cat 1, The-sat 2, The-mat 3, The-on 4, on-cat 3, on-. 3, the-on 2
    assert d[0, 1] == 1 and d[0, 2] == 2 and d[0, 5] == 3 and d[0, 3] == 4
    assert d[3, 1] == 3 and d[3, 6] == 3 and d[4, 3] == 2
    assert (d == d.T).all() and (np.diag(d) == 0).all() and d.max() == 4


def test_gold_distances_give_uuas_and_dspr_of_one():
    s = toy()
    gold = tree_distances(s.heads).astype(float)
    assert uuas([gold], [gold], [s.upos]) == 1.0
    assert dspr([gold], [gold], lengths=(5, 50)) == pytest.approx(1.0)
    # the gold tree minus punctuation is exactly the head edges between non-punctuation words
    heads = {tuple(sorted((i, h - 1))) for i, h in enumerate(s.heads) if h > 0 and s.upos[i] != "PUNCT"}
    assert spanning_tree_edges(gold, s.upos) == heads


def test_uuas_counts_edges_by_hand():
    s = toy()
    gold = tree_distances(s.heads).astype(float)
    # a chain in word order: edges (0,1) (1,2) (2,3) (3,4) (4,5); gold has (0,1) (1,2) (2,5) (3,5) (4,5)
    chain = np.abs(np.subtract.outer(np.arange(7), np.arange(7))).astype(float)
    assert uuas([chain], [gold], [s.upos]) == pytest.approx(3 / 5)


def test_spanning_tree_has_scipys_weight():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(size=(9, 3))
        d = predict_distances(np.eye(3), x)
        edges = spanning_tree_edges(d)
        assert len(edges) == 8
        assert sum(d[i, j] for i, j in edges) == pytest.approx(minimum_spanning_tree(d).sum())


def test_dspr_matches_scipy_loops_and_skips_lengths():
    rng = np.random.default_rng(1)
    predicted, gold, rows_by_length = [], [], {}
    for n in (4, 6, 6, 8, 60):
        g = rng.integers(1, 6, size=(n, n)).astype(float)
        g = np.triu(g, 1) + np.triu(g, 1).T
        p = g + rng.normal(scale=2.0, size=(n, n))
        predicted.append(p)
        gold.append(g)
        if 5 <= n <= 50:
            rows_by_length.setdefault(n, []).extend(spearmanr(p[i], g[i])[0] for i in range(n))
    expected = np.mean([np.mean(v) for v in rows_by_length.values()])
    assert dspr(predicted, gold) == pytest.approx(expected, abs=1e-10)


def test_held_out_split_is_seeded_and_disjoint():
    sentences = [Sentence(tuple(f"w{i}{k}" for k in range(3)), (2, 0, 2), ("X",) * 3, ("NOUN",) * 3) for i in range(50)]
    sentences.append(Sentence(("alone",), (0,), ("root",), ("NOUN",)))  # one word: no pairs, left out
    a, b = probe_data(sentences, seed=3), probe_data(sentences, seed=3)
    assert [s.words for s in a.eval] == [s.words for s in b.eval] and a.digest == b.digest
    assert len(a.eval) == 10 and len(a.train) == 40
    assert not {s.words for s in a.eval} & {s.words for s in a.train}
    assert probe_data(sentences, seed=4).digest != a.digest
    with pytest.raises(ProbeError, match="at least"):
        probe_data(sentences[-1:])


def test_probe_recovers_a_planted_tree_geometry():
    """Vectors whose first coordinates embed each tree (squared distances = tree distances) plus noise
    dimensions: a trained probe should get UUAS near 1; on pure noise it should not."""
    rng = np.random.default_rng(2)

    def random_tree(n):
        return tuple([0] + [int(rng.integers(1, i + 1)) for i in range(1, n)])

    def embed(heads, dim=24):
        # a tree's path metric embeds isometrically (squared L2) by giving every edge its own orthogonal axis
        n = len(heads)
        x = np.zeros((n, dim))
        for child in range(1, n):
            x[child] = x[heads[child] - 1]
            x[child, child - 1] = 1.0
        return np.concatenate([x, rng.normal(scale=1.0, size=(n, 8))], axis=1)

    sentences = [Sentence(tuple(map(str, range(n))), random_tree(n), ("x",) * n, ("NOUN",) * n) for n in rng.integers(5, 15, size=80)]
    vectors = [embed(s.heads).astype(np.float32) for s in sentences]
    noise = [rng.normal(size=v.shape).astype(np.float32) for v in vectors]
    distances = [tree_distances(s.heads).astype(np.float32) for s in sentences]
    settings = ProbeSettings(rank=16, epochs=30, batch_size=10, learning_rate=0.01)
    b, losses, _ = train_probe(vectors[:60], distances[:60], settings)
    assert b.shape == (16, 32) and losses[-1] < losses[0]
    planted, planted_dspr, _ = evaluate_probe(b, vectors[60:], sentences[60:])
    b_noise, _, _ = train_probe(noise[:60], distances[:60], settings)
    control, _, _ = evaluate_probe(b_noise, noise[60:], sentences[60:])
    assert planted > 0.9 and planted_dspr > 0.9
    assert control < 0.6
