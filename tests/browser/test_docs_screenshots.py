"""The screenshot at the top of each page's document (docs/pages/NAME.md, docs/img/NAME.png) is the one this test
takes: every page of the registry at 1440×900 with a sentence pair, no error on it. The test always saves them
with the run's screenshots; `BERTLENS_WRITE_DOCS_IMAGES=1` also writes them into docs/img/ (kept in git)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlencode

from tests.browser.conftest import each_page

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "img"


def test_every_page_has_the_screenshot_its_document_shows(browser, app_url, tmp_path):
    from tests.browser.conftest import SCREENSHOTS

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)
    query = urlencode({"a": "The cat sat on the mat because it was tired.", "b": "It was sleepy."})
    write = os.environ.get("BERTLENS_WRITE_DOCS_IMAGES") == "1"
    try:
        for view in each_page(page, app_url, query):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / f"docs_{view.name}.png"
            page.screenshot(path=str(shot))  # the first screen, as a reader sees it
            assert shot.stat().st_size > 10_000, f"{view.name}: an empty screenshot"
            if write:
                shutil.copyfile(shot, DOCS_IMAGES / f"{view.name}.png")
            assert (DOCS_IMAGES / f"{view.name}.png").is_file(), (
                f"docs/img/{view.name}.png is missing: run this test with BERTLENS_WRITE_DOCS_IMAGES=1")
    finally:
        context.close()
