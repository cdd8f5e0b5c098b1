"""`views`: the app's views as the registry (core/views/) holds them, each with its URL params and CLI commands."""

from __future__ import annotations

from dataclasses import asdict

from core import validation, views
from core.commands import add_json_arguments


def register(subparsers) -> None:
    p = subparsers.add_parser("views", help="list the app's views: page, URL params and the subcommands of each")
    add_json_arguments(p, '{"views": [{"name", "title", "url_path", "commands", "params"}], "utilities": [...], '
                       '"analyses": [{"name", "view", "command", "lens", "title", "settings": [{"name", "type", '
                       '"default", "low", "high", "choices", "help"}]}]}')
    p.set_defaults(func=run_views)


def listing() -> dict:
    """The registry as JSON: each view's name, title, url_path, commands and params (every Param field), the
    subcommands that belong to no view, and every declared analysis with its settings (core.contract), from which
    another tool can build a form."""
    return {
        "views": [{"name": v.name, "title": v.title, "url_path": v.url_path, "commands": list(views.commands_of(v.name)),
                   "params": [asdict(p) for p in views.params_of(v.name)]} for v in views.all_views()],
        "utilities": list(views.UTILITIES),
        "analyses": [a.describe() for a in views.all_analyses()],
    }


def run_views(args) -> int:
    if args.json:
        validation.dump_json(listing(), args.out)
        return 0
    for view in views.all_views():
        print(f"{view.title}  (/{view.url_path})")
        if views.commands_of(view.name):
            print(f"  commands: {', '.join(views.commands_of(view.name))}")
        if view.params:
            print(f"  URL params: {', '.join(p.name for p in view.params)}")
    print(f"Utilities: {', '.join(views.UTILITIES)}")
    return 0
