"""Issue 48: the pages show an error's message through core.safe_text.markdown_text, which draws a backtick as a
backtick, so a message written with a Markdown code span read "… or `python -m core finetune`" on the page. The
messages core raises are plain text: no backticks (a command reads well without them, on the page and the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def backticked_messages() -> list[str]:
    found = []
    for path in sorted((REPO / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str) and "`" in part.value:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {part.value[:80]}")
    return found


def test_raised_messages_hold_no_markdown_code_spans():
    assert backticked_messages() == []
