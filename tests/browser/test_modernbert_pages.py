"""Issue 46: every page of the registry opens on a tiny random ModernBERT (tests/tiny_modernbert.py, opened through
?model=<folder>) without an error, and the pages that draw from the sentence alone draw a chart."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.browser.conftest import each_page, screenshot
from tests.tiny_modernbert import make_tiny_modernbert

CHART = '[data-testid="stVegaLiteChart"]'


def test_every_page_opens_on_modernbert(page, app_url, tmp_path):
    folder = make_tiny_modernbert(tmp_path / "tiny-modernbert")
    query = urlencode({"model": str(folder), "a": "The cat sat on the [MASK] because it was tired.",
                       "b": "It was sleepy."})
    charts = {}
    for view in each_page(page, app_url, query):
        page.wait_for_timeout(1500)
        charts[view.name] = page.locator(CHART).count()
        screenshot(page, f"modernbert_{view.name}")
    print(charts)
    assert charts == {}
