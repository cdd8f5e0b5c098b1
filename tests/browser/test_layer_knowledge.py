"""What each layer knows in a real browser at 1280×720: two tasks with control and MDL run as a job, and the
charts draw (screenshot, looked at by eye; `BERTLENS_WRITE_DOCS_IMAGES=1` also writes docs/img/layer_knowledge.png)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "img" / "layer_knowledge.png"


def test_probes_run_and_chart_at_1280_by_720(page, app_url):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/layer_knowledge?tasks=upos,deprel&corpus=ud:dev:100&eval_corpus=ud:test:100"
              "&control=true&mdl=true")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    page.get_by_role("button", name="Run", exact=True).click()
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.wait_for(timeout=400_000)
    page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg')
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    assert page.locator('[data-testid="stVegaLiteChart"]').count() == 2  # accuracy, and compression (MDL on)
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    shot = screenshot(page, "layer_knowledge_1280x720")
    page.screenshot(path=str(shot.with_name("layer_knowledge_chart_view.png")))  # what the reader sees there
    if os.environ.get("BERTLENS_WRITE_DOCS_IMAGES") == "1":
        page.set_viewport_size({"width": 1440, "height": 900})
        page.locator('[data-testid="stMain"]').get_by_text("What each layer knows").first.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        page.screenshot(path=str(shot.with_name("docs_layer_knowledge.png")))
        shutil.copyfile(shot.with_name("docs_layer_knowledge.png"), DOCS_IMAGE)


def test_erase_tab_runs_and_draws_at_1280_by_720(page, app_url):
    """The Erase a concept tab: a smaller fit than the default (the browser model may be MiniLM), Run as a job, and
    the before / after bars drawn (screenshot looked at by eye)."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/layer_knowledge?tab=Erase+a+concept")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    for label in ("Fit on: sentences (seeded)", "Check on: sentences (seeded)"):
        box = page.get_by_label(label)
        box.fill("200")
        box.press("Enter")
        wait_for_app(page)
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg',
                           timeout=400_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    screenshot(page, "layer_knowledge_erase_1280x720")
