"""Issue 44: no Markdown from data. Model folders named like Markdown (an image whose address hides its slashes as
HTML entities, a Streamlit badge) and a SentencePiece-style tokenizer whose words are Markdown and HTML are shown on
every page in Chromium: no request leaves localhost, no badge, image or link is drawn from them, and the names and
words are shown as the characters they are."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from core.safe_text import WORD_JOINER
from tests.browser.conftest import StreamlitServer, each_page, screenshot, wait_for_app
from tests.browser.test_injection import Guarded
from tests.sentencepiece_payload import PAYLOAD_SENTENCE, make_payload_mlm

# The image address's slashes are HTML entities, so the name is a legal folder name and Markdown decodes it into a
# URL (the request issue 44 saw); the badge is Streamlit's own colour directive.
MODEL_FOLDER = "evil![f](http:&#47;&#47;192.0.2.1:9&#47;f2.png):red-background[BADGE]"
BROKEN_FOLDER = "broken![g](http:&#47;&#47;192.0.2.1&#47;g.png):blue-background[BROKEN]"

FIND_DRAWN = """() => {
  const roots = [...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')];
  const drawn = [];
  for (const root of roots) {
    for (const a of root.querySelectorAll('a[href]')) {
      if (/192\\.0\\.2\\.1|^javascript:/i.test(a.getAttribute('href'))) drawn.push('link ' + a.getAttribute('href'));
    }
    for (const img of root.querySelectorAll('img[src]')) {
      if (/192\\.0\\.2\\.1/.test(img.getAttribute('src'))) drawn.push('image ' + img.getAttribute('src'));
    }
    for (const el of root.querySelectorAll('strong, em, code, span')) {
      const text = el.textContent;
      if (text === 'BADGE' || text === 'BROKEN' || text === 'RED' || text === 'bold') drawn.push(el.tagName + ' ' + text);
    }
  }
  return drawn;
}"""


@pytest.fixture(scope="module")
def payload_server(browser_model, data_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("payload-data")
    for entry in Path(data_dir).iterdir():  # the real data, by link: pages that read SNLI or UD still can
        if entry.name != "models":
            (data / entry.name).symlink_to(entry)
    models = data / "models"
    models.mkdir()
    (models / "all-MiniLM-L6-v2").symlink_to(browser_model)
    make_payload_mlm(models / MODEL_FOLDER)
    (models / BROKEN_FOLDER).mkdir()
    (models / BROKEN_FOLDER / "config.json").write_text("{ not json", encoding="utf-8")
    server = StreamlitServer(str(models / MODEL_FOLDER), tmp_path_factory.mktemp("payload-cache"),
                             env={"BERTLENS_DATA": str(data)})
    yield server
    server.stop()


def test_payload_model_names_and_words_stay_text_on_every_page(browser, payload_server):
    guarded = Guarded(browser)
    page = guarded.page
    query = urlencode({"a": PAYLOAD_SENTENCE, "b": "the cat sat on the mat ."})
    try:
        for view in each_page(page, payload_server.url, query):
            page.wait_for_timeout(1000)  # images are fetched after the first paint
            screenshot(page, f"markdown_from_data_{view.name}")
            drawn = page.evaluate(FIND_DRAWN)
            assert drawn == [], f"page /{view.url_path} drew markup from a model name or word: {drawn}"
            guarded.assert_nothing_ran()
        # On a model without a masked-word head, the masked-word page offers the models on this computer that have
        # one, each by its folder's name, as typed (an invisible word joiner keeps "http:" from becoming a link).
        page.goto(f"{payload_server.url}/masked?{urlencode({'model': 'all-MiniLM-L6-v2', 'a': 'The [MASK] sat.'})}")
        wait_for_app(page)
        page.get_by_text("Use evil").first.wait_for()
        shown = page.locator('[data-testid="stMain"]').inner_text().replace(WORD_JOINER, "")
        assert f"Use {MODEL_FOLDER}" in shown
        screenshot(page, "markdown_from_data_masked_offers")
        assert page.evaluate(FIND_DRAWN) == []
        # Why this prediction?'s coloured words: each payload word shown as typed.
        page.goto(f"{payload_server.url}/explain?{query}")
        wait_for_app(page)
        assert page.evaluate(FIND_DRAWN) == []
        guarded.assert_nothing_ran()
    finally:
        guarded.context.close()
