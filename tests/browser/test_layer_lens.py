"""The Read the layers page's Lens tab in a real browser, on a tiny random 7-layer BertForMaskedLM opened through
?model=<folder> with a long sentence and a saved tuned lens (the shared server's MiniLM has no MLM head)."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np

from core.analyses import logit_lens as lenses
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app
from tests.conftest import TINY_VOCAB
from tests.tiny_mlm import make_layered_mlm

WORDS = [w for w in TINY_VOCAB if w.isalpha() and w.islower()]
LONG = " ".join(WORDS[(3 * i) % len(WORDS)] for i in range(40)) + " ."


def test_lens_grid_and_kl_of_a_long_sentence(page, app_url, app_server, tmp_path, monkeypatch):
    folder = make_layered_mlm(tmp_path / "tiny-mlm-7", layers=7)
    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))  # the server's cache: it lists this lens
    rng = np.random.default_rng(0)
    lenses.save_lens(lenses.Translators((np.eye(32) + rng.normal(0, 0.05, (7, 32, 32))).astype(np.float32),
                                        np.zeros((7, 32), np.float32)), "browser-lens", {"model": str(folder)})
    query = urlencode({"model": str(folder), "a": LONG, "lens_kind": "tuned", "lens": "browser-lens"})
    page.goto(f"{app_url}/layers?{query}")
    wait_for_app(page)
    page.get_by_text("Top guess at every layer and token").first.wait_for()
    assert_no_streamlit_exception(page)
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    assert charts.count() == 3
    grid = charts.first.bounding_box()
    assert grid["height"] > 42 * 16, grid  # 42 tokens, one readable row each
    main = page.locator('[data-testid="stMain"]').bounding_box()
    assert grid["x"] + grid["width"] <= main["x"] + main["width"] + 1, (grid, main)  # not cut at the right
    screenshot(page, "layer_lens_grid")
    page.evaluate("[...document.querySelectorAll('h3')].find(h => h.innerText.includes('How far'))"
                  ".scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    screenshot(page, "layer_lens_kl")
