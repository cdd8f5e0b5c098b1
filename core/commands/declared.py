"""The subcommands made from a declaration alone (core.contract): an analysis that declares its `inputs` and has
no command module of its own gets `python -m core COMMAND` here, after every command module has registered its
own. Its options: `--model`, its inputs (`--text` / `--text-b`, or `--corpus` and `--limit`), its settings
(add_settings_arguments), `--json` (the result's to_json() and "truncated") and `--quiet`."""

from __future__ import annotations

import math

from core import validation, views
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, counted, settings_from_args,
                           stderr_progress)
from core.contract import Analysis, Sentences
from core.data import corpus as corpora
from core.model.loading import load_model


def register_declared(subparsers) -> None:
    """Add a subcommand for every declared analysis with inputs whose command no module registered."""
    for analysis in views.all_analyses():
        if analysis.inputs and analysis.command not in subparsers.choices:
            _register(subparsers, analysis)


def _register(subparsers, analysis: Analysis) -> None:
    p = subparsers.add_parser(analysis.command, help=analysis.summary or analysis.title,
                              description=f"{analysis.title}: {analysis.summary} (declared in "
                                          f"{analysis.settings.__module__}; the page's \"{analysis.tab}\" tab).")
    add_model_argument(p)
    if analysis.inputs == ("text",):
        p.add_argument("--text", required=True, help="the sentence (the page's sentence A)")
        p.add_argument("--text-b", default=None, help="a second sentence (pair input; the page's sentence B)")
    else:
        p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
        p.add_argument("--limit", type=validation.positive, default=None, help="use only the first N sentences")
    add_settings_arguments(p, analysis)
    add_json_arguments(p)
    p.set_defaults(func=lambda args: run_declared(analysis, args))


def read_inputs(analysis: Analysis, args):
    """The analysis's inputs from the command line: a Sentences or a Corpus."""
    if analysis.inputs == ("text",):
        return Sentences(args.text, args.text_b or None)
    return corpora.resolve(args.corpus, limit=args.limit).head(args.limit)


def run_declared(analysis: Analysis, args) -> int:
    settings = settings_from_args(analysis, args)  # checked before the model loads
    inputs = read_inputs(analysis, args)
    lm = load_model(args.model)
    progress = stderr_progress(args)
    result, truncated = counted(lambda: analysis.run_function()(lm, inputs, settings, progress=progress))
    payload = {**result.to_json(), "truncated": truncated}
    if args.json:
        validation.dump_json(payload, args.out)
        return 0
    print(f"{analysis.title} ({lm.ref})")
    for line in plain_lines(payload):
        print(line)
    return 0


def plain_lines(payload: dict, width: int = 12) -> list[str]:
    """A result's JSON as lines a person reads: `key: value`, a list of numbers rounded (its first `width`
    shown), a list of rows as one line each; nested objects by their keys."""
    lines = []
    for key, value in payload.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key}:")
            lines += [f"  {_short(row, width)}" for row in value[:width]]
            if len(value) > width:
                lines.append(f"  … {len(value) - width} more (--json has them all)")
        else:
            lines.append(f"{key}: {_short(value, width)}")
    return lines


def _short(value, width: int) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v, width)}" for k, v in value.items())
    if isinstance(value, list):
        shown = " ".join(_short(v, width) for v in value[:width])
        return shown + (f" … ({len(value)} in all)" if len(value) > width else "")
    return str(value)


