"""The model view's block-max thumbnails (core.analyses.model_view) and their PNGs, against loops written here."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from core.analyses.attention import AttentionView
from core.analyses.model_view import block_max, model_view, pixel_starts
from core.charts import attention as attention_charts
from core.charts import layout


def covering_pixels(cells: int, pixels: int) -> list[list[int]]:
    """For each cell j (span [j/n, (j+1)/n) of the unit axis), the pixels (span [p/P, (p+1)/P)) that show it,
    from the geometry rather than from pixel_starts: with at least as many cells as pixels, the one pixel holding the
    cell's last point; with fewer, every pixel whose left edge falls in the cell (nearest sampling)."""
    if cells >= pixels:
        return [[((j + 1) * pixels - 1) // cells] for j in range(cells)]
    return [[p for p in range(pixels) if j * pixels <= p * cells < (j + 1) * pixels] for j in range(cells)]


def looped_block_max(matrix: np.ndarray, pixels: int) -> np.ndarray:
    rows, cols = matrix.shape
    out = np.zeros((pixels, pixels), dtype=matrix.dtype)
    for p in range(pixels):
        r0 = p * rows // pixels
        r1 = max((p + 1) * rows // pixels, r0 + 1)
        for q in range(pixels):
            c0 = q * cols // pixels
            c1 = max((q + 1) * cols // pixels, c0 + 1)
            out[p, q] = matrix[r0:r1, c0:c1].max()
    return out


def random_attention(layers: int, heads: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(n, 0.1), size=(layers, heads, n)).astype(np.float32)


@pytest.mark.parametrize("n, pixels", [(5, 44), (10, 44), (44, 44), (45, 44), (100, 44), (512, 44), (64, 7), (3, 3)])
def test_every_cell_is_covered_and_each_pixel_is_its_block_max(n, pixels):
    matrix = random_attention(1, 1, n, seed=n)[0, 0]
    pooled = block_max(matrix, pixels, pixels)
    np.testing.assert_array_equal(pooled, looped_block_max(matrix, pixels))
    covering = covering_pixels(n, pixels)
    assert all(covering), "a column no pixel covers"
    column_max = matrix.max(axis=0)
    for j, cover in enumerate(covering):
        shown = pooled[:, cover].max()
        assert shown >= column_max[j]  # no column vanishes
        block = [k for k, c in enumerate(covering) if set(c) & set(cover)]
        assert shown == column_max[block].max()  # and nothing is drawn that the covered cells do not hold
        if n <= pixels:
            assert shown == column_max[j]  # a pixel holds one cell: exactly the column's maximum


def test_nearest_sampling_lost_columns_block_max_keeps():
    """The defect of issue 33: at 100 tokens PIL's NEAREST resize to 44 px drops [CLS]'s column (and 55 more)."""
    n, pixels = 100, 44
    matrix = np.zeros((n, n), dtype=np.float32)
    matrix[:, 0] = 1.0  # every query on [CLS]: the vertical stripe
    nearest = np.asarray(Image.fromarray(matrix).resize((pixels, pixels), Image.NEAREST))
    assert nearest.max() == 0.0
    assert block_max(matrix, pixels, pixels)[:, 0].min() == 1.0


def test_pixel_starts_refuses_empty():
    with pytest.raises(ValueError, match="at least 1"):
        pixel_starts(0, 44)


def test_scales_and_top_keys():
    attentions = random_attention(3, 4, 30, seed=3)
    tokens = [f"t{i}" for i in range(30)]
    per_head = model_view(attentions, tokens, np.zeros(30, int), pixels=8)
    np.testing.assert_allclose(per_head.scale_max, attentions.max(axis=(-2, -1)))
    np.testing.assert_allclose(per_head.colour_fraction().max(axis=(-2, -1)), 1.0)
    shared = model_view(attentions, tokens, np.zeros(30, int), pixels=8, scale="shared")
    assert np.all(shared.scale_max == attentions.max())
    np.testing.assert_allclose(shared.colour_fraction(), shared.thumbnails / attentions.max())
    assert shared.to_json()["scale_max"] == pytest.approx(float(attentions.max()))
    assert np.asarray(per_head.to_json()["scale_max"]).shape == (3, 4)
    received = attentions[2, 1].mean(axis=0)
    expected = sorted(range(30), key=lambda k: -received[k])[:3]
    assert [p for p, _ in per_head.top_keys[2][1]] == expected
    assert per_head.top_keys_text(2, 1).startswith(f"{expected[0]}·t{expected[0]} {received[expected[0]]:.3f}")


def test_pair_filter_keeps_rows_of_one_sentence_and_columns_of_the_other():
    attentions = random_attention(2, 2, 12, seed=4)
    segments = np.array([0] * 7 + [1] * 5)
    view = model_view(attentions, [str(i) for i in range(12)], segments, pixels=5, pair_filter="A→B")
    assert view.query_positions == tuple(range(7)) and view.key_positions == tuple(range(7, 12))
    np.testing.assert_array_equal(view.thumbnails[1, 0], looped_block_max(attentions[1, 0, :7, 7:], 5))
    np.testing.assert_allclose(view.scale_max, attentions[:, :, :7, 7:].max(axis=(-2, -1)))
    assert all(p >= 7 for p, _ in view.top_keys[0][0])
    with pytest.raises(ValueError, match="sentence pair"):
        model_view(attentions, [str(i) for i in range(12)], np.zeros(12, int), pair_filter="B→A")


def _png(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_grid_images_are_the_scaled_thumbnails_and_hover_names_top_keys():
    attentions = random_attention(2, 3, 60, seed=5)
    view = model_view(attentions, [f"w{i}" for i in range(60)], np.zeros(60, int), pixels=10, scale="shared")
    frame = attention_charts.model_view_frame(view)
    assert len(frame) == 6
    for row in frame.to_dict("records"):
        image = _png(row["url"])
        assert image.shape == (10, 10, 3)
        layer = row["layer"] - 1  # the frame shows layers 1..L (core.numbering)
        np.testing.assert_array_equal(image, attention_charts.heatmap_rgb(view.thumbnails[layer, row["head"]],
                                                                          peak=float(attentions.max())))
        assert row["top keys"] == view.top_keys_text(layer, row["head"])
    spec = attention_charts.model_view_grid(view).to_dict()
    assert spec["layer"][0]["mark"]["width"] == 10
    assert any(t.get("field") == "top keys" for t in spec["layer"][0]["encoding"]["tooltip"])


def test_long_heatmap_image_keeps_every_column():
    """The heatmap's image path (past HEATMAP_IMAGE_CELLS) pools the same way: 700 keys into 640 px."""
    n = 700
    weights = np.zeros((n, n), dtype=np.float32)
    weights[:, 1::2] = 1.0  # every other column a stripe: nearest sampling would drop some
    labels = tuple(f"{i}·w" for i in range(n))
    chart = attention_charts.attention_heatmap(AttentionView(weights, labels, labels, 0, (0,), False, False, "all"))
    url = next(r["url"] for r in chart.layer[0].data.to_dict("records"))
    image = _png(url)
    assert image.shape == (640, 640, 3)
    np.testing.assert_array_equal(image, attention_charts.heatmap_rgb(looped_block_max(weights, 640)))
    # the axes exactly as wide as the image (not stretched to the page's column, which moved keys off their ticks)
    spec = chart.to_dict()
    assert spec["autosize"] == layout.PAD.to_dict() and spec["width"] == spec["layer"][0]["mark"]["width"] == 640
