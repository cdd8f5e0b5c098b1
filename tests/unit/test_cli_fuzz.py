"""CLI fuzz (issue 32): every subcommand, found from the parser itself, given empty, negative, huge, wrongly typed
and path-like values and broken files. Each must exit 2 with one line on stderr, never a traceback, before any
model loads, and leave no file behind (the test runs in an empty working folder with its own models_cache)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core import validation
from core.__main__ import build_parser, main
from core.settings import REPO_ROOT

BAD_NUMBERS = ("", "-5", "-1", "99999999999999999999999", "1e999", "nan", "two", "../../etc/passwd", "3.5")
BAD_CHOICES = ("", "../../etc/passwd", "NOPE")
BAD_NAMES = ("", "x\n", "../../etc", "a/b", ".hidden", "x" * 200, "name with spaces")
BAD_LAYERS = ("", "-1", "x,-1", "1e3", "../../etc/passwd", "0;6", "99999")
BAD_OUTPUTS = ("", "/", ".", "no/such/folder/x.json")
BAD_VALUES = {"name": BAD_NAMES, "layer_list": BAD_LAYERS, "output_file": BAD_OUTPUTS}
NUMBER_TYPES = (validation.count, validation.positive, validation.positive_number, validation.unit_fraction)


def _declared_bad_values(f) -> list[str]:
    """Bad values of a declared setting's option (core.contract), from its declaration: wrong types, and one step
    past each bound (as the user counts: a layer 1..L adds `shown`)."""
    if f.meta.choices is not None:
        return list(BAD_CHOICES)
    if f.type not in ("int", "float", "ints"):
        return []  # free text: any value is a value
    shown = f.meta.shown
    past = ([f.meta.low - 1 + shown] if f.meta.low is not None else []) + \
           ([f.meta.high + 1 + shown] if f.meta.high is not None else [])
    past = [str(int(v)) if float(v).is_integer() else str(v) for v in past]
    if f.type == "ints":
        return ["two", "1,x", *(f"{shown},{v}" for v in past)]
    return ["", "two", "nan", "1e999", *(["3.5"] if f.type == "int" else []), *past]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SUBCOMMANDS = _subparsers()


def _typed_options():
    """(subcommand, option string, bad value) for every option whose value argparse checks: a type or choices."""
    for name, sub in SUBCOMMANDS.items():
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            option = action.option_strings[-1]
            if getattr(action.type, "__name__", "") in BAD_VALUES:
                for value in BAD_VALUES[action.type.__name__]:
                    yield name, option, value
            elif getattr(action.type, "setting", None) is not None:
                for value in _declared_bad_values(action.type.setting):
                    yield name, option, value
            elif action.type in NUMBER_TYPES:
                takes_fractions = action.type is validation.positive_number
                for value in BAD_NUMBERS:
                    if not (takes_fractions and value == "3.5"):
                        yield name, option, value
            elif action.choices is not None:
                for value in BAD_CHOICES:
                    yield name, option, value


TYPED = list(_typed_options())


@pytest.fixture
def empty_cwd(tmp_path, monkeypatch, isolated_cache):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _files(*folders: Path) -> set[Path]:
    return {p for folder in folders for p in folder.rglob("*")}


def _refused(argv: list[str], capsys) -> str:
    """Run `python -m core ARGV` in-process; assert exit status 2 and one line on stderr; return that line."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    assert code == 2, f"{argv}: exit {code}, stderr {captured.err!r}"
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "error" in lines[0], f"{argv}: stderr {captured.err!r}"
    assert "Traceback" not in captured.err
    return lines[0]


def test_every_subcommand_is_enumerated_and_fuzzed():
    """The parser lists every module's subcommands; each with a typed option is fuzzed below, so a new subcommand
    with a number option is covered without editing this test."""
    assert {"anisotropy", "pca", "attention-norms", "explain", "fill-mask", "neuron", "finetune", "heads"} <= set(SUBCOMMANDS)
    fuzzed = {name for name, _, _ in TYPED}
    untyped = set(SUBCOMMANDS) - fuzzed
    # The subcommands with no number or choice option at all (their names and paths are fuzzed further down).
    assert untyped == {"download", "cancel"}, untyped


def test_every_typed_option_goes_through_core_validation():
    """A bare `type=int` took -5 and `type=float` took nan: every option with a type uses one of core.validation's
    or is a declared setting's (core.contract), so the fuzz below knows its bad values."""
    untested = [(name, action.option_strings[-1], action.type) for name, sub in SUBCOMMANDS.items()
                for action in sub._actions if action.type is not None and action.type not in NUMBER_TYPES
                and getattr(action.type, "__name__", "") not in BAD_VALUES
                and getattr(action.type, "setting", None) is None]
    assert untested == []


def test_bad_values_of_every_typed_option_exit_2_with_one_line(empty_cwd, isolated_cache, capsys):
    assert len(TYPED) > 300
    before = _files(empty_cwd, isolated_cache)
    for name, option, value in TYPED:
        line = _refused([name, option, value], capsys)
        assert option in line or "argument" in line, (name, option, value, line)
    assert _files(empty_cwd, isolated_cache) == before


def test_negative_limit_is_refused_not_read_from_the_end(empty_cwd, capsys):
    # main took `--limit -5` as "all but the last 5" (434 sentences).
    line = _refused(["anisotropy", "--corpus", "builtin", "--limit", "-5"], capsys)
    assert "--limit" in line and "at least 1" in line


def test_run_name_is_matched_whole(empty_cwd, capsys):
    # The old pattern ended in `$`, which also matches before a trailing newline.
    line = _refused(["finetune", "--model", "m", "--task", "snli", "--run", "x\n"], capsys)
    assert "--run" in line and "not a valid name" in line
    from core.training.recipe import Recipe

    with pytest.raises(ValueError, match="run name"):
        Recipe(model="m", task="snli", run_name="x\n")


def _broken_files(folder: Path) -> dict[str, Path]:
    files = {
        "long-field.csv": "text,label\na,1\nb,2\n\"" + "x" * 200_000 + "\",3\n",
        "not-json.jsonl": '{"text": "a"}\n{oops\n',
        "binary.txt": None,
        "empty.conllu": "",
        "list.json": "[1, 2]",
        "typed.json": json.dumps({"model": "m", "task": "snli", "run_name": "r", "epochs": "two"}),
        "truncated.json": '{"model": "m", "task": ',
    }
    paths = {}
    for name, text in files.items():
        path = folder / name
        if text is None:
            path.write_bytes(b"\xff\xfe\x00\x81 not utf-8 \xc3")
        else:
            path.write_text(text)
        paths[name] = path
    return paths


def _corpus_options():
    """(subcommand, option) for every option that takes a corpus spec, found from the help text."""
    from core.data.corpus import CLI_HELP

    for name, sub in SUBCOMMANDS.items():
        for action in sub._actions:
            if action.option_strings and CLI_HELP in (action.help or ""):
                yield name, action.option_strings[0]


CORPUS_OPTIONS = list(_corpus_options())
# What a subcommand needs besides the corpus to get as far as reading it.
REQUIRED = {"neuron": [], "compare": ["--a", "{model}", "--b", "{model}"], "attention-change": ["--a", "{model}", "--b", "{model}"],
            "neighbours": ["--text", "the cat sat .", "--word", "cat"], "explain-faithfulness": ["--model", "{model}"],
            "pca": ["--text", "the cat sat ."], "bias-heads": ["--model", "{model}"], "fit-tuned-lens": ["--out", "x"],
            "fit-mlm-head": ["--model", "{model}", "--corpus", "builtin", "--out", "x"],
            "sae-train": ["--layer", "1", "--features", "8", "--k", "2", "--out", "fuzz"],
            "probe-labels": ["--eval-corpus", "ud:test:5"]}


def test_corpus_options_refuse_empty_path_like_and_broken_files(empty_cwd, isolated_cache, tiny_bert_dir, monkeypatch, capsys):
    monkeypatch.setenv("BERTLENS_MODEL", str(tiny_bert_dir))
    assert len(CORPUS_OPTIONS) >= 14
    broken = _broken_files(empty_cwd)
    before = _files(empty_cwd, isolated_cache)
    specs = {"": "No corpus", "/": "Unknown corpus", "../../etc/passwd": "../../etc/passwd", "/etc/passwd": "only .txt", "missing.csv": "not found",
             "snli:dev:-5": "at least 1", str(broken["long-field.csv"]): "line 4",
             str(broken["not-json.jsonl"]): "line 2", str(broken["binary.txt"]): "UTF-8",
             str(broken["empty.conllu"]): "empty.conllu"}
    for name, option in CORPUS_OPTIONS:
        extra = [a.replace("{model}", str(tiny_bert_dir)) for a in REQUIRED.get(name, [])]
        for spec, expected in specs.items():
            line = _refused([name, *extra, option, spec], capsys)
            assert expected.lower() in line.lower(), (name, option, spec, line)
    assert _files(empty_cwd, isolated_cache) == before


def test_recipe_files_broken_or_mistyped_name_the_field(empty_cwd, isolated_cache, capsys):
    broken = _broken_files(empty_cwd)
    before = _files(empty_cwd, isolated_cache)
    expected = {"typed.json": 'field "epochs" must be a whole number, got "two"', "list.json": "must be an object",
                "truncated.json": "error", "binary.txt": "error", "missing.json": "No such file"}
    for command in ("finetune", "contrastive"):
        for name, text in expected.items():
            line = _refused([command, "--recipe", str(empty_cwd / name)], capsys)
            assert text in line, line
        assert "Is a directory" in _refused([command, "--recipe", "/"], capsys)
    assert _files(empty_cwd, isolated_cache) == before
    assert not broken["typed.json"].with_suffix(".failed").exists()


def test_task_files_broken_report_the_line(empty_cwd, isolated_cache, capsys):
    """(The `.r.failed` run folder these still leave is issue 32's point 3, the atomic-files part, not checked here.)"""
    broken = _broken_files(empty_cwd)
    # The CSV error named line 3 (DictReader's line before the failing record); the field is on line 4.
    expected = {"long-field.csv": "long-field.csv, line 4", "not-json.jsonl": "not-json.jsonl, line 2",
                "binary.txt": "binary.txt", "empty.conllu": "empty.conllu", "list.json": "list.json"}
    for command in ("finetune", "contrastive"):
        for name, text in expected.items():
            line = _refused([command, "--model", "m", "--task", str(broken[name]), "--run", "r"], capsys)
            assert text in line, line


def test_names_and_paths_of_untyped_commands(empty_cwd, isolated_cache, tiny_bert_dir, capsys):
    before = _files(empty_cwd, isolated_cache)
    for argv in (["bias", "--show", "../../etc"], ["bias", "--attach", ""], ["bias", "--name", "x\n"],
                 ["encode", "--model", "../../etc/passwd", "--text", "a", "--out", "x.npz"],
                 ["attention-norms", "--model", "/", "--text", "a"], ["runs", "--out"], ["models", "--json", "--out"],
                 # `encode --out /` wrote /.npz; a JSON --out into a missing folder named the temporary file
                 ["encode", "--text", "a", "--out", "/"], ["heads", "--json", "--out", "no/such/folder/x.json"]):
        _refused(argv, capsys)
    assert _files(empty_cwd, isolated_cache) == before


def test_a_word_not_in_the_sentence_builds_no_index(empty_cwd, isolated_cache, tiny_bert_dir, capsys):
    """The word needs the tokenizer (the model loads), but the corpus index is not built for nothing."""
    argv = ["neighbours", "--model", str(tiny_bert_dir), "--text", "the cat", "--word", "zebra", "--corpus", "builtin"]
    assert main(argv) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after transformers' own "Loading weights" bar
    assert last == "error: 'zebra' is not a word of the sentence; its words are: the cat"
    assert _files(empty_cwd, isolated_cache) == set()


def test_over_long_json_is_refused_naming_out(capsys, tmp_path):
    big = {"values": [0.123456789] * 1000}
    with pytest.raises(ValueError, match="--out"):
        validation.dump_json(big, limit=1000)
    out = tmp_path / "out" / "big.json"
    out.parent.mkdir()
    validation.dump_json(big, str(out), limit=1000)
    assert json.loads(out.read_text()) == big and [p.name for p in out.parent.iterdir()] == ["big.json"]


@pytest.mark.parametrize("argv, expected", [
    (["anisotropy", "--corpus", "builtin", "--limit", "-5"], "--limit: must be at least 1, got -5"),
    (["finetune", "--run-name", "x\n", "--model", "m", "--task", "snli"], "is not a valid name"),
])
def test_a_real_process_exits_2_with_one_line(argv, expected, empty_cwd):
    """The same through `python -m core` itself (argparse's exit, not only main's return value)."""
    tmp_path = empty_cwd
    result = subprocess.run([sys.executable, "-m", "core", *argv], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(REPO_ROOT), "BERTLENS_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
                            timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
