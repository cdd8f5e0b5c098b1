"""The "What fine-tuning changes" tab of the fine-tuning page in a real browser: MiniLM against a
random-initialised copy saved as a run, layer similarity on built-in sentences, then a small structural probe."""

from __future__ import annotations

import re

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"]:visible'  # the Runs tab's charts are in the DOM too, hidden


def open_tab(page, app_url) -> None:
    page.goto(f"{app_url}/finetune")
    wait_for_app(page)
    tab = page.get_by_role("tab", name=re.compile("chang", re.I))
    assert tab.count() > 0, "the fine-tuning page has no 'What fine-tuning changes' tab (app_pages/finetune.py should call render())"
    tab.first.click()
    wait_for_app(page)


def set_number(page, label: str, value: int) -> None:
    field = page.get_by_label(label, exact=True).filter(visible=True).first  # the Runs tab has an "Epochs" too
    field.fill(str(value))
    field.press("Enter")
    wait_for_app(page)


def test_similarity_and_probe_draw(page, app_url, random_run):
    open_tab(page, app_url)
    # The tab's own label reads the same: wait for the section's heading, which only the rendered section has.
    page.locator('[data-testid="stMain"]').get_by_role("heading", name="What fine-tuning changes").first.wait_for()
    set_number(page, "Sentences read", 40)
    page.get_by_role("button", name="Compare layers").click()
    page.get_by_text("Measured on").first.wait_for(timeout=180_000)
    wait_for_app(page)
    page.wait_for_selector(CHART)
    assert_no_streamlit_exception(page)
    page.get_by_text("Measured on").first.scroll_into_view_if_needed()
    screenshot(page, "finetune_changes_similarity")

    set_number(page, "Training sentences", 60)
    set_number(page, "Evaluation sentences", 30)
    set_number(page, "Epochs", 2)
    page.get_by_role("button", name="Train probes").click()
    page.get_by_text("One sentence: the probe").first.wait_for(timeout=300_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    assert page.locator(CHART).count() >= 5  # lines, heatmap, UUAS, DSpr, tree
    page.get_by_text("One sentence: the probe").first.scroll_into_view_if_needed()
    screenshot(page, "finetune_changes_probe")
    # issue 48 (at 1440x900): the tree was cut at the column's edge ("sinc…"), the CKA/RSA "measure" and the probe's
    # "kind" legends drew no line beside their names, the paper's number ran off the plot's left edge
    from tests.browser.test_chart_layout import APP_VIEWPORT, assert_whole, measure

    page.set_viewport_size(APP_VIEWPORT)
    page.wait_for_timeout(1000)
    assert_whole(measure(page), "what fine-tuning changes")
