"""Label probes per layer (issue 49): which layer holds part of speech, dependency relations, a morphological feature.

Per layer (0 = the embeddings), a multinomial logistic-regression probe is trained on the word vectors of a treebank
(tasks.labelled_words: a word's vector is the mean of its pieces) and scored on another one. Around it, the field's
three checks that a probe's accuracy means something:

- **control task** (Hewitt & Liang 2019, john-hewitt/control-tasks): each word *type* gets one fixed random label,
  drawn from the task's empirical label distribution; the same probe trained on those labels shows how much a probe
  can score by memorising word types. selectivity = accuracy - control accuracy.
- **online code** (Voita & Titov 2020, lena-voita/description-length-probing): the training labels are sent in
  blocks ending at 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50, 100 % of the (shuffled) training set; the first
  block with the uniform code (log2 K bits a label), each next block with a probe trained on every block before it
  (-log2 p(label) bits). compression = uniform codelength (N log2 K) / online codelength.
- **expected layer** (Tenney et al. 2019, "BERT rediscovers the classical NLP pipeline"): sum_l l·Δ(l) / sum_l Δ(l)
  with Δ(l) = score(l) - score(l-1) over cumulative scores, here the best per-layer accuracy up to l (Tenney's
  scalar mix of layers 0..l never loses what a lower layer had; one layer's probe can).

The probe is a softmax regression with sklearn's objective (mean cross-entropy + ||W||² / (2 C N), intercept not
penalised), on features standardised with the training mean and spread, fitted full-batch with L-BFGS in torch:
several times faster than sklearn's lbfgs on a 2-core machine and tested against it (tests/unit). Pure functions
on arrays first; `run_label_probes` reads a model and treebanks. No streamlit.
"""

from __future__ import annotations

# torch imported in functions (fit_probe): the view registry imports this declaration and must stay torch-free.
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from core.analyses.changes import probe_layer_numbers
from core.analyses.layer_knowledge.tasks import check_task, labelled_words
from core.contract import Analysis, setting
from core.progress import ProgressCallback, StopCheck, check_stop

# Voita & Titov's block ends, in percent of the training set (their online-code portions).
ONLINE_PORTIONS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25.0, 50.0, 100.0)
DEFAULT_C = 1.0  # sklearn LogisticRegression's default inverse regularisation


@dataclass(frozen=True)
class LabelProbeSettings:
    """The label probe's settings as every front end offers them (core.contract)."""

    task: str = setting("upos", "upos | xpos | deprel | morph:FEAT (e.g. morph:Number, morph:Gender): one label per "
                        "word from the treebank; a word's vector is the mean of its word pieces", url=None)
    layers: str = setting("all", "comma-separated layers, 0 = embeddings (e.g. '0,3,6'), or 'all'", url=None)
    control: bool = setting(False, "also train on Hewitt & Liang's control task (each word type a fixed random label) "
                            "and report selectivity = accuracy - control accuracy")
    mdl: bool = setting(False, "also measure the online (MDL) codelength of the training labels and its compression "
                        "(Voita & Titov 2020)")
    seed: int = setting(0, "seed of the control labels, the online code's order and the subsets", low=0, url=None)
    max_iter: int = setting(100, "L-BFGS iterations of each probe", low=1, high=10000, url=None)


@dataclass(frozen=True, eq=False)
class SoftmaxProbe:
    """A fitted multinomial logistic-regression probe. mean, scale [D] the training features' standardisation;
    weight [D, K], bias [K]."""

    mean: np.ndarray
    scale: np.ndarray
    weight: np.ndarray
    bias: np.ndarray

    def log_probs(self, x: np.ndarray) -> np.ndarray:
        """[N, K] natural-log class probabilities of the rows of x [N, D]."""
        logits = ((x - self.mean) / self.scale) @ self.weight + self.bias
        logits = logits - logits.max(axis=1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.log_probs(x).argmax(axis=1)


def fit_probe(x: np.ndarray, y: np.ndarray, n_classes: int, *, c: float = DEFAULT_C, max_iter: int = 100) -> SoftmaxProbe:
    """Softmax regression of y [N] (ints 0..K-1) on x [N, D], sklearn's objective (module docstring). A class absent
    from y still gets its logit, pushed down by the loss, so every label keeps a finite probability (the online
    code's early blocks need that)."""
    import torch

    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-8] = 1.0  # a constant feature carries nothing; leave it unscaled rather than divide by 0
    features = torch.from_numpy(((x - mean) / scale).astype(np.float32))
    target = torch.from_numpy(np.asarray(y, dtype=np.int64))
    n = len(target)
    weight = torch.zeros(x.shape[1], n_classes, requires_grad=True)
    bias = torch.zeros(n_classes, requires_grad=True)
    optimiser = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=int(max_iter), history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-5, tolerance_change=1e-9)

    def loss():
        optimiser.zero_grad()
        value = torch.nn.functional.cross_entropy(features @ weight + bias, target, reduction="mean") \
            + (weight * weight).sum() / (2.0 * c * n)
        value.backward()
        return value

    optimiser.step(loss)
    return SoftmaxProbe(mean, scale, weight.detach().numpy().astype(np.float64), bias.detach().numpy().astype(np.float64))


def accuracy(probe: SoftmaxProbe, x: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose most probable class is y (y = -1, a label the training set never had, is always wrong)."""
    return float((probe.predict(x) == y).mean()) if len(y) else float("nan")


def encode_labels(train: Sequence[str], evaluation: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(labels, train ids, eval ids): the training set's labels sorted; an eval label never seen in training is -1."""
    labels = tuple(sorted(set(train)))
    index = {label: i for i, label in enumerate(labels)}
    return (labels, np.array([index[label] for label in train], dtype=np.int64),
            np.array([index.get(label, -1) for label in evaluation], dtype=np.int64))


def majority_accuracy(train_ids: np.ndarray, eval_ids: np.ndarray) -> float:
    """Accuracy on the eval words of always answering the most frequent training label."""
    return float((eval_ids == np.bincount(train_ids).argmax()).mean()) if len(eval_ids) else float("nan")


@dataclass(frozen=True)
class ControlTask:
    """Hewitt & Liang's control labels: train [N], eval [M] ints; by_type {word type: label}."""

    train: np.ndarray
    eval: np.ndarray
    by_type: dict = field(repr=False)


def control_task(train_words: Sequence[str], train_ids: np.ndarray, eval_words: Sequence[str], n_classes: int,
                 seed: int) -> ControlTask:
    """Each word type (its form as written, as control-tasks keys on the sentence's strings) of training and
    evaluation gets one label drawn from the training labels' empirical distribution; every occurrence of the type
    carries it, so a probe can do well only by memorising types."""
    distribution = np.bincount(train_ids, minlength=n_classes) / len(train_ids)
    types = sorted(set(train_words) | set(eval_words))
    drawn = np.random.default_rng(seed).choice(n_classes, size=len(types), p=distribution)
    by_type = dict(zip(types, drawn.tolist()))
    return ControlTask(np.array([by_type[w] for w in train_words], dtype=np.int64),
                       np.array([by_type[w] for w in eval_words], dtype=np.int64), by_type)


def online_block_ends(n: int, portions: Sequence[float] = ONLINE_PORTIONS) -> tuple[int, ...]:
    """The end (exclusive) of each online-code block for n training examples: int(n · portion / 100), at least 1,
    strictly increasing (tiny sets merge blocks), the last n."""
    ends: list[int] = []
    for portion in portions:
        end = min(n, max(1, int(n * portion / 100.0)))
        if not ends or end > ends[-1]:
            ends.append(end)
    if ends[-1] != n:
        ends.append(n)
    return tuple(ends)


def uniform_codelength(n: int, n_classes: int) -> float:
    """Bits to send n labels of K classes with no model: n log2 K."""
    return n * math.log2(n_classes) if n_classes > 1 else 0.0


def online_codelength(x: np.ndarray, y: np.ndarray, n_classes: int, fit: Callable[[np.ndarray, np.ndarray], SoftmaxProbe],
                      ends: Sequence[int] | None = None, should_stop: StopCheck = None) -> float:
    """Voita & Titov's online (prequential) codelength of labels y [N] given x [N, D], in bits: the first block
    uniformly (ends[0] · log2 K), then each block [ends[i], ends[i+1]) with -sum log2 p(y | x) under `fit` trained on
    the first ends[i] examples. x and y in the order to send them (shuffle before)."""
    ends = tuple(ends or online_block_ends(len(y)))
    bits = uniform_codelength(ends[0], n_classes)
    for start, stop in zip(ends[:-1], ends[1:]):
        check_stop(should_stop)
        probe = fit(x[:start], y[:start])
        log_probs = probe.log_probs(x[start:stop])
        bits -= float(log_probs[np.arange(stop - start), y[start:stop]].sum()) / math.log(2.0)
    return bits


def cumulative_scores(layers: Sequence[int], scores: Sequence[float]) -> np.ndarray:
    """Each layer's cumulative score, layers in ascending order: the best score of it and every layer below it.
    Tenney et al. score a probe on the scalar mix of layers 0..l, which can only gain as l grows; a probe on one
    layer can lose (a sentence encoder's last layers forget part of speech), so the best so far stands in for it."""
    values = np.asarray(scores, dtype=float)[np.argsort(layers)]
    return np.maximum.accumulate(values)


def expected_layer(layers: Sequence[int], scores: Sequence[float]) -> float | None:
    """Tenney et al.'s expected layer: sum l·Δ(l) / sum Δ(l), Δ(l) = cumulative score(l) - cumulative score(the
    layer given below l) (cumulative_scores), over the layers after the lowest. None when it is undefined: fewer
    than two layers, or no layer above the lowest gains anything (sum Δ = 0)."""
    if len(layers) < 2:
        return None
    numbers = np.sort(np.asarray(layers, dtype=float))
    deltas = np.diff(cumulative_scores(layers, scores))
    total = deltas.sum()
    if not np.isfinite(total) or total <= 0:
        return None
    return float((numbers[1:] * deltas).sum() / total)


@dataclass(frozen=True)
class LayerScore:
    """One layer's probe. None where not asked for (control, MDL)."""

    layer: int
    accuracy: float
    control_accuracy: float | None = None
    codelength_bits: float | None = None
    compression: float | None = None

    @property
    def selectivity(self) -> float | None:
        return None if self.control_accuracy is None else self.accuracy - self.control_accuracy

    def to_json(self) -> dict:
        return {"layer": self.layer, "accuracy": self.accuracy, "control_accuracy": self.control_accuracy,
                "selectivity": self.selectivity, "codelength_bits": self.codelength_bits,
                "compression": self.compression}


@dataclass(frozen=True)
class LabelProbeResult:
    """Label probes of one model on one task. labels: the training labels (probe classes), sorted; majority: the
    eval accuracy of always answering the most frequent training label; expected_layer over the accuracies."""

    model: str
    task: str
    corpus: str
    n_train: int
    n_eval: int
    labels: tuple[str, ...]
    majority: float
    layers: tuple[LayerScore, ...]
    expected_layer: float | None
    n_sentences_skipped: int = 0

    def below_majority_notice(self) -> str | None:
        """A warning when no layer's probe beats always answering the most frequent label (too few training words,
        or too few iterations), else None."""
        if not self.layers or max(s.accuracy for s in self.layers) > self.majority:
            return None
        return (f"no layer beats the majority baseline ({self.majority:.3f}) for {self.task}: train on more "
                "sentences or give the probe more iterations")

    def to_json(self) -> dict:
        """What `python -m core probe-labels --json` prints (the issue's keys, exactly)."""
        return {"task": self.task, "n_train": self.n_train, "n_eval": self.n_eval, "labels": list(self.labels),
                "majority": self.majority, "layers": [score.to_json() for score in self.layers],
                "expected_layer": self.expected_layer}


def probe_layers(train_vectors: np.ndarray, train_labels: Sequence[str], train_words: Sequence[str],
                 eval_vectors: np.ndarray, eval_labels: Sequence[str], eval_words: Sequence[str], layers: Sequence[int],
                 settings: LabelProbeSettings, *, model: str = "", corpus: str = "", n_sentences_skipped: int = 0,
                 progress: ProgressCallback = None, should_stop: StopCheck = None) -> LabelProbeResult:
    """Every layer's probe (and control, online code when the settings ask) from the vectors: train_vectors
    [n_layers, N, D], eval_vectors [n_layers, M, D], in `layers` order. progress(done, total) counts layers."""
    labels, train_ids, eval_ids = encode_labels(list(train_labels), list(eval_labels))
    n_classes = len(labels)

    def fit(x, y):
        return fit_probe(x, y, n_classes, max_iter=settings.max_iter)

    control = control_task(list(train_words), train_ids, list(eval_words), n_classes, settings.seed) \
        if settings.control else None
    order = np.random.default_rng(settings.seed).permutation(len(train_ids))  # the online code's sending order
    scores = []
    for k, layer in enumerate(layers):
        check_stop(should_stop)
        x, z = train_vectors[k], eval_vectors[k]
        score = accuracy(fit(x, train_ids), z, eval_ids)
        control_score = None
        if control is not None:
            check_stop(should_stop)
            control_score = accuracy(fit(x, control.train), z, control.eval)
        bits = ratio = None
        if settings.mdl:
            bits = online_codelength(x[order], train_ids[order], n_classes, fit, should_stop=should_stop)
            ratio = uniform_codelength(len(train_ids), n_classes) / bits if bits > 0 else None
        scores.append(LayerScore(int(layer), score, control_score, bits, ratio))
        if progress is not None:
            progress(k + 1, len(layers))
    return LabelProbeResult(model, settings.task, corpus, len(train_ids), len(eval_ids), labels,
                            majority_accuracy(train_ids, eval_ids), tuple(scores),
                            expected_layer([s.layer for s in scores], [s.accuracy for s in scores]),
                            n_sentences_skipped)


def run_label_probes(lm, data, settings: LabelProbeSettings, progress: ProgressCallback = None,
                     should_stop: StopCheck = None) -> LabelProbeResult:
    """The declared analysis's run: `data` a core.analyses.probe.ProbeData (probe_inputs: training and evaluation
    treebank sentences). Encoding is the first half of the progress, the probes the second."""
    task = check_task(settings.task)
    layers = probe_layer_numbers(settings.layers, lm.num_layers) or list(range(lm.num_layers + 1))
    total = len(data.train) + len(data.eval) + len(layers)

    def stage(offset):
        return None if progress is None else (lambda done, _total: progress(offset + done, total))

    train = labelled_words(lm, data.train, task, layers, progress=stage(0), should_stop=should_stop)
    evaluation = labelled_words(lm, data.eval, task, layers, progress=stage(len(data.train)), should_stop=should_stop)
    return probe_layers(train.vectors, train.labels, train.words, evaluation.vectors, evaluation.labels,
                        evaluation.words, layers, settings, model=lm.ref, corpus=data.name,
                        n_sentences_skipped=train.n_sentences_skipped + evaluation.n_sentences_skipped,
                        progress=stage(len(data.train) + len(data.eval)), should_stop=should_stop)


ANALYSIS = Analysis(
    name="probe-labels", view="layer_knowledge", command="probe-labels", lens="probe_labels",
    settings=LabelProbeSettings, run=run_label_probes, charts="core.charts.layer_knowledge:probe_charts",
    title="Probes per layer", order=10,
    summary="a linear probe per layer for a word's part of speech, dependency relation or morphology, with "
            "Hewitt & Liang's control task, Voita & Titov's online codelength and Tenney's expected layer",
)
