"""The adapter is the one way into a model's activations (issue 45 item 5): outside core/model/ nothing asks
transformers for `output_attentions` or `output_hidden_states`; attention maps and layer inputs are read through
core.model.adapter's points ("pattern", "resid_pre", ...) or core.model.encoding. Read with `ast`: a keyword
argument of that name, or the name as a string (a **{...} feed, a getattr)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLAGS = frozenset({"output_attentions", "output_hidden_states"})
ALLOWED = ROOT / "core" / "model"


def asks_transformers(source: str) -> list[int]:
    """Lines where the source passes one of FLAGS as a keyword argument or names one in a string."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg in FLAGS:
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Constant) and node.value in FLAGS:
            lines.append(node.lineno)
    return sorted(lines)


def test_no_output_attentions_or_hidden_states_outside_core_model():
    found = [f"{path.relative_to(ROOT)}:{line}"
             for folder in ("core", "app_pages") for path in sorted((ROOT / folder).rglob("*.py"))
             if ALLOWED not in path.parents
             for line in asks_transformers(path.read_text(encoding="utf-8"))]
    assert not found, ("read attention maps and hidden states through core.model.adapter (points 'pattern', "
                       f"'resid_pre', 'resid_post') or core.model.encoding, not transformers' flags: {found}")


def test_the_check_sees_a_keyword_and_a_string_but_not_a_comment():
    source = ("def f(model, feed):\n"
              "    # output_attentions is not asked for here\n"
              "    a = model(**feed, output_attentions=True)\n"
              "    b = model(**{**feed, 'output_hidden_states': True})\n"
              "    return a.attentions, b\n")
    assert asks_transformers(source) == [3, 4]
