"""The "Paraphrase heads (MRPC)" section of the attention page's dataset tab in a real browser: measure a few MRPC
pairs, wait for the AUC grids and the pair's head view, and save a screenshot."""

from __future__ import annotations

import re

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app


def test_paraphrase_heads(page, app_url, data_dir):
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    page.get_by_role("tab", name="Heads over a dataset").click()
    wait_for_app(page)
    page.get_by_text("Paraphrase heads (MRPC)").wait_for()
    pairs = page.get_by_label("Pairs (seeded sample)", exact=True)
    pairs.fill("16")
    pairs.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name=re.compile(r"Measure 16 MRPC pairs")).click()
    page.get_by_text(re.compile(r"equivalent pairs of mrpc:test:16")).wait_for(timeout=240_000)
    wait_for_app(page)
    page.get_by_text("Open a pair in the head view").scroll_into_view_if_needed()
    page.get_by_role("button", name=re.compile("Open in the")).wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_pair_heads")
