"""The Bias experiment page in a real browser: the word counts chart draws, an example word list applies."""

from __future__ import annotations

import shutil

from playwright.sync_api import expect

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


def test_reopened_bias_page_shows_the_settings_of_the_experiment_shown(page, app_server, app_url, minilm_dir, monkeypatch):
    """Issue 37: reopened, the form said 2,000 / 1,000 pairs beside results computed with 1,000 / 500. The
    experiment is written into the server's own cache folder, as an earlier launch would have left it."""
    from core import bias

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    bias.prepare(bias.ExperimentSpec(name="bias-browser-quick", model=str(minilm_dir), train_limit=1000,
                                     test_limit=500, epochs=1, max_length=64))
    try:
        page.goto(f"{app_url}/bias")
        wait_for_app(page)
        expect(page.get_by_role("combobox", name="Experiment")).to_have_value("bias-browser-quick")
        for label, value in (("Training pairs (0 = all)", "1000"), ("Test pairs (0 = all)", "500"), ("Epochs", "1"),
                             ("Max tokens", "64")):
            assert page.get_by_role("spinbutton", name=label, exact=True).input_value() == value, label
        assert_no_streamlit_exception(page)
        screenshot(page, "bias_reopened")
    finally:  # the server is shared by the session's browser tests: leave its cache as it was
        shutil.rmtree(bias.experiment_dir("bias-browser-quick"))
