"""Issue 32: SIGKILL a writer at its worst moment (everything written, the rename to the final name still to come) —
a foreground `finetune` in its save step, a nearest-contexts index build, a corpus-pass process job — then check
that nothing half-written looks complete, and that the next start (`python -m core ...`) removes the leftovers.

BERTLENS_TEST_PAUSE_BEFORE_RENAME (core/files.py) holds the writer there, so the kill lands at the same point on
every run instead of racing a write that takes milliseconds on a tiny model."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from core.data import corpus as corpora
from core import files, jobs, settings
from core.__main__ import main
from core.model.loading import available_models, load_model
from core.training import list_runs
from core.training.runs import final_dir, partial_dir
from core.analyses.vector_index import TokenIndex, index_key, index_root
from tests.integration import kill_work
from tests.integration.test_training import _wait_until as wait_for
from tests.own_thread import in_own_thread
from tests.unit.test_files import dead_pid


def start_cli(*argv: str, pause: str) -> subprocess.Popen:
    """`python -m core ARGV` in a session of its own (its process group is killed), paused before its rename."""
    env = {**os.environ, files.PAUSE_ENV: pause}
    return subprocess.Popen([sys.executable, "-m", "core", *argv], cwd=settings.REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@pytest.fixture
def animal_file(tmp_path) -> str:
    rows = [{"text": f"the {animal} sat on the mat", "label": animal} for animal in ["cat", "dog"] * 12]
    path = tmp_path / "animals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_finetune_killed_in_its_save_step_is_never_a_model(tiny_bert_dir, animal_file, capsys):
    name = "killed-in-save"
    child = start_cli("finetune", "--model", str(tiny_bert_dir), "--task", animal_file, "--run", name, "--epochs", "1",
                      "--batch-size", "8", "--max-length", "16", "--threads", "1", pause=name)
    partial = partial_dir(name)
    try:
        # The worst moment: weights, metrics.json and status "done" all written, the rename to NAME not yet done.
        wait_for(lambda: (files.read_json(partial / "status.json") or {}).get("state") == "done")
    finally:
        kill(child)
    assert (partial / "model.safetensors").is_file() and (partial / "metrics.json").is_file()

    listed = {r.name: r for r in list_runs()}  # what `core runs` shows, read only
    assert listed[name].state == "killed" and listed[name].metrics is None
    assert not final_dir(name).exists()
    assert name not in [m.name for m in available_models()]
    with pytest.raises(Exception):
        load_model(name)

    assert main(["runs"]) == 0  # the next start
    assert capsys.readouterr().out.startswith(f"{name}\tkilled\t")
    assert not partial.exists() and (settings.runs_dir() / f".{name}.killed" / "recipe.json").is_file()
    assert not list(settings.runs_dir().rglob("*.safetensors"))


def test_index_build_killed_before_its_rename_leaves_no_index_and_is_cleaned(tiny_bert_dir, capsys):
    layer, corpus = 1, corpora.resolve("builtin")
    key = index_key(load_model(str(tiny_bert_dir)).ref, corpus.digest, [layer])
    argv = ["neighbours", "--model", str(tiny_bert_dir), "--text", "the cat sat on the mat", "--word", "cat",
            "--layer", str(layer), "--corpus", "builtin", "--json"]
    child = start_cli(*argv, pause=key)
    try:
        complete = (lambda: next((p for p in index_root().glob(f".{key}.*") if (p / "info.json").is_file()), None))
        temporary = wait_for(complete)
    finally:
        kill(child)
    assert files.writer_pid(temporary) == child.pid
    assert not (index_root() / key).exists()
    with pytest.raises(Exception):
        TokenIndex(index_root() / key)

    assert main(["models"]) == 0  # the next start removes it
    assert not temporary.exists() and list(index_root().iterdir()) == []
    capsys.readouterr()
    assert main(argv) == 0  # and the index builds again
    assert json.loads(capsys.readouterr().out)["query"]["word"] == "cat"
    assert [p.name for p in index_root().iterdir()] == [key]


def test_corpus_pass_job_killed_while_saving_its_result_has_no_result(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv(files.PAUSE_ENV, jobs.RESULT)
    work = functools.partial(kill_work.anisotropy_pass, str(tiny_bert_dir), "builtin", 40)
    job = jobs.submit("anisotropy", {"model": str(tiny_bert_dir), "corpus": "builtin"}, work, process=True)
    folder = jobs.jobs_dir() / job.id
    try:
        temporary = wait_for(lambda: next(folder.glob(f".{jobs.RESULT}.*.tmp"), None))
        wait_for(lambda: files.read_json(temporary))  # complete, not yet renamed
    finally:
        os.killpg(job.popen.pid, signal.SIGKILL)
        job.popen.wait(timeout=30)
    assert jobs.status(job.id).state == "killed"
    assert jobs.result_json(job.id) is None and not (folder / jobs.RESULT).exists()

    monkeypatch.delenv(files.PAUSE_ENV)
    assert main(["models"]) == 0  # the next start
    assert not temporary.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted([jobs.RECORD, jobs.WORK, jobs.LOG])
    assert jobs.status(job.id).state == "killed"


def test_the_app_start_cleans_too(monkeypatch):
    """The server's lifespan (app_pages/shell/launch.py) runs the same cleaning as the command line (here with the
    warm-up off; with it on, the warm-up thread does it after its first forward)."""
    import asyncio

    from app_pages.shell import launch
    from core.training.runs import STATUS

    monkeypatch.setenv("BERTLENS_WARM_UP", "0")
    gone = dead_pid()
    stale = index_root() / f".0a1b2c3d4e5f60718293.{gone}.0123abcd.tmp"
    stale.mkdir(parents=True)
    dead_run = partial_dir("dead")
    dead_run.mkdir(parents=True)
    files.write_json_atomic(dead_run / STATUS, {"state": "running", "pid": gone, "queued_at": time.time()})
    (dead_run / "model.safetensors").write_bytes(b"half")

    async def serve_once() -> None:
        async with launch.lifespan(None):
            pass

    in_own_thread(asyncio.run, serve_once())
    assert not stale.exists() and not dead_run.exists()
    assert (settings.runs_dir() / ".dead.killed").is_dir() and not list(settings.runs_dir().rglob("*.safetensors"))
