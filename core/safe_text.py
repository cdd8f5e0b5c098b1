"""The one place user text is made safe for HTML, JavaScript and Markdown.

Sentences, lesson titles and notes, URL parameters, uploaded files' cells and column names, model and run names all
come from someone else: a shared link, an imported lesson, a CSV from anywhere. Every HTML document the project
writes or displays (chart export, lesson deck, notebook iframe) embeds them through `script_json` / `html_text`,
and every Streamlit element that renders Markdown shows them through `markdown_text` / `markdown_code`, so that
text is always shown as text: it never runs as script and never makes the browser fetch an image from a third
party (tests/unit/test_safe_text.py, tests/browser/test_injection.py; a grep test keeps HTML built elsewhere out).
"""

from __future__ import annotations

import html
import json
import math
import re
import unicodedata

# Inside <script>, "</script" ends the element and "<!--" switches the HTML parser into an escaped state whatever
# the JavaScript says; U+2028/2029 end a line in JavaScript before ES2019. Escaped as \uXXXX they can only appear
# inside JSON strings, so the JSON means exactly the same.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")

# CommonMark lets a backslash escape any ASCII punctuation, and an escaped character is always literal text: with
# all of it escaped no image, link, HTML, emphasis, heading, list, table, math ($) or Streamlit directive
# (:red[…], :material/…:) can start.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_LINE_BREAKS = re.compile(r"[\r\n]+")
# Streamlit's Markdown (remark-gfm) turns "http://…", "www.…" and "name@host.org" into links after escapes are
# decoded, so no escape can stop it; an invisible WORD JOINER (U+2060) before the ":", "." or "@" that completes the
# pattern does, and the text reads the same.
_AUTOLINK_STARTS = re.compile(r"(?i)(?:(?<=https)|(?<=http))(?=:)|(?<=www)(?=\.)|(?<=[-.\w+])(?=@)")
WORD_JOINER = "\u2060"


def _no_autolink(text: str) -> str:
    return _AUTOLINK_STARTS.sub(WORD_JOINER, text)


def _finite(value):
    """NaN and ±inf as null (what altair makes of them in a data frame): JSON has no token for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def script_json(value) -> str:
    """`value` as JSON that can sit inside any <script> element (executable or a type="application/json" data
    island) and still parses, with JSON.parse or as a JavaScript expression, to exactly `value`."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), allow_nan=False)
    return _SCRIPT_UNSAFE.sub(lambda m: _SCRIPT_ESCAPES[m.group()], text)


def inline_script(code: str) -> str:
    """Trusted JavaScript (a bundled library) made safe to inline in <script>: "</script" cannot end the element
    early. "<\\/" means "</" wherever it can occur in JavaScript (a string, template, regular expression, comment)."""
    return re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE).replace("<!--", "<\\!--")


def html_text(text) -> str:
    """`text` as HTML text or a quoted attribute value: &, <, >, " and ' escaped."""
    return html.escape(str(text), quote=True)


def html_markdown_text(text) -> str:
    """`text` as HTML text that a Markdown renderer also leaves alone: st.markdown(..., unsafe_allow_html=True) parses
    the text between tags as Markdown, so html_text alone lets `![x](//host/x.png)` or `:red-background[x]` in a
    word draw an image or a badge. Every ASCII punctuation character becomes a numeric character reference, which
    both HTML and CommonMark decode to the literal character and neither reads as markup."""
    return _MARKDOWN_PUNCTUATION.sub(lambda m: f"&#{ord(m.group())};", _no_autolink(_LINE_BREAKS.sub(" ", str(text))))


def markdown_text(text, *, keep_lines: bool = False) -> str:
    """`text` shown literally by a Markdown renderer (st.markdown, st.caption, st.error…, widget labels): every
    ASCII punctuation character backslash-escaped. Line breaks become spaces (one element's text stays one line),
    or with keep_lines=True hard line breaks (speaker notes keep their lines; no line can start a block, since its
    punctuation is escaped too)."""
    if keep_lines:
        return "  \n".join(_MARKDOWN_PUNCTUATION.sub(r"\\\1", _no_autolink(line)) for line in str(text).splitlines())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", _no_autolink(_LINE_BREAKS.sub(" ", str(text))))


def markdown_code(text) -> str:
    """`text` as a Markdown inline code span: nothing inside is interpreted. The fence is one backtick longer than
    the longest run of backticks in the text, and line breaks become spaces (a blank line would end the span)."""
    text = _LINE_BREAKS.sub(" ", str(text))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    # A space on each side keeps a backtick at the text's edge from joining the fence; CommonMark strips one space
    # from each end when both are there, so text that has its own there gets one more.
    padded = not text.strip(" ") or text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ")
    return f"{fence} {text} {fence}" if padded else f"{fence}{text}{fence}"


_VEGA_PATH_SYNTAX = re.compile(r"""([\\.\[\]"'])""")


def vega_field(name) -> str:
    """A column name as a Vega-Lite `field`: Vega reads ".", "[", "]" and quotes as a path into nested data, so a
    CSV column called "a.b" or "x[0]" would draw nothing; each is backslash-escaped. Pass it as `field=` (with
    `type=`), never in altair's "name:N" shorthand, which also splits at ":"."""
    return _VEGA_PATH_SYNTAX.sub(r"\\\1", str(name))


# A spreadsheet reads a CSV cell that starts with one of these as a formula (CSV injection: "=HYPERLINK(...)").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


# Format characters kept by strip_invisible: zero-width non-joiner and joiner, which Persian and Indic spellings and
# emoji sequences (a family, a flag) need.
_KEPT_FORMAT = frozenset("\u200c\u200d")


def _invisible(ch: str) -> bool:
    """Control (Cc: NUL, ESC, ...), lone surrogate (Cs) or format character (Cf: bidi overrides and isolates such as
    U+202E, the BOM U+FEFF, zero-width space, soft hyphen) other than _KEPT_FORMAT."""
    category = unicodedata.category(ch)
    return category in ("Cc", "Cs") or (category == "Cf" and ch not in _KEPT_FORMAT)


def strip_invisible(text) -> str:
    """Text without the characters a reader cannot see but a program acts on: controls (an ESC sequence recolours a
    terminal), bidi overrides (U+202E shows "txt.exe" as "exe.txt"), BOMs and zero-width characters (which hide a
    "=" from a formula check). Tab, newline and the other whitespace controls become spaces."""
    return "".join(" " if ch.isspace() else ch for ch in str(text) if ch.isspace() or not _invisible(ch))


def spreadsheet_cell(text) -> str:
    """Text for a CSV cell that a spreadsheet shows as text: a cell whose first visible character is a formula
    character (also after spaces or invisible characters: "\ufeff=cmd", " =1+1") gets a "'" before it."""
    text = "" if text is None else str(text)
    formula = text.startswith(_FORMULA_STARTS) or strip_invisible(text).lstrip().startswith(_FORMULA_STARTS)
    return "'" + text if formula else text
