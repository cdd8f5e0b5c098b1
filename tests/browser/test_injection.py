"""Issue 32: user text never runs as script and never makes the browser call a third party.

One payload — a `</script>` break-out, an HTML comment opener, `<img onerror>`, `<svg onload>`, an `<img>` and a
Markdown image pointing at 192.0.2.1 (TEST-NET-1, never a real host), a `javascript:` URL — is put through every
export (chart HTML, lesson deck, the notebook's iframe) and every page that shows user text (a sentence and an
unknown parameter name in a shared link, a model name, an imported lesson and presenter mode, the presenter's
lesson name, the explorer with an uploaded CSV). Headless Chromium then checks that no script ran (`window.__pwned`
in every frame, the document title, dialogs), that no request left localhost (file:, data:, blob:, about: for a
file), and that the payload is shown as the text it is.
"""

from __future__ import annotations

import csv
import io
import json
from urllib.parse import urlencode, urlparse

import altair as alt
import pandas as pd
import pytest

from core.safe_text import WORD_JOINER
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app
from tests.browser.test_lessons import wait_for_slide

MARKDOWN_IMAGE = "![x](http://192.0.2.1/x.png)"
# Single quotes in the script: JSON escapes double ones, which would break the payload rather than run it.
PAYLOAD = ("</script><script>window.__pwned='script';document.title='pwned'</script><!--"
           '<img src=x onerror="window.__pwned=\'img\'"><img src="http://192.0.2.1/html.png">'
           '<svg onload="window.__pwned=\'svg\'"></svg> [link](javascript:window.__pwned="js") '
           f"{MARKDOWN_IMAGE} :red[red] $x$ **bold**")
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
LOCAL_SCHEMES = {"file", "data", "blob", "about"}


def _local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in LOCAL_SCHEMES or parsed.hostname in LOCAL_HOSTS


class Guarded:
    """A browser page that records dialogs and every request, aborting those that would leave this machine."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.outside: list[str] = []
        self.dialogs: list[str] = []

        def route(r):
            if _local(r.request.url):
                r.continue_()
            else:
                self.outside.append(r.request.url)
                r.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(180_000)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def assert_nothing_ran(self) -> None:
        ran = []
        for frame in self.page.frames:
            if frame.is_detached():
                continue
            value = frame.evaluate("() => window.__pwned === undefined ? null : String(window.__pwned)")
            if value is not None:
                ran.append((frame.url[:80], value))
        assert ran == [], f"the payload ran as script: {ran}"
        assert self.page.title() != "pwned"
        assert self.dialogs == [], self.dialogs
        assert self.outside == [], f"requests left localhost: {sorted(set(self.outside))}"

    def shows(self, text: str) -> bool:
        """The text appears, as typed, in the page's rendered text (not as markup)."""
        # markdown_text puts an invisible word joiner into "http:" so Streamlit makes no link of it: not shown text
        return text in self.page.locator("body").inner_text().replace(WORD_JOINER, "")


@pytest.fixture
def guarded(browser):
    g = Guarded(browser)
    yield g
    g.context.close()


def payload_chart() -> alt.Chart:
    frame = pd.DataFrame({"text": [PAYLOAD, "plain", MARKDOWN_IMAGE], "x": [1.0, 2.0, 3.0], "y": [3.0, 1.0, 2.0]})
    return alt.Chart(frame, title=PAYLOAD).mark_circle(size=400).encode(
        x=alt.X("x:Q", title=PAYLOAD), y="y:Q", color=alt.Color("text:N", title=PAYLOAD),
        tooltip=[alt.Tooltip("text:N", title=PAYLOAD)])


def hover_marks(page, selector: str = ".vega-embed svg.marks .mark-symbol path") -> None:
    marks = page.locator(selector)
    for i in range(marks.count()):
        marks.nth(i).hover(force=True)
        page.wait_for_timeout(150)


# ---- exports --------------------------------------------------------------------------------------------------

def test_chart_html_export(guarded, tmp_path):
    from core.charts import chart_html

    path = tmp_path / "chart.html"
    path.write_text(chart_html(payload_chart()), encoding="utf-8")
    page = guarded.page
    page.goto(path.as_uri())
    guarded.assert_nothing_ran()  # on main the payload closed vl-convert's script and ran here, on opening
    page.wait_for_selector(".vega-embed svg.marks .mark-symbol path", state="attached", timeout=30_000)
    hover_marks(page)
    # The spec came through the browser's own JSON.parse unchanged.
    spec = page.evaluate("JSON.parse(document.getElementById('vega-spec').textContent)")
    assert spec["title"] == PAYLOAD
    assert [row["text"] for row in next(iter(spec["datasets"].values()))] == [PAYLOAD, "plain", MARKDOWN_IMAGE]
    assert PAYLOAD in page.locator(".vega-embed svg.marks").text_content()  # the title, as text
    screenshot(page, "injection_chart_html")
    guarded.assert_nothing_ran()


def test_lesson_deck_export(guarded, tmp_path):
    from core.report import deck_html

    path = tmp_path / "deck.html"
    path.write_text(deck_html([(PAYLOAD, payload_chart(), PAYLOAD, PAYLOAD), (PAYLOAD, None, PAYLOAD)], title=PAYLOAD),
                    encoding="utf-8")
    page = guarded.page
    page.goto(path.as_uri())
    guarded.assert_nothing_ran()
    page.wait_for_selector("section.slide.current .vega-embed svg .mark-symbol path", state="attached")
    assert page.locator("section.slide.current h1").inner_text() == PAYLOAD
    page.keyboard.press("n")  # the speaker notes, shown as text
    assert page.locator("section.slide.current aside.notes").inner_text() == PAYLOAD
    hover_marks(page, "section.slide.current .vega-embed svg .mark-symbol path")
    screenshot(page, "injection_deck")
    page.keyboard.press("ArrowRight")
    assert page.locator("section.slide.current p.caption").inner_text() == PAYLOAD
    guarded.assert_nothing_ran()


def test_notebook_display(guarded, tmp_path):
    """lens's renderer output inside a stand-in notebook page: the chart draws in its sandboxed frame, cannot
    reach the notebook, and the frame still grows to the chart's size (posted, since the parent cannot read it)."""
    from core import lens

    output = lens._iframe(payload_chart().to_dict())["text/html"]
    path = tmp_path / "notebook.html"
    path.write_text(f"<!DOCTYPE html><html><body><p>notebook cell</p>{output}</body></html>", encoding="utf-8")
    page = guarded.page
    page.goto(path.as_uri())
    guarded.assert_nothing_ran()
    frame = page.frame_locator("iframe")
    frame.locator(".vega-embed svg .mark-symbol path").first.wait_for(state="attached")
    page.wait_for_function("() => document.querySelector('iframe').style.height !== '420px'")
    # The frame settles at the chart's height (it used to grow a few pixels per resize, without end).
    heights = []
    for _ in range(3):
        page.wait_for_timeout(700)
        heights.append(page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().height"))
    chart = page.frames[1]
    drawn = chart.evaluate("() => document.querySelector('.vega-embed').getBoundingClientRect().bottom")
    assert heights[0] == heights[1] == heights[2] and drawn <= heights[0] < drawn + 60, (heights, drawn)
    assert chart.evaluate("() => { try { return String(parent.document.body.innerHTML.length) } catch (e) { return 'blocked' } }") == "blocked"
    hover_marks(chart)
    screenshot(page, "injection_notebook")
    guarded.assert_nothing_ran()


# ---- pages ----------------------------------------------------------------------------------------------------

def test_sentence_param_name_and_model_in_a_link(guarded, app_url):
    page = guarded.page
    for path in ("attention", "pca"):
        page.goto(f"{app_url}/{path}?{urlencode({'a': PAYLOAD, 'b': PAYLOAD, PAYLOAD: '1'})}")
        wait_for_app(page)
        page.wait_for_selector('[data-testid="stVegaLiteChart"]')
        assert_no_streamlit_exception(page)
        # The unknown parameter's notice names it as typed.
        assert guarded.shows(f"“{PAYLOAD}” is not a setting of this page"), path
        hover_marks(page, '[data-testid="stVegaLiteChart"] svg .mark-symbol path')
        screenshot(page, f"injection_{path}")
        guarded.assert_nothing_ran()
    page.goto(f"{app_url}/?{urlencode({'model': PAYLOAD, 'a': 'The cat sat.'})}")
    wait_for_app(page)
    page.locator('[data-testid="stAlert"]').first.wait_for()
    assert guarded.shows(PAYLOAD)  # the error names the model as typed
    screenshot(page, "injection_model_name")
    guarded.assert_nothing_ran()


def _lesson_file(tmp_path, steps) -> str:
    path = tmp_path / "lesson.json"
    from core import lessons

    path.write_text(json.dumps({"version": lessons.VERSION, "title": PAYLOAD, "steps": steps}), encoding="utf-8")
    return str(path)


def test_imported_lesson_and_presenter_mode(guarded, app_url, tmp_path):
    page = guarded.page
    page.goto(f"{app_url}/lessons")
    wait_for_app(page)
    steps = [{"title": PAYLOAD, "page": "attention", "params": {"a": PAYLOAD, PAYLOAD: "1", "layer": PAYLOAD},
              "notes": f"{PAYLOAD}\n- second line {MARKDOWN_IMAGE}"},
             {"title": PAYLOAD, "page": "", "params": {}, "notes": PAYLOAD}]  # "": the home page
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(_lesson_file(tmp_path, steps))
    wait_for_app(page)
    screenshot(page, "injection_lessons")
    assert_no_streamlit_exception(page)
    page.get_by_text("is not a setting of this page").first.wait_for()
    assert page.get_by_label("Lesson title").input_value() == PAYLOAD
    assert guarded.shows(f"“{PAYLOAD}” is not a setting of this page")
    guarded.assert_nothing_ran()

    # Presenter mode in the same session (a page link keeps the session, so the imported lesson is the current one).
    page.get_by_text("Present this lesson").click()
    page.get_by_text("step 1 of 2").wait_for()
    wait_for_slide(page)
    page.get_by_text("Speaker notes (presenter only)").click()
    page.get_by_text("second line").wait_for()
    assert guarded.shows(f"{PAYLOAD}\n- second line {MARKDOWN_IMAGE}")  # the notes' own lines, as text
    assert guarded.shows(f"{PAYLOAD} · step 1 of 2")  # the lesson's title; the step's is the slide's heading
    assert page.locator('[data-testid="stHeading"]').first.inner_text().strip().replace(WORD_JOINER, "") == PAYLOAD
    hover_marks(page, '[data-testid="stVegaLiteChart"] svg .mark-symbol path')
    screenshot(page, "injection_present")
    guarded.assert_nothing_ran()

    # A lesson the app refuses: the error names the bad page as typed.
    page.goto(f"{app_url}/lessons")
    wait_for_app(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        _lesson_file(tmp_path, [{"title": "t", "page": PAYLOAD, "params": {}}]))
    page.get_by_text("Not a lesson:").wait_for()  # "Not a lesson: FILE: what is wrong" (issue 44)
    assert guarded.shows(MARKDOWN_IMAGE)
    guarded.assert_nothing_ran()


def test_presenter_lesson_name(guarded, app_url):
    page = guarded.page
    page.goto(f"{app_url}/present?{urlencode({'lesson': PAYLOAD})}")
    wait_for_app(page)
    page.get_by_text("No lesson called").wait_for()
    assert guarded.shows(f"No lesson called “{PAYLOAD}”")
    screenshot(page, "injection_present_name")
    guarded.assert_nothing_ran()


def test_explorer_with_an_uploaded_csv(guarded, app_url, tmp_path):
    rows = io.StringIO()
    writer = csv.writer(rows)
    writer.writerow(["text", "label", PAYLOAD])
    for i in range(6):
        writer.writerow([f"{PAYLOAD} number {i}", PAYLOAD if i % 2 else "plain", PAYLOAD if i % 3 else MARKDOWN_IMAGE])
    path = tmp_path / "payload.csv"
    path.write_text(rows.getvalue(), encoding="utf-8")
    page = guarded.page
    page.goto(f"{app_url}/explorer?{urlencode({'corpus': 'upload', 'colour': PAYLOAD})}")
    wait_for_app(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    wait_for_app(page)
    page.get_by_role("button", name="Run this model").click()
    page.locator('[data-testid="stVegaLiteChart"] svg .mark-symbol path, [data-testid="stException"]').first.wait_for(
        state="attached")
    wait_for_app(page)
    assert_no_streamlit_exception(page)  # on main: altair refused the column's name, a traceback
    # Colour by the column whose name is the payload, then take the chart away as an interactive HTML file.
    page.get_by_label("Colour by").click()
    page.get_by_role("option").filter(has_text="column: ").first.click()
    wait_for_app(page)
    # The legend's title is the column's name, as text (Vega shortens it with "…").
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] svg text')]"
                           ".some(t => t.textContent.startsWith('column: </script>'))")
    hover_marks(page, '[data-testid="stVegaLiteChart"] svg .mark-symbol path')
    screenshot(page, "injection_explorer")
    guarded.assert_nothing_ran()
    with page.expect_download() as download:
        page.get_by_role("button", name="HTML (interactive, offline)").first.click()
    exported = tmp_path / "explorer.html"
    download.value.save_as(exported)
    page.goto(exported.as_uri())
    guarded.assert_nothing_ran()
    page.wait_for_selector(".vega-embed svg.marks .mark-symbol path", state="attached", timeout=30_000)
    hover_marks(page)
    assert f"column: {PAYLOAD}"[:30] in page.locator(".vega-embed svg.marks").text_content()  # the legend's title
    screenshot(page, "injection_explorer_export")
    guarded.assert_nothing_ran()
