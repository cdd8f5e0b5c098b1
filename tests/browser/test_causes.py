"""The Attention heads page's "What causes it?" tab in a real browser, on a tiny random BertForMaskedLM opened
through its link: both patching heatmaps drawn with every token labelled, then a click on a head opens it in the
head view."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app
from tests.tiny_mlm import make_tiny_mlm

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'


def test_patching_heatmaps_and_click_to_open_a_head(page, app_url, tmp_path):
    folder = make_tiny_mlm(tmp_path / "tiny-mlm", layers=4)
    query = urlencode({"model": str(folder), "tab": "What causes it?", "target": "bank",
                       "clean": "the woman sat on the river [MASK] and the girl ran to the house .",
                       "corrupt": "the man sat on the river [MASK] and the boy ran to the house ."})
    page.goto(f"{app_url}/attention?{query}")
    wait_for_app(page)
    page.get_by_text("Click a head to open it").wait_for()
    page.wait_for_selector(CHART)
    assert_no_streamlit_exception(page)
    assert page.locator('[data-testid="stVegaLiteChart"]').count() == 2
    screenshot(page, "causes")
    positions = page.locator('[data-testid="stVegaLiteChart"]').nth(1)
    positions.scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    screenshot(page, "causes_positions")

    # Click a cell of the heads grid: its rects when the chart is drawn as SVG, else points over the chart until one
    # hits (the grid's place moves with its title, axis and legend: issue 48 sized it for a projector).
    heads = page.locator('[data-testid="stVegaLiteChart"]').first
    heads.scroll_into_view_if_needed()
    opened = page.get_by_role("tab", name="One sentence", selected=True)
    cells = heads.locator("svg .mark-rect path")
    if cells.count():
        cells.nth(cells.count() // 2).click(force=True)
        wait_for_app(page)
    box = heads.bounding_box()
    for fy in (0.35, 0.45, 0.55, 0.65, 0.75):
        if opened.count():
            break
        for fx in (0.3, 0.45, 0.6):
            page.mouse.click(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
            wait_for_app(page)
            if opened.count():
                break
    opened.wait_for(timeout=5_000)
    wait_for_app(page)
    page.wait_for_selector(CHART)
    assert page.get_by_label("Sentence A").input_value().startswith("the woman sat on the river [MASK]")
    assert_no_streamlit_exception(page)
    screenshot(page, "causes_opened_head")
