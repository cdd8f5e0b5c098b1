"""One validation layer for what people type: command-line arguments, page input, recipe and lesson files.

The argparse types (`count`, `positive`, `positive_number`, `name_type`, `output_file`, `layer_list`) raise
argparse.ArgumentTypeError, so a bad value stops the command before any model loads, with exit status 2 and one
line naming the option. The same functions
check values outside argparse (`check_count`, `check_fields`) and raise ValueError, whose message names the field
and what it needs. Names are matched whole (`re.fullmatch`): a pattern ending in `$` also accepts a trailing
newline, which made `--run-name $'x\\n'` a folder no name could load.

Long input is cut to the model's length *with* a notice: `truncation(encodings)` is the JSON every result that
encodes user text carries (`{"tokens_dropped": N}`), and `dump_json` refuses to print more than MAX_JSON_BYTES
to a terminal (write it with --out instead).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import numbers
import os
import re
import sys
import types
import typing
from pathlib import Path

import numpy as np
import yaml

# A count above this is a typo or an attack, never a corpus size or a batch (and it keeps numpy/torch from
# being asked for an absurd allocation before anything is read).
MAX_COUNT = 10**9
MAX_NUMBER = 1e6  # the largest learning rate, temperature ... a command takes
# JSON larger than this is not printed to a terminal (`attention-norms --json` on 5,000 words printed 427 MB).
MAX_JSON_BYTES = 50 * 2**20


def check_count(value, what: str, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """`value` as an int in [minimum, maximum], else ValueError naming `what`; bools and floats are refused, numpy
    integers and text of digits are taken."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{what} must be at most {maximum:,}, got {value:,}")
    return value


def check_number(value, what: str, *, minimum: float = 0.0, strict: bool = False, maximum: float = MAX_NUMBER) -> float:
    """`value` as a finite float in [minimum, maximum] (> minimum when `strict`), else ValueError naming `what`."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    if number < minimum or (strict and number == minimum):
        raise ValueError(f"{what} must be {'greater than' if strict else 'at least'} {minimum:g}, got {value}")
    if number > maximum:
        raise ValueError(f"{what} must be at most {maximum:g}, got {value}")
    return number


def _argparse_type(check, name: str):
    def parse(text: str):
        try:
            return check(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).replace("value ", "", 1)) from None

    parse.__name__ = name  # argparse names the type in "invalid <name> value" messages
    return parse


count = _argparse_type(lambda text: check_count(text, "value"), "count")
positive = _argparse_type(lambda text: check_count(text, "value", minimum=1), "positive count")
positive_number = _argparse_type(lambda text: check_number(text, "value", strict=True), "positive number")
unit_fraction = _argparse_type(lambda text: check_number(text, "value", strict=True, maximum=1.0),
                               "number in (0, 1]")


def output_file(text: str) -> str:
    """An argparse type for a file to write: not empty, not a folder, in a folder that exists (`--out /` wrote
    `/.npz`)."""
    path = Path(text)
    if not text.strip() or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder or empty; give a file name")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(path.parent)!r} of {text!r} does not exist")
    return text


def layer_list(text: str) -> str:
    """An argparse type for a layer choice: "all", "last" or comma-separated whole numbers (checked against the
    model's depth once it is loaded)."""
    if text.strip().lower() in ("all", "last"):
        return text.strip().lower()
    parts = [part.strip() for part in text.split(",")]
    if not all(re.fullmatch(r"\d{1,4}", part) for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give 'all', 'last' or comma-separated layer numbers such as 0,6,12")
    return text


def whole_match(pattern: re.Pattern, value) -> bool:
    """True when `value` is text that `pattern` matches from its first to its last character (no trailing newline)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def name_type(pattern: re.Pattern, rule: str):
    """An argparse type for a name matched whole by `pattern`; `rule` says what a name may be."""

    def parse(text: str) -> str:
        if not whole_match(pattern, text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid name: {rule}")
        return text

    parse.__name__ = "name"
    return parse


def _type_name(expected) -> str:
    if expected is type(None):
        return "null"
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(expected))
    if origin in (tuple, list):
        item = typing.get_args(expected)[0]
        return "a list of " + {int: "whole numbers", float: "numbers", str: "texts"}.get(item, _type_name(item))
    return {int: "a whole number", float: "a number", str: "text", bool: "true or false", dict: "an object"}.get(
        expected, getattr(expected, "__name__", str(expected)))


def _fits(value, expected) -> bool:
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in typing.get_args(expected))
    if origin in (tuple, list):
        item = typing.get_args(expected)[0]
        return isinstance(value, (list, tuple)) and all(_fits(v, item) for v in value)
    if expected is type(None):
        return value is None
    # numbers.*: numpy's scalars count too (a page may pass np.int64; np.bool_ is neither); JSON writes 2.0 as 2.
    if expected is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if expected is typing.Any:
        return True
    return isinstance(value, expected)


def type_problem(value, expected) -> str | None:
    """None when `value` (parsed JSON/YAML) fits the type hint `expected`, else what is wrong, e.g.
    `must be a whole number, got "two" (str)`; bools are not numbers, ints are floats."""
    if _fits(value, expected):
        return None
    return f"must be {_type_name(expected)}, got {json.dumps(value, default=repr)[:60]} ({type(value).__name__})"


def check_fields(cls, values, where: str) -> None:
    """ValueError naming the first field of dataclass `cls` whose value in mapping `values` has the wrong type,
    e.g. `recipe.json: field "epochs" must be a whole number, got "two" (str)`. Unknown keys are left alone."""
    if not isinstance(values, dict):
        raise ValueError(f"{where}: must be an object of fields, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        problem = type_problem(values[f.name], hints[f.name]) if f.name in values else None
        if problem:
            raise ValueError(f'{where}: field "{f.name}" {problem}')


def tokens_dropped(encodings) -> int:
    """Word pieces cut off to fit the model's length, summed over `encodings` (Encoding or Tokenized, one or many)."""
    if not isinstance(encodings, (list, tuple)):
        encodings = [encodings]
    return sum(max(0, e.n_tokens_full - e.n_tokens) for e in encodings)


def truncation(encodings) -> dict:
    """What every JSON result that encodes user text carries: {"tokens_dropped": N} (0 when nothing was cut)."""
    return {"tokens_dropped": tokens_dropped(encodings)}


def truncation_notice(encodings) -> str | None:
    """The UI's line for an input cut to the model's length, or None when nothing was cut. Only numbers go in
    (no user text, no model name), so the line is safe to show as Markdown."""
    if not isinstance(encodings, (list, tuple)):
        encodings = [encodings]
    dropped = tokens_dropped(encodings)
    if dropped <= 0:
        return None
    longest = max(e.max_length for e in encodings)
    return (f"The input is longer than the model reads ({longest} tokens): {dropped} word pieces at its end were "
            "cut off and are not part of this view.")


def corpus_truncation_notice(dropped, max_length: int) -> str | None:
    """truncation_notice for a corpus pass: `dropped` [N] word pieces cut off each input (0 when it fit)."""
    dropped = [int(d) for d in dropped]
    cut = sum(d > 0 for d in dropped)
    if not cut:
        return None
    return (f"{cut} of {len(dropped)} examples are longer than the model reads ({max_length} tokens): "
            f"{sum(dropped)} word pieces at their ends were cut off and are not part of this view.")


class CorpusCuts:
    """What a corpus pass's result says about inputs cut to the model's length, from its fields `dropped` ([N] word
    pieces cut off each input, or None for a result saved before they were counted) and `max_length`."""

    def truncation_notice(self) -> str | None:
        return None if self.dropped is None else corpus_truncation_notice(self.dropped, self.max_length)

    def truncation(self) -> dict:
        """The JSON's "truncated" field, as for one input: {"tokens_dropped": N}, summed over the corpus."""
        return {"tokens_dropped": 0 if self.dropped is None else int(sum(self.dropped))}


def dump_json(payload, out: str | None = None, *, indent: int | None = None, limit: int | None = None,
              stream=None) -> None:
    """Print `payload` as JSON, or stream it into `out` (a temporary name, then renamed). Refuses with ValueError
    to print more than `limit` bytes (MAX_JSON_BYTES) to a terminal, naming --out, as soon as the encoded text
    passes it: a 400 MB result is neither printed nor built whole first.

    Not core.files.write_json_atomic: that one pretty-prints small status files (indent=2, the pure-Python
    encoder), minutes and twice the bytes for an attention tensor."""
    not_finite = [0]
    chunks = _finite_json_chunks(payload, indent, not_finite)
    if out:
        path = Path(out)  # checked by the output_file type of --out
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        size = 0
        try:
            with tmp.open("w", encoding="utf-8") as handle:
                for chunk in chunks:
                    size += handle.write(chunk)
                handle.write("\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        print(f"{path}: {size:,} characters of JSON", file=sys.stderr)
        _warn_not_finite(not_finite[0])
        return
    limit = MAX_JSON_BYTES if limit is None else limit
    kept, size = [], 0
    for chunk in chunks:
        size += len(chunk.encode())
        if size > limit:
            raise ValueError(f"the JSON result is larger than the {_size(limit)} printed to a terminal; write it to "
                             "a file with --out FILE.json (or shorten the input)")
        kept.append(chunk)
    print("".join(kept), file=stream or sys.stdout)
    _warn_not_finite(not_finite[0])


def _finite_json_chunks(payload, indent: int | None, not_finite: list):
    """JSONEncoder(indent=indent).iterencode(payload), but NaN and ±infinity written as null (counted in
    not_finite[0]): Python's bare `NaN` / `Infinity` is not JSON, and jq, JavaScript and most parsers reject the
    whole output. The encoder's own generator, given a float formatter; iterencode uses it for every payload."""

    def floatstr(value: float) -> str:
        if math.isfinite(value):
            return float.__repr__(value)
        not_finite[0] += 1
        return "null"

    encoder = json.JSONEncoder(indent=indent)
    return json.encoder._make_iterencode(
        {}, encoder.default, json.encoder.encode_basestring_ascii, indent if indent is None or isinstance(indent, str)
        else " " * indent, floatstr, encoder.key_separator, encoder.item_separator, False, False, False)(payload, 0)


def _warn_not_finite(count: int) -> None:
    if count:
        print(f"warning: {count:,} number(s) of the result are NaN or infinite (a model or input gave no finite "
              "value); written as null in the JSON", file=sys.stderr)


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:,.0f} KB"


# ---- JSON and YAML from a file: depth and number size checked before parsing ---------------------------------
# json and PyYAML parse nested brackets by recursion (a 200,000-deep `[[[…` is a RecursionError, a traceback) and
# turn a digit run into an int (5,000 digits pass Python's 4,300-digit limit: a ValueError from deep inside).
# A lesson is 4 levels deep and a JSONL row 1 or 2, so these limits refuse only what no real file holds.
MAX_NESTING = 64
MAX_DIGITS = 400
# A double-quoted string (JSON, YAML) is text: its brackets and digits do not count. (The loop unrolled, so the
# regex engine runs through a string's characters without trying an alternative at each.)
_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
# A digit run is tried from its first digit only (the lookbehind), so the search stays linear in the text.
_LONG_NUMBER = re.compile(r"(?<!\d)\d{%d,}" % (MAX_DIGITS + 1))
_OPENERS, _CLOSERS = b"[{", b"]}"
_CHUNK = 1 << 20


def nesting_problem(text: str, *, max_depth: int = MAX_NESTING) -> str | None:
    """Why `text` (JSON, JSON Lines, or YAML's flow brackets) is too deep or holds too long a number to parse
    safely, naming the line; None when it is fine. Regular expressions and numpy, never a Python step per
    character: a 25 MB file takes well under a second. Depth is the running count of openers less closers
    outside strings (a stray closer ends any parse before the openers after it are reached)."""
    bare = _STRING.sub("", text)  # strings hold no newline, so line numbers are unchanged
    long_number = _LONG_NUMBER.search(bare)
    if long_number:
        return f"has a number of more than {MAX_DIGITS} digits (line {bare.count(chr(10), 0, long_number.start()) + 1})"
    if bare.count("[") + bare.count("{") <= max_depth:
        return None  # too few openers to be too deep: most files, and every line of a JSON Lines file
    data = np.frombuffer(bare.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    depth = 0
    for start in range(0, len(data), _CHUNK):  # chunked: a running count over 25 MB at once would take 100 MB
        chunk = data[start:start + _CHUNK]
        steps = np.isin(chunk, np.frombuffer(_OPENERS, np.uint8)).astype(np.int32)
        steps -= np.isin(chunk, np.frombuffer(_CLOSERS, np.uint8))
        running = depth + np.cumsum(steps, dtype=np.int64)
        deep = np.flatnonzero(running > max_depth)
        if len(deep):
            line = data[:start + int(deep[0])].tobytes().count(b"\n") + 1
            return f"nested more than {max_depth} levels deep (line {line})"
        depth = int(running[-1]) if len(running) else depth
    return None


class TextFileError(ValueError):
    """A JSON or YAML text that cannot be read: `where` (the file) and `reason` (what is wrong), "WHERE: REASON"."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


def load_yaml_text(text: str, where: str):
    """yaml.safe_load after nesting_problem's check, with the composer's own depth bounded too (YAML nests by
    indentation and `- - -` as well as by brackets); TextFileError naming `where` and what is wrong."""
    problem = nesting_problem(text)
    if problem:
        raise TextFileError(where, problem)

    class DepthLimitedLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            if self.depth > MAX_NESTING:
                mark = self.peek_event().start_mark
                raise TextFileError(where, f"nested more than {MAX_NESTING} levels deep (line {mark.line + 1})")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = DepthLimitedLoader(text)
    try:
        return loader.get_single_data()
    except TextFileError:
        raise
    except (yaml.YAMLError, ValueError, RecursionError) as err:
        raise TextFileError(where, f"not YAML ({' '.join(str(err).split()) or type(err).__name__})") from None
    finally:
        loader.dispose()
