"""Disabling attention heads of a fine-tuned classifier and measuring the accuracy change (Kovaleva et al. 2019,
section 4.6), one head at a time and one whole layer at a time.

Two ways to disable a head:
    uniform  Kovaleva's: the head's attention probabilities become 1/L over the L real (unpadded) tokens, so each
             query's context for that head is the mean of the value vectors of the real tokens;
    mask     the head's context vector is zeroed (what `head_mask` did before transformers 5 removed it).

Both act on each head's context z (its input to the output projection), with the value vectors read at the
same pass, through core.model.adapter (every family it knows; eager or SDPA attention alike). The hooks are on
only inside `HeadDisabler`, under the model's lock, and removed whatever happens: a model shared through the
app's cache must never carry them.

A sweep runs the intact model once per batch, keeps each layer's input, and for a head in layer l runs only
layers l.. again from that input (the layers below are unchanged by construction): one batched pass over the
sample per disabled head, about half the work of a full forward on average.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from core.contract import Analysis, setting
from core import validation
from core.data.datasets import Example
from core.model.adapter import AdapterError, ModelAdapter
from core.model.classifier import classifier_batches, load_classifier, predict_logits, softmax, text_features
from core.model.evaluation import Degeneracy, degeneracy
from core.progress import ProgressCallback, StopCheck, check_stop

MODES = ("uniform", "mask")


@dataclass(frozen=True)
class AblationSettings:
    """The `ablate` analysis's settings, declared once (core.contract): CLI options, lens.ablate, the page's widget."""

    mode: str = setting("uniform", "uniform: the head's attention becomes 1/L (Kovaleva); mask: its output is zeroed",
                        choices=MODES, url=None)
    sweep_layers: bool = setting(True, "the whole-layer conditions besides the heads", cli="layers", url=None)
    batch_size: int = setting(32, "examples run at once", low=1, high=4096, url=None)


class AblationError(ValueError):
    """The model or the sample cannot be ablated; the message says why and what to pick instead."""


class HeadDisabler:
    """Hooks that disable the heads in `disabled` ({layer: (head, ...)}) on the forward passes inside the block
    (a context manager; the hooks are removed on exit whatever happens). Uniform mode averages over the real
    tokens of the pass (its attention mask)."""

    def __init__(self, model, mode: str = "uniform"):
        if mode not in MODES:
            raise AblationError(f"mode {mode!r} unknown; use one of {', '.join(MODES)}")
        try:
            self.adapter = ModelAdapter.of(model)
        except AdapterError as err:
            raise AblationError(f"{err}; head ablation needs one of them") from err
        self.mode = mode
        self.disabled: dict[int, tuple[int, ...]] = {}
        self._values = None
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> "HeadDisabler":
        with contextlib.ExitStack() as stack:
            if self.mode == "uniform":
                self._values = stack.enter_context(self.adapter.capture(["v"]))
            stack.enter_context(self.adapter.intervene("z", self._edit))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> None:
        stack, self._stack, self._values = self._stack, None, None
        stack.close()

    def _edit(self, z: torch.Tensor, layer: int) -> torch.Tensor | None:
        """z [batch, tokens, heads, head_dim] -> the same with the disabled heads' contexts replaced."""
        heads = list(self.disabled.get(layer, ()))
        if not heads:
            return None
        z = z.clone()
        if self.mode == "mask":
            z[:, :, heads] = 0.0
            return z
        values = self._values["v", layer][:, :, heads]  # [batch, tokens, disabled, head_dim]
        mask = self.adapter.token_mask.to(values.dtype)
        weights = (mask / mask.sum(dim=1, keepdim=True))[:, :, None, None]
        z[:, :, heads] = (values * weights).sum(dim=1, keepdim=True).expand(-1, z.shape[1], -1, -1)
        return z


def _check_disabled(disabled: Mapping[int, Sequence[int]], layers: int, heads: int) -> dict[int, tuple[int, ...]]:
    clean = {}
    for layer, hs in disabled.items():
        if not 0 <= int(layer) < layers:
            raise AblationError(f"layer {layer} does not exist; the model has layers 0..{layers - 1}")
        bad = [h for h in hs if not 0 <= int(h) < heads]
        if bad:
            raise AblationError(f"head(s) {bad} do not exist; the model has heads 0..{heads - 1}")
        if hs:
            clean[int(layer)] = tuple(sorted({int(h) for h in hs}))
    return clean


def _max_length(clf) -> int:
    return int(min(clf.head.get("max_length") or clf.encoder.max_length, clf.encoder.max_length))


def _logits_from_hidden(clf, hidden: torch.Tensor) -> torch.Tensor:
    return clf.model.head_logits(hidden)


def predict_disabled(
    clf,
    items: Sequence[tuple[str, str | None]],
    disabled: Mapping[int, Sequence[int]],
    mode: str = "uniform",
    batch_size: int = 32,
) -> np.ndarray:
    """Class probabilities [len(items), classes] with the given heads ({layer: heads}) disabled; a full forward."""
    disabled = _check_disabled(disabled, clf.encoder.num_layers, clf.encoder.num_heads)
    features = text_features(clf.tokenizer, list(items), _max_length(clf))
    with HeadDisabler(clf.model, mode=mode) as disabler:
        disabler.disabled = disabled
        return softmax(predict_logits(clf, features, batch_size=batch_size))


@dataclass(frozen=True)
class AblationResult(validation.CorpusCuts):
    """Accuracy of a classifier with one head, or one whole layer, disabled.

    base_accuracy   float: the intact model on the sample
    head_accuracy   float64 [layer, head] (NaN when heads were not swept); head_delta = head_accuracy - base
    layer_accuracy  float64 [layer] (NaN when layers were not swept); layer_delta = layer_accuracy - base
    mode            "uniform" or "mask"; n_examples; labels of the classes
    task, eval_split, run_accuracy  the run's task, the split the sample came from and the accuracy its
                    metrics.json reports, when known (None otherwise)
    degenerate      whether the intact model learned (almost) nothing on the sample (core.model.evaluation)
    dropped         [n_examples] word pieces cut off each example to fit max_length, the length the run was
                    trained and scored with (core.validation.CorpusCuts)
    """

    model: str
    mode: str
    base_accuracy: float
    head_accuracy: np.ndarray
    layer_accuracy: np.ndarray
    n_examples: int
    labels: tuple[str, ...]
    task: str | None = None
    eval_split: str | None = None
    run_accuracy: float | None = None
    degenerate: Degeneracy | None = None
    dropped: tuple[int, ...] | None = None
    max_length: int = 0

    @property
    def head_delta(self) -> np.ndarray:
        return self.head_accuracy - self.base_accuracy

    @property
    def layer_delta(self) -> np.ndarray:
        return self.layer_accuracy - self.base_accuracy

    def to_json(self) -> dict:
        def clean(array):
            return [clean(x) for x in array] if np.ndim(array) else (None if np.isnan(array) else round(float(array), 6))

        return {"model": self.model, "mode": self.mode, "base_accuracy": self.base_accuracy,
                "head_delta": clean(self.head_delta), "layer_delta": clean(self.layer_delta),
                "n_examples": self.n_examples, "labels": list(self.labels),
                "task": self.task, "eval_split": self.eval_split, "run_accuracy": self.run_accuracy,
                "degenerate": None if self.degenerate is None else self.degenerate.to_json()}


def conditions(layers: int, heads: int, sweep_heads: bool = True, sweep_layers: bool = True) -> list[tuple[int, tuple[int, ...]]]:
    """The sweep's conditions as (layer, disabled heads): every single head, then every whole layer."""
    out = []
    if sweep_heads:
        out += [(l, (h,)) for l in range(layers) for h in range(heads)]
    if sweep_layers:
        out += [(l, tuple(range(heads))) for l in range(layers)]
    return out


@torch.inference_mode()
def ablation_sweep(
    clf,
    examples: Sequence[Example],
    *,
    mode: str = "uniform",
    sweep_heads: bool = True,
    sweep_layers: bool = True,
    batch_size: int = 32,
    reuse_lower_layers: bool = True,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> AblationResult:
    """Accuracy on `examples` with each head, and each layer, disabled in turn (see the module docstring).

    reuse_lower_layers=False runs the whole model for every condition (the bench's baseline).
    progress(done, total) counts batch passes: (1 + conditions) per batch.
    """
    if not examples:
        raise AblationError("the sample is empty: pick a run whose task has evaluation examples")
    index = {label: i for i, label in enumerate(clf.labels)}
    unknown = sorted({e.label for e in examples} - set(index))
    if unknown:
        raise AblationError(f"labels {unknown} are not among the classifier's classes {list(clf.labels)}")
    n_layers, n_heads = clf.encoder.num_layers, clf.encoder.num_heads
    todo = conditions(n_layers, n_heads, sweep_heads, sweep_layers)
    items = [(e.text, e.text_b) for e in examples]
    features = text_features(clf.tokenizer, items, _max_length(clf))
    truth = np.array([index[e.label] for e in examples])
    batches = list(classifier_batches(clf, features, batch_size))
    base_correct = 0
    base_predicted = np.zeros(len(examples), dtype=np.int64)  # the intact model's class per example
    correct = np.zeros(len(todo), dtype=np.int64)
    encoder = clf.model.encoder
    total, done = len(batches) * (1 + len(todo)), 0
    with HeadDisabler(clf.model, mode=mode) as disabler, disabler.adapter.capture(["call"], layers=0) as first:
        for chunk, feed in batches:
            check_stop(should_stop)
            disabler.disabled = {}
            with disabler.adapter.capture(["resid_pre"]) as inputs:  # only the intact pass: the sweeps reuse them
                out = encoder(**feed)
            layer_inputs = inputs.layers("resid_pre")  # [layers] of [batch, tokens, hidden]: the input of layer l
            call = first["call", 0]  # the mask (and MPNet's bias) every layer is called with
            true = truth[chunk]
            base_predicted[chunk] = _logits_from_hidden(clf, out.last_hidden_state).argmax(-1).cpu().numpy()
            base_correct += int((base_predicted[chunk] == true).sum())
            done += 1
            for k, (layer, heads) in enumerate(todo):
                check_stop(should_stop)
                disabler.disabled = {layer: heads}
                if reuse_lower_layers:
                    logits = _logits_from_hidden(clf, disabler.adapter.run_layers(layer_inputs[layer], call, layer))
                else:
                    logits = clf.model(**feed)
                correct[k] += int((logits.argmax(-1).cpu().numpy() == true).sum())
                done += 1
                if progress is not None:
                    progress(done, total)
    n = len(examples)
    head_accuracy = np.full((n_layers, n_heads), np.nan)
    layer_accuracy = np.full(n_layers, np.nan)
    n_head_conditions = n_layers * n_heads if sweep_heads else 0
    for k, (layer, heads) in enumerate(todo):
        if k < n_head_conditions:
            head_accuracy[layer, heads[0]] = correct[k] / n
        else:
            layer_accuracy[layer] = correct[k] / n
    # The classifier tokenizes itself (not core.model.encoding), so its cuts are counted here, not by counting_cuts.
    max_length = _max_length(clf)
    dropped = tuple(max(0, len(clf.tokenizer(a, b, truncation=False)["input_ids"]) - max_length) for a, b in items)
    return AblationResult(clf.encoder.ref, mode, base_correct / n, head_accuracy, layer_accuracy, n, tuple(clf.labels),
                          degenerate=degeneracy(truth, base_predicted, tuple(clf.labels)), dropped=dropped,
                          max_length=max_length)


def load_for_ablation(ref: str, device: str | None = None):
    """A private copy of a classification run (SDPA attention: ablation never needs the probabilities back)."""
    return load_classifier(ref, device=device, attention="sdpa")


def run_ablation(clf, examples: Sequence[Example], settings: AblationSettings = AblationSettings(),
                 progress: ProgressCallback = None, should_stop: StopCheck = None) -> AblationResult:
    """`ablation_sweep` with its declared settings (the `ablate` analysis's run)."""
    return ablation_sweep(clf, examples, mode=settings.mode, sweep_layers=settings.sweep_layers,
                          batch_size=settings.batch_size, progress=progress, should_stop=should_stop)


ANALYSIS = Analysis(
    name="ablate", view="attention", command="ablate", lens="ablate", settings=AblationSettings, run=run_ablation,
    charts="core.charts.heads_dataset:ablation_charts", title="Heads over a dataset: ablation",
    summary="accuracy of a fine-tuned run with each head / layer disabled", order=21,
)
