"""The biased-training-data experiment of the CS4650 slides, done with a control: spec, data, runs, scoring,
and its life as background work on the one job runner (core.jobs).

The slides removed every SNLI training pair containing a "female" word and saw test accuracy fall from
90.45 % to 59.47 %. Removing data also makes the training set smaller, so here three runs share one recipe:

    full     every training example
    biased   the examples matching the word list removed
    control  exactly as many examples removed, drawn at random from all of them (seeded)

All three are scored on the same test split, overall and in two slices that partition it (test examples
with a listed word in premise or hypothesis, and without), with bootstrap confidence intervals, per-class F1
and confusion matrices; and on counterfactual copies of the test examples whose gendered words are swapped
(woman <-> man, she <-> he, ...): the flip rate is the share of swapped examples whose prediction changes.

Runs go through the training engine (core.training, public API only) as ordinary runs named
EXPERIMENT-full / -biased / -control. The engine trains on a user data file, so each run's training set is
written as a JSON Lines file whose eval rows (split "test") are the experiment's test set: the engine's own
accuracy is then on the same examples as ours. Everything else lives in settings.cache_dir()/experiments/EXPERIMENT/:

    spec.json               the ExperimentSpec (written by prepare)
    train_<arm>.jsonl       each run's data file: train rows + the test rows (written by prepare)
    job.json                {"job": ID}: the core.jobs job that drives it (written by whoever started that job)
    predictions_<arm>.json  predicted labels on the test set and on the swapped copies (written by the job)
    results.json            the ExperimentResult (written by the job)

Who writes what: the job alone records how it is doing (its core.jobs record); `experiment_status` only reads,
deriving failed / cancelled / killed from the runs' states and that record.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.bias_settings import TASKS, BiasSettings  # declared once, with the settings
from core.data import datasets
from core import jobs, settings, training
from core.bias.statistics import ARMS, ExperimentResult, score_experiment
from core.bias.swaps import DEFAULT_SWAPS, Counterfactuals, counterfactuals, parse_swaps
from core.bias.words import DEFAULT_WORDS, TrainingSets, check_filter, match_mask, parse_words, training_sets
from core.data.datasets import Example
from core.files import read_json, write_json_atomic, write_text_atomic
from core.model.loading import download
from core.progress import Cancelled, ProgressCallback, StopCheck, check_stop
from core.training.classifier import predict_logits, text_features
from core.training.recipe import PAPER_SETTINGS, paper_recipe
from core.validation import whole_match

# The one reach past core.training's public API (asked for as a public name): the scorer waits its turn in the
# training queue, so scoring never competes with a training run for the processor.
from core.training.queue import queue_turn

EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # matched whole (validation.whole_match)
EXPERIMENT_NAME_RULE = ("it must start with a letter or digit and use only letters, digits, '_', '-' and '.' "
                        "(at most 64 characters)")
JOB_KIND = "bias"
SPEC, JOB, RESULTS = "spec.json", "job.json", "results.json"
ACTIVE_STATES = ("training", "evaluating")
ENDED_STATES = ("done", "failed", "cancelled", "killed")
# A run name the engine would refuse: a queued, running or finished run holds it (failed / cancelled ones do not).
RUN_NAME_TAKEN = ("queued", "running", "done")


# The bias page's quick demo, as ExperimentSpec values: three MiniLM-L6 runs on 1,000 / ~714 / ~714 pairs, each of
# which must beat the majority baseline by 10 points (bench/quick_presets.py; figures in bench/RESULTS.md). One
# epoch left the ~714-pair arms at +4 to +10 points (the control once predicted one class); two epochs with the
# lowest 3 layers and the embeddings frozen (about half the time per step) gave +14 to +26.
QUICK_DEMO = {"train_limit": 1000, "test_limit": 500, "epochs": 2, "max_length": 64, "lr": 1e-4, "batch_size": 16,
              "freeze_layers": 3, "freeze_embeddings": True, "cpu_threads": 1}


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment: the data, the word and swap lists, and the recipe the three runs share.

    train_limit / test_limit: seeded subsets of the task's train / test split taken before filtering
    (None = all). seed: the subsets, the control's removals, training and the bootstrap.
    protocol: "bertlens" (whole words, any case, premise or hypothesis; BERT Lens's recipe) or "slides" (the
    slides' filter, core.bias.words, and their recipe, core.training.recipe.PAPER_SETTINGS: epochs, lr and
    batch size must then be the slides' 2, 5e-5 and 32).
    """

    name: str
    model: str
    # The defaults are the declared settings' (core.bias_settings.BiasSettings: the CLI, core.lens and the page).
    task: str = BiasSettings.task
    words: tuple[str, ...] = DEFAULT_WORDS
    swaps: tuple[tuple[str, str], ...] = DEFAULT_SWAPS
    train_limit: int | None = None
    test_limit: int | None = None
    epochs: int = BiasSettings.epochs
    seed: int = BiasSettings.seed
    lr: float = BiasSettings.lr
    batch_size: int = BiasSettings.batch_size
    max_length: int = BiasSettings.max_length
    head: str = BiasSettings.head
    freeze_layers: int = BiasSettings.freeze_lowest  # the lowest N encoder layers kept fixed in all three runs
    freeze_embeddings: bool = BiasSettings.freeze_embeddings
    device: str | None = None
    cpu_threads: int | None = None  # torch CPU threads for training and scoring (None: torch's default, all cores)
    bootstrap: int = BiasSettings.bootstrap
    protocol: str = BiasSettings.protocol
    created_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if not whole_match(EXPERIMENT_NAME, self.name):
            raise ValueError(f"experiment name {self.name!r}: {EXPERIMENT_NAME_RULE}")
        if self.task not in TASKS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(TASKS)}: the experiment needs a test split with labels")
        check_filter(self.protocol)
        object.__setattr__(self, "words", parse_words(self.words, keep_case=self.protocol == "slides"))
        object.__setattr__(self, "swaps", parse_swaps(self.swaps))
        for name in ("train_limit", "test_limit"):
            value = getattr(self, name)
            if value is not None and value < 10:
                raise ValueError(f"{name} must be at least 10 (or empty for all examples)")
        self.recipe("full")  # the engine's own checks (epochs, lr, max_length ...), before anything is written

    def run_name(self, arm: str) -> str:
        return f"{self.name}-{arm}"

    def recipe(self, arm: str) -> training.Recipe:
        values = dict(model=self.model, task=str(data_file(self.name, arm)), run_name=self.run_name(arm),
                      epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, max_length=self.max_length,
                      seed=self.seed, head=self.head, frozen_layers=tuple(range(self.freeze_layers)),
                      freeze_embeddings=self.freeze_embeddings, device=self.device, cpu_threads=self.cpu_threads,
                      data_source="local")
        if self.protocol == "slides":
            fixed = PAPER_SETTINGS["slides"]
            wrong = [f"{k}={fixed[k]!r} (got {values[k]!r})" for k in ("epochs", "lr", "batch_size") if values[k] != fixed[k]]
            if wrong:
                raise ValueError(f"The slides' protocol fixes {', '.join(wrong)}; use protocol 'bertlens' to change them.")
        return paper_recipe(self.protocol, **values)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["swaps"] = [list(p) for p in self.swaps]
        d["words"] = list(self.words)
        return {"kind": "bias", **d}

    @classmethod
    def from_json(cls, d: dict) -> "ExperimentSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["words"] = tuple(values.get("words", DEFAULT_WORDS))
        values["swaps"] = tuple(tuple(p) for p in values.get("swaps", DEFAULT_SWAPS))
        return cls(**values)




def new_experiment_name() -> str:
    return time.strftime("bias-%Y%m%d-%H%M%S")


def experiments_dir() -> Path:
    return settings.cache_dir() / "experiments"


def experiment_dir(name: str) -> Path:
    return experiments_dir() / name


def data_file(name: str, arm: str) -> Path:
    return experiment_dir(name) / f"train_{arm}.jsonl"


def load_split(task: str, split: str, limit: int | None, seed: int) -> list[Example]:
    """The task's local split (the hub is not needed: the test split must be the same for every run)."""
    reader = {"snli": datasets.snli, "mrpc": datasets.mrpc}[task]
    return reader(split, limit, seed)


@dataclass(frozen=True)
class ExperimentData:
    """The experiment's inputs. with_words [n_test] bool: the test slice; labels: class order of every score."""

    sets: TrainingSets
    test: tuple[Example, ...]
    with_words: np.ndarray
    counterfactuals: Counterfactuals
    labels: tuple[str, ...]

    @property
    def agreement(self) -> tuple[str | None, ...]:
        """[n_test] how many annotators chose the gold label ("5/5", ...), None where the data has no judgments."""
        return tuple(e.agreement for e in self.test)


def experiment_data(spec: ExperimentSpec) -> ExperimentData:
    train = load_split(spec.task, "train", spec.train_limit, spec.seed)
    test = tuple(load_split(spec.task, "test", spec.test_limit, spec.seed))
    return ExperimentData(training_sets(train, spec.words, spec.seed, spec.protocol), test,
                          match_mask(test, spec.words, spec.protocol),
                          counterfactuals(test, spec.swaps), training.TASK_LABELS[spec.task])



def prepare(spec: ExperimentSpec) -> ExperimentData:
    """Write spec.json and the three data files (train rows, then the test rows as split "test").

    Checks first that the model can be had (raises ModelUnavailable) and that neither the experiment nor its
    runs exist, so a bad name fails before anything is written."""
    download(spec.model)
    folder = experiment_dir(spec.name)
    if (folder / SPEC).exists():
        raise ValueError(f"An experiment named '{spec.name}' already exists in {experiments_dir()}; pick another name.")
    taken = [spec.run_name(a) for a in ARMS if _run_name_taken(spec.run_name(a))]
    if taken:
        raise ValueError(f"Runs named {', '.join(taken)} already exist; pick another experiment name.")
    data = experiment_data(spec)
    folder.mkdir(parents=True, exist_ok=True)
    test_rows = [{"text": e.text, "text_b": e.text_b, "label": e.label, "split": "test"} for e in data.test]
    for arm in ARMS:
        train_rows = [{"text": e.text, "text_b": e.text_b, "label": e.label, "split": "train"} for e in data.sets.arm(arm)]
        write_text_atomic(data_file(spec.name, arm), "".join(json.dumps(row) + "\n" for row in train_rows + test_rows))
    write_json_atomic(folder / SPEC, spec.to_json())
    return data


def _run_name_taken(name: str) -> bool:
    run = training.get_run(name)
    return run is not None and run.state in RUN_NAME_TAKEN


def load_spec(name: str) -> ExperimentSpec:
    d = read_json(experiment_dir(name) / SPEC)
    if d is None:
        raise ValueError(f"No experiment named '{name}' in {experiments_dir()}.")
    return ExperimentSpec.from_json(d)


def load_result(name: str) -> ExperimentResult | None:
    d = read_json(experiment_dir(name) / RESULTS)
    return ExperimentResult.from_json(d) if d else None


def list_experiments() -> list[str]:
    """Experiment names, newest first."""
    root = experiments_dir()
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        spec = read_json(folder / SPEC)
        if spec and spec.get("kind") == "bias":
            found.append((float(spec.get("created_at") or 0), folder.name))
    return [name for _, name in sorted(found, reverse=True)]


def predict_labels(clf, examples: Sequence[Example], labels: Sequence[str], *, batch_size: int = 64,
                   max_length: int | None = None, progress: ProgressCallback = None,
                   should_stop: StopCheck = None) -> np.ndarray:
    """Predicted class [n] of a LoadedClassifier, as an index into `labels` whatever class order the run saved
    (a data-file run orders its labels alphabetically)."""
    if not examples:
        return np.zeros(0, dtype=np.int64)
    max_length = max_length or clf.head.get("max_length") or clf.encoder.max_length
    to_ours = np.array([list(labels).index(label) for label in clf.labels])
    features = text_features(clf.tokenizer, [(e.text, e.text_b) for e in examples], max_length)
    logits = predict_logits(clf, features, batch_size=batch_size, progress=progress, should_stop=should_stop)
    return to_ours[logits.argmax(axis=1)]


def evaluate(spec: ExperimentSpec, data: ExperimentData | None = None, progress: ProgressCallback = None,
             should_stop: StopCheck = None) -> ExperimentResult:
    """Predict the test set and its swapped copies with the three finished runs; write results.json.

    Predictions already saved for a run (predictions_<arm>.json) are reused. progress counts examples."""
    data = data or experiment_data(spec)
    folder = experiment_dir(spec.name)
    cf = data.counterfactuals
    total = len(ARMS) * (len(data.test) + len(cf.examples))
    predictions, swapped, engine = {}, {}, {}
    for position, arm in enumerate(ARMS):
        run = training.get_run(spec.run_name(arm))
        if run is None or run.state != "done":
            raise ValueError(f"run {spec.run_name(arm)} has not finished ({run.state if run else 'missing'}); "
                             "it must finish before the experiment can be scored")
        engine[arm] = {"run": run.name, "accuracy": (run.metrics or {}).get("accuracy"),
                       "train_seconds": (run.metrics or {}).get("train_seconds")}
        saved = read_json(folder / f"predictions_{arm}.json")
        if saved and saved.get("n_test") == len(data.test) and saved.get("n_swapped") == len(cf.examples):
            predictions[arm], swapped[arm] = np.array(saved["test"]), np.array(saved["swapped"])
            continue
        base = position * (len(data.test) + len(cf.examples))

        def step(offset):
            return None if progress is None else (lambda done, _total: progress(base + offset + done, total))

        clf = training.load_classifier(run.name, device=spec.device, attention="sdpa")
        options = {"batch_size": spec.batch_size * 2, "max_length": spec.max_length, "should_stop": should_stop}
        with training.torch_threads(spec.cpu_threads):
            predictions[arm] = predict_labels(clf, data.test, data.labels, progress=step(0), **options)
            swapped[arm] = predict_labels(clf, cf.examples, data.labels, progress=step(len(data.test)), **options)
        del clf
        write_json_atomic(folder / f"predictions_{arm}.json", {
            "labels": list(data.labels), "n_test": len(data.test), "n_swapped": len(cf.examples),
            "test": predictions[arm].tolist(), "swapped": swapped[arm].tolist()})
    true = np.array([data.labels.index(e.label) for e in data.test])
    result = score_experiment(spec.name, data.labels, true, data.with_words, predictions, swapped, cf.indices,
                              {a: len(data.sets.arm(a)) for a in ARMS}, data.sets.removed, spec.bootstrap, spec.seed, engine,
                              spec.protocol, data.agreement)
    write_json_atomic(folder / RESULTS, result.to_json())
    return result


def train_and_score(spec: ExperimentSpec, data: ExperimentData | None = None,
                    progress: Callable[[str, int, int], None] | None = None,
                    should_stop: StopCheck = None) -> ExperimentResult:
    """The three runs one after another in this process, then the scoring (spec already prepared).

    progress(stage, done, total): stage is an arm name while it trains, "evaluating" while scoring."""
    data = data or experiment_data(spec)
    for arm in ARMS:
        report = None if progress is None else (lambda d, t, arm=arm: progress(arm, d, t))
        training.finetune(spec.recipe(arm), progress=report, should_stop=should_stop)
    report = None if progress is None else (lambda d, t: progress("evaluating", d, t))
    return evaluate(spec, data, report, should_stop)


def run_experiment(spec: ExperimentSpec, progress: Callable[[str, int, int], None] | None = None,
                   should_stop: StopCheck = None) -> ExperimentResult:
    """prepare + train_and_score in this process, with no job around it (scripts, benchmarks)."""
    return train_and_score(spec, prepare(spec), progress, should_stop)


# ---- background work on the job runner ------------------------------------------------------------


def _remember_job(name: str, started: str) -> None:
    write_json_atomic(experiment_dir(name) / JOB, {"job": started})


def job_id(name: str) -> str | None:
    """The id of the core.jobs job driving the experiment (None before one was started)."""
    return (read_json(experiment_dir(name) / JOB) or {}).get("job")


def start_job(spec: ExperimentSpec, progress: Callable[[str, int, int], None] | None = None) -> jobs.Job:
    """The command line's experiment: prepared here, then trained and scored by a job in a thread of this
    process, so that its record says "killed" if this process dies and a page can cancel it. Returns at once."""
    data = prepare(spec)

    def work(report, should_stop) -> ExperimentResult:
        def both(stage: str, done: int, total: int) -> None:
            report(done, total, stage)
            if progress is not None:
                progress(stage, done, total)

        return train_and_score(spec, data, both, should_stop)

    job = jobs.submit(JOB_KIND, {"experiment": spec.name, "mode": "in-process"}, work, unit="steps")
    _remember_job(spec.name, job.id)
    return job


def attach_job(name: str) -> jobs.Job:
    """`attach` as a job in a thread of this process (the command line's --attach NAME): the experiment's
    job.json then names it, so its status follows this job rather than an earlier scorer that died."""
    load_spec(name)  # a clear error for an unknown name, before any job exists
    job = jobs.submit(JOB_KIND, {"experiment": name, "mode": "attach"}, functools.partial(attach, name),
                      unit="predictions")
    _remember_job(name, job.id)
    return job


def launch(spec: ExperimentSpec) -> jobs.JobRecord:
    """The page's experiment: prepare the data, queue the three runs as training jobs, and start the scorer
    (`attach`) as a process job that waits for them and writes results.json. Returns at once.

    When a run cannot be queued, the queued ones are cancelled and the experiment folder removed: nothing
    was started, so nothing is left that would look like a stalled experiment."""
    prepare(spec)
    try:
        for arm in ARMS:
            training.submit(spec.recipe(arm))
    except BaseException:
        for arm in ARMS:
            training.cancel(spec.run_name(arm))
        shutil.rmtree(experiment_dir(spec.name), ignore_errors=True)
        raise
    job = jobs.submit(JOB_KIND, {"experiment": spec.name}, functools.partial(attach, spec.name), unit="predictions",
                      process=True)
    _remember_job(spec.name, job.id)
    return job.status()


def attach(name: str, progress=None, should_stop: StopCheck = None, poll: float = 1.0) -> ExperimentResult:
    """The scorer: wait for the experiment's three runs, then (in the training queue's turn, so scoring never
    competes with a training run for the processor) score them. Raises Cancelled / RuntimeError when a run
    was cancelled / failed. progress(done, total, message=None), as core.jobs gives it."""
    spec = load_spec(name)

    def report(done: int, total: int, message: str) -> None:
        if progress is not None:
            progress(done, total, message)

    while True:
        check_stop(should_stop)
        runs = {arm: training.get_run(spec.run_name(arm)) for arm in ARMS}
        ended = {arm: r for arm, r in runs.items() if r is None or r.state in ("failed", "cancelled", "killed")}
        if ended:
            arm, r = next(iter(ended.items()))
            if r is not None and r.state == "cancelled":
                raise Cancelled(f"run {spec.run_name(arm)} was cancelled")
            why = r.error if r is not None else "its run folder is gone"
            raise RuntimeError(f"run {spec.run_name(arm)} {r.state if r is not None else 'failed'}: {why}")
        finished = sum(r.state == "done" for r in runs.values())
        if finished == len(ARMS):
            break
        report(0, 0, f"waiting for the runs ({finished} of {len(ARMS)} done)")
        time.sleep(poll)
    report(0, 0, "waiting for the training queue")
    with queue_turn(f"{name}-scoring", should_stop):
        return evaluate(spec, None, lambda done, total: report(done, total, "scoring"), should_stop)


def cancel_experiment(name: str) -> None:
    """Stop the experiment's queued or running runs, then its job (the job sees the runs end either way)."""
    try:
        spec = load_spec(name)
    except ValueError:
        return
    for arm in ARMS:
        training.cancel(spec.run_name(arm))
    found = job_id(name)
    if found:
        jobs.cancel(found)


@dataclass(frozen=True)
class ExperimentStatus:
    """Where an experiment stands, derived afresh on every read (nothing is written).

    state: training | evaluating | done | failed | cancelled | killed (its job's process died unasked).
    runs[arm]: the engine's RunInfo (None before it exists). job: the core.jobs record of the job driving the
    experiment (None before it exists). error: why it failed, was cancelled or killed. result: once done."""

    spec: ExperimentSpec
    state: str
    runs: dict
    job: jobs.JobRecord | None
    error: str | None
    result: ExperimentResult | None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


def derive_state(runs: dict, job: jobs.JobRecord | None, has_result: bool, cancel_asked: bool = False,
                 legacy: dict | None = None) -> tuple[str, str | None]:
    """(state, error) from what the runs and the job say. A job that ended says best why; a job killed after
    a cancel was asked counts as cancelled (the signal can land before the job could record it)."""
    if has_result:
        return "done", None
    if cancel_asked and (job is None or job.state in ("failed", "cancelled", "killed")
                         or any(r is not None and r.state in ("failed", "cancelled", "killed") for r in runs.values())):
        # A run stopped while it started can end as failed (its worker died before it could say "cancelled").
        return "cancelled", "cancelled by the user"
    if job is not None and job.state in ("failed", "cancelled"):
        return job.state, job.error
    if job is not None and job.state == "killed":
        return ("cancelled", "cancelled by the user") if cancel_asked else ("killed", job.error)
    for run in runs.values():
        if run is not None and run.state in ("failed", "cancelled", "killed"):
            return run.state, f"run {run.name} {run.state}: {run.error}"
    if job is not None and job.state == "done":
        return "failed", "the experiment's job finished but its results.json is missing"
    if job is None and (legacy or {}).get("state") in ("failed", "cancelled"):
        return legacy["state"], legacy.get("error")  # an experiment from before the job runner
    if runs and all(r is not None and r.state == "done" for r in runs.values()):
        return "evaluating", None
    return "training", None


def experiment_status(name: str) -> ExperimentStatus:
    """Read-only: the spec, the runs (core.training.get_run), the job's record (core.jobs.status), results.json."""
    spec = load_spec(name)
    runs = {arm: training.get_run(spec.run_name(arm)) for arm in ARMS}
    result = load_result(name)
    found = job_id(name)
    job = jobs.status(found) if found else None
    cancel_asked = bool(found) and (jobs.jobs_dir() / found / jobs.CANCEL).exists()
    legacy = read_json(experiment_dir(name) / "state.json") if job is None else None
    state, error = derive_state(runs, job, result is not None, cancel_asked, legacy)
    return ExperimentStatus(spec, state, runs, job, error, result)


def flipped_examples(name: str, arm: str, data: ExperimentData, limit: int = 20) -> list[dict]:
    """Swapped test examples whose prediction changed under `arm`: original and swapped text, both predictions."""
    saved = read_json(experiment_dir(name) / f"predictions_{arm}.json")
    if not saved:
        return []
    cf = data.counterfactuals
    rows = []
    for position, index in enumerate(cf.indices.tolist()):
        before, after = saved["test"][index], saved["swapped"][position]
        if before != after:
            e, s = data.test[index], cf.examples[position]
            rows.append({"premise": e.text, "hypothesis": e.text_b, "swapped premise": s.text,
                         "swapped hypothesis": s.text_b, "gold": e.label, "predicted": data.labels[before],
                         "predicted after swap": data.labels[after]})
            if len(rows) >= limit:
                break
    return rows


# The experiment can take hours; the command line and the notebook wait for its job as long as it runs.
NO_TIMEOUT = 10 * 365 * 24 * 3600.0


def spec_of(settings: BiasSettings, *, name: str, model: str, device: str | None = None,
            threads: int | None = None) -> ExperimentSpec:
    """The experiment of the declared settings (core.bias_settings; 0 limits read as all)."""
    train_limit, test_limit = settings.limits
    return ExperimentSpec(
        name=name, model=model, task=settings.task, words=settings.words, train_limit=train_limit,
        test_limit=test_limit, epochs=settings.epochs, seed=settings.seed, lr=settings.lr,
        batch_size=settings.batch_size, max_length=settings.max_length, head=settings.head,
        freeze_layers=settings.freeze_lowest, freeze_embeddings=settings.freeze_embeddings, device=device,
        cpu_threads=threads, bootstrap=settings.bootstrap, protocol=settings.protocol,
    )


def run_settings(model: str, name: str | None, settings: BiasSettings,
                 progress: Callable[[str, int, int], None] | None = None, should_stop=None, *,
                 device: str | None = None, threads: int | None = None) -> ExperimentResult:
    """The bias analysis under the contract: train the three runs of `model` in a job of this process and score
    them (name None: bias-DATE-TIME); progress(stage, done, total). Blocks until the job ends."""
    spec = spec_of(settings, name=name or new_experiment_name(), model=model, device=device, threads=threads)
    return jobs.wait_in_foreground(start_job(spec, progress), timeout=NO_TIMEOUT)
