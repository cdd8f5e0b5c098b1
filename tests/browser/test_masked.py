"""The Masked words page in a real browser, on a tiny random BertForMaskedLM opened through ?model=<folder>
(the shared server's own model, MiniLM, has no MLM head): a typed [MASK], then a clicked word."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app
from tests.tiny_mlm import make_tiny_mlm

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'


def test_masked_sentence_and_click_to_mask(page, app_url, tmp_path):
    folder = make_tiny_mlm(tmp_path / "tiny-mlm")
    query = urlencode({"model": str(folder), "a": "the [MASK] sat on the mat by the river bank ."})
    page.goto(f"{app_url}/masked?{query}")
    wait_for_app(page)
    page.get_by_text("The model's guesses").wait_for()
    page.wait_for_selector(CHART)
    assert_no_streamlit_exception(page)
    assert page.locator('[data-testid="stVegaLiteChart"]').count() == 4
    page.get_by_text("not the model's output").first.wait_for()

    group = page.locator('[data-testid="stButtonGroup"]').first
    group.get_by_role("button", name="mat", exact=True).click()
    wait_for_app(page)
    page.wait_for_function("() => document.body.innerText.includes('mask 2 (token 6)')")
    assert_no_streamlit_exception(page)
    screenshot(page, "masked")
    # Streamlit's main area scrolls on its own, so a full-page shot stops at the viewport: scroll to each section.
    for heading, name in (("Layer by layer", "masked_layers"), ("Attention from the mask", "masked_attention")):
        page.get_by_role("heading", name=heading).scroll_into_view_if_needed()
        page.evaluate(f"[...document.querySelectorAll('h3')].find(h => h.innerText.includes('{heading}'))"
                      ".scrollIntoView({block: 'start'})")
        page.wait_for_timeout(400)
        screenshot(page, name)


def test_a_model_without_an_mlm_head_is_told_plainly(page, app_url):
    page.goto(f"{app_url}/masked?{urlencode({'a': 'the [MASK] sat .'})}")
    wait_for_app(page)
    page.get_by_text("no masked-word (MLM) head").wait_for()
    page.get_by_role("button", name="Use bert-base-uncased").wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "masked_no_head")
