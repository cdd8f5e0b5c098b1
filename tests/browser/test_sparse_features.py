"""The Sparse features tab of "Read the layers" in a real browser with MiniLM: an SAE saved in the server's cache
draws the features on the sentence, and after the corpus pass one feature's top contexts and histogram (the numbers
are checked by tests/app/test_sparse_features_tab.py; this looks at the drawing)."""

from __future__ import annotations

from urllib.parse import quote

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'
TEXT = "She sat on the river bank and watched the water."


def test_features_tab_draws_the_sentence_and_a_feature(page, app_url, app_server, browser_model, monkeypatch):
    from core.analyses import sparse_features as sf
    from core.model.loading import load_model

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    if not (app_server.log.parent / "saes" / "browser-sae").is_dir():
        lm = load_model(browser_model)
        words = ("the a man woman dog river bank money park house sat ran walked near with on in at of and is was "
                 "water tree boat city").split()
        texts = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(8)) + " ." for i in range(80)]
        sf.train_sae(lm, texts, 4, sf.TrainSettings(features=768, k=16, batch=256, steps=40, lr=3e-3),
                     "browser-sae")
    page.goto(f"{app_url}/layers?sae=browser-sae&a={quote(TEXT)}")
    wait_for_app(page)
    page.get_by_role("tab", name="Sparse features").click()
    wait_for_app(page)
    page.locator(CHART).filter(visible=True).first.wait_for()  # the Lens tab's charts stay in the page, hidden
    assert_no_streamlit_exception(page)
    page.get_by_text("Features on your sentence").first.scroll_into_view_if_needed()
    screenshot(page, "sparse_features_sentence")

    page.get_by_role("button", name="Read the features of").click()
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stVegaLiteChart]')].length >= 3",
                           timeout=240_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    page.get_by_text("One feature over a corpus").first.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    screenshot(page, "sparse_features_feature")
