"""Erase a concept from one layer and see what changes (issue 49): LEACE (Belrose et al. 2023, EleutherAI's
`concept-erasure` package) fitted on one layer's word vectors for a treebank task, checked with fresh linear probes,
saved, and run through the rest of the model.

The eraser is the package's: `LeaceFitter` on the words' vectors and their one-hot labels gives `proj_left` [D, k],
`proj_right` [k, D] and `bias` [D] (the vectors' mean), and a vector x is erased as

    x' = x − ((x − bias) @ proj_rightᵀ) @ proj_leftᵀ

(`LeaceEraser.__call__`; `erase` below is that formula, so a saved file applied by hand gives the same numbers).
LEACE's guarantee: no linear classifier reads the labels from x' better than a constant guess on the data it was fitted
on; `probe_after` checks that with a fresh multinomial logistic regression trained and scored on erased vectors of
held-out sentences, next to `probe_before` on the same vectors unerased and the majority label.

`effect` applies the eraser to every token's hidden state at the layer's output (each word piece's vector, through
core.model.adapter's hooks) and runs the rest of the model: a masked-word model's held-out top-1 (masked whole
words, every piece right), or a fine-tuned classification run's accuracy on its own evaluation set, before, after, and
after erasing a random subspace of the same rank (the amnesic probing control, Elazar et al. 2021: a random
orthonormal basis of that rank, seeded, projected out by the same formula around the same mean).
"""

from __future__ import annotations

import json
import math
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from concept_erasure import LeaceFitter
from safetensors.numpy import load_file
from safetensors.torch import save_file

from core import numbering
from core.analyses.layer_knowledge.tasks import LabelledWords, TaskError, check_task, labelled_words
from core.contract import Analysis, setting
from core.data import corpus as corpora
from core.files import atomic_path, write_text_atomic
from core.progress import ProgressCallback, StopCheck, check_stop
from core.model import artefacts
from core.model.adapter import ModelAdapter
from core.validation import whole_match

# sklearn imported in functions: only a run that probes loads it.

VIEW = "layer_knowledge"
WEIGHTS, CONFIG = "eraser.safetensors", "config.json"
MAX_LAYER_INDEX = 127
MAX_PROBE_ITER = 300
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")  # one folder name, matched whole (as a run's)
NAME_RULE = "it must start with a letter or digit and use only letters, digits, '_', '-' and '.' (no '/')"


class EraseError(ValueError):
    """An erasure that cannot run or a saved eraser that cannot be read; the message says why and what to do."""


@dataclass(frozen=True)
class EraseSettings:
    """The `erase` analysis's settings, declared once (core.contract): CLI options, lens.erase, the erase panel."""

    layer: int | None = setting(
        None, f"the layer whose output is erased, {numbering.LAYER_ARGUMENT_HELP}; core.lens takes its array index, "
        "one less; by default the middle layer", type="int", low=0, high=MAX_LAYER_INDEX, shown=1, url="erase_layer")
    seed: int = setting(0, "seed of the random-subspace control and of the masked words", low=0, high=2**31 - 1,
                        url="erase_seed")
    effect_limit: int = setting(300, "held-out sentences (a run: evaluation examples) the effect is measured on",
                                low=1, high=100_000, url="erase_limit", cli="effect-sentences")


ANALYSIS = Analysis(
    name="erase", view=VIEW, command="erase", lens="erase", settings=EraseSettings,
    run="core.training.erasure_effect:run_erase_measured", charts="core.charts.erasure:erase_charts",
    title="Erase a concept", tab="Erase a concept", order=20,
    summary="Fit LEACE on one layer's word vectors for a treebank task, check that a fresh linear probe then reads "
            "no more than the majority label, save the eraser, and measure what the rest of the model loses when "
            "the concept is erased (masked words or a run's accuracy, with a random subspace of the same rank).",
)


# ---- the eraser ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Eraser:
    """x' = x − ((x − bias) @ proj_rightᵀ) @ proj_leftᵀ, float32 arrays: proj_left [D, k], proj_right [k, D],
    bias [D]. `rank`: the rank of the subspace erased (of proj_left @ proj_right)."""

    proj_left: np.ndarray
    proj_right: np.ndarray
    bias: np.ndarray

    @property
    def rank(self) -> int:
        product = self.proj_left.astype(np.float64) @ self.proj_right.astype(np.float64)
        return int(np.linalg.matrix_rank(product, tol=1e-6 * max(1.0, float(np.abs(product).max(initial=0.0)))))

    def erase(self, x: np.ndarray) -> np.ndarray:
        """Erased rows of x [..., D] (numpy, float32 out)."""
        x = np.asarray(x, dtype=np.float32)
        return (x - ((x - self.bias) @ self.proj_right.T) @ self.proj_left.T).astype(np.float32)

    def torch_fn(self, device, dtype):
        """The same formula on torch tensors [..., D] (an adapter intervention's `fn(value, layer)`)."""
        left = torch.from_numpy(self.proj_left).to(device=device, dtype=dtype)
        right = torch.from_numpy(self.proj_right).to(device=device, dtype=dtype)
        bias = torch.from_numpy(self.bias).to(device=device, dtype=dtype)

        def apply(value, _layer=None):
            return value - ((value - bias) @ right.T) @ left.T

        return apply


def identity_eraser(dim: int) -> Eraser:
    """An eraser of rank 0: erasing changes nothing (a control for the front ends)."""
    return Eraser(np.zeros((dim, 1), np.float32), np.zeros((1, dim), np.float32), np.zeros(dim, np.float32))


def one_hot(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    index = {label: i for i, label in enumerate(classes)}
    out = np.zeros((len(labels), len(classes)), dtype=np.float32)
    out[np.arange(len(labels)), [index[label] for label in labels]] = 1.0
    return out


def fit_leace(vectors: np.ndarray, labels: Sequence[str], classes: Sequence[str]) -> Eraser:
    """The concept-erasure package's LEACE eraser of these vectors [N, D] for these labels (one-hot over `classes`),
    fitted in float64 (its eigendecomposition of the covariance), kept as float32."""
    x = torch.from_numpy(np.asarray(vectors, dtype=np.float64))
    z = torch.from_numpy(one_hot(labels, classes).astype(np.float64))
    eraser = LeaceFitter.fit(x, z).eraser
    bias = eraser.bias if eraser.bias is not None else torch.zeros(x.shape[1], dtype=torch.float64)
    return Eraser(eraser.proj_left.numpy().astype(np.float32), eraser.proj_right.numpy().astype(np.float32),
                  bias.numpy().astype(np.float32))


def random_eraser(like: Eraser, seed: int) -> Eraser:
    """The amnesic control: a random orthonormal basis Q [D, rank] (seeded Gaussian, QR), projected out around the
    same mean by the same formula (proj_left = Q, proj_right = Qᵀ)."""
    dim, rank = like.bias.shape[0], like.rank
    if rank == 0:
        return identity_eraser(dim)
    gaussian = np.random.default_rng(seed).standard_normal((dim, rank))
    basis, _ = np.linalg.qr(gaussian)
    basis = basis.astype(np.float32)
    return Eraser(basis, basis.T.copy(), like.bias.copy())


# ---- probes -------------------------------------------------------------------------------------------------------

def majority_accuracy(train_labels: Sequence[str], eval_labels: Sequence[str]) -> float:
    """The accuracy on `eval_labels` of always guessing the most frequent training label."""
    values, counts = np.unique(np.asarray(train_labels, dtype=object).astype(str), return_counts=True)
    guess = values[np.argmax(counts)]
    return float(np.mean(np.asarray(eval_labels, dtype=object).astype(str) == guess))


def probe_accuracy(train_x: np.ndarray, train_y: Sequence[str], eval_x: np.ndarray, eval_y: Sequence[str],
                   seed: int = 0) -> float:
    """A fresh multinomial logistic regression (scikit-learn, L2, features standardised on the training rows)
    trained on (train_x, train_y) and scored on (eval_x, eval_y)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_y = np.asarray(train_y, dtype=object).astype(str)
    if len(set(train_y)) < 2:
        return majority_accuracy(train_y, eval_y)
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=MAX_PROBE_ITER, random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a probe on erased vectors has nothing to converge to
        probe.fit(np.asarray(train_x, dtype=np.float64), train_y)
    return float(probe.score(np.asarray(eval_x, dtype=np.float64), np.asarray(eval_y, dtype=object).astype(str)))


# ---- saving -------------------------------------------------------------------------------------------------------

def erasers_dir() -> Path:
    return artefacts.artefact_dir("eraser")


def check_name(name: str) -> str:
    """A saved eraser is named like a run (one folder name, matched whole)."""
    if not whole_match(NAME, name or ""):
        raise EraseError(f"--out {name!r}: {NAME_RULE}, such as minilm-upos-L4")
    return name


def check_free_name(name: str) -> Path:
    """The folder a new eraser `name` is saved in; EraseError, before any work, when one of that name exists."""
    folder = erasers_dir() / check_name(name)
    if folder.exists():
        raise EraseError(f"an eraser named '{name}' is saved already ({folder}): pick another --out")
    return folder


def default_name(model: str, task: str, layer_shown: int) -> str:
    """A free name such as all-MiniLM-L6-v2-upos-L4 (-2, -3 ... when taken)."""
    stem = "".join(c if c.isalnum() or c in "_.-" else "-" for c in f"{Path(model).name}-{task}-L{layer_shown}")
    stem = stem.lstrip("_.-")[:70] or "eraser"
    name, n = stem, 1
    while (erasers_dir() / name).exists():
        n += 1
        name = f"{stem}-{n}"
    return name


def save_eraser(eraser: Eraser, folder: Path, config: dict) -> Path:
    """eraser.safetensors (proj_left, proj_right, bias) and config.json in `folder`, which appears whole or not at
    all (written under a temporary name, then renamed)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        save_file({"proj_left": torch.from_numpy(np.ascontiguousarray(eraser.proj_left)),
                   "proj_right": torch.from_numpy(np.ascontiguousarray(eraser.proj_right)),
                   "bias": torch.from_numpy(np.ascontiguousarray(eraser.bias))}, str(tmp / WEIGHTS))
        write_text_atomic(tmp / CONFIG, json.dumps(config, indent=1))
    return folder


@dataclass(frozen=True)
class SavedEraser:
    """A saved eraser: its name, folder, config.json and the eraser."""

    name: str
    path: str
    config: dict
    eraser: Eraser

    @property
    def layer(self) -> int:
        """The layer it erases, numbered as shown (1..L)."""
        return int(self.config["layer"])


def list_erasers() -> list[str]:
    """The names of the complete erasers saved (dotted temporary folders left out)."""
    return [a.name for a in artefacts.list_artefacts("eraser") if (Path(a.path) / CONFIG).is_file()]


def load_eraser(name: str) -> SavedEraser:
    """A saved eraser by name (models_cache/erasers/NAME) or folder path; EraseError naming those saved."""
    path = Path(str(name)).expanduser()
    folder = path if (path / WEIGHTS).is_file() else erasers_dir() / str(name)
    if not (folder / WEIGHTS).is_file() or not (folder / CONFIG).is_file():
        saved = ", ".join(list_erasers()) or "none yet"
        raise EraseError(f"no eraser named {name!r} in {erasers_dir()} (saved: {saved}); make one with "
                         "python -m core erase")
    try:
        tensors = load_file(str(folder / WEIGHTS))
        config = json.loads((folder / CONFIG).read_text())
        eraser = Eraser(*(np.asarray(tensors[k], dtype=np.float32) for k in ("proj_left", "proj_right", "bias")))
    except (OSError, ValueError, KeyError) as err:
        raise EraseError(f"{folder} is not a readable eraser ({err})") from err
    if eraser.proj_left.shape[0] != eraser.bias.shape[0] or eraser.proj_right.shape[1] != eraser.bias.shape[0]:
        raise EraseError(f"{folder}: proj_left, proj_right and bias do not fit together")
    return SavedEraser(folder.name, str(folder), config, eraser)


# ---- the effect on the rest of the model ---------------------------------------------------------------------------

def erasing(model, index: int, eraser: Eraser):
    """A context manager: on every forward pass of `model` inside it, the output of transformer layer `index`
    (array index; resid_post) has every token's vector erased."""
    adapter = ModelAdapter.of(model)
    parameter = next(model.parameters())
    return adapter.intervene("resid_post", eraser.torch_fn(parameter.device, parameter.dtype), layers=[index])


# ---- the whole analysis -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EraseInputs:
    """What `erase` reads besides the model and its settings: the task (tasks.TASK_HELP), the treebank it fits on, the
    held-out treebank it checks on (names as given), and the saved eraser's name (None: a free default name)."""

    task: str
    corpus: str
    eval_corpus: str
    out: str | None = None
    train: tuple = field(default=(), repr=False)
    evaluation: tuple = field(default=(), repr=False)


def erase_inputs(task: str, corpus: str, eval_corpus: str, out: str | None = None, seed: int = 0) -> EraseInputs:
    """The task checked and the treebanks of two corpus specs (ud:dev:2000, ud:test, a .conllu path); a bad task
    and a taken or bad `out` are refused here, before any work."""
    task = check_task(task)
    if out is not None:
        check_free_name(out)
    return inputs_of(task, corpora.resolve(corpus, seed), corpora.resolve(eval_corpus, seed), out)


def inputs_of(task: str, train: corpora.Corpus, evaluation: corpora.Corpus, out: str | None = None) -> EraseInputs:
    """EraseInputs of two corpora already read (the page's pickers); CorpusError for one without trees."""
    return EraseInputs(check_task(task), train.name, evaluation.name, out, tuple(corpora.require_trees(train)),
                       tuple(corpora.require_trees(evaluation)))


@dataclass(frozen=True)
class EraseResult:
    """What `erase` made and measured; `to_json()` is the CLI's JSON. layer: shown 1..L; labels: the task's labels
    in the training words (the one-hot columns); n_train / n_eval: labelled words fitted on / checked on."""

    name: str
    path: str
    model: str
    layer: int
    task: str
    labels: tuple[str, ...]
    majority: float
    probe_before: float
    probe_after: float
    rank: int
    effect: dict
    n_train: int
    n_eval: int
    seconds: float
    eraser: Eraser = field(repr=False, compare=False, default=None)

    def to_json(self) -> dict:
        return {"name": self.name, "path": self.path, "layer": self.layer, "task": self.task,
                "majority": round(self.majority, 4), "probe_before": round(self.probe_before, 4),
                "probe_after": round(self.probe_after, 4), "rank": self.rank,
                "effect": {k: round(v, 4) if isinstance(v, float) else v for k, v in self.effect.items()}}


def middle_layer(num_layers: int) -> int:
    """The array index the analysis erases when no layer is given: the middle transformer layer (MiniLM's 6: 4)."""
    return max(0, num_layers // 2)


def run_erase(lm, inputs: EraseInputs, settings: EraseSettings, progress: ProgressCallback = None,
              should_stop: StopCheck = None, *, effect: Callable | None = None) -> EraseResult:
    """Fit, check, save and measure (module docstring). `effect(model, lm, eval_texts, index, eraser, seed, limit,
    progress, should_stop) -> dict`: core.training.erasure_effect.measure_effect in the declared run (None: not
    measured, {"kind": "none"}). Raises EraseError / TaskError with a plain message; a cancelled run leaves nothing
    saved."""
    started = time.perf_counter()
    task = check_task(inputs.task)
    index = middle_layer(lm.num_layers) if settings.layer is None else int(settings.layer)
    shown = numbering.shown(index)
    if not 0 <= index < lm.num_layers:
        raise EraseError(f"layer {shown}: this model's transformer layers are 1..{lm.num_layers}")
    folder = check_free_name(inputs.out) if inputs.out else erasers_dir() / default_name(lm.ref, task, shown)
    report = _phases(progress)
    train = _words(lm, inputs.train, task, shown, report(0), should_stop, inputs.corpus)
    held = _words(lm, inputs.evaluation, task, shown, report(1), should_stop, inputs.eval_corpus)
    classes = tuple(sorted(set(train.labels)))
    if len(classes) < 2:
        raise TaskError(f"{inputs.corpus} gives every word the same {task} label ({classes[0]}): there is nothing "
                        "to erase; pick another task or a larger treebank.")
    train_x, eval_x = train.at(shown), held.at(shown)
    eraser = fit_leace(train_x, train.labels, classes)
    check_stop(should_stop)
    majority = majority_accuracy(train.labels, held.labels)
    before = probe_accuracy(train_x, train.labels, eval_x, held.labels, settings.seed)
    report(2)(1, 2, "probing the vectors as they are")
    check_stop(should_stop)
    after = probe_accuracy(eraser.erase(train_x), train.labels, eraser.erase(eval_x), held.labels, settings.seed)
    report(2)(2, 2, "probing the erased vectors")
    texts = [" ".join(s.words) for s in inputs.evaluation]
    effect = {"kind": "none", "message": "the effect was not measured"} if effect is None else \
        effect(lm.ref, lm, texts, index, eraser, settings.seed, settings.effect_limit, report(3), should_stop)
    check_stop(should_stop)
    config = {"model": lm.ref, "layer": shown, "task": task, "labels": list(classes), "rank": eraser.rank,
              "corpus": inputs.corpus, "n_train": len(train)}
    save_eraser(eraser, folder, config)
    return EraseResult(folder.name, str(folder), lm.ref, shown, task, classes, majority, before, after, eraser.rank,
                       effect, len(train), len(held), round(time.perf_counter() - started, 2), eraser)


def _words(lm, sentences, task: str, layer: int, progress, should_stop, name: str) -> LabelledWords:
    if not sentences:
        raise EraseError(f"{name} has no sentences")
    return labelled_words(lm, list(sentences), task, [layer], progress=progress, should_stop=should_stop)


# The phases' shares of the progress bar: encoding the two treebanks, the two probes, the effect's three passes.
_PHASE_SHARES = (0.45, 0.15, 0.15, 0.25)


def _phases(progress: ProgressCallback):
    """report(phase) -> a progress callback mapping that phase's (done, total) onto one bar of 1000 steps."""
    def report(phase: int):
        if progress is None:
            return lambda done, total, message=None: None
        start = sum(_PHASE_SHARES[:phase])

        def each(done, total, message=None):
            fraction = start + _PHASE_SHARES[phase] * (done / max(total, 1))
            progress(int(math.floor(1000 * fraction)), 1000, message or "encoding the treebank")
        return each
    return report
