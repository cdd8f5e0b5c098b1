"""One runner for every long piece of work: corpus passes, sweeps, probes, projections, training, bias experiments.

    from core import jobs
    job = jobs.submit("anisotropy", {"model": ref}, partial(measure_corpus, lm, corpus, settings))
    jobs.status(job.id)     # JobRecord: state, done / total, unit, message, error
    jobs.cancel(job.id)     # the work sees should_stop() == True at its next check and raises Cancelled
    jobs.wait(job.id).state == "done"; job.result

`work(progress, should_stop)` is a plain core function: `progress(done, total, message=None)` reports, and
`should_stop()` is polled between batches (core.progress.check_stop raises Cancelled). It runs either

- in a thread of this process (the default): closures are fine and `job.result` holds what `work` returned;
- in its own process (`process=True`, for training and bias experiments, so a crash never takes the server
  down and a page reload never kills it): `work` must be a module-level function or a `functools.partial` of
  one with JSON-serialisable arguments. The child runs `python -m core.jobs JOB_ID` in a new session; a result
  with `to_json()` (or a plain dict) is saved as result.json.

Every job leaves a durable record, written only by the job itself, in `settings.cache_dir()/jobs/ID/`:

    record.json   {id, kind, params, state, done, total, unit, message, error, pid, process,
                   created_at, started_at, finished_at, updated_at}
    work.json     process jobs: the function and its arguments
    output.log    process jobs: the child's stdout and stderr
    result.json   the result's to_json(), when it has one: process jobs, and thread jobs submitted with keep_result
    cancel        present once a cancel was asked for

At most settings.max_jobs() thread jobs of one process (a server: all its sessions together; BERTLENS_MAX_JOBS,
default 2) run at once; the others stay "queued" in the order they came, their message saying their place
("queued, 2nd in line"), and can be cancelled there. Process jobs are training runs and bias scorers, which wait
for their turn in core.training.queue (one at a time) instead.

state is queued | running | done | failed | cancelled. Reading never writes: a record left "queued" or "running"
by a process that no longer exists (killed, crashed, server restarted) is *reported* as "killed".
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core import settings
from core.files import pid_alive, read_json, write_json_atomic
from core.model.loading import ModelUnavailable
from core.progress import Cancelled

ACTIVE_STATES = ("queued", "running")
ENDED_STATES = ("done", "failed", "cancelled", "killed")
RECORD, WORK, LOG, RESULT, CANCEL = "record.json", "work.json", "output.log", "result.json", "cancel"
WRITE_EVERY_SECONDS = 0.5  # progress reaches the disk at most this often (the in-memory state is always current)
KEEP_RECORDS = 200  # older finished job folders are pruned when a new job starts
KILLED_MESSAGE = "the job's process ended without finishing (killed, crashed or the server restarted)"


def jobs_dir() -> Path:
    return settings.cache_dir() / "jobs"


@dataclass(frozen=True)
class JobRecord:
    """What a reader knows of one job (from this process's live state, or from record.json).

    done / total count `unit`s (total 0 while unknown); message is the current stage ("waiting for the
    training queue", a model name); error is set when state is failed, cancelled or killed."""

    id: str
    kind: str
    params: dict
    state: str
    done: int = 0
    total: int = 0
    unit: str = "items"
    message: str = ""
    error: str | None = None
    pid: int | None = None
    process: bool = False
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    updated_at: float | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def progress_text(self) -> str:
        """The line under a progress bar: the stage, then done / total once the work has counted anything
        ("starting…" before, never "0 / … items")."""
        if self.active and not (self.done or self.total):
            return f"{self.message or ('waiting to start' if self.state == 'queued' else 'starting')}…"
        if self.unit == "%":  # a job of several phases: the message counts the phase, done the whole in percent
            return f"{self.message} ({self.done} % done)".strip()
        return f"{self.message} {self.done} / {self.total or '…'} {self.unit}".strip()

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict) -> "JobRecord":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _settled(record: JobRecord) -> JobRecord:
    """A record whose process is gone cannot be running any more: report it as killed, or as cancelled when a
    cancel was asked for (the signal can land before the child could record anything). Nothing is written."""
    if record.active and not pid_alive(record.pid):
        if (jobs_dir() / record.id / CANCEL).exists():
            return JobRecord.from_json({**record.to_json(), "state": "cancelled", "error": record.error or "cancelled"})
        return JobRecord.from_json({**record.to_json(), "state": "killed", "error": record.error or KILLED_MESSAGE})
    return record


class _Reporter:
    """The job's side of the record: progress, stop checks and state changes, mirrored to record.json."""

    def __init__(self, folder: Path, record: dict, stop_event: threading.Event | None = None):
        self.folder = folder
        self.record = record
        self.stop_event = stop_event or threading.Event()
        self._written = 0.0
        self._lock = threading.Lock()

    def write(self, force: bool = True, **fields) -> None:
        with self._lock:
            self.record.update(fields, updated_at=time.time())
            if force or time.time() - self._written >= WRITE_EVERY_SECONDS:
                write_json_atomic(self.folder / RECORD, self.record)
                self._written = time.time()

    def progress(self, done: int, total: int, message: str | None = None) -> None:
        fields = {"done": int(done), "total": int(total)}
        if message is not None:
            fields["message"] = message
        self.write(force=False, **fields)

    def should_stop(self) -> bool:
        if not self.stop_event.is_set() and (self.folder / CANCEL).exists():
            self.stop_event.set()
        return self.stop_event.is_set()

    def execute(self, work: Callable, keep: Callable[[Any], None] = lambda result: None) -> Any:
        """Run `work`, hand its result to `keep` (before the record says done, so a reader that sees "done"
        finds the result), and end the record as done, cancelled or failed. Returns the result (None unless done)."""
        self.write(state="running", started_at=time.time(), pid=os.getpid())
        try:
            result = work(self.progress, self.should_stop)
            keep(result)
        except Cancelled as err:
            self.write(state="cancelled", error=f"cancelled: {err}", finished_at=time.time())
            return None
        except BaseException as err:  # recorded for the page; the server keeps working
            self.write(state="failed", error=describe_error(err), finished_at=time.time())
            if not isinstance(err, Exception):
                raise
            return None
        self.write(state="done", finished_at=time.time(), **({"done": self.record["total"]} if self.record.get("total") else {}))
        return result


def describe_error(err: BaseException) -> str:
    """A failed job's error as a page shows it: a ModelUnavailable message is written for a person (it names the
    model and what to do), so it goes without its class name; anything else keeps the class, which says what broke."""
    return str(err) if isinstance(err, ModelUnavailable) else f"{type(err).__name__}: {err}"


@dataclass
class Job:
    """This process's handle on a job it started. `result` is set when a thread job ends done."""

    id: str
    kind: str
    params: dict
    folder: Path
    process: bool
    reporter: _Reporter | None = None
    thread: threading.Thread | None = None
    popen: subprocess.Popen | None = None
    result: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def status(self) -> JobRecord:
        if self.reporter is not None:
            with self.reporter._lock:
                return JobRecord.from_json(dict(self.reporter.record))
        if self.popen is not None:
            self.popen.poll()  # reap it, so a finished child is not taken for a live zombie
        return read_record(self.id) or JobRecord(self.id, self.kind, self.params, "killed", error=KILLED_MESSAGE)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def queued_message(position: int) -> str:
    return f"queued, {ordinal(position)} in line"


class _Slots:
    """This process's thread jobs: at most settings.max_jobs() run at once (read at every check, so a test or an
    operator can change it), the others wait first come, first served. Without it ten sessions ran ten corpus
    passes at once, each holding its own activations (issue 44)."""

    POLL_SECONDS = 0.2  # how often a waiting job looks for a cancel (cancel() also wakes it at once)

    def __init__(self):
        self._changed = threading.Condition()
        self._running = 0
        self._waiting: list[str] = []

    def position(self, job_id: str) -> int | None:
        """1 for the next job to start, None when the job is not waiting."""
        with self._changed:
            return self._waiting.index(job_id) + 1 if job_id in self._waiting else None

    def wait_turn(self, job_id: str, reporter: "_Reporter") -> bool:
        """Block until the job may run (True), or until it is cancelled while waiting (False); the record's
        message says its place in line whenever that changes."""
        shown = None
        with self._changed:
            self._waiting.append(job_id)
        try:
            while True:
                with self._changed:
                    position = self._waiting.index(job_id) + 1
                    if position == 1 and self._running < settings.max_jobs():
                        self._waiting.remove(job_id)
                        self._running += 1
                        self._changed.notify_all()  # the next in line moves up
                        break
                if reporter.should_stop():
                    return False
                if position != shown:
                    reporter.write(message=queued_message(position))
                    shown = position
                with self._changed:
                    self._changed.wait(self.POLL_SECONDS)
        finally:
            with self._changed:
                if job_id in self._waiting:  # cancelled, or an error while waiting: make room for the others
                    self._waiting.remove(job_id)
                    self._changed.notify_all()
        if shown is not None:
            reporter.write(message="")
        return True

    def release(self) -> None:
        with self._changed:
            self._running -= 1
            self._changed.notify_all()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()


_slots = _Slots()

# Jobs started by this process (a Streamlit server keeps them across reruns and sessions).
_live: dict[str, Job] = {}
_live_lock = threading.Lock()


def _id_part(kind: str) -> str:
    """The kind as it appears in a job id (a folder name): a kind holding a path ("pca.background./a/model") made
    nested folders, which list_records and latest could not see."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", kind)


def _new_id(kind: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{_id_part(kind)}-{uuid.uuid4().hex[:6]}"


def _work_spec(work: Callable) -> dict:
    """How a child process finds `work` again: a module-level function and JSON arguments."""
    function, args, kwargs = work, (), {}
    if isinstance(work, functools.partial):
        function, args, kwargs = work.func, work.args, work.keywords
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or "<" in name or module == "__main__":
        raise ValueError("a process job's work must be a module-level function (or a functools.partial of one)")
    spec = {"function": f"{module}:{name}", "args": list(args), "kwargs": dict(kwargs)}
    try:
        json.dumps(spec)
    except TypeError as err:
        raise ValueError(f"a process job's arguments must be JSON-serialisable: {err}") from None
    return spec


def _load_work(spec: dict) -> Callable:
    module, name = spec["function"].split(":")
    function = importlib.import_module(module)
    for part in name.split("."):
        function = getattr(function, part)
    return functools.partial(function, *spec.get("args", ()), **spec.get("kwargs", {}))


def _prune() -> None:
    root = jobs_dir()
    ended = []
    for folder in root.iterdir() if root.is_dir() else ():
        record = read_json(folder / RECORD)
        if record and record.get("state") not in ACTIVE_STATES:
            ended.append((float(record.get("created_at") or 0), folder))
    for _, folder in sorted(ended)[: max(0, len(ended) - KEEP_RECORDS)]:
        for path in folder.iterdir():
            path.unlink(missing_ok=True)
        folder.rmdir()


def _save_result(folder: Path, result: Any) -> None:
    """result.json: the result's to_json() (or a plain dict); a result that is not JSON is kept by the work itself
    (a run folder, an experiment folder)."""
    if result is None:
        return
    data = result.to_json() if hasattr(result, "to_json") else result
    try:
        write_json_atomic(folder / RESULT, data)
    except TypeError:
        pass


def submit(kind: str, params: dict, work: Callable, *, unit: str = "items", process: bool = False,
           keep_result: bool = False) -> Job:
    """Start `work(progress, should_stop)` (a thread job: once fewer than settings.max_jobs() run, see _Slots) and
    return its handle; the job's record exists on return.

    A process job's result is always saved as result.json; a thread job's only with `keep_result` (its result is
    in memory otherwise), so that it outlives the server (a page reads it back with its result type's from_json)."""
    json.dumps(params, default=str)  # params go into the record: fail here, not in the worker
    spec = _work_spec(work) if process else None
    _prune()
    job_id = _new_id(kind)
    folder = jobs_dir() / job_id
    folder.mkdir(parents=True)
    record = {"id": job_id, "kind": kind, "params": params, "state": "queued", "done": 0, "total": 0, "unit": unit,
              "message": "", "error": None, "pid": os.getpid(), "process": process, "created_at": time.time(),
              "started_at": None, "finished_at": None, "updated_at": time.time()}
    if process:
        write_json_atomic(folder / WORK, spec)
        write_json_atomic(folder / RECORD, record)
        env = {**os.environ, "BERTLENS_CACHE": str(settings.cache_dir())}
        with open(folder / LOG, "ab") as log:
            popen = subprocess.Popen([sys.executable, "-m", "core.jobs", job_id], cwd=settings.REPO_ROOT, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        # Until the child writes its own pid, the record names the launcher; the child's pid replaces it at once.
        write_json_atomic(folder / RECORD, {**record, "pid": popen.pid})
        # Reaped the moment it exits: otherwise only a page polling this job's status reaps it, and a job whose
        # tab was closed stays a <defunct> child of the server (issue 37: four were found after a walk).
        threading.Thread(target=popen.wait, name=f"reap-{job_id}", daemon=True).start()
        job = Job(job_id, kind, params, folder, True, popen=popen)
    else:
        reporter = _Reporter(folder, record)
        reporter.write()
        job = Job(job_id, kind, params, folder, False, reporter=reporter)

        def keep(result) -> None:
            if keep_result:
                _save_result(folder, result)
            job.result = result

        def run() -> None:
            if not _slots.wait_turn(job_id, reporter):
                reporter.write(state="cancelled", error="cancelled while queued", finished_at=time.time())
                return
            try:
                reporter.execute(work, keep=keep)
            finally:
                _slots.release()

        job.thread = threading.Thread(target=run, name=f"job-{job_id}", daemon=True)
        job.thread.start()
    with _live_lock:
        _live[job_id] = job
    return job


def reap() -> None:
    """Collect this process's finished child processes, so they do not linger as zombies."""
    for job in list(_live.values()):
        if job.popen is not None:
            job.popen.poll()


def get(job_id: str) -> Job | None:
    """The handle of a job this process started (None for jobs of other processes or past servers)."""
    return _live.get(job_id)


def read_record(job_id: str) -> JobRecord | None:
    data = read_json(jobs_dir() / job_id / RECORD)
    return _settled(JobRecord.from_json(data)) if data else None


def status(job_id: str) -> JobRecord | None:
    """The job's current record: live for this process's thread jobs, else from disk (killed when its process died)."""
    job = _live.get(job_id)
    return job.status() if job is not None else read_record(job_id)


def result_json(job_id: str) -> dict | None:
    """A finished job's result.json (process jobs; thread jobs submitted with keep_result), None before or without."""
    return read_json(jobs_dir() / job_id / RESULT)


def list_records(kind: str | None = None) -> list[JobRecord]:
    """Every job on disk, oldest first (optionally of one kind)."""
    root = jobs_dir()
    records = [status(folder.name) for folder in root.iterdir()] if root.is_dir() else []
    found = [r for r in records if r is not None and (kind is None or r.kind == kind)]
    return sorted(found, key=lambda r: (r.created_at, r.id))


def latest(kind: str, where: dict, accept: Callable[[JobRecord], bool] = lambda record: record.active or record.state == "done"
           ) -> JobRecord | None:
    """The newest job of `kind` whose params hold every item of `where` and that `accept`s (default: queued,
    running or done): how a page finds the job for its settings from any session, a new tab or a reload.

    Read from the durable records, newest first; a folder's name (the id starts with the time and the kind) is
    checked before its record is read, so a lookup reads only that kind's records."""
    root = jobs_dir()
    if not root.is_dir():
        return None
    marker = f"-{_id_part(kind)}-"
    for name in sorted((f.name for f in root.iterdir() if marker in f.name), reverse=True):
        record = status(name)
        if (record is not None and record.kind == kind and all(record.params.get(k) == v for k, v in where.items())
                and accept(record)):
            return record
    return None


def cancel(job_id: str) -> bool:
    """Ask a queued or running job to stop; False when it is not active."""
    record = status(job_id)
    if record is None or not record.active:
        return False
    folder = jobs_dir() / job_id
    (folder / CANCEL).touch()
    job = _live.get(job_id)
    if job is not None and job.reporter is not None:
        job.reporter.stop_event.set()
        _slots.wake()  # a queued job sees its cancel now, not at its next poll
    elif record.process and record.pid and record.pid != os.getpid() and pid_alive(record.pid):
        try:  # the child leads its own process group: its helpers get the signal too
            os.killpg(int(record.pid), signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    return True


def wait(job_id: str, timeout: float = 600.0, poll: float = 0.2) -> JobRecord:
    """Block until the job has ended (tests and scripts); raises TimeoutError."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        record = status(job_id)
        if record is not None and not record.active:
            job = _live.get(job_id)
            if job is not None and job.thread is not None:
                job.thread.join(timeout=max(0.0, deadline - time.time()))
            return record
        time.sleep(poll)
    raise TimeoutError(f"job {job_id} did not end within {timeout:.0f} s")


def wait_in_foreground(job: Job, timeout: float = 10 * 24 * 3600.0) -> Any:
    """A command line's wait: the job's result once done; Ctrl-C or SIGTERM cancels the job (and waits for it to
    stop) instead of abandoning it. Raises Cancelled, or RuntimeError with the job's error."""
    main = threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    try:
        try:
            record = wait(job.id, timeout=timeout)
        except KeyboardInterrupt:
            cancel(job.id)
            record = wait(job.id, timeout=timeout)
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    if record.state == "done":
        return job.result
    if record.state == "cancelled":
        raise Cancelled(record.error or "cancelled")
    raise RuntimeError(f"the {job.kind} job {record.state}: {record.error}")


def run_child(job_id: str) -> int:
    """The body of `python -m core.jobs JOB_ID`: run a process job's work and keep its record."""
    folder = jobs_dir() / job_id
    record = read_json(folder / RECORD)
    if record is None:
        print(f"no job {job_id} in {jobs_dir()}", file=sys.stderr)
        return 2
    reporter = _Reporter(folder, record)

    def on_signal(signum, frame) -> None:
        reporter.stop_event.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        work = _load_work(read_json(folder / WORK) or {})
    except Exception as err:
        reporter.write(state="failed", error=f"cannot load the job's work: {err}", finished_at=time.time())
        return 1

    reporter.execute(work, functools.partial(_save_result, folder))
    return {"done": 0, "cancelled": 130}.get(reporter.record["state"], 1)


if __name__ == "__main__":
    sys.exit(run_child(sys.argv[1]))
