"""No HTML is built from data outside core/safe_text.py: a read of the source (AST), so a new export, page or
chart that pastes text into HTML fails here before it ships.

An f-string holding an HTML tag may interpolate only a core.safe_text escaper's result, a module constant (UPPER
case: fixed text), a number with a numeric format (`{x:.2f}`, `{i:d}`), or a choice between those; vl-convert's
`vegalite_to_html` (which pastes the spec into a script unescaped) and `html.escape` outside the helper are not
used; raw HTML reaches Streamlit only from a constant or from core.charts.explain.coloured_text (checked here too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "core" / "safe_text.py"
ESCAPERS = {"script_json", "html_text", "html_markdown_text", "inline_script"}
HTML_TAG = re.compile(r"<[A-Za-z!/]")
NUMERIC_FORMAT = re.compile(r"^[^a-zA-Z]*[dfFeEgG%n]$")
RAW_HTML_BUILDERS = {"coloured_text"}  # core.charts.explain: every word through html_text (checked below)


def sources() -> list[Path]:
    files = [REPO / "app.py", *sorted((REPO / "core").rglob("*.py")), *sorted((REPO / "app_pages").rglob("*.py")),
             *sorted((REPO / "bench").rglob("*.py"))]
    return [f for f in files if f.exists() and f != HELPER]


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _safe(expr: ast.expr, format_spec: ast.expr | None = None) -> bool:
    if isinstance(expr, ast.Call) and _name(expr.func) in ESCAPERS:
        return True
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name) and expr.id.isupper():
        return True
    if isinstance(expr, ast.IfExp):
        return _safe(expr.body) and _safe(expr.orelse)
    if format_spec is not None and isinstance(format_spec, ast.JoinedStr):
        spec = "".join(v.value for v in format_spec.values if isinstance(v, ast.Constant))
        return bool(NUMERIC_FORMAT.match(spec))
    return False


def html_fstring_holes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of each interpolation into an f-string that holds an HTML tag and is not one of the safe kinds."""
    holes = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if not HTML_TAG.search(literal):
            continue
        for value in node.values:
            if isinstance(value, ast.FormattedValue) and not _safe(value.value, value.format_spec):
                holes.append((value.lineno, ast.unparse(value.value)))
    return holes


def raw_html_to_streamlit(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that hand raw HTML to the browser (unsafe_allow_html=True, st.html, components.html, st.iframe) whose
    content is neither a constant nor a builder listed in RAW_HTML_BUILDERS."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        raw = any(k.arg == "unsafe_allow_html" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                  for k in node.keywords)
        if not raw and _name(node.func) not in ("html", "iframe"):
            continue
        content = node.args[0]
        fixed = isinstance(content, ast.Constant) or (isinstance(content, ast.Name) and content.id.isupper())
        built = isinstance(content, ast.Call) and _name(content.func) in RAW_HTML_BUILDERS
        if not (fixed or built):
            found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_html_is_built_only_through_the_escaping_helper(path):
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    where = path.relative_to(REPO)
    assert not re.search(r"vegalite_to_html\s*\(", text), f"{where}: vl-convert's HTML pastes the spec into a script unescaped; use core.charts.chart_html"
    assert not re.search(r"\bhtml\.escape\(|^import html$|^from html import", text, re.M), \
        f"{where}: escape through core.safe_text (html_text), the one helper"
    assert html_fstring_holes(tree) == [], f"{where}: text pasted into HTML without core.safe_text"
    assert raw_html_to_streamlit(tree) == [], f"{where}: raw HTML from data shown in Streamlit"


def test_the_checker_catches_what_it_looks_for():
    """The rules above flag the defects they exist for (vl-convert's pasted spec was caught by the first)."""
    bad = ast.parse('x = f"<p>{title}</p>"\ny = f"<div id=\'{i}\'>"\nst.markdown(f"<b>{name}</b>", unsafe_allow_html=True)\n'
                    'st.html(page)\ncomponents.html(text)\n')
    assert [line for line, _ in html_fstring_holes(bad)] == [1, 2, 3]
    assert [line for line, _ in raw_html_to_streamlit(bad)] == [3, 4, 5]
    good = ast.parse('x = f"<p>{html_text(title)}</p><i>{n:d}</i><b>{v:+.3f}</b>{STYLE}{A if c else \'\'}"\n'
                     'label = f"{name} is {n}"\nst.markdown(STYLE, unsafe_allow_html=True)\n'
                     'st.markdown(charts.coloured_text(result), unsafe_allow_html=True)\n')
    assert html_fstring_holes(good) == [] and raw_html_to_streamlit(good) == []
