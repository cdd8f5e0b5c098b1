"""The "Inside a head" tab of the attention page in a real browser: the neuron view draws for the sidebar's
sentence, the raw vs norm-weighted row beside it, and the dataset shares run on pasted sentences; plus the head
view with norm-weighted attention. Screenshots of each."""

from __future__ import annotations

import re

from tests.browser.conftest import assert_no_streamlit_exception, enter_sentences, screenshot, wait_for_app

TAB = "Inside a head"


def _charts(page):
    return page.locator('[data-testid="stVegaLiteChart"]').filter(has=page.locator("canvas, svg"))


def test_inside_a_head(page, app_url):
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    enter_sentences(page, "The bank raised rates, and the river flooded.")
    tab = page.get_by_role("tab", name=TAB)
    assert tab.count() == 1, f"the attention page has no '{TAB}' tab"
    tab.click()
    wait_for_app(page)
    page.get_by_text("Neuron view").wait_for()
    panel = page.get_by_role("tabpanel", name=TAB)
    charts = panel.locator('[data-testid="stVegaLiteChart"]').filter(has=page.locator("canvas, svg"))
    charts.first.wait_for()
    assert charts.count() >= 2  # neuron view and the raw vs norm-weighted row
    assert_no_streamlit_exception(page)
    page.get_by_text("Neuron view").scroll_into_view_if_needed()
    screenshot(page, "inside_head")

    panel.get_by_text("Paste text").click()
    wait_for_app(page)
    area = panel.get_by_label(re.compile("^Text"))
    area.fill("The cat sat on the mat.\nA dog ran, fast, in the park.\nIt rained all day.")
    area.press("Control+Enter")
    wait_for_app(page)
    panel.get_by_role("button", name=re.compile(r"Run .* over 3 examples")).click()
    page.get_by_text("where attention goes", exact=False).first.wait_for(timeout=180_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    page.get_by_text("where attention goes", exact=False).first.scroll_into_view_if_needed()
    screenshot(page, "inside_head_dataset")


def test_head_view_norm_weighted(page, app_url):
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    enter_sentences(page, "The bank raised rates, and the river flooded.")
    page.get_by_role("combobox", name="Weights", exact=True).click()
    page.get_by_role("option", name=re.compile("norm-weighted")).click()
    wait_for_app(page)
    page.get_by_text("Norm-weighted: ‖α_ij f(x_j)‖", exact=False).first.wait_for()
    _charts(page).first.wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_norm_weighted")


def test_neuron_view_sentence_filter(page, app_url):
    """Issue 45: a sentence pair offers bertviz's filter beside layer, head and query; A→B draws sentence B's keys."""
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    enter_sentences(page, "The bank raised rates.", "The river flooded.")
    page.get_by_role("tab", name=TAB).click()
    wait_for_app(page)
    panel = page.get_by_role("tabpanel", name=TAB)
    panel.get_by_role("combobox", name="Sentence filter").click()
    page.get_by_role("option", name="A→B", exact=True).click()
    wait_for_app(page)
    page.get_by_text("keys of A→B", exact=False).first.wait_for()
    assert_no_streamlit_exception(page)
    page.get_by_text("Neuron view").scroll_into_view_if_needed()
    screenshot(page, "inside_head_filter")
