"""Exported HTML opens with the network cut off: a chart file and a lesson deck (core.report.deck_html) drawn by
headless Chromium with every non-file request aborted (and counted: there must be none); then, in the app, the
attention page's "HTML (interactive, offline)" and "PDF report" downloads."""

from __future__ import annotations

import re
import shutil
import subprocess

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts import chart_html
from core.report import deck_html
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

BARS = ".vega-embed svg.marks .mark-rect path"


def bars(n: int, title: str) -> alt.Chart:
    frame = pd.DataFrame({"word": [f"w{i}" for i in range(n)], "score": np.arange(1, n + 1, dtype=float)})
    return alt.Chart(frame, title=title).mark_bar().encode(x="word:N", y="score:Q", tooltip=["word", "score"])


@pytest.fixture
def offline_page(browser):
    """A page whose every request other than file:// is aborted and recorded."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    context.set_offline(True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.blocked = blocked
    yield page
    context.close()


def test_chart_html_draws_offline(offline_page, tmp_path):
    path = tmp_path / "chart.html"
    path.write_text(chart_html(bars(4, "Four bars")), encoding="utf-8")
    errors: list[str] = []
    offline_page.on("pageerror", lambda e: errors.append(str(e)))
    offline_page.goto(path.as_uri())
    offline_page.wait_for_selector(BARS, state="attached")
    assert offline_page.locator(BARS).count() == 4
    assert "Four bars" in offline_page.locator(".vega-embed svg.marks").inner_html()
    assert offline_page.blocked == [] and errors == []
    screenshot(offline_page, "offline_chart_html")


def test_deck_steps_with_arrow_keys_offline(offline_page, tmp_path):
    path = tmp_path / "deck.html"
    steps = [("One", bars(2, "two bars"), "first caption", "say this first"), ("Two", bars(5, "five bars"), "second caption"),
             ("Three", None, "a text-only slide")]
    path.write_text(deck_html(steps, title="Deck"), encoding="utf-8")
    errors: list[str] = []
    offline_page.on("pageerror", lambda e: errors.append(str(e)))
    offline_page.goto(path.as_uri())
    current = "section.slide.current"
    offline_page.wait_for_selector(f"{current} {BARS}", state="attached")
    assert offline_page.locator(f"{current} {BARS}").count() == 2
    assert offline_page.locator(f"{current} h1").inner_text() == "One"
    assert not offline_page.locator(f"{current} aside.notes").is_visible()  # notes hidden from the slide
    screenshot(offline_page, "offline_deck_1")
    offline_page.keyboard.press("ArrowRight")
    offline_page.wait_for_selector(f"{current} {BARS}", state="attached")
    assert offline_page.locator(f"{current} h1").inner_text() == "Two"
    offline_page.wait_for_function(f"document.querySelectorAll('{current} {BARS}').length === 5")
    assert offline_page.locator(f"{current} p.caption").inner_text() == "second caption"
    screenshot(offline_page, "offline_deck_2")
    offline_page.keyboard.press("ArrowRight")
    assert offline_page.locator(f"{current} h1").inner_text() == "Three"
    assert offline_page.locator(f"{current} .vega-embed").count() == 0
    offline_page.keyboard.press("ArrowLeft")
    offline_page.keyboard.press("ArrowLeft")
    offline_page.keyboard.press("n")
    assert offline_page.locator(f"{current} aside.notes").is_visible()
    assert offline_page.locator(f"{current} h1").inner_text() == "One"
    assert offline_page.blocked == [] and errors == []


def test_app_exports_open_offline(page, app_url, offline_page, tmp_path):
    """The attention page's HTML download draws offline; its PDF report has one page per exportable chart."""
    from urllib.parse import urlencode

    page.goto(f"{app_url}/attention?{urlencode({'a': 'The cat sat on the mat.'})}")
    wait_for_app(page)
    page.wait_for_selector('[data-testid="stVegaLiteChart"]')
    assert_no_streamlit_exception(page)
    with page.expect_download() as download:
        page.get_by_role("button", name="HTML (interactive, offline)").first.click()
    html_path = tmp_path / "attention.html"
    download.value.save_as(html_path)
    wait_for_app(page)
    offline_page.goto(html_path.as_uri())
    offline_page.wait_for_selector(".vega-embed svg.marks .mark-text text", state="attached")
    assert offline_page.blocked == []
    screenshot(offline_page, "offline_attention_export")

    button = page.get_by_role("button", name=re.compile("PDF report of this page"))
    button.first.scroll_into_view_if_needed()
    screenshot(page, "attention_export_menu")
    label = button.first.inner_text()
    charts = int(label.split("(")[1].split()[0])
    with page.expect_download() as download:
        button.first.click()
    pdf = tmp_path / "page.pdf"
    download.value.save_as(pdf)
    pdftoppm = shutil.which("pdftoppm")
    assert pdftoppm, "pdftoppm not found: apt-get install poppler-utils"
    subprocess.run([pdftoppm, "-png", "-r", "20", str(pdf), str(tmp_path / "p")], check=True)
    assert len(list(tmp_path.glob("p-*.png"))) == charts >= 1
