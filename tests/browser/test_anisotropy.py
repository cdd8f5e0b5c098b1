"""The anisotropy page in a real browser: a pass can be cancelled, and a finished one draws its chart."""

from __future__ import annotations

from tests.browser.conftest import assert_no_streamlit_exception, run_anisotropy_on_first, screenshot, wait_for_app


def test_anisotropy_cancel_then_run_and_chart(page, app_url):
    # Streamlit scrolls inside its own container, so a full-page shot shows only the viewport: make it tall.
    page.set_viewport_size({"width": 1400, "height": 2300})
    page.goto(f"{app_url}/anisotropy")
    wait_for_app(page)
    page.get_by_role("button", name="Run on 1 model").click()
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Cancelled").wait_for()
    assert_no_streamlit_exception(page)

    run_anisotropy_on_first(page, 60)
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.wait_for(timeout=240_000)
    chart.scroll_into_view_if_needed()
    page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg')
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    assert page.locator('[data-testid="stMain"]').get_by_text("60 sentences, ").count() >= 1
    screenshot(page, "anisotropy")
