"""The "Heads over a dataset" tab of the attention page in a real browser: run the statistics pass on a few SNLI
pairs, wait for the layer x head heatmap, check the pattern grid, and save a screenshot."""

from __future__ import annotations

import re

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

TAB = "Heads over a dataset"


def test_heads_over_a_dataset(page, app_url, data_dir):
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    tab = page.get_by_role("tab", name=TAB)
    assert tab.count() == 1, f"the attention page has no '{TAB}' tab (it should call app_pages.attention_dataset.render())"
    tab.click()
    wait_for_app(page)
    examples = page.get_by_label("Examples", exact=True)
    examples.fill("8")
    examples.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name=re.compile(r"Run .* over 8 examples")).click()
    page.get_by_text(re.compile(r"8 inputs \(8 pairs")).wait_for(timeout=180_000)
    wait_for_app(page)
    chart = page.locator('[data-testid="stVegaLiteChart"]').filter(has=page.locator("canvas, svg")).first
    chart.wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset")

    page.get_by_role("radio", name="Pattern types").or_(page.get_by_role("button", name="Pattern types")).first.click()
    wait_for_app(page)
    page.get_by_text("Example maps of each type").wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset_patterns")
