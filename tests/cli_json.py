"""Reading back what `python -m core ... --json` prints, for the tests that compare a notebook twin with its CLI
twin (the analyses declared once, core.contract)."""

import io
import json

from core import validation


def cli_json(capsys, *argv: str) -> dict:
    """`python -m core ARGV --json --quiet` run in this process: exit status 0 (else its stderr is the failure),
    and the one JSON object it printed. What earlier calls printed is read away first."""
    from core.__main__ import main

    capsys.readouterr()
    status = main([*argv, "--json", "--quiet"])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    return json.loads(printed.out)


def as_printed(payload) -> object:
    """A payload as --json writes it (core.validation.dump_json: tuples as lists, NaN as null)."""
    stream = io.StringIO()
    validation.dump_json(payload, stream=stream)
    return json.loads(stream.getvalue())
