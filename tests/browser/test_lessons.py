"""Issue 20 in a real browser: no request leaves localhost on any page, and presenter mode steps through the
built-in lesson with the arrow keys (a screenshot per step)."""

from __future__ import annotations

from urllib.parse import urlencode, urlparse

from playwright.sync_api import expect

from core import lessons
from tests.browser.conftest import assert_no_streamlit_exception, page_url_paths, screenshot, wait_for_app

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


def _outside(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme not in ("data", "blob", "about", "chrome-extension") and parsed.hostname not in LOCAL_HOSTS


def test_no_page_calls_a_host_other_than_localhost(page, app_url):
    """Every page, with a sentence so charts draw: any request to another host (fonts, icons, CDNs) fails."""
    outside: list[str] = []
    page.on("request", lambda request: outside.append(request.url) if _outside(request.url) else None)
    query = urlencode({"a": "The cat sat on the mat because it was tired.", "b": "It was sleepy."})
    paths = ["", *page_url_paths()]
    assert "present" in paths and "lessons" in paths
    for path in paths:
        extra = "&lesson=bert-in-ten-views&step=1" if path == "present" else ""
        page.goto(f"{app_url}/{path}?{query}{extra}")
        wait_for_slide(page) if path == "present" else wait_for_app(page)
        assert_no_streamlit_exception(page)
        page.wait_for_timeout(1500)  # favicons and fonts are fetched after the first paint
        assert not outside, f"page /{path} called outside hosts: {sorted(set(outside))}"
    icon = page.locator("link[rel~='icon']").first.get_attribute("href")
    assert icon and not _outside(page.evaluate("(h) => new URL(h, document.baseURI).href", icon)), icon


def wait_for_slide(page) -> None:
    """wait_for_app without waiting for the sidebar to show: presenter mode hides it."""
    page.wait_for_selector('[data-testid="stSidebar"]', state="attached")
    page.wait_for_timeout(500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-stale=\"true\"]')",
        timeout=180_000,
    )
    page.wait_for_timeout(300)


def open_settings(page, shown) -> None:
    """Unfold the slide's settings (the page's own controls, under the chart) unless `shown` is already visible."""
    if not shown.is_visible():
        page.get_by_text("Settings of this view").click()
        shown.wait_for()


def _step_text(index: int, n: int) -> str:
    return f"step {index + 1} of {n}"


def test_presenter_steps_with_arrow_keys(page, app_url):
    lesson = lessons.builtin()["bert-in-ten-views"]
    n = len(lesson.steps)
    page.goto(f"{app_url}/present?lesson=bert-in-ten-views&step=1")
    wait_for_slide(page)
    page.get_by_text(_step_text(0, n)).wait_for()
    # Polled: under load the slide's text can arrive a moment before the style that hides the sidebar applies.
    expect(page.locator('section[data-testid="stSidebar"]')).to_be_hidden(timeout=30_000)
    # Speaker notes are folded away from the slide.
    assert not page.get_by_text(lesson.steps[0].notes[:40]).is_visible()
    for index in range(n):
        wait_for_slide(page)
        page.get_by_text(_step_text(index, n)).wait_for()
        assert_no_streamlit_exception(page)
        # The URL follows the slide (history.replaceState: no navigation event to wait for).
        page.wait_for_function("(n) => new URLSearchParams(location.search).get('step') === String(n)", arg=index + 1)
        page.evaluate("document.querySelector('[data-testid=\"stMain\"]')?.scrollTo(0, 0)")
        screenshot(page, f"present_step{index + 1:02d}")
        if index + 1 < n:
            page.evaluate("document.activeElement && document.activeElement.blur()")  # keys go to the page
            page.keyboard.press("ArrowRight")
            page.get_by_text(_step_text(index + 1, n)).wait_for(timeout=180_000)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowLeft")
    page.get_by_text(_step_text(n - 2, n)).wait_for(timeout=180_000)
    wait_for_slide(page)
    page.get_by_text("Speaker notes (presenter only)").click()
    page.get_by_text(lesson.steps[n - 2].notes[:40]).wait_for()
    screenshot(page, "present_notes")


def test_lesson_editor_with_the_builtin_lesson(page, app_url):
    page.goto(f"{app_url}/lessons")
    wait_for_app(page)
    page.get_by_role("button", name="Start from “BERT in ten views”").click()
    wait_for_app(page)
    page.get_by_text("python -m core download bert-base-uncased").first.wait_for()
    steps = lessons.builtin()["bert-in-ten-views"].steps
    assert page.get_by_label(f"Step {len(steps)}").input_value() == steps[-1].title
    assert_no_streamlit_exception(page)
    screenshot(page, "lessons_editor")


def test_presenter_next_step_shows_the_style_it_draws(page, app_url):
    """Issue 37: step 1 is a heatmap; step 2 (no style in its link), reached with →, drew lines while the radio
    still showed "Heatmap"."""
    n = len(lessons.builtin()["bert-in-ten-views"].steps)
    page.goto(f"{app_url}/present?lesson=bert-in-ten-views&step=1")
    wait_for_slide(page)
    radio = page.get_by_role("radiogroup", name="Draw as")
    open_settings(page, radio)
    expect(radio.get_by_role("radio", name="Heatmap")).to_be_checked()
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowRight")
    page.get_by_text(_step_text(1, n)).wait_for(timeout=180_000)
    wait_for_slide(page)
    open_settings(page, radio)
    expect(radio.get_by_role("radio", name="Lines")).to_be_checked()
    assert page.get_by_text("Show all lines").is_visible()  # drawn only under the lines view
    screenshot(page, "present_step02_after_arrow")


SLIDE = ".st-key-present-slide"  # Streamlit's class for the container keyed present.slide


def test_presenter_slide_at_projector_size(browser, app_url):
    """Issue 48 at 1280×720: the step's title, then its chart first and wide, the page's settings folded under it;
    no sidebar word, no preparation list or cache path on screen; a step whose model cannot load offers the local
    model on the slide, and one click draws the step with it."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.set_default_timeout(180_000)
    try:
        page.goto(f"{app_url}/present?lesson=bert-in-ten-views&step=1")
        wait_for_slide(page)
        chart = page.locator(f'{SLIDE} [data-testid="stVegaLiteChart"]').first
        chart.wait_for()
        screenshot(page, "present_1280_step01")
        box, settings = chart.bounding_box(), page.get_by_text("Settings of this view").bounding_box()
        assert box["y"] < 200 and box["width"] >= 0.6 * 1280, box  # first on the slide, across its width
        assert settings["y"] > box["y"] + box["height"] - 1, (settings, box)  # the page's form folded under it
        shown = page.locator('[data-testid="stMain"]').inner_text()
        assert "sidebar" not in shown.lower()
        assert not page.get_by_text("Long work prepared ahead").is_visible()
        assert not page.locator('[data-testid="stAlertContentWarning"]').first.is_visible()
        assert_no_streamlit_exception(page)

        page.goto(f"{app_url}/present?lesson=bert-in-ten-views&step=5")  # bert-base-uncased: not here, offline
        wait_for_slide(page)
        offer = page.locator(SLIDE).get_by_role("button", name="all-MiniLM-L6-v2")
        offer.wait_for()
        assert "bert-base-uncased" in page.locator(SLIDE).inner_text()
        assert "sidebar" not in page.locator('[data-testid="stMain"]').inner_text().lower()
        screenshot(page, "present_1280_step05_offer")
        offer.click()
        wait_for_slide(page)
        assert_no_streamlit_exception(page)
        assert not page.locator(SLIDE).get_by_role("button", name="all-MiniLM-L6-v2").is_visible()
        screenshot(page, "present_1280_step05_minilm")
    finally:
        context.close()
