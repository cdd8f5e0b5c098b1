"""The Reproduce page in a real browser: a study opened from its URL, run on the sidebar's model, its chart drawn."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core import studies
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


def test_the_study_dropdown_takes_the_first_change(page, app_url):
    """Issue 37: the first change of the dropdown was undone (4 of 4 tries), then a notice named the old study."""
    page.goto(f"{app_url}/reproduce")
    wait_for_app(page)
    page.get_by_text("Ethayarajh").first.wait_for()
    page.get_by_label("Study").click()
    page.get_by_role("option", name="clark").first.click()
    wait_for_app(page)
    page.wait_for_function("() => new URLSearchParams(location.search).get('study') === 'clark'")
    expect(page.get_by_role("combobox", name="Study")).to_have_value(re.compile(r"^clark — "))
    page.get_by_text(studies.get("clark").title).first.wait_for()  # the study card follows
    assert not page.get_by_text("Not available now").is_visible()
    assert_no_streamlit_exception(page)
    screenshot(page, "reproduce_first_change")
