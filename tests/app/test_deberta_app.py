"""Issue 46 in the app (AppTest): on a tiny DeBERTa the sidebar's model help names DeBERTa-v3 among the families,
and the attention page's heatmap is DeBERTa's own attention (what transformers' eager attention returns)."""

from __future__ import annotations

import numpy as np

from core.model.encoding import encode
from core.model.loading import load_model


def test_the_attention_page_on_deberta(tiny_deberta_dir, make_app, chart_rows):
    text_a, text_b = "the cat sat on the mat .", "he ran ."
    at = make_app(str(tiny_deberta_dir), text_a, text_b)
    at.switch_page("app_pages/attention.py").run()
    assert "DeBERTa-v3" in at.sidebar.selectbox(key="model").help
    at.selectbox(key="attention.layer").set_value(1)
    at.multiselect(key="attention.heads").set_value([2])
    at.radio(key="attention.style").set_value("Heatmap").run()
    assert not at.exception
    expected = encode(load_model(str(tiny_deberta_dir)), (text_a, text_b)).attentions[1, 2]
    shown = np.zeros_like(expected)
    for row in chart_rows(at):
        shown[int(row["query"].split("·")[0]), int(row["key"].split("·")[0])] = row["weight"]
    np.testing.assert_allclose(shown, expected, atol=1e-3)  # kept as float16 for display
    assert expected.max() > 0.3  # a peaked head: a wrong layer or head could not pass
