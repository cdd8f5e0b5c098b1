"""The Bias experiment page in a real browser: the word counts chart draws, an example word list applies."""

from __future__ import annotations

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'


def test_bias_page_counts_words(page, app_url):
    page.goto(f"{app_url}/bias")
    wait_for_app(page)
    page.wait_for_selector(CHART)
    page.get_by_text("Training pairs with a word").first.wait_for()
    assert_no_streamlit_exception(page)
    assert page.get_by_role("button", name="Launch full, biased and control").is_enabled()

    page.get_by_role("button", name="The male counterparts").click()
    wait_for_app(page)
    page.wait_for_selector(CHART)
    words = page.get_by_label("Words to remove from the training data (comma-separated; whole words, any capitalisation)")
    assert words.input_value() == "men, man, boy, boys, father, husband, male"
    assert_no_streamlit_exception(page)
    screenshot(page, "bias")
