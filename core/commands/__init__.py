"""Subcommands of `python -m core`, one module each (see core/__main__.py), and what they share: the one
dialect every subcommand speaks (`--model`, repeated for several models; `--limit`, `--train-limit` /
`--eval-limit`; `--json` printing one JSON object and `--quiet`), and the hidden aliases kept for one release."""

from __future__ import annotations

import argparse
import sys

from core import validation
from core.contract import bound_text
from core.model.encoding import counting_cuts

MODEL_HELP = "hub id, local folder or run name (default: BERTLENS_MODEL)"


def add_model_argument(parser) -> None:
    """The `--model` most subcommands take: any model reference, BERTLENS_MODEL when left out."""
    parser.add_argument("--model", default=None, help=MODEL_HELP)


def add_models_argument(parser, help: str = MODEL_HELP + "; repeat for several models") -> None:
    """`--model` given once or more (a list in args.model; None when left out)."""
    parser.add_argument("--model", action="append", default=None, help=help)


def add_two_models_arguments(parser) -> None:
    """`--model A --model B` for a two-model comparison; the old `--a A --b B` still work, hidden (one release)."""
    add_models_argument(parser, "a model (hub id, local folder, run name or data-folder model); give it twice: "
                        "--model A --model B (e.g. the pretrained base, then a fine-tuned run)")
    parser.add_argument("--a", dest="model_a", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--b", dest="model_b", default=None, help=argparse.SUPPRESS)


def two_models(args) -> tuple[str, str]:
    """Model A and model B of add_two_models_arguments: --a first, then the --model values, then --b."""
    refs = ([args.model_a] if args.model_a else []) + list(args.model or []) + ([args.model_b] if args.model_b else [])
    if len(refs) != 2:
        raise ValueError(f"{args.command} compares two models: give --model A --model B (got {len(refs)})")
    return refs[0], refs[1]


def add_settings_arguments(parser, analysis, *, skip: tuple[str, ...] = ()) -> None:
    """The options of an analysis's settings, made from its declaration (core.contract): `--name-with-dashes`
    with the declared default, the help with its bounds, choices and default; a bool is `--name` / `--no-name`.
    Every value goes through the declaration's own check (aliases read, bounds and choices), so a bad value
    stops the command with exit status 2 and one line naming the option. `skip`: settings this command takes
    another way (e.g. from its positional arguments)."""
    for f in analysis.fields:
        if f.option is None or f.name in skip:
            continue
        text = f.meta.help.replace("%", "%%")  # argparse formats help with %: a declared "50%" must not break --help
        if f.meta.choices is not None:
            text += f" (one of {', '.join(map(str, f.meta.choices))})"
        if f.meta.low is not None or f.meta.high is not None:
            shown = f.meta.shown
            low = bound_text(None if f.meta.low is None else f.meta.low + shown)
            high = bound_text(None if f.meta.high is None else f.meta.high + shown)
            text += f" [{low}…{high}]"
        if f.type == "bool":
            said = "" if f.default is None else f" (default {'on' if f.default else 'off'})"  # None: the analysis decides
            parser.add_argument(f.option, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default,
                                help=text + said)
            continue
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        shown_default = default if not f.meta.shown or default is None else default + f.meta.shown
        parser.add_argument(f.option, dest=f.name, type=_setting_type(f), default=f.default,
                            metavar="{" + ",".join(map(str, f.meta.choices)) + "}"
                            if f.meta.choices is not None and f.type in ("str", "int") else f.name.upper(),
                            help=text + ("" if shown_default is None else f" (default {shown_default})"))


def _setting_type(f):
    """The argparse type of a setting: its declaration's check, with an int the user counts from `shown` (a layer
    number 1..L) turned back into the index the analysis holds."""

    def parse(text: str):
        try:
            if f.meta.shown and f.type in ("int", "ints"):
                numbers = [_whole(v, f.name) for v in text.split(",") if v.strip()] if f.type == "ints" \
                    else [_whole(text, f.name)]
                for number in numbers:  # said in the numbers the user typed (a layer 1..L), not array indices
                    low, high = f.meta.low, f.meta.high
                    if low is not None and number < low + f.meta.shown or high is not None and number > high + f.meta.shown:
                        raise ValueError(f"{f.name} must be within {bound_text(None if low is None else low + f.meta.shown)}"
                                         f"…{bound_text(None if high is None else high + f.meta.shown)}, got {number}")
                shifted = [n - f.meta.shown for n in numbers]
                return f.check(shifted if f.type == "ints" else shifted[0])
            return f.check(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = f.type
    parse.setting = f  # what the CLI fuzz (tests/unit/test_cli_fuzz.py) reads to make this option's bad values
    return parse


def _whole(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None


def settings_from_args(analysis, args, **given):
    """The analysis's settings dataclass from parsed arguments (and `given` values the command read otherwise)."""
    values = {f.name: getattr(args, f.name) for f in analysis.fields if f.option is not None and hasattr(args, f.name)}
    return analysis.make({**values, **given})


def add_hidden_alias(parser, old: str, new: str) -> None:
    """`old` as another spelling of the value option `new` (same destination, type and choices) that --help no
    longer shows; kept for one release so scripts keep working."""
    action = next(a for a in parser._actions if new in a.option_strings)
    parser.add_argument(old, dest=action.dest, type=action.type, choices=action.choices, metavar=action.metavar,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_json_arguments(parser, what: str = "one JSON object instead of a table") -> None:
    """`--json` (one JSON object on stdout: the result's to_json(), plus the notes "truncated" / "degenerate" the
    command adds) and `--quiet` (no progress on stderr; warnings stay). core/__main__.py adds `--out`."""
    parser.add_argument("--json", action="store_true", help=f"print {what}")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr (warnings are still printed)")


def stderr_progress(args):
    """A one-line progress report on stderr, redrawn when the percentage changes (stdout stays clean for --json);
    None with --quiet."""
    if getattr(args, "quiet", False):
        return None
    last = [-1]

    def report(done: int, total: int, message: str | None = None) -> None:
        percent = int(100 * done / max(total, 1))
        if percent != last[0]:
            last[0] = percent
            print(f"\r{done}/{total} ({percent}%)", end="\n" if done >= total else "", file=sys.stderr, flush=True)

    return report


def warn_degenerate(degeneracy, run: str | None = None) -> None:
    """The "learned (almost) nothing" warning (core.training.evaluation.Degeneracy) on stderr, so a terminal
    user sees it as a page user does; stdout stays clean for --json, whose output carries "degenerate"."""
    if degeneracy is not None and degeneracy.flagged:
        print(f"warning: {run + ': ' if run else ''}{degeneracy.message}", file=sys.stderr)


def warn_truncated(encodings) -> dict:
    """The pages' notice of an input cut to the model's length (core.validation.truncation_notice), on stderr as
    warn_degenerate's; returns the "truncated" field of the command's JSON ({"tokens_dropped": N})."""
    warn(validation.truncation_notice(encodings))
    return validation.truncation(encodings)


def counted(run):
    """run() inside core.model.encoding.counting_cuts: (its result, its JSON's "truncated" field), with the corpus
    pass's notice of inputs cut to the model's length on stderr (warn_cuts), counted over every rank."""
    with counting_cuts() as cuts:
        result = run()
    return result, warn_cuts(cuts.over_ranks())


def warn_cuts(cuts: validation.CorpusCuts) -> dict:
    """warn_truncated for a corpus pass (cuts: core.model.encoding.counting_cuts's count, or a result's CorpusCuts):
    "K of N examples ... were cut off" on stderr; returns the JSON's "truncated" field, summed over the corpus."""
    warn(cuts.truncation_notice())
    return cuts.truncation()


def warn(notice: str | None) -> None:
    """A notice the page shows as a warning, on stderr (None: nothing to say)."""
    if notice:
        print(f"warning: {notice}", file=sys.stderr)
