"""Every `python -m core X` that a message, a docstring or the docs tell a user to type names a real subcommand
(a warning once said `python -m core train`; the subcommand is `finetune`)."""

from __future__ import annotations

import re
from pathlib import Path

from core.__main__ import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"python -m core ([a-z][a-z0-9_-]*)")


def subcommands() -> set[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return set(action.choices)


def named_commands() -> dict[str, list[str]]:
    files = [*ROOT.glob("core/**/*.py"), *ROOT.glob("app_pages/**/*.py"), *ROOT.glob("core/data/**/*.json"),
             ROOT / "app.py", ROOT / "README.md", ROOT / "ARCHITECTURE.md", *ROOT.glob("docs/**/*.md")]
    found: dict[str, list[str]] = {}
    for path in files:
        for name in COMMAND.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_named_subcommand_exists():
    known, named = subcommands(), named_commands()
    assert {"finetune", "bias", "explain", "reproduce"} <= set(named)  # the scan does read the messages
    unknown = {name: sorted(set(where)) for name, where in named.items() if name not in known}
    assert not unknown, f"messages name subcommands that do not exist: {unknown}"
