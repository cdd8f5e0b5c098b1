"""Run folders under settings.runs_dir(): written under a dotted temporary name, renamed when complete.

    runs_dir()/.NAME.partial/   queued or running: recipe.json, status.json, train.log (never a model:
                                available_models() skips dotted names)
    runs_dir()/NAME/            finished: the checkpoint, metrics.json, recipe.json, status.json, train.log
    runs_dir()/.NAME.cancelled/ stopped by the user, .NAME.failed/ crashed (an error it could report) and
                                .NAME.killed/ ended without a word (SIGKILL, out of memory, power cut): recipe,
                                status with the error, log (and traceback.txt); weights are deleted so nothing
                                there looks like a model

A run folder is created only for a recipe whose data file reads (tasks.check_user_file), so a broken file leaves
no folder. A .NAME.partial folder is never listed as done, whatever its status.json says: a worker killed
between writing "done" and the rename leaves exactly that.

status.json holds {state, phase, step, total_steps, epoch, epochs, loss, examples_per_second,
eta_seconds, elapsed_seconds, pid, queued_at, started_at, updated_at, losses: [[step, loss], ...], error}.
A queued/running folder whose process is gone (killed, machine restarted) is listed as killed by list_runs() and
settled as killed at the next start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from core import settings
from core.data.datasets import Example, seeded_subset
from core.files import (finish_rename, pid_alive, read_json, remove_stale_temporaries, write_json_atomic,
                        write_text_atomic)
from core.model.evaluation import Degeneracy, run_degeneracy
from core.training.recipe import Recipe
from core.training.tasks import check_user_file, load_task

ACTIVE_STATES = ("queued", "running")
ENDED_STATES = ("cancelled", "failed", "killed")
STATUS, RECIPE, METRICS, LOG, CANCEL_FLAG = "status.json", "recipe.json", "metrics.json", "train.log", "cancel"
TRACEBACK = "traceback.txt"  # a failed run's full traceback; listings show the error's one line
# Written by the launcher, not status.json: two processes merging into one file could lose each other's fields.
WORKER_PID = "worker.pid"
JOB_ID = "job.id"  # the core.jobs job training this run, when a launcher started one
MAX_LOSS_POINTS = 400
# A folder just created by the launcher may not have its worker's pid yet.
PID_GRACE_SECONDS = 30.0
DEAD_RUN_ERROR = "killed: the training process ended without finishing or reporting an error; see the log"
CANCELLED_DEAD_RUN_ERROR = "cancelled by the user (the process stopped before it could say so)"


def dead_run_end(folder: Path) -> tuple[str, str]:
    """(state, error) of a run whose process vanished: killed, or cancelled when a cancel had been asked for (the
    signal can land before the worker could record it)."""
    if (folder / CANCEL_FLAG).exists():
        return "cancelled", CANCELLED_DEAD_RUN_ERROR
    return "killed", DEAD_RUN_ERROR


class RunExists(ValueError):
    """The run name is taken by a finished or an active run."""


def partial_dir(name: str) -> Path:
    return settings.runs_dir() / f".{name}.partial"


def ended_dir(name: str, state: str) -> Path:
    return settings.runs_dir() / f".{name}.{state}"


def final_dir(name: str) -> Path:
    return settings.runs_dir() / name


def worker_pid(status: dict, folder: Path | None = None) -> int | None:
    """The worker's pid: its own record in status.json, else the one its launcher wrote to worker.pid."""
    if status.get("pid"):
        return int(status["pid"])
    try:
        return int((folder / WORKER_PID).read_text()) if folder is not None else None
    except (OSError, ValueError):
        return None


def job_id(folder: Path) -> str | None:
    try:
        return (folder / JOB_ID).read_text().strip() or None
    except OSError:
        return None


def process_gone(status: dict, folder: Path | None = None) -> bool:
    """True when an active run's worker no longer exists."""
    pid = worker_pid(status, folder)
    if pid:
        return not pid_alive(pid)
    return time.time() - float(status.get("queued_at") or 0) > PID_GRACE_SECONDS


class RunFolder:
    """The temporary folder of one queued or running run, and its two ways out (finish / end)."""

    def __init__(self, name: str):
        self.name = name
        self.path = partial_dir(name)

    @classmethod
    def create(cls, recipe: Recipe) -> "RunFolder":
        """The queued folder of a new run. Raises RunExists, or a TaskError for an unreadable data file, before
        anything is written."""
        name = recipe.run_name
        settle_dead_runs()
        if final_dir(name).exists():
            raise RunExists(f"A run named '{name}' already exists in {settings.runs_dir()}; pick another name or delete it.")
        if partial_dir(name).exists():
            raise RunExists(f"A run named '{name}' is already queued or running; pick another name or cancel it.")
        check_user_file(recipe)
        folder = cls(name)
        folder.path.mkdir(parents=True)
        write_json_atomic(folder.path / RECIPE, recipe.to_dict())
        write_json_atomic(folder.path / STATUS, {"state": "queued", "phase": "queued", "queued_at": time.time(), "losses": []})
        return folder

    @classmethod
    def adopt_or_create(cls, recipe: Recipe) -> "RunFolder":
        """The folder a launcher made for this process (queued, our pid or none yet), else a new one."""
        folder = cls(recipe.run_name)
        status = read_json(folder.path / STATUS) if folder.path.is_dir() else None
        if status and status.get("state") == "queued" and status.get("pid") in (None, os.getpid()):
            folder.write_status(pid=os.getpid())
            return folder
        created = cls.create(recipe)
        created.write_status(pid=os.getpid())
        return created

    @property
    def status(self) -> dict:
        return read_json(self.path / STATUS) or {}

    def write_status(self, **fields) -> dict:
        status = {**self.status, **fields, "updated_at": time.time()}
        write_json_atomic(self.path / STATUS, status)
        return status

    def log(self, message: str) -> None:
        with open(self.path / LOG, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%H:%M:%S')} {message.rstrip()}\n")

    def cancel_requested(self) -> bool:
        return (self.path / CANCEL_FLAG).exists()

    def finish(self, metrics: dict) -> Path:
        """metrics.json last, then one rename: the run appears complete or not at all."""
        write_json_atomic(self.path / METRICS, metrics)
        self.write_status(state="done", phase="done", eta_seconds=0.0, finished_at=time.time())
        target = final_dir(self.name)
        finish_rename(self.path, target, replace=False)  # fails rather than overwrite if the name got taken meanwhile
        self.path = target
        return target

    def end(self, state: str, error: str, traceback_text: str | None = None) -> Path:
        """Cancelled, failed or killed: keep recipe, status, log (and the traceback); delete weights; move to
        .NAME.<state>. The weights go first: on a full disk that makes the room the status needs."""
        for weights in self.path.glob("*.safetensors"):
            weights.unlink()
        if traceback_text:
            try:
                write_text_atomic(self.path / TRACEBACK, traceback_text)
            except OSError:
                pass  # the disk is still full: the status below says what happened, the traceback is a detail
        self.write_status(state=state, phase=state, error=error, finished_at=time.time())
        target = ended_dir(self.name, state)
        if target.exists():
            shutil.rmtree(target)
        os.rename(self.path, target)
        self.path = target
        return target


@dataclass(frozen=True)
class RunInfo:
    """One run as listed on the page and by `python -m core runs`."""

    name: str
    state: str  # queued | running | done | cancelled | failed | killed
    folder: str
    recipe: dict
    status: dict
    metrics: dict | None
    log_tail: str

    @property
    def is_model(self) -> bool:
        return self.state == "done"

    @property
    def error(self) -> str | None:
        return self.status.get("error")

    @property
    def error_line(self) -> str:
        """The error on one line, for listings (traceback.txt in the folder has all of it)."""
        return one_line(self.error or "")

    def progress_fraction(self) -> float:
        total = self.status.get("total_steps") or 0
        return min(1.0, (self.status.get("step") or 0) / total) if total else 0.0


def one_line(text: str, limit: int = 300) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def log_tail(folder: Path, lines: int = 20) -> str:
    try:
        text = (folder / LOG).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _info(name: str, folder: Path, fallback_state: str) -> RunInfo:
    status = read_json(folder / STATUS) or {}
    state = status.get("state", fallback_state)
    if fallback_state == "done":
        state = "done"
    elif fallback_state in ENDED_STATES:
        state = fallback_state
    elif process_gone(status, folder):
        # Reported, not written: the next start, run created or delete settles the folder as killed.
        state, error = dead_run_end(folder)
        status = {**status, "state": state, "error": error}
    elif state not in ACTIVE_STATES:
        state = "running"  # "done" written, the rename to NAME still to come: not a model yet
    return RunInfo(
        name=name,
        state=state,
        folder=str(folder),
        recipe=read_json(folder / RECIPE) or {},
        status=status,
        metrics=read_json(folder / METRICS) if state == "done" else None,
        log_tail=log_tail(folder),
    )


def settle_dead_runs() -> None:
    """Temporary run folders whose process died (kill -9, power cut), even one that had written "done" but not yet
    renamed, become killed runs without weights."""
    root = settings.runs_dir()
    if not root.is_dir():
        return
    for folder in root.glob(".*.partial"):
        status = read_json(folder / STATUS) or {}
        if process_gone(status, folder):
            run = RunFolder(folder.name[1 : -len(".partial")])
            try:
                run.end(*dead_run_end(folder))
            except OSError:
                pass  # its worker finished or another reader settled it at the same moment


def clean_leftovers() -> list[Path]:
    """What killed writers left behind, removed when the app or the command line starts: stale temporary names
    under the models cache, and run folders of trainers that died (settled as killed runs, weights deleted).
    Here rather than in core.files because it settles runs too, and core.files sits below the runs."""
    removed = remove_stale_temporaries(settings.cache_dir())
    settle_dead_runs()
    return removed


def list_runs() -> list[RunInfo]:
    """All runs, oldest first: active, finished, cancelled, failed and killed. Reads only: a run whose process
    died is listed as killed but its folder is left as it is."""
    root = settings.runs_dir()
    if not root.is_dir():
        return []
    runs = []
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        if folder.name.startswith("."):
            stem, _, kind = folder.name[1:].rpartition(".")
            if kind == "partial":
                runs.append(_info(stem, folder, "queued"))
            elif kind in ENDED_STATES:
                runs.append(_info(stem, folder, kind))
        elif (folder / METRICS).is_file():
            runs.append(_info(folder.name, folder, "done"))
    return sorted(runs, key=lambda r: (float(r.status.get("queued_at") or 0), r.name))


def get_run(name: str) -> RunInfo | None:
    return next((r for r in list_runs() if r.name == name and r.state in ACTIVE_STATES + ("done",)), None) or next(
        (r for r in list_runs() if r.name == name), None
    )


def saved_degeneracy(ref: str) -> Degeneracy | None:
    """Whether the classifier `ref` (a run's name or its folder) learned (almost) nothing, by the rule of
    core.training.evaluation on its metrics.json; None when `ref` is no finished classification run."""
    for folder in (final_dir(ref), Path(ref)):
        if ref and (folder / METRICS).is_file():
            return run_degeneracy(read_json(folder / METRICS))
    return None


def delete_run(name: str) -> None:
    """Remove a finished, cancelled, failed or killed run (an active one must be cancelled first)."""
    settle_dead_runs()
    if partial_dir(name).exists():
        raise ValueError(f"Run '{name}' is still queued or running; cancel it first.")
    for folder in [final_dir(name)] + [ended_dir(name, s) for s in ENDED_STATES]:
        if folder.is_dir():
            shutil.rmtree(folder)


# ---- a run's own evaluation sample (head ablation scores a run on it) ------------------------------------------


class RunSampleError(ValueError):
    """The run's evaluation sample cannot be rebuilt; the message says why."""


@dataclass(frozen=True)
class RunSample:
    """The evaluation examples a classification run was scored on, and the accuracy it recorded (metrics.json)."""

    examples: tuple[Example, ...]
    task: str
    eval_split: str
    run_accuracy: float | None
    complete: bool  # True when `examples` is the whole evaluation set the run's accuracy was measured on


def run_eval_sample(clf, limit: int | None = None, seed: int = 0) -> RunSample:
    """The run's evaluation set, rebuilt from its recipe.json (same task, eval_limit, seed, data source);
    `limit` takes a seeded subset of it."""
    folder = Path(clf.encoder.path)
    try:
        recipe = Recipe.from_dict(json.loads((folder / RECIPE).read_text()))
    except (OSError, ValueError) as err:
        raise RunSampleError(f"{folder} has no readable {RECIPE} ({err}); ablation needs a classification run made by "
                             "the Fine-tuning page or python -m core finetune") from err
    metrics = {}
    try:
        metrics = json.loads((folder / METRICS).read_text())
    except (OSError, ValueError):
        pass
    data = load_task(recipe.task, train_limit=1, eval_limit=recipe.eval_limit, seed=recipe.seed, source=recipe.data_source)
    if tuple(data.labels) != tuple(clf.labels):
        raise RunSampleError(f"the run's classes {list(clf.labels)} differ from its task's {list(data.labels)}")
    examples = tuple(data.eval)
    subset = tuple(seeded_subset(list(examples), limit, seed)) if limit else examples
    return RunSample(subset, recipe.task, data.eval_split, metrics.get("accuracy"), len(subset) == len(examples))
