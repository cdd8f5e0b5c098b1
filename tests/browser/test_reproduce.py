"""The Reproduce page in a real browser: a study opened from its URL, run on the sidebar's model, its chart drawn."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core import studies
from tests.browser.conftest import assert_no_streamlit_exception, run_study_on_sidebar_model, screenshot, wait_for_app

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


def test_reproduce_over_three_seeds(page, app_url):
    """The seeds field from the URL: clark on the sidebar's model, 40 treebank sentences per seed, seeds 0, 1, 2; the
    verdict on the intervals, paper vs the seeds' mean with error bars (per layer and per relation), the table of
    every number per seed and the paper's heads ranked per seed."""
    page.set_viewport_size({"width": 1400, "height": 2000})
    page.goto(f"{app_url}/reproduce?study=clark&seeds=0,1,2")
    wait_for_app(page)
    expect(page.get_by_role("textbox", name="Seeds")).to_have_value("0,1,2")
    run_study_on_sidebar_model(page, 40)
    page.get_by_text("Every number, per seed").first.wait_for(timeout=240_000)
    wait_for_app(page)
    page.wait_for_selector(CHART)
    page.get_by_text(re.compile(r"over seeds 0, 1, 2")).first.wait_for()
    assert page.locator('[data-testid="stVegaLiteChart"]').count() == 2  # per layer, per relation
    assert_no_streamlit_exception(page)
    assert "seeds=0" in page.url
    screenshot(page, "reproduce_seeds")
    page.get_by_text("The paper's heads: rank per seed").first.scroll_into_view_if_needed()
    screenshot(page, "reproduce_seeds_heads")
