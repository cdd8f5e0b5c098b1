"""The time-lapse of a fine-tuning run: what the model looked like at N evenly spaced steps of its training.

A recipe with `timelapse` N > 0 measures the model being trained at `frame_steps(total_steps, N)` (step 0, before
any update, and the final step included), inside the training job, on a fixed probe set, and writes every frame to
the run folder's `timelapse.json` as soon as it is measured (the whole file rewritten under a temporary name, then
renamed: a cancelled or crashed run keeps the frames it had, never half a frame). The measuring itself is
core/training/watch.py; this module is the file's format, its reader and its writer (numpy only, so a page that
lists runs reads a time-lapse without loading torch).

    tl = read_timelapse(runs_dir() / "my-run")   # None when the run has no time-lapse
    tl.steps                                     # (0, 12, 25, ...) the planned steps; tl.frames the measured ones
    tl.frames[-1].cka                            # [layers + 1] CKA per layer against the starting model
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.files import write_json_atomic

FILE = "timelapse.json"
DEFAULT_PROBE_SIZE = 100

# The keys of one frame in timelapse.json (the CLI contract of issue 35); "uuas" only when the probe set is a treebank.
FRAME_KEYS = ("step", "loss", "dev_accuracy", "rsa", "cka", "anisotropy", "attention_change")


@dataclass(frozen=True, eq=False)
class Frame:
    """The model at one step of training, measured against the starting model on the time-lapse's probe set.

    step            the training step (batches done; 0 = before any update)
    loss            mean cross-entropy on the frame's dev examples (the same ones as dev_accuracy)
    dev_accuracy    accuracy on the dev examples (Timelapse.dev_examples): the probe pairs themselves when the probe
                    is the task's own dev split (the default: read from the frame's one pass, core/training/watch.py),
                    else a fixed seeded sample of the run's evaluation split
    rsa, cka        float64 [layers + 1] (0 = embeddings): RSA / linear CKA of each layer against the same layer of
                    the starting model, as `python -m core compare --a BASE --b RUN --corpus PROBE --seed S`
    anisotropy      float64 [layers + 1]: mean cosine of seeded random pairs of words from different sentences of
                    the same word sample (Ethayarajh's baseline; core.analyses.anisotropy.measures.random_pair_cosine)
    attention_change float64 [layers, heads]: cosine between each head's flattened attention map now and in the
                    starting model, averaged over the probe inputs (`python -m core attention-change`; 1 = unchanged)
    uuas            float64 [layers + 1] or None: the structural probe's UUAS per layer, when the probe set is a
                    treebank (ud / .conllu)
    measure_seconds seconds spent measuring this frame
    """

    step: int
    loss: float
    dev_accuracy: float
    rsa: np.ndarray
    cka: np.ndarray
    anisotropy: np.ndarray
    attention_change: np.ndarray
    uuas: np.ndarray | None = None
    measure_seconds: float = 0.0

    def to_json(self) -> dict:
        values = {
            "step": int(self.step),
            "loss": float(self.loss),
            "dev_accuracy": float(self.dev_accuracy),
            "rsa": _floats(self.rsa),
            "cka": _floats(self.cka),
            "anisotropy": _floats(self.anisotropy),
            "attention_change": [_floats(row) for row in self.attention_change],
            "measure_seconds": float(self.measure_seconds),
        }
        if self.uuas is not None:
            values["uuas"] = _floats(self.uuas)
        return values

    @classmethod
    def from_json(cls, values: dict, where: str = "frame") -> "Frame":
        if not isinstance(values, dict):
            raise ValueError(f"{where}: a frame must be a JSON object, got {type(values).__name__}")
        missing = [key for key in FRAME_KEYS if key not in values]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        try:
            frame = cls(
                step=int(values["step"]),
                loss=float(values["loss"]),
                dev_accuracy=float(values["dev_accuracy"]),
                rsa=_array(values["rsa"], 1),
                cka=_array(values["cka"], 1),
                anisotropy=_array(values["anisotropy"], 1),
                attention_change=_array(values["attention_change"], 2),
                uuas=None if values.get("uuas") is None else _array(values["uuas"], 1),
                measure_seconds=float(values.get("measure_seconds") or 0.0),
            )
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None
        if not len(frame.rsa) == len(frame.cka) == len(frame.anisotropy):
            raise ValueError(f"{where}: rsa, cka and anisotropy must have one value per layer each "
                             f"(got {len(frame.rsa)}, {len(frame.cka)}, {len(frame.anisotropy)})")
        return frame


@dataclass(frozen=True, eq=False)
class Timelapse:
    """A run's time-lapse: the planned steps and the frames measured so far (all of them once the run is done).

    steps           the N planned steps, evenly spaced, 0 first and the run's final step last
    probe           the corpus spec the frames were measured on (core.data.corpus grammar)
    seed            seed of the probe's sample and of the word sample (as `compare --seed`)
    frames          the frames measured, in step order (fewer than steps when the run was cancelled)
    dev_examples    how many evaluation examples each frame's dev_accuracy and loss are measured on
    measure_seconds seconds spent measuring, all frames together; train_seconds: seconds spent training so far
    checkpoints     steps whose whole model is kept (`--keep-checkpoints`; saved when their frame is measured),
                    loadable as NAME@STEP
    """

    steps: tuple[int, ...]
    probe: str
    seed: int
    frames: tuple[Frame, ...] = ()
    dev_examples: int = 0
    measure_seconds: float = 0.0
    train_seconds: float = 0.0
    checkpoints: tuple[int, ...] = ()

    @property
    def measure_share(self) -> float:
        """Measuring time as a share of training time (0 before any training)."""
        return self.measure_seconds / self.train_seconds if self.train_seconds > 0 else 0.0

    @property
    def complete(self) -> bool:
        return tuple(f.step for f in self.frames) == self.steps

    def to_json(self) -> dict:
        return {
            "steps": [int(s) for s in self.steps],
            "probe": self.probe,
            "seed": int(self.seed),
            "frames": [frame.to_json() for frame in self.frames],
            "dev_examples": int(self.dev_examples),
            "measure_seconds": float(self.measure_seconds),
            "train_seconds": float(self.train_seconds),
            "measure_share": float(self.measure_share),
            "checkpoints": [int(s) for s in self.checkpoints],
        }

    @classmethod
    def from_json(cls, values, where: str = FILE) -> "Timelapse":
        if not isinstance(values, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(values).__name__}")
        missing = [key for key in ("steps", "probe", "seed", "frames") if key not in values]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        if not isinstance(values["frames"], list) or not isinstance(values["steps"], list):
            raise ValueError(f"{where}: steps and frames must be lists")
        try:
            steps = tuple(int(s) for s in values["steps"])
            checkpoints = tuple(int(s) for s in values.get("checkpoints") or ())
            numbers = (int(values["seed"]), int(values.get("dev_examples") or 0),
                       float(values.get("measure_seconds") or 0.0), float(values.get("train_seconds") or 0.0))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None
        frames = tuple(Frame.from_json(f, f"{where}, frame {i}") for i, f in enumerate(values["frames"]))
        unplanned = [f.step for f in frames if f.step not in steps]
        if unplanned:
            raise ValueError(f"{where}: frames at steps {unplanned} that are not among the planned steps {list(steps)}")
        seed, dev_examples, measure_seconds, train_seconds = numbers
        return cls(steps, str(values["probe"]), seed, frames, dev_examples, measure_seconds, train_seconds, checkpoints)


def read_timelapse(run_folder: str | Path) -> Timelapse | None:
    """The time-lapse of a run folder (finished, running, or cancelled: the frames written so far); None when the
    run was trained without one. ValueError naming the file for a file that is not a time-lapse."""
    path = Path(run_folder) / FILE
    if not path.is_file():
        return None
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable time-lapse file ({err})") from None
    return Timelapse.from_json(values, str(path))


def default_probe(task: str) -> str | None:
    """The probe set of a task's time-lapse when the recipe names none: 100 seeded pairs of its dev split, as a
    corpus spec (core.data.corpus) that `attention-change --corpus` reads the same way; None for a task without one.
    Their gold labels are also the frames' dev scores, so a frame is one forward pass over these 100 pairs (issue 47:
    with 10 frames over 2,000 pairs on 2 cores measuring was 16 % of training, bench/RESULTS.md)."""
    return {"snli": f"snli:dev:{DEFAULT_PROBE_SIZE}", "mrpc": f"mrpc:dev:{DEFAULT_PROBE_SIZE}"}.get(task)


def frame_steps(total_steps: int, frames: int) -> tuple[int, ...]:
    """The `frames` steps to measure at, evenly spaced from 0 (before training) to `total_steps` (the final step),
    both included. ValueError for fewer than 2 frames or more frames than the run has steps + 1."""
    if frames < 2:
        raise ValueError(f"a time-lapse needs at least 2 frames (step 0 and the final step), got {frames}; "
                         "0 turns it off")
    if frames > total_steps + 1:
        raise ValueError(f"a time-lapse of {frames} frames needs at least {frames - 1} training steps; this run has "
                         f"{total_steps} (ask for at most {total_steps + 1} frames, or train on more examples)")
    return tuple(int(s) for s in np.round(np.linspace(0, total_steps, frames)).astype(int))


def kept_checkpoints(steps: tuple[int, ...], keep: int) -> tuple[int, ...]:
    """`keep` of the frames' steps, evenly chosen, the final step always among them (0 keeps none)."""
    if keep < 0 or keep > len(steps):
        raise ValueError(f"cannot keep {keep} checkpoints of a time-lapse of {len(steps)} frames: give 0 to "
                         f"{len(steps)}")
    if keep == 0:
        return ()
    picks = np.round(np.linspace(len(steps) - 1, 0, keep)).astype(int) if keep > 1 else np.array([len(steps) - 1])
    return tuple(sorted({steps[i] for i in picks}))


class TimelapseWriter:
    """Appends frames to a run folder's timelapse.json, the whole file rewritten atomically after each one."""

    def __init__(self, run_folder: Path, timelapse: Timelapse):
        self.path = Path(run_folder) / FILE
        self.timelapse = timelapse
        write_json_atomic(self.path, timelapse.to_json())

    def add(self, frame: Frame, train_seconds: float) -> Timelapse:
        t = self.timelapse
        self.timelapse = Timelapse(t.steps, t.probe, t.seed, (*t.frames, frame), t.dev_examples,
                                   t.measure_seconds + frame.measure_seconds, train_seconds, t.checkpoints)
        write_json_atomic(self.path, self.timelapse.to_json())
        return self.timelapse


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _array(values, ndim: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"expected a {'list' if ndim == 1 else 'list of lists'} of numbers, got {array.ndim} dimensions")
    return array
