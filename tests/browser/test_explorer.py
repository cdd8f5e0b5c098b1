"""The Dataset explorer in a real browser: the SNLI projector draws, a dragged box selects examples, one of them
opens in Attention heads with the sidebar set; the nearest contexts of "bank" are listed."""

from __future__ import annotations

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"]'


def test_explorer_projector_selection_and_nearest_contexts(page, app_url):
    page.goto(f"{app_url}/explorer")
    wait_for_app(page)
    page.get_by_role("button", name="SNLI dev, 200 pairs, last layer").click()
    wait_for_app(page)
    page.get_by_role("button", name="Run this model").click()
    try:
        page.wait_for_selector(f"{CHART} canvas, {CHART} svg", timeout=400_000)
    except Exception:
        screenshot(page, "explorer_failed")
        raise
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    chart = page.locator(CHART).first
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] * 0.8, steps=10)
    page.mouse.up()
    page.get_by_text("Selection: ").filter(has_not_text="Selection: 0 examples").first.wait_for(timeout=60_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    chart.scroll_into_view_if_needed()
    screenshot(page, "explorer_projector")

    page.get_by_role("button", name="Open in Attention heads").click()
    page.wait_for_url("**/attention**", timeout=60_000)
    wait_for_app(page)
    page.wait_for_function("() => new URLSearchParams(location.search).get('a')", timeout=60_000)
    opened = page.evaluate("() => new URLSearchParams(location.search).get('a')")
    screenshot(page, "explorer_opened_in_attention")
    assert page.get_by_label("Sentence A").input_value(timeout=20_000) == opened

    page.goto(f"{app_url}/explorer")
    wait_for_app(page)
    page.get_by_role("button", name="Nearest contexts of “bank”").click()  # opens the Nearest contexts tab too
    wait_for_app(page)
    page.get_by_role("button", name="Build / open the corpus index").click()
    page.get_by_text("search**").or_(page.get_by_text("Exact search")).first.wait_for(timeout=240_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    page.get_by_text("Exact search").first.scroll_into_view_if_needed()
    screenshot(page, "explorer_neighbours")
