"""The Read the layers page's Lens tab in a real browser, on a tiny random 7-layer BertForMaskedLM opened through
?model=<folder> with a long sentence and a tuned lens fitted here (the shared server's MiniLM has no MLM head)."""

from __future__ import annotations

from urllib.parse import urlencode

from core.analyses import logit_lens as lenses
from core.model.loading import load_model
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app
from tests.conftest import TINY_VOCAB
from tests.tiny_mlm import make_layered_mlm

WORDS = [w for w in TINY_VOCAB if w.isalpha() and w.islower()]
LONG = " ".join(WORDS[(3 * i) % len(WORDS)] for i in range(40)) + " ."


def test_lens_grid_and_kl_of_a_long_sentence(page, app_url, app_server, tmp_path, monkeypatch):
    folder = make_layered_mlm(tmp_path / "tiny-mlm-7", layers=7)
    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))  # the server's cache: it lists this lens
    corpus = [" ".join(WORDS[(5 * i + 7 * j) % len(WORDS)] for j in range(8)) + " ." for i in range(60)]
    lenses.fit_tuned_lens(load_model(str(folder), masked_lm=True, device="cpu"), corpus, "browser-lens", steps=80)
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
    for heading, name in (("One cell", "layer_lens_cell"), ("How far", "layer_lens_kl")):
        page.evaluate(f"[...document.querySelectorAll('h3')].find(h => h.innerText.includes('{heading}'))"
                      ".scrollIntoView({block: 'start'})")
        page.wait_for_timeout(400)
        screenshot(page, name)
