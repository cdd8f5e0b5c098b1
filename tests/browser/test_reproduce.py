"""The Reproduce page in a real browser: a study opened from its URL, run on the sidebar's model, its chart drawn."""

from __future__ import annotations

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'


def test_reproduce_page_runs_a_study(page, app_url):
    page.goto(f"{app_url}/reproduce?study=visbert")
    wait_for_app(page)
    page.get_by_text("VisBERT: Hidden-State Visualizations").first.wait_for()
    screenshot(page, "reproduce_card")
    page.get_by_role("button", name="Measure the sidebar's model").click()
    wait_for_app(page)
    page.get_by_role("button", name="Run the study").click()
    page.get_by_text("No published numbers to compare with").first.wait_for()
    wait_for_app(page)
    page.wait_for_selector(CHART)
    assert_no_streamlit_exception(page)
    assert "study=visbert" in page.url
    screenshot(page, "reproduce")
