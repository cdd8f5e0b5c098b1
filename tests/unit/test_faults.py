"""Issue 44, items 5 and 7: every fault a sentence. A lesson or JSONL nested 200,000 deep or holding a 5,000-digit
number, a corrupt safetensors file, NaN weights: each a one-line message naming the file and what is wrong (exit 2
on the command line), never a traceback; `--json` never prints a bare NaN."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from core import lessons, validation
from core.__main__ import main
from core.analyses import explorer
from core.data import corpus as corpora
from core.model.loading import ModelUnavailable, load_model
from core.training import tasks

DEEP_JSON = "[" * 200_000 + "]" * 200_000
LONG_NUMBER = '{"version": ' + "7" * 5_000 + ', "title": "x", "steps": []}'


def _one_line_error(argv: list[str], capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert "Traceback" not in err
    return lines[0]


# ---- lessons ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, problem", [
    (DEEP_JSON, "nested more than 64 levels deep (line 1)"),
    ('{"steps": [' + "{" * 200_000, "nested more than 64 levels deep (line 1)"),
    (LONG_NUMBER, "has a number of more than 400 digits (line 1)"),
    ("title: x\nversion: " + "9" * 5_000 + "\n", "has a number of more than 400 digits (line 2)"),  # YAML
    ("- " * 100_000 + "x\n", "nested more than 64 levels deep"),  # YAML: nested by `- ` alone, no bracket
    ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 300)), "nested more than 64 levels deep"),  # by indent
])
def test_a_lesson_too_deep_or_with_a_huge_number_is_one_line_naming_the_file(text, problem):
    # Before: RecursionError (json, PyYAML) or "Exceeds the limit (4300 digits)" ValueError, a traceback on the page.
    with pytest.raises(lessons.LessonError) as err:
        lessons.loads(text, "evil.json")
    message = str(err.value)
    assert message.startswith("evil.json: ") and problem in message and "\n" not in message


def test_a_lesson_file_read_from_disk_is_named_in_its_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(DEEP_JSON)
    with pytest.raises(lessons.LessonError, match=r"^deep.yaml: nested more than"):
        lessons.load(path)


def test_the_depth_scan_leaves_real_lessons_and_bracketed_text_alone():
    for lesson in lessons.builtin().values():
        assert lessons.loads(lessons.dumps(lesson)) == lesson
        assert lessons.loads(lessons.dumps(lesson, "yaml")) == lesson
    # Brackets and digits inside a string are text, however many.
    title = "[" * 500 + " " + "1" * 1000
    lesson = lessons.Lesson(title)
    assert lessons.loads(lessons.dumps(lesson)).title == title


# ---- JSONL in the explorer, corpora and training files ---------------------------------------------------------
@pytest.mark.parametrize("bad_line, problem", [(DEEP_JSON, "nested more than 64 levels deep (line 3)"),
                                               ('{"text": ' + "5" * 5_000 + "}", "more than 400 digits (line 3)")])
def test_explorer_jsonl_nested_deep_is_one_line_naming_the_file_and_line(bad_line, problem, tmp_path):
    data = '{"text": "a cat"}\n{"text": "a dog"}\n' + bad_line + "\n"
    with pytest.raises(corpora.CorpusError) as err:
        explorer.examples_from_upload("rows.jsonl", data.encode())
    assert str(err.value).startswith("rows.jsonl: ") and problem in str(err.value)
    path = tmp_path / "rows.jsonl"
    path.write_text(data)
    with pytest.raises(corpora.CorpusError, match=r"rows.jsonl: .*\(line 3\)"):
        explorer.load_examples(str(path))
    task_rows = '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n' + bad_line + "\n"
    path.write_text(task_rows)
    with pytest.raises(tasks.TaskError, match=r"rows.jsonl: .*\(line 3\)"):
        tasks.read_user_rows(path)


# ---- --json and non-finite numbers -----------------------------------------------------------------------------
def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"bare {constant} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_output_writes_nan_and_infinity_as_null_with_a_warning(capsys, tmp_path):
    payload = {"fve": float("nan"), "curve": [1.0, float("inf"), -float("inf")], "text": "NaN", "ok": 0.5}
    validation.dump_json(payload)
    captured = capsys.readouterr()
    assert _strict(captured.out) == {"fve": None, "curve": [1.0, None, None], "text": "NaN", "ok": 0.5}
    assert captured.err.startswith("warning: 3 number(s) of the result are NaN or infinite")
    out = tmp_path / "r.json"
    validation.dump_json(payload, str(out), indent=2)
    assert _strict(out.read_text())["curve"] == [1.0, None, None]
    assert "warning: 3" in capsys.readouterr().err
    validation.dump_json({"fine": [0.1, 1e-300, 1e300, 3]})  # finite numbers exactly as json writes them
    captured = capsys.readouterr()
    assert captured.out.strip() == json.dumps({"fine": [0.1, 1e-300, 1e300, 3]}) and captured.err == ""


# ---- model files -----------------------------------------------------------------------------------------------
def _copy_model(source: Path, folder: Path) -> Path:
    folder.mkdir()
    for file in source.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def _rewrite_header(weights: Path, change) -> None:
    data = weights.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    weights.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length:])


def _out_of_range(header: dict) -> None:
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"] = [0, 10**12]


CORRUPTIONS = {
    "header length 2^62": lambda f: f.write_bytes(struct.pack("<Q", 2**62) + f.read_bytes()[8:]),
    "offsets out of range": lambda f: _rewrite_header(f, _out_of_range),
    "truncated": lambda f: f.write_bytes(f.read_bytes()[: f.stat().st_size // 2]),
    "four bytes": lambda f: f.write_bytes(b"\x01\x02\x03\x04"),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_safetensors_file_is_one_line_naming_it(corruption, tiny_bert_dir, tmp_path, capsys):
    # Before: safetensors' SafetensorError ("header too large", "invalid offset") escaped as a traceback.
    folder = _copy_model(tiny_bert_dir, tmp_path / "broken")
    CORRUPTIONS[corruption](folder / "model.safetensors")
    line = _one_line_error(["fill-mask", "--model", str(folder), "--text", "the [MASK] sat ."], capsys)
    assert str(folder / "model.safetensors") in line
    assert any(word in line for word in ("truncated", "corrupt", "too short")), line
    with pytest.raises(ModelUnavailable, match="model.safetensors"):
        load_model(str(folder))


def test_nan_weights_are_refused_at_load_naming_the_tensor(tiny_bert_dir, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = _copy_model(tiny_bert_dir, tmp_path / "nan-model")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["encoder.layer.1.attention.self.query.weight"][3, 5] = float("nan")
    tensors["encoder.layer.1.attention.self.query.weight"][0, 0] = float("inf")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelUnavailable, match=r"NaN or infinity \(2 of 1,024 values of tensor "
                                               r"'encoder.layer.1.attention.self.query.weight'\)"):
        load_model(str(folder))
    line = _one_line_error(["attention-norms", "--model", str(folder), "--text", "the cat sat .", "--json"], capsys)
    assert "NaN or infinity" in line and "query.weight" in line


# ---- replacing a folder: the old one aside until the new one is in ---------------------------------------------
def _folder(path: Path, text: str) -> Path:
    path.mkdir(parents=True)
    (path / "weights").write_text(text)
    return path


def test_a_folder_written_over_another_replaces_it_whole(tmp_path):
    from core import files

    tmp_path = tmp_path / "writes"  # beside the test's own models_cache
    tmp_path.mkdir()

    target = _folder(tmp_path / "lens", "old")
    with files.atomic_path(target) as tmp:
        _folder(tmp, "new")
    assert (target / "weights").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["lens"]
    with pytest.raises(OSError):  # replace=False still never replaces
        with files.atomic_path(target, replace=False) as tmp:
            _folder(tmp, "newer")
    assert (target / "weights").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["lens"]


def test_an_old_folder_left_aside_by_a_killed_writer_is_put_back_or_dropped(tmp_path):
    from core import files
    from tests.unit.test_files import dead_pid

    tmp_path = tmp_path / "writes"  # beside the test's own models_cache
    tmp_path.mkdir()

    gone = dead_pid()
    # Killed between the renames: the old one aside, the new one complete under its temporary name, no "lens".
    _folder(tmp_path / f".lens.{gone}.0123abcd.old", "old")
    _folder(tmp_path / f".lens.{gone}.4567cdef.tmp", "new")
    files.remove_stale_temporaries(tmp_path)
    assert (tmp_path / "lens" / "weights").read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["lens"]
    # Killed after the new one was in, before the old one was deleted: the old one goes.
    _folder(tmp_path / f".lens.{gone}.89abcdef.old", "older")
    files.remove_stale_temporaries(tmp_path)
    assert (tmp_path / "lens" / "weights").read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["lens"]
    # The next writer of the name does the same outside the models cache (the start-up cleaning looks only there).
    (tmp_path / "lens").rename(tmp_path / f".lens.{gone}.0123abcd.old")
    with files.atomic_path(tmp_path / "lens") as tmp:
        assert (tmp_path / "lens" / "weights").read_text() == "old"  # put back before the new one is written
        _folder(tmp, "new")
    assert (tmp_path / "lens" / "weights").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["lens"]


def test_a_full_disk_is_named_as_such_whatever_layer_reports_it(tmp_path):
    import errno

    from core import files

    tmp_path = tmp_path / "writes"  # beside the test's own models_cache
    tmp_path.mkdir()

    for err in (OSError(errno.ENOSPC, "No space left on device"), OSError(errno.EDQUOT, "Disk quota exceeded"),
                RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")):
        with pytest.raises(files.DiskFull) as caught:
            with files.atomic_path(tmp_path / "out.bin"):
                raise err
        assert str(caught.value) == (f"disk full: could not write {tmp_path / 'out.bin'}; free some space on that "
                                     "disk and run it again")
        assert caught.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
    assert files.disk_full(OSError(errno.EACCES, "Permission denied"), tmp_path) is None


def test_a_corrupt_saved_sae_or_lens_is_one_line_naming_its_file(tmp_path, capsys):
    import numpy as np
    from safetensors.numpy import save_file

    from core.analyses import logit_lens, sparse_features as sf
    from core.model import artefacts

    d, F = 4, 8
    sae = sf.SparseAutoencoder(W_enc=np.zeros((d, F), np.float32), b_enc=np.zeros(F, np.float32),
                               W_dec=np.zeros((F, d), np.float32), b_dec=np.zeros(d, np.float32), k=2, layer=1,
                               model="m", input_scale=1.0)
    weights = sf.save_sae(sae, "cut") / sf.WEIGHTS
    weights.write_bytes(weights.read_bytes()[:-20])
    line = _one_line_error(["sae-features", "--sae", "cut", "--text", "the cat"], capsys)
    assert str(weights) in line and "truncated or corrupt" in line
    folder = artefacts.artefact_dir("tuned-lens") / "cut"
    folder.mkdir(parents=True)
    save_file({"layers.0.weight": np.eye(d, dtype=np.float32), "layers.0.bias": np.zeros(d, np.float32)},
              str(folder / logit_lens.LENS_FILE))
    (folder / logit_lens.LENS_FILE).write_bytes(struct.pack("<Q", 2**62) + (folder / logit_lens.LENS_FILE).read_bytes()[8:])
    with pytest.raises(ValueError, match=r"lens.safetensors states a header of 4,611,686,018,427,387,904 bytes"):
        logit_lens.read_translators(folder)
