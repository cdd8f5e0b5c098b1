"""`python -m core SUBCOMMAND ...`: the command-line twin of each page.

Each module in core/commands/ defines `register(subparsers)`, adding its subcommand(s) with a `func`
default that takes the parsed arguments and returns an exit code. Modules are found automatically; an analysis
declared with its inputs (core.contract) and no module of its own gets its subcommand from the declaration
(core/commands/declared.py), registered last. Every subcommand speaks one dialect (--model, repeated for
several; --limit / --train-limit / --eval-limit; --json printing one object, --quiet), through the helpers of
core/commands/__init__.py.
"""

from __future__ import annotations

# core.training (torch) imported in functions: only when a command runs, never for --help or a usage error.

import argparse
import importlib
import os
import pkgutil
import sys

import core.commands
from core.commands import declared
from core import validation
from core.files import disk_full
from core.model import distributed
from core.model.loading import ModelUnavailable
from core.progress import Cancelled


class OneLineParser(argparse.ArgumentParser):
    """argparse with its error on one line (no usage block), so a script or a test reads exactly what was wrong."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="BERT Lens from the command line.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(core.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"core.commands.{info.name}")
        if hasattr(module, "register"):
            module.register(subparsers)
    # Last: an analysis declared with its inputs and no module of its own gets its subcommand from the declaration.
    declared.register_declared(subparsers)
    for sub in subparsers.choices.values():
        options = sub._option_string_actions
        if "--json" in options and "--out" not in options:
            sub.add_argument("--out", metavar="FILE", type=validation.output_file, default=None,
                             help=f"write the JSON to FILE (temporary name, then renamed) instead of printing it; "
                             f"needed above {validation.MAX_JSON_BYTES >> 20} MB")
    return parser


def one_line(err: BaseException, command: str) -> str:
    """An error's first line; a longer message (a corpus error lists the whole spec grammar) points to --help."""
    lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    return lines[0] + (f" (more: python -m core {command} --help)" if len(lines) > 1 else "")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if distributed.launched_world_size() > 1:
        ctx = distributed.init(getattr(args, "device", None))
        if not ctx.is_main:
            # Every rank computes the same reduced result; it is printed (or written to --out) once, by the main process.
            sys.stdout = open(os.devnull, "w")
            if hasattr(args, "json"):
                args.out = None  # the JSON file too: one writer
    else:
        from core.training.runs import clean_leftovers  # core.training imports torch: only when a command runs

        clean_leftovers()  # what killed writers left; under a launcher, the process that started the ranks did it
    finished = False
    try:
        code = int(args.func(args) or 0)
        finished = True
        return code
    except (ModelUnavailable, ValueError, OSError) as err:  # OSError: a path that is a folder, unreadable, ...
        print(f"error: {one_line(disk_full(err, None) or err, args.command)}", file=sys.stderr)
        return 2
    except Cancelled as err:
        print(f"cancelled: {err}", file=sys.stderr)
        return 130
    except RuntimeError as err:  # a background job that failed: its error, not a traceback
        full = disk_full(err, None)  # torch's C++ writer reports a full disk as a RuntimeError
        print(f"error: {full or err}", file=sys.stderr)
        return 2 if full else 1
    finally:
        if distributed.launched_world_size() > 1:
            distributed.shutdown(finished)


if __name__ == "__main__":
    exit_code = main()
    if distributed.launched_world_size() > 1:
        distributed.exit_now(exit_code)  # after shutdown(): no interpreter teardown for a launched rank
    sys.exit(exit_code)
