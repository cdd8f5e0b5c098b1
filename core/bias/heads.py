"""The heads behind a bias flip: for the counterfactual swaps (woman <-> man, ...) that change a run's prediction,
which attention heads carry the change?

Each flipping pair is patched head by head from the original into the swapped input (core.analyses.patching,
metric: the logit of the original's predicted class minus the swapped copy's), heads are ranked by their mean
recovery over the pairs, and the ranking is confirmed by disabling the top-k heads (core.analyses.ablation) and
scoring the flip rate again on every swappable item. The default ablation zeroes the heads' contexts ("mask"):
Kovaleva's uniform attention would still average the swapped word's value into the head's output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering
from core import training
from core.analyses.ablation import MODES, predict_disabled
from core.analyses.patching import DEFAULT_MEMORY_MB, SMALL_GAP, PatchingError, PatchingWarning, patch_many
from core.bias.experiment import predict_labels
from core.bias_settings import DEFAULT_PAIRS, DEFAULT_TOP_K, BiasHeadsSettings  # declared once
from core.bias.flips import item_examples
from core.bias.swaps import DEFAULT_SWAPS, counterfactuals, parse_swaps
from core.data.datasets import Example
from core.progress import ProgressCallback, StopCheck, check_stop



@dataclass(frozen=True)
class BiasHeads:
    """Heads ranked by how much of a swap's flipped prediction they carry. L = layers, H = heads, P = pairs patched.

    swappable      items a swap changed; flips: those whose predicted class changed
    patched_pairs  P flipping pairs patched (at most `limit`); skipped: flipping pairs left out because the swap
                   changed the number of word pieces (a patch needs equal lengths)
    recovery       float64 [L, H] mean over the P pairs of (patched - swapped) / (original - swapped), metric
                   logit[original's class] - logit[swapped copy's class]
    ranking        ((layer, head), ...) every head, highest mean recovery first; top_k: how many were ablated
    flip_rate_before, flip_rate_after   flips / swappable with the model intact and with the top-k heads disabled
                   (mode "mask" or "uniform", core.analyses.ablation)
    small_gaps     patched pairs whose original - swapped metric is under core.analyses.patching.SMALL_GAP: their
                   recoveries divide by almost nothing and are mostly noise in the mean (`warnings` says so)
    """

    corpus: str
    run: str
    labels: tuple[str, ...]
    swappable: int
    flips: int
    patched_pairs: int
    skipped: int
    recovery: np.ndarray
    ranking: tuple[tuple[int, int], ...]
    top_k: int
    mode: str
    flip_rate_before: float
    flip_rate_after: float
    small_gaps: int = 0

    @property
    def warnings(self) -> tuple[PatchingWarning, ...]:
        if not self.small_gaps:
            return ()
        return (PatchingWarning("small_gap", (
            f"{self.small_gaps:,} of the {self.patched_pairs:,} patched pairs differ by under {SMALL_GAP} in "
            "logit[original's class] - logit[swapped copy's class]: their recoveries divide by almost nothing, so "
            "they are mostly noise in the mean recovery.")),)

    @property
    def top(self) -> tuple[tuple[int, int], ...]:
        return self.ranking[:self.top_k]

    def to_json(self) -> dict:
        def num(x):
            return None if x is None or not np.isfinite(x) else float(x)

        return {"corpus": self.corpus, "run": self.run, "labels": list(self.labels), "swappable": self.swappable,
                "flips": self.flips, "patched_pairs": self.patched_pairs, "skipped": self.skipped,
                "recovery": [[num(v) for v in row] for row in self.recovery],
                # [layer, head] with the layer as every chart shows it (1..L, core.numbering)
                "ranking": [[numbering.shown(l), h] for l, h in self.ranking], "top_k": self.top_k,
                "top_heads": [[numbering.shown(l), h] for l, h in self.top], "mode": self.mode,
                "flip_rate_before": num(self.flip_rate_before), "flip_rate_after": num(self.flip_rate_after),
                "small_gap_pairs": self.small_gaps, "warnings": [w.to_json() for w in self.warnings]}


def _pair(example: Example):
    return example.text if not example.text_b else (example.text, example.text_b)


def _flip_rate(clf, originals, swapped, disabled, mode: str) -> float:
    items = [(e.text, e.text_b) for e in (*originals, *swapped)]
    predicted = predict_disabled(clf, items, disabled, mode=mode).argmax(axis=1).reshape(2, -1)
    return float((predicted[0] != predicted[1]).mean())


def bias_heads(clf, examples: Sequence[Example], swaps=DEFAULT_SWAPS, *, top_k: int = DEFAULT_TOP_K,
               mode: str = "mask", limit: int = DEFAULT_PAIRS, corpus: str = "", run: str = "",
               memory_mb: float = DEFAULT_MEMORY_MB, progress: ProgressCallback = None,
               should_stop: StopCheck = None) -> BiasHeads:
    """Rank the heads of `clf` (a LoadedClassifier) by mean recovery over the swaps of `examples` that flip its
    prediction (at most `limit` of them), then disable the top_k heads and score the flip rate again."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} unknown; use one of {', '.join(MODES)}")
    labels = tuple(clf.labels)
    cf = counterfactuals(examples, parse_swaps(swaps))
    originals = [examples[i] for i in cf.indices]
    if not originals:
        raise ValueError(f"no item of {corpus or 'the corpus'} contains a word the swaps change; use a corpus that "
                         "mentions people (e.g. snli:dev:500)")
    before = predict_labels(clf, originals, labels)
    after = predict_labels(clf, cf.examples, labels)
    flipping = np.flatnonzero(before != after)
    grids, skipped, small_gaps = [], 0, 0
    chosen = flipping[:limit]
    check_stop(should_stop)

    def pairs_done(cells: int, total: int) -> None:  # patch_many counts cells; this progress counts pairs
        if progress is not None:
            progress(len(chosen) * cells // max(total, 1), len(chosen))

    # every flipping pair in one call: pairs share padded batches and the layers below each patched head (issue 47)
    results = patch_many(clf, [(_pair(originals[i]), _pair(cf.examples[i]), (int(before[i]), int(after[i])))
                               for i in chosen], "heads", memory_mb=memory_mb, progress=pairs_done,
                         should_stop=should_stop)
    for result in results:
        if isinstance(result, PatchingError):
            skipped += 1
            continue
        grids.append(result.recovered)
        small_gaps += int(not abs(result.gap) >= SMALL_GAP)
    if progress is not None:
        progress(len(chosen), len(chosen))
    adapter_shape = (clf.encoder.num_layers, clf.encoder.num_heads)
    recovery = np.nanmean(grids, axis=0) if grids else np.full(adapter_shape, np.nan)
    order = np.argsort(-np.nan_to_num(recovery, nan=-np.inf), axis=None, kind="stable")
    ranking = tuple((int(i // recovery.shape[1]), int(i % recovery.shape[1])) for i in order)
    top_k = min(int(top_k), len(ranking)) if grids else 0
    disabled: dict[int, list[int]] = {}
    for layer, head in ranking[:top_k]:
        disabled.setdefault(layer, []).append(head)
    rate_before = float((before != after).mean())
    rate_after = _flip_rate(clf, originals, cf.examples, disabled, mode) if disabled else rate_before
    return BiasHeads(corpus, run, labels, len(originals), int(flipping.size), len(grids), skipped, recovery, ranking,
                     top_k, mode, rate_before, rate_after, small_gaps)


def corpus_bias_heads(corpus, run: str, swaps=DEFAULT_SWAPS, *, device: str | None = None, **options) -> BiasHeads:
    """bias_heads on corpus.items (a core.data.corpus Corpus) with the finished classification run `run`."""
    examples = item_examples(getattr(corpus, "items", ()) or corpus.sentences)
    if not examples:
        raise ValueError(f"{corpus.name} has no items to swap.")
    clf = training.load_classifier(run, device=device, attention="sdpa")
    return bias_heads(clf, examples, swaps, corpus=corpus.name, run=run, **options)


def run_bias_heads(run: str, corpus, settings: BiasHeadsSettings, progress: ProgressCallback = None,
                   should_stop: StopCheck = None, *, device: str | None = None) -> BiasHeads:
    """The bias-heads analysis under the contract (core.bias_settings): corpus_bias_heads with the settings."""
    return corpus_bias_heads(corpus, run, device=device, top_k=settings.top_k, mode=settings.mode,
                             limit=settings.limit, progress=progress, should_stop=should_stop)
