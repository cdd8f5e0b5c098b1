"""Issue 32, half-written files: a failed `encode --out` leaves the old file (or none) and says why on one line; an
invalid task file creates no run folder; a failed run keeps its traceback in its folder and is listed as one line."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest

from core import settings
from core.__main__ import main
from core.training import Recipe, finetune
from tests.unit.test_files import dead_pid


def exit_code(argv: list[str]) -> int:
    """main()'s code, whether it returned it or argparse's own checks exited with it."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


def message_lines(err: str) -> list[str]:
    """stderr without transformers' "Loading weights" progress bar (its lines end in carriage returns)."""
    return [line for line in err.splitlines() if line.strip() and "\r" not in line and "Loading weights" not in line]


def test_encode_out_writes_a_complete_file(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "out" / "x"
    out.parent.mkdir()
    assert main(["encode", "--model", str(tiny_bert_dir), "--text", "the cat sat", "--out", str(out)]) == 0
    with np.load(tmp_path / "out" / "x.npz") as arrays:  # numpy's suffix rule kept
        assert list(arrays["tokens"]) == ["[CLS]", "the", "cat", "sat", "[SEP]"]
        assert arrays["attentions"].shape[-1] == 5
    assert [p.name for p in out.parent.iterdir()] == ["x.npz"]
    assert "x.npz: 5 tokens" in capsys.readouterr().out


def test_encode_out_that_fails_midway_keeps_the_old_file_and_prints_one_line(tiny_bert_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out" / "x.npz"
    out.parent.mkdir()
    out.write_bytes(b"yesterday's complete file")
    import core.commands.models as models_command

    def disk_full(file, **arrays):
        (file.write if hasattr(file, "write") else open(file, "wb").write)(b"PK\x03\x04 half an archive")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(models_command.np, "savez_compressed", disk_full)
    assert main(["encode", "--model", str(tiny_bert_dir), "--text", "the cat sat", "--out", str(out)]) == 2
    lines = message_lines(capsys.readouterr().err)
    # Issue 44: a full disk is said as such, with the file.
    assert len(lines) == 1 and lines[0].startswith(f"error: disk full: could not write {out}") and "nothing was written" in lines[0]
    assert out.read_bytes() == b"yesterday's complete file"
    assert [p.name for p in out.parent.iterdir()] == ["x.npz"]


def test_the_next_encode_to_a_name_removes_what_a_killed_one_left(tiny_bert_dir, tmp_path):
    """A temporary left in the user's folder (outside the models cache the start-up cleaning walks) by a killed
    `encode --out` is removed by the next write of that name; another name's, or a live writer's, is not."""
    from core import files

    gone = dead_pid()
    out = tmp_path / "out" / "x.npz"
    out.parent.mkdir()
    leftover = out.parent / f".x.npz.{gone}.0123abcd.tmp"
    other = out.parent / f".y.npz.{gone}.0123abcd.tmp"
    live = files.temp_name(out)
    for path in (leftover, other, live):
        path.write_bytes(b"PK half")
    assert main(["encode", "--model", str(tiny_bert_dir), "--text", "the cat sat", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(["x.npz", other.name, live.name])


@pytest.mark.parametrize("where", ["a file as folder", "missing folder", "a folder"])
def test_encode_out_to_an_unwritable_place_exits_2_with_one_line(tiny_bert_dir, tmp_path, capsys, where):
    (tmp_path / "plain.txt").write_text("not a folder")
    (tmp_path / "dir.npz").mkdir()
    out = {"a file as folder": tmp_path / "plain.txt" / "x.npz", "missing folder": tmp_path / "nowhere" / "x.npz",
           "a folder": tmp_path / "dir.npz"}[where]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert exit_code(["encode", "--model", str(tiny_bert_dir), "--text", "the cat", "--out", str(out)]) == 2
    lines = message_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "error: " in lines[0] and "--out" in lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_an_invalid_task_file_creates_no_run_folder(tiny_bert_dir, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nthe cat sat,cat\n")  # one row: nothing to hold out
    code = main(["finetune", "--model", str(tiny_bert_dir), "--task", str(bad), "--run", "bad-file", "--epochs", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "Traceback" not in err
    runs = settings.runs_dir()
    assert not runs.exists() or not [p.name for p in runs.iterdir() if "bad-file" in p.name]
    assert main(["runs"]) == 0
    assert "bad-file" not in capsys.readouterr().out


def test_a_failed_run_keeps_its_traceback_and_is_listed_on_one_line(tiny_bert_dir, tmp_path, capsys):
    rows = [{"text": f"the {animal} sat on the mat", "label": animal} for animal in ["cat", "dog"] * 10]
    task = tmp_path / "animals.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def crash(done, total):
        raise RuntimeError("simulated crash\nwith a second line")

    recipe = Recipe(model=str(tiny_bert_dir), task=str(task), run_name="crashes", epochs=1, batch_size=8, max_length=16,
                    cpu_threads=1)
    with pytest.raises(RuntimeError):
        finetune(recipe, progress=crash)
    folder = settings.runs_dir() / ".crashes.failed"
    traceback_text = (folder / "traceback.txt").read_text()
    assert traceback_text.startswith("Traceback") and "def crash" not in traceback_text and "in crash" in traceback_text
    assert main(["runs"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines == ["crashes\tfailed\t" + str(task) + "\tRuntimeError: simulated crash with a second line"]


def test_a_background_run_of_an_invalid_task_file_starts_nothing(tiny_bert_dir, tmp_path):
    """The page and `finetune --background` queue through training.submit: the file is read before any folder or job."""
    from core import jobs
    from core.training import TaskError, submit

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "the cat", "label": "cat"}\n{"text": "the dog"\n')
    with pytest.raises(TaskError, match="bad.jsonl"):
        submit(Recipe(model=str(tiny_bert_dir), task=str(bad), run_name="bad-background", epochs=1))
    for folder in (settings.runs_dir(), jobs.jobs_dir()):
        assert not folder.exists() or not list(folder.iterdir())
