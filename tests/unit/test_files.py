"""core.files: writes appear whole or not at all, and the leftovers of dead writers (only those) are removed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from core import files


@pytest.fixture
def folder(tmp_path):
    """An empty folder of its own (tmp_path also holds the test's models_cache)."""
    path = tmp_path / "w"
    path.mkdir()
    return path


def dead_pid() -> int:
    """The pid of a process that has exited (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_finished_write_replaces_the_file_and_leaves_no_temporary_name(folder):
    target = folder / "result.json"
    target.write_text("old")
    files.write_json_atomic(target, {"a": 1})
    assert files.read_json(target) == {"a": 1}
    assert [p.name for p in folder.iterdir()] == ["result.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_name(folder):
    target = folder / "x.npz"
    target.write_bytes(b"the old, complete file")
    with pytest.raises(OSError, match="disk full"):
        with files.atomic_path(target) as tmp:
            tmp.write_bytes(b"half of the new")
            assert files.writer_pid(tmp) == os.getpid()
            raise OSError("disk full")
    assert target.read_bytes() == b"the old, complete file"
    assert [p.name for p in folder.iterdir()] == ["x.npz"]


def test_no_replace_refuses_an_existing_file_or_folder_and_cleans_up(folder):
    (folder / "taken.txt").write_text("theirs")
    with pytest.raises(OSError):
        with files.atomic_path(folder / "taken.txt", replace=False) as tmp:
            tmp.write_text("ours")
    assert (folder / "taken.txt").read_text() == "theirs"
    (folder / "index").mkdir()
    (folder / "index" / "info.json").write_text("{}")
    with pytest.raises(OSError):
        with files.atomic_path(folder / "index", replace=False) as tmp:
            tmp.mkdir()
            (tmp / "info.json").write_text('{"ours": true}')
    assert (folder / "index" / "info.json").read_text() == "{}"
    assert sorted(p.name for p in folder.iterdir()) == ["index", "taken.txt"]


def test_temporary_names_carry_the_writer_pid_and_nothing_else_parses_as_one(folder):
    name = files.temp_name(folder / "record.json")
    assert name.parent == folder and name.name.startswith(".record.json.") and name.suffix == ".tmp"
    assert files.writer_pid(name) == os.getpid()
    assert files.writer_pid(folder / ".a1b2.12345.1732527000123456789") == 12345  # an index folder of older code
    assert files.writer_pid(folder / ".record.json.12345.tmp") == 12345  # write_json_atomic of older code
    for other in ("record.json", ".tiny.partial", ".tiny.failed", "layer_3.f16", ".queue.lock", "abc.12.tmp"):
        assert files.writer_pid(folder / other) is None, other


def test_stale_temporaries_of_dead_writers_are_removed_and_a_live_writers_kept(folder):
    gone = dead_pid()
    jobs = folder / "jobs" / "20260101-job"
    jobs.mkdir(parents=True)
    stale_file = jobs / f".result.json.{gone}.0123abcd.tmp"
    stale_file.write_text('{"half"')
    index = folder / "explorer_index"
    stale_folder = index / f".0a1b2c3d4e5f60718293.{gone}.1732527000123456789"
    (stale_folder / "deep").mkdir(parents=True)
    (stale_folder / "layer_1.f16").write_bytes(b"\0" * 64)
    live = files.temp_name(jobs / "record.json")
    live.write_text("{}")
    kept = [jobs / "record.json", index / "0a1b2c3d4e5f60718293" / "info.json", folder / "runs" / ".tiny.partial" / "status.json"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")

    removed = files.remove_stale_temporaries(folder)

    assert sorted(removed) == sorted([stale_file, stale_folder])
    assert not stale_file.exists() and not stale_folder.exists()
    assert live.exists() and all(p.exists() for p in kept)


def test_a_reused_pid_does_not_keep_an_older_leftover(folder):
    """Containers restart with the same small pids: a leftover named with our pid, but last written before this
    process started, cannot be ours."""
    leftover = files.temp_name(folder / "record.json")
    leftover.write_text("{}")
    started = files.process_start_time(os.getpid())
    assert started is not None and abs(started - time.time()) < 24 * 3600
    os.utime(leftover, (started - 60, started - 60))
    assert not files.writer_alive(leftover)
    assert files.remove_stale_temporaries(folder) == [leftover]


def test_a_run_folder_whose_trainer_died_after_writing_done_is_not_listed_done(folder, monkeypatch):
    """A trainer killed between status "done" and the rename to NAME leaves .NAME.partial saying done: it must be
    listed as killed and settled (weights removed), never as a finished run."""
    from core.training import runs

    monkeypatch.setenv("BERTLENS_CACHE", str(folder))
    partial = runs.partial_dir("half")
    partial.mkdir(parents=True)
    files.write_json_atomic(partial / runs.STATUS, {"state": "done", "pid": dead_pid(), "queued_at": time.time()})
    files.write_json_atomic(partial / runs.METRICS, {"accuracy": 0.9})
    (partial / "model.safetensors").write_bytes(b"complete-looking weights")
    assert [(r.name, r.state, r.metrics) for r in runs.list_runs()] == [("half", "killed", None)]
    runs.settle_dead_runs()
    failed = runs.ended_dir("half", "killed")
    assert not partial.exists() and failed.is_dir() and not list(failed.glob("*.safetensors"))
