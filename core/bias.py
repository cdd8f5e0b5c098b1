"""The biased-training-data experiment of the CS4650 slides, done with a control.

The slides removed every SNLI training pair containing a "female" word and saw test accuracy fall from
90.45 % to 59.47 %. Removing data also makes the training set smaller, so here three runs share one recipe:

    full     every training example
    biased   the examples matching the word list removed
    control  exactly as many examples removed, drawn at random from all of them (seeded)

All three are scored on the same test split, overall and in two slices that partition it (test examples
with a listed word in premise or hypothesis, and without), with bootstrap confidence intervals, per-class F1
and confusion matrices; and on counterfactual copies of the test examples whose gendered words are swapped
(woman <-> man, she <-> he, ...): the flip rate is the share of swapped examples whose prediction changes.

Matching is whole-word and case-insensitive ("Woman" and "woman's" match "woman"; "womanhood" does not).

Runs go through the training engine (core.training) as ordinary runs named EXPERIMENT-full / -biased /
-control. The engine trains on a user data file, so each run's training set is written as a JSON Lines file
whose eval rows (split "test") are the experiment's test set: the engine's own accuracy is then on the same
examples as ours. Everything else lives in settings.cache_dir()/experiments/EXPERIMENT/:

    spec.json            the ExperimentSpec
    train_<arm>.jsonl    each run's data file (train rows + the test rows)
    state.json           {state, phase, done, total, error, evaluator_pid, updated_at} of the evaluation step
    predictions_<arm>.json  predicted labels on the test set and on the swapped copies
    results.json         the ExperimentResult (what the page and the CLI show)
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from core import settings
from core.datasets import Example
from core.progress import Cancelled, ProgressCallback, StopCheck, check_stop

DEFAULT_WORDS = ("women", "woman", "girl", "girls", "mother", "wife", "female")
ARMS = ("full", "biased", "control")
SLICES = ("with_words", "without_words")
TASKS = ("snli", "mrpc")
# The CS4650 slides (BERT-base, full SNLI train, 2 epochs): test accuracy with and without the female words.
SLIDES_REFERENCE = {"full": 0.9045195439739413, "biased": 0.5946661237785016, "train_batches_full": 17168,
                    "train_batches_biased": 13197}

# Each pair swaps both ways. "her" is two words in one: possessive ("her dog" -> "his dog") and object
# ("gave her a cup" -> "gave him a cup"); without a parser we take "him" when the next word is a function
# word, punctuation or the end of the text, and "his" otherwise (see `swap_text`). Other ambiguities are
# left alone: "man" as a verb ("man the boat") is rare in SNLI.
DEFAULT_SWAPS: tuple[tuple[str, str], ...] = (
    ("woman", "man"), ("women", "men"), ("girl", "boy"), ("girls", "boys"), ("she", "he"), ("her", "his"),
    ("her", "him"), ("herself", "himself"), ("mother", "father"), ("mothers", "fathers"), ("mom", "dad"),
    ("moms", "dads"), ("wife", "husband"), ("wives", "husbands"), ("female", "male"), ("females", "males"),
    ("daughter", "son"), ("daughters", "sons"), ("sister", "brother"), ("sisters", "brothers"),
    ("lady", "gentleman"), ("ladies", "gentlemen"), ("grandmother", "grandfather"), ("aunt", "uncle"),
    ("niece", "nephew"), ("queen", "king"), ("bride", "groom"), ("girlfriend", "boyfriend"),
    ("actress", "actor"), ("waitress", "waiter"), ("policewoman", "policeman"),
    ("businesswoman", "businessman"),
)
# After these (or punctuation / the end) a two-target word takes its second target: "her" -> "him".
FUNCTION_WORDS = frozenset(
    "a an the to and or but in on at with for from of up down out off as while is are was were that this "
    "these those by into onto over under back away around through near behind across some his her their its "
    "my your our who which when where because so then than".split()
)
EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
WORD = re.compile(r"^[^\W_](?:[\w'-]*[^\W_])?$")


# ---- word matching -----------------------------------------------------------------------------------


def parse_words(words: str | Iterable[str]) -> tuple[str, ...]:
    """Lower-cased, de-duplicated words from a list or a comma/space/newline separated string.

    Raises ValueError naming any entry that is not a single word (letters, digits, inner ' or -)."""
    items = re.split(r"[,\s]+", words) if isinstance(words, str) else [str(w) for w in words]
    cleaned = [w.strip().lower() for w in items if w and w.strip()]
    bad = [w for w in cleaned if not WORD.match(w)]
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))} {'is not a word' if len(bad) == 1 else 'are not words'}: use single "
            "words made of letters or digits (inner ' and - are fine), separated by commas."
        )
    if not cleaned:
        raise ValueError("The word list is empty; give at least one word (e.g. woman, girl, mother).")
    return tuple(dict.fromkeys(cleaned))


def word_pattern(words: Iterable[str]) -> re.Pattern:
    """One case-insensitive regex matching any of the words as a whole word (no letter, digit or _ next to it)."""
    alternatives = sorted(parse_words(words), key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, alternatives)) + r")(?!\w)", re.IGNORECASE)


def example_texts(example: Example) -> str:
    return example.text if not example.text_b else f"{example.text}\n{example.text_b}"


def match_mask(examples: Sequence[Example], words: Iterable[str]) -> np.ndarray:
    """mask [n] bool: example i has a listed word in its premise or its hypothesis."""
    pattern = word_pattern(words)
    return np.fromiter((bool(pattern.search(example_texts(e))) for e in examples), dtype=bool, count=len(examples))


@dataclass(frozen=True)
class WordMatches:
    """How a word list hits a set of examples.

    mask [n] bool: the example contains at least one listed word.
    per_word: word -> number of examples containing that word (an example may count for several words).
    """

    words: tuple[str, ...]
    mask: np.ndarray
    per_word: dict[str, int]

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    @property
    def n(self) -> int:
        return int(self.mask.size)


def word_matches(examples: Sequence[Example], words: Iterable[str]) -> WordMatches:
    words = parse_words(words)
    texts = [example_texts(e) for e in examples]
    per_word = {w: sum(1 for t in texts if word_pattern([w]).search(t)) for w in words}
    return WordMatches(words, match_mask(examples, words), per_word)


def highlight(text: str, words: Iterable[str]) -> str:
    """The text with every match in **bold** (markdown)."""
    return word_pattern(words).sub(lambda m: f"**{m.group(0)}**", text)


# ---- the three training sets ------------------------------------------------------------------------


def control_keep(n: int, n_remove: int, seed: int) -> np.ndarray:
    """Indices [n - n_remove] kept by the control: n_remove of range(n) removed uniformly at random (seeded),
    the rest in their original order."""
    if not 0 <= n_remove <= n:
        raise ValueError(f"cannot remove {n_remove} of {n} examples")
    removed = set(random.Random(seed).sample(range(n), n_remove))
    return np.array([i for i in range(n) if i not in removed], dtype=np.int64)


@dataclass(frozen=True)
class TrainingSets:
    """The three training sets; `removed` examples left out of both `biased` and `control`.

    matched [n] bool over `full`: the examples the biased set leaves out.
    control_kept [n - removed]: indices into `full` the control keeps.
    """

    full: tuple[Example, ...]
    biased: tuple[Example, ...]
    control: tuple[Example, ...]
    matched: np.ndarray
    control_kept: np.ndarray

    @property
    def removed(self) -> int:
        return int(self.matched.sum())

    def arm(self, name: str) -> tuple[Example, ...]:
        return {"full": self.full, "biased": self.biased, "control": self.control}[name]


def training_sets(train: Sequence[Example], words: Iterable[str], seed: int = 0) -> TrainingSets:
    matched = match_mask(train, words)
    if matched.all():
        raise ValueError("Every training example contains a listed word, so the biased set would be empty; shorten the word list.")
    kept = control_keep(len(train), int(matched.sum()), seed)
    return TrainingSets(
        full=tuple(train),
        biased=tuple(e for e, m in zip(train, matched) if not m),
        control=tuple(train[i] for i in kept),
        matched=matched,
        control_kept=kept,
    )


# ---- counterfactual swaps ---------------------------------------------------------------------------


def parse_swaps(text: str | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Pairs from lines such as "woman = man", "woman <-> man", "woman, man" (or from a list of pairs).

    A word may have two partners only as "her" has (his / him); more, or a word paired with itself, is an error."""
    if isinstance(text, str):
        pairs = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            parts = [p for p in re.split(r"\s*(?:<->|↔|=|,|\s)\s*", line.strip()) if p]
            if len(parts) != 2:
                raise ValueError(f"Swap line {number} ({line.strip()!r}) should hold two words, like 'woman = man'.")
            pairs.append((parts[0], parts[1]))
    else:
        pairs = [tuple(p) for p in text]
    cleaned = []
    for a, b in pairs:
        a, b = parse_words([a, b]) if a.lower() != b.lower() else (a.lower(), a.lower())
        if a == b:
            raise ValueError(f"'{a}' is paired with itself; give it a different counterpart or remove the line.")
        cleaned.append((a, b))
    cleaned = list(dict.fromkeys(cleaned))
    targets = swap_targets(cleaned)
    crowded = {w: t for w, t in targets.items() if len(t) > 2}
    if crowded:
        w, t = next(iter(crowded.items()))
        raise ValueError(f"'{w}' is paired with {', '.join(t)}; a word can have at most two counterparts (like her: his, him).")
    if not cleaned:
        raise ValueError("The swap list is empty; add pairs like 'woman = man'.")
    return tuple(cleaned)


def format_swaps(pairs: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"{a} = {b}" for a, b in pairs)


def swap_targets(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """word -> its counterparts, both directions, in list order ("her" -> ("his", "him"))."""
    targets: dict[str, list[str]] = {}
    for a, b in pairs:
        for source, target in ((a, b), (b, a)):
            if target not in targets.setdefault(source, []):
                targets[source].append(target)
    return {w: tuple(t) for w, t in targets.items()}


def match_case(source: str, target: str) -> str:
    """target written like source: WOMAN -> MAN, Woman -> Man, woman -> man."""
    if len(source) > 1 and source.isupper():
        return target.upper()
    if source[:1].isupper():
        return target[:1].upper() + target[1:]
    return target


def swap_text(text: str, pairs: Iterable[tuple[str, str]]) -> str:
    """Every listed word replaced by its counterpart in one pass (so woman -> man and man -> woman do not
    undo each other), keeping capitalisation. A word with two counterparts takes the second before a
    function word, punctuation or the end of the text, else the first (her hat -> his hat, saw her. -> saw him.)."""
    targets = swap_targets(pairs)
    if not targets:
        return text
    pattern = re.compile(
        r"(?<!\w)(" + "|".join(map(re.escape, sorted(targets, key=len, reverse=True))) + r")(?!\w)", re.IGNORECASE
    )

    def replace(m: re.Match) -> str:
        word = m.group(0)
        options = targets[word.lower()]
        choice = options[0]
        if len(options) > 1:
            following = re.match(r"\s*([\w'-]+)", text[m.end():])
            if following is None or following.group(1).lower() in FUNCTION_WORDS:
                choice = options[1]
        return match_case(word, choice)

    return pattern.sub(replace, text)


def swap_example(example: Example, pairs: Iterable[tuple[str, str]]) -> Example:
    return Example(swap_text(example.text, pairs), swap_text(example.text_b, pairs) if example.text_b else None, example.label)


@dataclass(frozen=True)
class Counterfactuals:
    """indices [m]: test examples a swap changed; examples: their swapped copies, in the same order."""

    indices: np.ndarray
    examples: tuple[Example, ...]


def counterfactuals(test: Sequence[Example], pairs: Iterable[tuple[str, str]]) -> Counterfactuals:
    pairs = tuple(pairs)
    indices, swapped = [], []
    for i, e in enumerate(test):
        s = swap_example(e, pairs)
        if s != e:
            indices.append(i)
            swapped.append(s)
    return Counterfactuals(np.array(indices, dtype=np.int64), tuple(swapped))


# ---- scores -----------------------------------------------------------------------------------------


def bootstrap_accuracy_ci(correct: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of correct [n] (bool).

    Resampling n examples with replacement and counting the correct ones is a Binomial(n, accuracy) draw,
    so the resamples are drawn as binomials: the same distribution as index resampling, in O(n_boot)."""
    correct = np.asarray(correct, dtype=bool)
    n = correct.size
    if n == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    accuracies = rng.binomial(n, correct.mean(), size=n_boot) / n
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(accuracies, [tail, 100 - tail])
    return float(low), float(high)


def paired_difference_ci(correct_a: np.ndarray, correct_b: np.ndarray, n_boot: int = 1000, seed: int = 0,
                         level: float = 0.95) -> tuple[float, float, float]:
    """(accuracy_a - accuracy_b, low, high): percentile bootstrap over the same resampled examples for both runs.

    Per example the difference is -1, 0 or +1, so a resample's three counts are one Multinomial draw."""
    a, b = np.asarray(correct_a, dtype=int), np.asarray(correct_b, dtype=int)
    if a.shape != b.shape:
        raise ValueError(f"the two runs were scored on different example counts ({a.size} vs {b.size})")
    n = a.size
    if n == 0:
        return (float("nan"),) * 3
    d = a - b
    shares = [float(np.mean(d == v)) for v in (-1, 0, 1)]
    counts = np.random.default_rng(seed).multinomial(n, shares, size=n_boot)
    diffs = (counts[:, 2] - counts[:, 0]) / n
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float(d.mean()), float(low), float(high)


@dataclass(frozen=True)
class SliceScores:
    """Scores of one run on one slice of the test set.

    confusion [true class, predicted class] (int counts, classes in `labels` order); per_class_f1 [class];
    ci: (low, high) 95 % bootstrap interval of accuracy.
    """

    n: int
    accuracy: float
    ci: tuple[float, float]
    macro_f1: float
    per_class_f1: tuple[float, ...]
    confusion: np.ndarray

    def to_dict(self, labels: Sequence[str]) -> dict:
        return {"n": self.n, "accuracy": self.accuracy, "ci": list(self.ci), "macro_f1": self.macro_f1,
                "per_class_f1": dict(zip(labels, self.per_class_f1)), "confusion": self.confusion.tolist()}

    @classmethod
    def from_dict(cls, d: dict, labels: Sequence[str]) -> "SliceScores":
        return cls(int(d["n"]), _float(d["accuracy"]), tuple(_float(v) for v in d["ci"]), _float(d["macro_f1"]),
                   tuple(float(d["per_class_f1"][label]) for label in labels), np.array(d["confusion"], dtype=np.int64))


def _float(v) -> float:
    return float("nan") if v is None else float(v)


def slice_scores(true: np.ndarray, predicted: np.ndarray, k: int, n_boot: int = 1000, seed: int = 0) -> SliceScores:
    """true, predicted [n] class indices in range(k)."""
    from core.training.evaluation import evaluate_predictions

    true, predicted = np.asarray(true, dtype=int), np.asarray(predicted, dtype=int)
    if true.size == 0:
        return SliceScores(0, float("nan"), (float("nan"), float("nan")), float("nan"), (float("nan"),) * k,
                           np.zeros((k, k), dtype=np.int64))
    m = evaluate_predictions(true, predicted, tuple(str(i) for i in range(k)))
    return SliceScores(m.n, m.accuracy, bootstrap_accuracy_ci(true == predicted, n_boot, seed), m.macro_f1,
                       tuple(float(f) for f in m.per_class_f1), m.confusion)


@dataclass(frozen=True)
class RunResult:
    """One arm of the experiment.

    overall and slices[name] (with_words / without_words): SliceScores on the test set.
    flip_rate: share of the `swapped` counterfactual examples whose predicted class changed (`flips` of them).
    engine_accuracy: the accuracy the training engine itself reported on the same test rows.
    """

    arm: str
    run: str
    train_size: int
    overall: SliceScores
    slices: dict[str, SliceScores]
    flip_rate: float
    flips: int
    swapped: int
    engine_accuracy: float | None = None
    train_seconds: float | None = None

    def to_dict(self, labels: Sequence[str]) -> dict:
        return {
            "run": self.run, "train_size": self.train_size, **self.overall.to_dict(labels),
            "slices": {name: s.to_dict(labels) for name, s in self.slices.items()},
            "flip_rate": self.flip_rate, "flips": self.flips, "swapped": self.swapped,
            "engine_accuracy": self.engine_accuracy, "train_seconds": self.train_seconds,
        }

    @classmethod
    def from_dict(cls, arm: str, d: dict, labels: Sequence[str]) -> "RunResult":
        return cls(arm, d["run"], int(d["train_size"]), SliceScores.from_dict(d, labels),
                   {name: SliceScores.from_dict(s, labels) for name, s in d["slices"].items()},
                   _float(d["flip_rate"]), int(d["flips"]), int(d["swapped"]), d.get("engine_accuracy"), d.get("train_seconds"))


@dataclass(frozen=True)
class ExperimentResult:
    """Everything the page and `python -m core bias` report.

    removed: training examples the filter (and so the control) left out. test_with_words: test examples in
    the with_words slice. differences[(a, b)][slice] = (accuracy_a - accuracy_b, low, high) paired bootstrap.
    """

    name: str
    labels: tuple[str, ...]
    removed: int
    test_size: int
    test_with_words: int
    runs: dict[str, RunResult]
    differences: dict[str, dict[str, tuple[float, float, float]]]

    def to_dict(self) -> dict:
        return {
            "experiment": self.name, "labels": list(self.labels), "removed": self.removed,
            "test_size": self.test_size,
            "test_slices": {"with_words": self.test_with_words, "without_words": self.test_size - self.test_with_words},
            "runs": {arm: r.to_dict(self.labels) for arm, r in self.runs.items()},
            "differences": {k: {s: list(v) for s, v in d.items()} for k, d in self.differences.items()},
            "slides_reference": {"full": SLIDES_REFERENCE["full"], "biased": SLIDES_REFERENCE["biased"]},
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentResult":
        labels = tuple(d["labels"])
        return cls(d["experiment"], labels, int(d["removed"]), int(d["test_size"]), int(d["test_slices"]["with_words"]),
                   {arm: RunResult.from_dict(arm, r, labels) for arm, r in d["runs"].items()},
                   {k: {s: tuple(_float(x) for x in v) for s, v in dd.items()} for k, dd in d.get("differences", {}).items()})


DIFFERENCES = (("biased", "full"), ("control", "full"), ("biased", "control"))


def score_experiment(name: str, labels: Sequence[str], true: np.ndarray, with_words: np.ndarray,
                     predictions: dict[str, np.ndarray], swapped_predictions: dict[str, np.ndarray],
                     swapped_indices: np.ndarray, train_sizes: dict[str, int], removed: int,
                     n_boot: int = 1000, seed: int = 0, engine: dict[str, dict] | None = None) -> ExperimentResult:
    """Scores from class indices.

    true [n], with_words [n] bool, predictions[arm] [n]: predicted class on the test set;
    swapped_predictions[arm] [m]: predicted class on the swapped copies of test examples swapped_indices [m].
    """
    k = len(labels)
    true, with_words = np.asarray(true, dtype=int), np.asarray(with_words, dtype=bool)
    masks = {"with_words": with_words, "without_words": ~with_words}
    runs = {}
    for arm, predicted in predictions.items():
        predicted = np.asarray(predicted, dtype=int)
        if predicted.shape != true.shape:
            raise ValueError(f"run {arm}: {predicted.size} predictions for {true.size} test examples")
        swapped = np.asarray(swapped_predictions[arm], dtype=int)
        flips = int((swapped != predicted[swapped_indices]).sum()) if swapped.size else 0
        meta = (engine or {}).get(arm, {})
        runs[arm] = RunResult(
            arm=arm, run=meta.get("run", arm), train_size=int(train_sizes[arm]),
            overall=slice_scores(true, predicted, k, n_boot, seed),
            slices={s: slice_scores(true[m], predicted[m], k, n_boot, seed) for s, m in masks.items()},
            flip_rate=flips / swapped.size if swapped.size else float("nan"), flips=flips, swapped=int(swapped.size),
            engine_accuracy=meta.get("accuracy"), train_seconds=meta.get("train_seconds"),
        )
    differences = {}
    for a, b in DIFFERENCES:
        if a in predictions and b in predictions:
            ca, cb = np.asarray(predictions[a]) == true, np.asarray(predictions[b]) == true
            differences[f"{a}-{b}"] = {
                "overall": paired_difference_ci(ca, cb, n_boot, seed),
                **{s: paired_difference_ci(ca[m], cb[m], n_boot, seed) for s, m in masks.items()},
            }
    return ExperimentResult(name, tuple(labels), int(removed), int(true.size), int(with_words.sum()), runs, differences)


# ---- the experiment: spec, data, runs, evaluation ---------------------------------------------------


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment: the data, the word and swap lists, and the recipe the three runs share.

    train_limit / test_limit: seeded subsets of the task's train / test split taken before filtering
    (None = all). seed: the subsets, the control's removals, training and the bootstrap.
    """

    name: str
    model: str
    task: str = "snli"
    words: tuple[str, ...] = DEFAULT_WORDS
    swaps: tuple[tuple[str, str], ...] = DEFAULT_SWAPS
    train_limit: int | None = None
    test_limit: int | None = None
    epochs: int = 2
    seed: int = 0
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 128
    head: str = "linear"
    device: str | None = None
    bootstrap: int = 1000
    created_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if not EXPERIMENT_NAME.match(self.name or ""):
            raise ValueError(f"experiment name {self.name!r} must start with a letter or digit and use only letters, "
                             "digits, '_', '-' and '.' (at most 64 characters)")
        if self.task not in TASKS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(TASKS)}: the experiment needs a test split with labels")
        object.__setattr__(self, "words", parse_words(self.words))
        object.__setattr__(self, "swaps", parse_swaps(self.swaps))
        for name in ("train_limit", "test_limit"):
            value = getattr(self, name)
            if value is not None and value < 10:
                raise ValueError(f"{name} must be at least 10 (or empty for all examples)")
        self.recipe("full")  # the engine's own checks (epochs, lr, max_length ...), before anything is written

    def run_name(self, arm: str) -> str:
        return f"{self.name}-{arm}"

    def recipe(self, arm: str):
        from core.training import Recipe

        return Recipe(model=self.model, task=str(data_file(self.name, arm)), run_name=self.run_name(arm),
                      epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, max_length=self.max_length,
                      seed=self.seed, head=self.head, device=self.device, data_source="local")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["swaps"] = [list(p) for p in self.swaps]
        d["words"] = list(self.words)
        return {"kind": "bias", **d}

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentSpec":
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
    from core import datasets

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


def experiment_data(spec: ExperimentSpec) -> ExperimentData:
    from core.training import TASK_LABELS

    train = load_split(spec.task, "train", spec.train_limit, spec.seed)
    test = tuple(load_split(spec.task, "test", spec.test_limit, spec.seed))
    return ExperimentData(training_sets(train, spec.words, spec.seed), test, match_mask(test, spec.words),
                          counterfactuals(test, spec.swaps), TASK_LABELS[spec.task])


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def prepare(spec: ExperimentSpec) -> ExperimentData:
    """Write spec.json and the three data files (train rows, then the test rows as split "test").

    Checks first that the model can be had (raises ModelUnavailable), so a bad name fails before any run."""
    from core.models import download

    download(spec.model)
    folder = experiment_dir(spec.name)
    if (folder / "spec.json").exists():
        raise ValueError(f"An experiment named '{spec.name}' already exists in {experiments_dir()}; pick another name.")
    from core.training.runs import final_dir, partial_dir

    taken = [spec.run_name(a) for a in ARMS if final_dir(spec.run_name(a)).exists() or partial_dir(spec.run_name(a)).exists()]
    if taken:
        raise ValueError(f"Runs named {', '.join(taken)} already exist; pick another experiment name.")
    data = experiment_data(spec)
    folder.mkdir(parents=True, exist_ok=True)
    test_rows = [{"text": e.text, "text_b": e.text_b, "label": e.label, "split": "test"} for e in data.test]
    for arm in ARMS:
        with open(data_file(spec.name, arm), "w", encoding="utf-8") as handle:
            for e in data.sets.arm(arm):
                handle.write(json.dumps({"text": e.text, "text_b": e.text_b, "label": e.label, "split": "train"}) + "\n")
            for row in test_rows:
                handle.write(json.dumps(row) + "\n")
    _write_json(folder / "spec.json", spec.to_dict())
    write_state(spec.name, state="training", phase="training", removed=data.sets.removed,
                train_sizes={a: len(data.sets.arm(a)) for a in ARMS})
    return data


def write_state(name: str, **fields) -> dict:
    path = experiment_dir(name) / "state.json"
    state = {**(_read_json(path) or {}), **fields, "updated_at": time.time()}
    _write_json(path, state)
    return state


def read_state(name: str) -> dict:
    return _read_json(experiment_dir(name) / "state.json") or {}


def load_spec(name: str) -> ExperimentSpec:
    d = _read_json(experiment_dir(name) / "spec.json")
    if d is None:
        raise ValueError(f"No experiment named '{name}' in {experiments_dir()}.")
    return ExperimentSpec.from_dict(d)


def load_result(name: str) -> ExperimentResult | None:
    d = _read_json(experiment_dir(name) / "results.json")
    return ExperimentResult.from_dict(d) if d else None


def list_experiments() -> list[str]:
    """Experiment names, newest first."""
    root = experiments_dir()
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        spec = _read_json(folder / "spec.json")
        if spec and spec.get("kind") == "bias":
            found.append((float(spec.get("created_at") or 0), folder.name))
    return [name for _, name in sorted(found, reverse=True)]


def predict_labels(clf, examples: Sequence[Example], labels: Sequence[str], *, batch_size: int = 64,
                   max_length: int | None = None, progress: ProgressCallback = None, should_stop: StopCheck = None,
                   chunk: int = 256) -> np.ndarray:
    """Predicted class [n] of a LoadedClassifier, as an index into `labels` whatever class order the run saved
    (a data-file run orders its labels alphabetically)."""
    if not examples:
        return np.zeros(0, dtype=np.int64)
    max_length = max_length or clf.head.get("max_length")
    to_ours = np.array([list(labels).index(label) for label in clf.labels])
    out = np.zeros(len(examples), dtype=np.int64)
    items = [(e.text, e.text_b) for e in examples]
    for start in range(0, len(items), chunk):
        check_stop(should_stop)
        probabilities = clf.predict_proba(items[start:start + chunk], batch_size=batch_size, max_length=max_length)
        out[start:start + chunk] = to_ours[probabilities.argmax(axis=1)]
        if progress is not None:
            progress(min(start + chunk, len(items)), len(items))
    return out


def evaluate(spec: ExperimentSpec, data: ExperimentData | None = None, progress: ProgressCallback = None,
             should_stop: StopCheck = None) -> ExperimentResult:
    """Predict the test set and its swapped copies with the three finished runs; write results.json.

    Predictions already saved for a run (predictions_<arm>.json) are reused. progress counts examples."""
    from core.training import get_run, load_classifier

    data = data or experiment_data(spec)
    folder = experiment_dir(spec.name)
    cf = data.counterfactuals
    total = len(ARMS) * (len(data.test) + len(cf.examples))
    predictions, swapped, engine = {}, {}, {}
    for position, arm in enumerate(ARMS):
        run = get_run(spec.run_name(arm))
        if run is None or run.state != "done":
            raise ValueError(f"run {spec.run_name(arm)} has not finished ({run.state if run else 'missing'}); "
                             "it must finish before the experiment can be scored")
        engine[arm] = {"run": run.name, "accuracy": (run.metrics or {}).get("accuracy"),
                       "train_seconds": (run.metrics or {}).get("train_seconds")}
        saved = _read_json(folder / f"predictions_{arm}.json")
        if saved and saved.get("n_test") == len(data.test) and saved.get("n_swapped") == len(cf.examples):
            predictions[arm], swapped[arm] = np.array(saved["test"]), np.array(saved["swapped"])
            continue
        base = position * (len(data.test) + len(cf.examples))

        def step(offset):
            return None if progress is None else (lambda done, _total: progress(base + offset + done, total))

        clf = load_classifier(run.name, device=spec.device, attention="sdpa")
        options = {"batch_size": spec.batch_size * 2, "max_length": spec.max_length, "should_stop": should_stop}
        predictions[arm] = predict_labels(clf, data.test, data.labels, progress=step(0), **options)
        swapped[arm] = predict_labels(clf, cf.examples, data.labels, progress=step(len(data.test)), **options)
        del clf
        _write_json(folder / f"predictions_{arm}.json", {
            "labels": list(data.labels), "n_test": len(data.test), "n_swapped": len(cf.examples),
            "test": predictions[arm].tolist(), "swapped": swapped[arm].tolist()})
    true = np.array([data.labels.index(e.label) for e in data.test])
    result = score_experiment(spec.name, data.labels, true, data.with_words, predictions, swapped, cf.indices,
                              {a: len(data.sets.arm(a)) for a in ARMS}, data.sets.removed, spec.bootstrap, spec.seed, engine)
    _write_json(folder / "results.json", result.to_dict())
    write_state(spec.name, state="done", phase="done", done=total, total=total)
    return result


def run_experiment(spec: ExperimentSpec, progress=None, should_stop: StopCheck = None) -> ExperimentResult:
    """The whole experiment in this process: the three runs one after another, then the scoring.

    progress(stage, done, total): stage is an arm name while it trains, "evaluating" while scoring."""
    from core.training import finetune

    data = prepare(spec)
    write_state(spec.name, runner_pid=os.getpid())  # a page can then see this process die, or ask it to stop
    try:
        for arm in ARMS:
            report = None if progress is None else (lambda d, t, arm=arm: progress(arm, d, t))
            finetune(spec.recipe(arm), progress=report, should_stop=should_stop)
        write_state(spec.name, state="evaluating", phase="evaluating")
        report = None if progress is None else (lambda d, t: progress("evaluating", d, t))
        return evaluate(spec, data, report, should_stop)
    except Cancelled:
        write_state(spec.name, state="cancelled", phase="cancelled", error="cancelled by the user")
        raise
    except BaseException as err:
        write_state(spec.name, state="failed", phase="failed", error=f"{type(err).__name__}: {err}")
        raise


# ---- background experiments (the page) ------------------------------------------------------------


def launch(spec: ExperimentSpec) -> None:
    """Prepare the data, queue the three runs as engine jobs, and start a detached scorer
    (`python -m core bias --attach NAME`) that waits for them and writes results.json. Returns at once."""
    from core.training import submit

    prepare(spec)
    try:
        for arm in ARMS:
            submit(spec.recipe(arm))
    except BaseException as err:
        cancel_experiment(spec.name)
        write_state(spec.name, state="failed", phase="failed", error=f"{type(err).__name__}: {err}")
        raise
    folder = experiment_dir(spec.name)
    command = [sys.executable, "-m", "core", "bias", "--attach", spec.name]
    env = {**os.environ, "BERTLENS_CACHE": str(settings.cache_dir())}
    with open(folder / "evaluate.log", "ab") as log:
        process = subprocess.Popen(command, cwd=settings.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    _children.append(process)
    write_state(spec.name, evaluator_pid=process.pid)


_children: list[subprocess.Popen] = []


def _reap() -> None:
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def attach(name: str, progress: ProgressCallback = None, should_stop: StopCheck = None, poll: float = 1.0) -> ExperimentResult:
    """Wait for the experiment's three runs, then (in the training queue's turn, so scoring never competes
    with a training run for the processor) score them. Ends the experiment as failed/cancelled when a run does."""
    from core.training import get_run
    from core.training.jobs import queue_turn

    spec = load_spec(name)
    stop = lambda: (experiment_dir(name) / "cancel").exists() or bool(should_stop and should_stop())  # noqa: E731
    try:
        while True:
            check_stop(stop)
            runs = {arm: get_run(spec.run_name(arm)) for arm in ARMS}
            ended = {arm: r for arm, r in runs.items() if r is None or r.state in ("failed", "cancelled")}
            if ended:
                arm, r = next(iter(ended.items()))
                state = "cancelled" if r is not None and r.state == "cancelled" else "failed"
                why = r.error if r is not None else "its run folder is gone"
                write_state(name, state=state, phase=state, error=f"run {spec.run_name(arm)} {state}: {why}")
                if state == "cancelled":
                    raise Cancelled(f"run {spec.run_name(arm)} was cancelled")
                raise RuntimeError(f"run {spec.run_name(arm)} failed: {why}")
            if all(r.state == "done" for r in runs.values()):
                break
            time.sleep(poll)
        write_state(name, state="evaluating", phase="waiting for the training queue")
        with queue_turn(f"{name}-scoring", stop):
            write_state(name, phase="evaluating")

            def report(done: int, total: int) -> None:
                write_state(name, done=done, total=total)
                if progress is not None:
                    progress(done, total)

            return evaluate(spec, None, report, stop)
    except Cancelled:
        write_state(name, state="cancelled", phase="cancelled", error=read_state(name).get("error") or "cancelled by the user")
        raise
    except BaseException as err:
        if read_state(name).get("state") not in ("failed", "cancelled"):
            write_state(name, state="failed", phase="failed", error=f"{type(err).__name__}: {err}")
        raise


def cancel_experiment(name: str) -> None:
    """Stop the experiment's queued or running runs and its scorer."""
    from core.training import cancel
    from core.training.runs import pid_alive

    _reap()
    folder = experiment_dir(name)
    if folder.is_dir():
        (folder / "cancel").touch()
    try:
        spec = load_spec(name)
    except ValueError:
        return
    for arm in ARMS:
        cancel(spec.run_name(arm))
    state = read_state(name)
    # The page's scorer leads its own process group; a command-line run gets the signal alone (SignalStop).
    for key, kill in (("evaluator_pid", os.killpg), ("runner_pid", os.kill)):
        pid = state.get(key)
        if pid and pid != os.getpid() and pid_alive(pid):
            try:
                kill(int(pid), signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    if state.get("state") in ("training", "evaluating"):
        write_state(name, state="cancelled", phase="cancelled", error="cancelled by the user")


@dataclass(frozen=True)
class ExperimentStatus:
    """Where an experiment stands: state is training | evaluating | done | failed | cancelled.

    runs[arm]: the engine's RunInfo (None before it exists); state_info: state.json."""

    spec: ExperimentSpec
    state: str
    runs: dict
    state_info: dict
    result: ExperimentResult | None

    @property
    def active(self) -> bool:
        return self.state in ("training", "evaluating")


def experiment_status(name: str) -> ExperimentStatus:
    from core.training import get_run
    from core.training.runs import process_gone

    _reap()
    spec = load_spec(name)
    info = read_state(name)
    state = info.get("state", "training")
    runs = {arm: get_run(spec.run_name(arm)) for arm in ARMS}
    result = load_result(name)
    owner = info.get("evaluator_pid") or info.get("runner_pid")
    ended = [(arm, r) for arm, r in runs.items() if r is not None and r.state in ("failed", "cancelled")]
    if result is not None:
        state = "done"
    elif state in ("training", "evaluating") and owner and process_gone({"pid": owner}):
        # The process driving the experiment died without saying why (killed, machine restarted).
        state = "failed"
        info = write_state(name, state="failed", phase="failed",
                           error=info.get("error") or "the experiment's process ended without finishing; see evaluate.log")
    elif state in ("training", "evaluating") and ended:
        arm, run = ended[0]
        state = run.state
        info = write_state(name, state=state, phase=state, error=f"run {run.name} {run.state}: {run.error}")
    return ExperimentStatus(spec, state, runs, info, result)


# ---- tables for the page and the exports ----------------------------------------------------------

SLICE_TITLES = {"overall": "all test examples", "with_words": "with the words", "without_words": "without the words"}


def accuracy_frame(result: ExperimentResult):
    """One row per (run, slice): n, accuracy, ci_low, ci_high, macro_f1, f1_<label>, and the run's flip rate."""
    import pandas as pd

    rows = []
    for arm, run in result.runs.items():
        for name, s in (("overall", run.overall), *run.slices.items()):
            rows.append({"run": arm, "slice": name, "n": s.n, "accuracy": s.accuracy, "ci_low": s.ci[0], "ci_high": s.ci[1],
                         "macro_f1": s.macro_f1, **{f"f1_{label}": f for label, f in zip(result.labels, s.per_class_f1)},
                         "train_size": run.train_size, "flip_rate": run.flip_rate})
    return pd.DataFrame(rows)


def confusion_frame(result: ExperimentResult):
    """Long table: run, slice, true, predicted, count, share (of the true class's row)."""
    import pandas as pd

    rows = []
    for arm, run in result.runs.items():
        for name, s in (("overall", run.overall), *run.slices.items()):
            totals = s.confusion.sum(axis=1)
            for i, true in enumerate(result.labels):
                for j, predicted in enumerate(result.labels):
                    count = int(s.confusion[i, j])
                    rows.append({"run": arm, "slice": name, "true": true, "predicted": predicted, "count": count,
                                 "share": count / totals[i] if totals[i] else 0.0})
    return pd.DataFrame(rows)


def difference_frame(result: ExperimentResult):
    """comparison ("biased-full" ...), slice, difference (accuracy points as a fraction), ci_low, ci_high."""
    import pandas as pd

    return pd.DataFrame([{"comparison": k, "slice": s, "difference": v[0], "ci_low": v[1], "ci_high": v[2]}
                         for k, d in result.differences.items() for s, v in d.items()])


def flip_frame(result: ExperimentResult):
    import pandas as pd

    return pd.DataFrame([{"run": arm, "flip_rate": r.flip_rate, "flips": r.flips, "swapped": r.swapped}
                         for arm, r in result.runs.items()])


def flipped_examples(name: str, arm: str, data: ExperimentData, limit: int = 20) -> list[dict]:
    """Swapped test examples whose prediction changed under `arm`: original and swapped text, both predictions."""
    saved = _read_json(experiment_dir(name) / f"predictions_{arm}.json")
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
