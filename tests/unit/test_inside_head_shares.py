"""Row shares, category shares and the chart frames of core.analyses.inside_head / core.charts.inside_head on synthetic
arrays, against plain loops."""

from __future__ import annotations

import numpy as np

from core.charts import inside_head as charts
from core.analyses.inside_head import CATEGORIES, NeuronView, NormShares, category_shares, row_shares


def test_row_shares_sum_to_one_and_keep_zero_rows():
    rng = np.random.default_rng(0)
    w = rng.random((2, 3, 4, 4))
    w[1, 2, 3] = 0.0
    s = row_shares(w)
    for idx in np.ndindex(*w.shape[:3]):
        total = w[idx].sum()
        np.testing.assert_allclose(s[idx], w[idx] / total if total else 0.0)


def test_category_shares_against_a_loop():
    rng = np.random.default_rng(1)
    w = rng.random((3, 2, 5, 5))
    cats = np.array([0, 3, 2, 3, 1])
    got = category_shares(w, cats)
    expected = np.zeros((3, 4))
    for layer in range(3):
        for head in range(2):
            for q in range(5):
                row = w[layer, head, q] / w[layer, head, q].sum()
                for j in range(5):
                    expected[layer, cats[j]] += row[j] / 10
    np.testing.assert_allclose(got, expected)


def test_shares_frame_and_chart():
    shares = NormShares(model="m", corpus="c", n_inputs=2, raw=np.full((2, 4), 0.25), norm=np.eye(2, 4))
    frame = charts.shares_frame(shares)
    assert len(frame) == 2 * 2 * 4 and set(frame["category"]) == set(CATEGORIES)
    norm = frame[frame["measure"] == charts.NORM].set_index(["layer", "category"])["share"]
    assert norm[(2, "[SEP]")] == 1.0 and norm[(2, "[CLS]")] == 0.0  # array row 1 is layer 2 (1..L, core.numbering)
    chart, _ = charts.shares_chart(shares)
    chart.to_dict()


def test_neuron_frame_keeps_products_per_key_and_dimension():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=3).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    scores = (k @ q) / np.sqrt(3)
    view = NeuronView(model="m", layer=0, head=0, query_index=1, tokens=("[CLS]", "a", "b", "[SEP]"), query=q,
                      keys=k, products=q * k, scores=scores, attention=np.exp(scores) / np.exp(scores).sum(),
                      bias=np.zeros(4, np.float32))
    frame = charts.neuron_frame(view)
    for row in frame.itertuples():
        assert np.isclose(row.product, q[row.dim] * k[row.key_order, row.dim])
        assert np.isclose(row.q, q[row.dim]) and np.isclose(row.k, k[row.key_order, row.dim])
    charts.neuron_chart(view).to_dict()
    # the keys before the sentence-pair filter (issue 45), then where the view is and which keys it keeps, and which
    # keys the query may see (issue 46: a ModernBERT local layer's window; all here); DeBERTa's terms only for it
    assert list(view.to_json()) == ["tokens", "query", "keys", "products", "scores", "attention", "layer", "head",
                                    "query_index", "pair_filter", "key_positions", "visible"]
    assert view.to_json()["visible"] == [True] * 4
    assert view.to_json()["key_positions"] == [0, 1, 2, 3] and view.to_json()["layer"] == 1
