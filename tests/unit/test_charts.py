"""Chart builders: the data they carry, token order kept, offline export works."""

from __future__ import annotations

import numpy as np

from core import charts
from core.charts import attention as attention_charts
from core.attention import AttentionView


def view_with_repeated_tokens():
    labels = ("0·the", "1·cat", "2·sat", "3·on", "4·the", "5·mat")
    weights = np.random.default_rng(0).random((6, 6)).astype(np.float32)
    return AttentionView(weights / weights.sum(1, keepdims=True), labels, labels, 0, (0,), False, False, "all")


def test_heatmap_keeps_token_order_and_both_thes():
    view = view_with_repeated_tokens()
    spec = attention_charts.attention_heatmap(view).to_dict()
    assert spec["encoding"]["y"]["sort"] == list(view.query_labels)
    assert spec["encoding"]["x"]["sort"] == list(view.key_labels)
    frame = attention_charts.view_frame(view)
    assert len(frame) == 36 and frame["query"].nunique() == 6
    np.testing.assert_allclose(frame.pivot(index="query_order", columns="key_order", values="weight").to_numpy(), view.weights, rtol=1e-6)


def test_model_view_has_one_cell_per_head_and_renders_offline():
    rng = np.random.default_rng(1)
    attentions = rng.random((3, 2, 5, 5)).astype(np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    chart = attention_charts.model_view_grid(attentions, pixels=10)
    rows = list(chart.data.itertuples())  # altair hoists the shared data to the layer chart
    assert {(r.layer, r.head) for r in rows} == {(layer, head) for layer in range(3) for head in range(2)}
    assert all(r.url.startswith("data:image/png;base64,") for r in rows)
    svg = charts.chart_svg(chart)
    assert svg.startswith("<svg") and svg.count("<image") == 6
    assert charts.chart_png(chart)[:8] == b"\x89PNG\r\n\x1a\n"


def test_thumbnail_darkest_at_the_heads_maximum():
    import base64
    import io

    from PIL import Image

    matrix = np.zeros((4, 4), dtype=np.float32)
    matrix[2, 3] = 1.0
    uri = attention_charts.thumbnail_data_uri(matrix, pixels=4)
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
    assert tuple(image[2, 3]) == tuple(attention_charts.BLUES_HIGH) and tuple(image[0, 0]) == tuple(attention_charts.BLUES_LOW)


def test_head_view_lines_carry_every_pair():
    view = view_with_repeated_tokens()
    chart = attention_charts.head_view_lines(view)
    lines = chart.layer[0].data
    assert len(lines) == 36
    np.testing.assert_allclose(lines["weight"].to_numpy().reshape(6, 6), view.weights, rtol=1e-6)
