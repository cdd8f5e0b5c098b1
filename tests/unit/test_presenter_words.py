"""Issue 48: presenter mode has no sidebar, so no message a page shows may send the user to one. A page names the
place of the model and sentence boxes through common.sidebar_place() ("the sidebar", or on a slide "the settings
under the chart"); the literal word is left only where no slide can show it (listed here, each with why)."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# (file, start of the string): shown only where the sidebar is on screen.
ALLOWED = {
    ("app_pages/lessons.py", '"Add views with the sidebar'),  # the Lessons page, never a step
    ("app_pages/lessons.py", '"No steps yet: open a page'),
    ("app_pages/present.py", '"This lesson has no steps yet'),  # presenter mode without slides keeps the sidebar
    ("app_pages/shell/router.py", '"Back to the default model'),  # inside the sidebar itself
    ("app_pages/widgets/common.py", '"The model in the sidebar'),  # show_model_error, after its presenter branch
    ("app_pages/widgets/common.py", '"the sidebar"'),  # sidebar_place() outside presenter mode
    ("app_pages/reproduce.py", '"Measure the sidebar'),  # its presenter-mode label is "Measure this step's model"
    ("app_pages/reproduce.py", '"use_sidebar"'),  # a widget key
}


def strings_naming_the_sidebar(path: Path):
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))
    for i, token in enumerate(tokens):
        if token.type != tokenize.STRING or "sidebar" not in token.string.lower():
            continue
        before = tokens[i - 1].type if i else tokenize.NEWLINE
        if token.string.startswith(('"""', "'''")) and before in (tokenize.INDENT, tokenize.NEWLINE, tokenize.NL,
                                                                   tokenize.DEDENT):
            continue  # a docstring
        if "stSidebar" in token.string or "st.sidebar" in token.string or "{sidebar_place()}" in token.string:
            continue
        yield token.string


def test_no_page_message_names_the_sidebar_outside_the_allowed_places():
    found = {(str(path.relative_to(REPO)), text) for path in sorted((REPO / "app_pages").rglob("*.py"))
             for text in strings_naming_the_sidebar(path)}
    unexpected = sorted((f, t[:80]) for f, t in found if not any(f == a and t.startswith(s) for a, s in ALLOWED))
    assert not unexpected, f"use common.sidebar_place() (presenter mode has no sidebar): {unexpected}"


def test_the_builtin_lessons_notes_name_no_sidebar():
    from core import lessons

    for name, lesson in lessons.builtin().items():
        for step in lesson.steps:
            assert "sidebar" not in (step.notes + step.title).lower(), (name, step.title)
