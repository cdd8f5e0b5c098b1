"""Issue 18 in a real browser: a long input's head view (visible lines only, stated) and its heatmap as an image."""

from __future__ import annotations

from urllib.parse import quote

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

LONG = " ".join(f"the river bank number {i} flooded again" for i in range(50))  # ~350 word pieces


def test_long_input_head_view_and_image_heatmap(page, app_url, browser_model):
    page.goto(f"{app_url}/attention?model={quote(browser_model)}&a={quote(LONG)}")
    wait_for_app(page)
    page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg')
    page.get_by_text("lines drawn: weights ≥ 0.02").wait_for()
    assert page.get_by_text("Show all lines").count() == 1
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_long_input_lines")
    page.get_by_text("Heatmap", exact=True).click()
    wait_for_app(page)
    page.get_by_text("drawn as one image").wait_for()
    page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg')
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_long_input_heatmap")


def test_inside_a_head_says_what_a_long_sentence_lost(page, app_url, browser_model):
    """Issue 32: the "Inside a head" tab drew a sentence longer than the model reads without saying it was cut."""
    from transformers import AutoTokenizer

    longer = " ".join(f"the river bank number {i} flooded again" for i in range(90))
    dropped = len(AutoTokenizer.from_pretrained(browser_model)(longer, truncation=False)["input_ids"]) - 512
    assert dropped > 0
    page.goto(f"{app_url}/attention?model={quote(browser_model)}&a={quote(longer)}")
    wait_for_app(page)
    page.get_by_role("tab", name="Inside a head").click()
    wait_for_app(page)
    panel = page.get_by_role("tabpanel", name="Inside a head")
    notice = panel.get_by_text(f"The input is longer than the model reads (512 tokens): {dropped} word pieces")
    notice.wait_for(timeout=120_000)
    panel.get_by_text("Neuron view").wait_for(timeout=120_000)
    assert_no_streamlit_exception(page)
    notice.scroll_into_view_if_needed()
    screenshot(page, "inside_head_long_input")
