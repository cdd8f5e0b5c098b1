"""core.safe_text, checked against independent parsers: Python's json and html.parser, node's JSON.parse and
JavaScript parser, markdown-it-py (CommonMark). Then the HTML every export writes, parsed element by element."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import altair as alt
import pandas as pd
import pytest
from markdown_it import MarkdownIt

from core.safe_text import (WORD_JOINER, html_markdown_text, html_text, inline_script, markdown_code, markdown_text,
                            script_json, vega_field)

# remark-gfm's autolink literal (mdast-util-gfm-autolink-literal), which Streamlit's Markdown runs on decoded text.
GFM_AUTOLINK = re.compile(r"(https?://|www(?=\.))([-.\w]+)|([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.I)

# What an attacker would put in a sentence, a CSV cell, a lesson title or a URL parameter.
PAYLOADS = [
    "</script><script>window.__pwned = 1</script>",
    "</SCRIPT ><script>alert(1)</script>",
    "<!--<script>alert(1)//",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "![x](http://192.0.2.1/x.png)",
    "[click](javascript:alert(1))",
    '"><svg onload=alert(1)>',
    "a\u2028b\u2029c & d",
    "`code` ``two`` *em* _em_ # h :red[x] :material/home: $x^2$ <b>bold</b> | a | b |",
    "line one\n\n![y](http://192.0.2.1/y.png)\n# heading",
]


class _Elements(HTMLParser):
    """Every element's tag, attributes and raw text, as a browser's tokenizer splits the document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[list] = []
        self.open: list | None = None

    def handle_starttag(self, tag, attrs):
        self.open = [tag, dict(attrs), ""]
        self.elements.append(self.open)

    def handle_endtag(self, tag):
        self.open = None

    def handle_data(self, data):
        if self.open is not None:
            self.open[2] += data


def elements(page: str) -> list[list]:
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser.elements


@pytest.mark.parametrize("payload", PAYLOADS)
def test_script_json_round_trips_and_cannot_close_its_script(payload):
    value = {"text": payload, "rows": [payload, 1.5, None, True]}
    text = script_json(value)
    assert json.loads(text) == value
    for unsafe in ("<", ">", "&", "\u2028", "\u2029"):
        assert unsafe not in text
    # Inside a data island the browser sees one script element whose text is exactly that JSON.
    found = elements(f'<script type="application/json" id="d">{text}</script><p>after</p>')
    assert [e[0] for e in found] == ["script", "p"] and json.loads(found[0][2]) == value


def test_script_json_parses_in_javascript_too():
    """JSON.parse and a JavaScript expression give back the same strings (node, an independent parser)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the browser test tests/browser/test_injection.py checks JSON.parse too)")
    source = f"const a = JSON.parse({json.dumps(script_json(PAYLOADS))}); const b = {script_json(PAYLOADS)};" \
             "process.stdout.write(JSON.stringify([a, b]));"
    out = subprocess.run([node, "-e", source], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [PAYLOADS, PAYLOADS]


def test_script_json_writes_nan_and_infinity_as_null():
    assert json.loads(script_json({"x": [float("nan"), float("inf"), -float("inf"), 2.0]})) == {"x": [None, None, None, 2.0]}


def test_inline_script_cannot_be_closed_early():
    code = 'var s = "</script><b>x</b>"; var r = /<\\/script>/; // <!-- comment'
    found = elements(f"<script>{inline_script(code)}</script><p>after</p>")
    assert [e[0] for e in found] == ["script", "p"]
    assert "</script" not in inline_script(code).lower() and "<!--" not in inline_script(code)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_html_text_is_text_in_content_and_attributes(payload):
    found = elements(f'<p title="{html_text(payload)}">{html_text(payload)}</p>')
    assert len(found) == 1 and found[0][0] == "p"
    assert found[0][1] == {"title": payload} and found[0][2] == payload


def _markdown_tokens(markdown: str) -> list:
    """Every token markdown-it (CommonMark, plus GFM tables and strikethrough) makes, inline children included."""
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = []
    for token in parser.parse(markdown):
        tokens.append(token)
        tokens.extend(token.children or [])
    return tokens


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_text_is_shown_literally(payload):
    tokens = _markdown_tokens(markdown_text(payload))
    kinds = {t.type for t in tokens}
    assert kinds <= {"paragraph_open", "paragraph_close", "inline", "text"}, kinds
    shown = "".join(t.content for t in tokens if t.type == "text")
    assert shown.replace(WORD_JOINER, "") == payload.replace("\n\n", " ").replace("\n", " ")
    assert not GFM_AUTOLINK.search(shown)  # no link made of a bare address either
    # Streamlit's own syntax (colours, icons, math) starts with ":" or "$": always escaped.
    assert ":" not in markdown_text(payload).replace("\\:", "") and "$" not in markdown_text(payload).replace("\\$", "")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_text_keeping_lines_is_shown_literally_line_by_line(payload):
    notes = f"First line: {payload}\n- not a list\n1. nor this\n    nor code\n> nor a quote\n{payload}"
    tokens = _markdown_tokens(markdown_text(notes, keep_lines=True))
    kinds = {t.type for t in tokens}
    assert kinds <= {"paragraph_open", "paragraph_close", "inline", "text", "hardbreak"}, kinds
    shown = "\n".join(t.content for t in tokens if t.type == "text").replace(WORD_JOINER, "")
    # every line as typed, leading spaces aside (Markdown drops those); blank lines become paragraph breaks
    assert shown == "\n".join(line.lstrip() for line in notes.splitlines() if line.strip())


@pytest.mark.parametrize("payload", PAYLOADS + ["`", "a ` b", "``x``", " lead", "trail ", " both ", "layer=9"])
def test_markdown_code_is_one_code_span_holding_the_text(payload):
    tokens = [t for t in _markdown_tokens(markdown_code(payload)) if t.type not in ("paragraph_open", "paragraph_close", "inline")]
    assert [t.type for t in tokens] == ["code_inline"]
    assert tokens[0].content == payload.replace("\n\n", " ").replace("\n", " ")


# ---- every HTML the project writes, with a payload in its data ----------------------------------------------------

def payload_chart() -> alt.Chart:
    frame = pd.DataFrame({"word": PAYLOADS, "score": range(len(PAYLOADS))})
    return alt.Chart(frame, title=PAYLOADS[0]).mark_bar().encode(x="word:N", y="score:Q", tooltip=["word", "score"])


def scripts(page: str) -> list[list]:
    return [e for e in elements(page) if e[0] == "script"]


def test_chart_html_keeps_the_data_in_its_json_island():
    from core.charts.export import offline_spec
    from core.charts import chart_html

    chart = payload_chart()
    page = chart_html(chart)
    found = scripts(page)
    # The libraries, the spec (data, never run) and the embed call: no payload opened a script of its own.
    assert [e[1].get("type") for e in found] == ["text/javascript", "application/json", "text/javascript"]
    assert json.loads(found[1][2]) == json.loads(json.dumps(offline_spec(chart)))
    assert all(p not in page for p in PAYLOADS[:4])


def test_deck_keeps_titles_notes_and_data_as_text():
    from core.report import deck_html

    page = deck_html([(p, payload_chart(), p, p) for p in PAYLOADS[:4]], title=PAYLOADS[0])
    found = elements(page)
    assert [e[1].get("type") for e in found if e[0] == "script"] == ["text/javascript", "application/json", "text/javascript"]
    assert [e[2] for e in found if e[0] == "h1"] == PAYLOADS[:4]
    assert [e[2] for e in found if e[0] == "aside"] == PAYLOADS[:4]
    assert [e[2] for e in found if e[0] == "title"] == [PAYLOADS[0]]
    assert not [e for e in found if e[0] in ("img", "svg")]


def test_notebook_iframe_is_sandboxed_and_holds_the_safe_page():
    from core import lens
    from core.charts import chart_html

    chart = payload_chart()
    bundle = lens._iframe(chart.to_dict())
    found = elements(bundle["text/html"])
    assert len(found) == 1 and found[0][0] == "iframe"
    attributes = found[0][1]
    assert attributes["sandbox"] == "allow-scripts"  # scripts run, but in an opaque origin, not the notebook's
    assert attributes["srcdoc"] == chart_html(chart.to_dict(), post_size=True)


def test_explorer_scatter_reaches_file_columns_named_like_paths():
    """A CSV column called `a.b["c"]` or `x: y` is read by name (Vega draws its values), not as a nested path;
    before vega_field, altair's shorthand raised on the second ":" and the page showed a traceback."""
    import vl_convert as vlc

    from core.charts.explorer import scatter

    for name in ['column: a.b["c"]', "column: x: y", "column: it's [0]", "column: back\\slash", f"column: {PAYLOADS[9]}"]:
        frame = pd.DataFrame({"id": [0, 1], "x": [0.0, 1.0], "y": [1.0, 0.0], "text": ["s0", "s1"],
                              name: ["alpha", "omega"]})
        chart = scatter(frame, name, "t", selectable=False)
        assert chart.to_dict()["encoding"]["color"]["field"] == vega_field(name)
        svg = vlc.vegalite_to_svg(chart.to_dict())
        assert "alpha" in svg and "omega" in svg, name  # the legend lists the column's values


def test_pdf_report_holds_the_payload_as_text_and_no_actions():
    """The PDF report (fpdf2 text + vl-convert's chart page): titles and captions are drawn text; the file has no
    JavaScript, open action, link or launch annotation a reader could run."""
    from io import BytesIO

    from pypdf import PdfReader

    from core.report import report_pdf

    reader = PdfReader(BytesIO(report_pdf([(PAYLOADS[0], payload_chart(), PAYLOADS[5])], title=PAYLOADS[3])))
    root = reader.trailer["/Root"]
    # fpdf2's open "action" is a destination (page, fit to width): an array, never an action dictionary.
    assert isinstance(root.get("/OpenAction", []), list)
    assert "/AA" not in root and "/JavaScript" not in str(root.get("/Names", {}))
    for page in reader.pages:
        assert "/Annots" not in page and "/AA" not in page
    text = " ".join(page.extract_text() for page in reader.pages)
    assert "window.__pwned" in text and "192.0.2.1" in text  # shown, as text


def test_a_lesson_steps_link_is_percent_encoded():
    """The lessons page puts Step.link() in a Markdown link: nothing in it can close the link or start another."""
    from core.lessons import Step

    link = Step("t", "attention) ![x](http://192.0.2.1/x.png", {"a": PAYLOADS[5], PAYLOADS[0]: "1"}).link()
    assert not set(link) & set("()[]<>!\"' `\\")
    tokens = _markdown_tokens(f"[Open this view](/{link})")
    assert [t.type for t in tokens if t.type not in ("paragraph_open", "paragraph_close", "inline")] == [
        "link_open", "text", "link_close"]


# A word a SentencePiece-style tokenizer keeps whole (it splits at spaces only), as issue 44 found it drawn.
SENTENCEPIECE_WORDS = ["?a=look", "http://192.0.2.1/bare", "www.example.org", "me@example.org", "![x](//192.0.2.1/w.png)", ":red-background[RED]", "[l](http://192.0.2.1)",
                       "<b>x</b>", "&amp;", "**b**"]


@pytest.mark.parametrize("payload", PAYLOADS + SENTENCEPIECE_WORDS)
def test_html_markdown_text_is_text_for_html_and_for_markdown_with_html(payload):
    """st.markdown(..., unsafe_allow_html=True) renders Markdown with HTML passed through: the escaped text inside
    a <span> is one text run there (no image, link, emphasis or code) and reads back as the payload, and an HTML
    parser reads it back as the payload too."""
    escaped = html_markdown_text(payload)
    parser = MarkdownIt("commonmark", {"html": True})
    tokens = []
    for token in parser.parse(f"<span>{escaped}</span>"):
        tokens.extend([token, *(token.children or [])])
    kinds = {t.type for t in tokens}
    assert kinds <= {"paragraph_open", "paragraph_close", "inline", "text", "html_inline"}, kinds
    shown = "".join(t.content for t in tokens if t.type == "text")
    assert shown.replace(WORD_JOINER, "") == payload.replace("\n\n", " ").replace("\n", " ")
    assert not GFM_AUTOLINK.search(shown)
    assert not [t for t in tokens if t.type == "html_inline" and t.content not in ("<span>", "</span>")]
    assert elements(f"<p>{escaped}</p>")[0][2].replace(WORD_JOINER, "") == payload.replace("\n\n", " ").replace("\n", " ")
    assert ":" not in escaped and "[" not in escaped and "$" not in escaped  # Streamlit's own directives too


def test_explain_coloured_words_are_text_for_streamlit_markdown():
    """The explain page's coloured words go to st.markdown(unsafe_allow_html=True): a tokenizer's word made of
    Markdown draws no image, link or badge (issue 44)."""
    from types import SimpleNamespace

    import numpy as np

    from core.charts.explain import coloured_text

    words = SENTENCEPIECE_WORDS
    page = coloured_text(SimpleNamespace(words=words, word_scores=np.linspace(-1, 1, len(words))))
    rendered = MarkdownIt("commonmark", {"html": True}).render(page)
    assert "<img" not in rendered and "<a " not in rendered and "<strong" not in rendered
    assert [e[2].replace(WORD_JOINER, "") for e in elements(rendered) if e[0] == "span"] == words
    assert not any(GFM_AUTOLINK.search(e[2]) for e in elements(rendered))
