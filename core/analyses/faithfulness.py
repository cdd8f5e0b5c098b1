"""How faithful is each explanation? Comprehensiveness and sufficiency (DeYoung et al. 2020, ERASER).

For an input x predicted as class y with probability p(y|x), and the top k% of its words by a method's word
scores (r_k; ties broken by position, at least one word):
    comprehensiveness_k = p(y|x) - p(y|x without r_k)   high: the words the method names were needed
    sufficiency_k       = p(y|x) - p(y|r_k only)        low: those words alone keep the prediction
Deleting means removing the words' pieces from the token sequence (special tokens stay). Each is averaged
over FRACTIONS (AOPC) and over the examples. A random ranking of the same words is the control a method
must beat.

Human rationales: e-SNLI's highlights are not in the offline data, so plausibility is not measured here.
HUMAN_RATIONALES is the hook: register a source name -> function(items) giving per item a [W] 0/1 array (or
None), and `rationale_precision` scores a method's ranking against it.
"""

from __future__ import annotations

# torch and pandas imported in functions: importing this module (the CLI's --help, the studies list, the pages) must
# not load them.
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from core import validation
from core.analyses.explain import DEFAULT_STEPS, METHODS, Explainer, available_methods, explain, prepare, probabilities
from core.progress import ProgressCallback, StopCheck, check_stop
from core.contract import Analysis, setting

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
RANDOM = "random"
# What a lesson can wait for (issue 48: all ten methods on 50 examples took ~30 min on 2 cores): four cheap
# methods, one of each family (a gradient, a perturbation, two from attention), on 20 examples; all ten are one
# click (the page) or `--methods all` (the CLI) away. Shapley, KernelSHAP and LIME run ~200 inputs per example
# and IG one per step. Measured in bench/RESULTS.md ("Faithfulness default").
QUICK_METHODS = ("grad-input", "occlusion", "rollout", "attention")
QUICK_EXAMPLES = 20
DEFAULT_METHODS = QUICK_METHODS

# Human rationales by corpus source: name -> function(items) -> list of [W] 0/1 arrays (None where missing).
# Empty: e-SNLI (Camburu et al. 2018) is not offline. Add a source here and the page/CLI can report plausibility.
HUMAN_RATIONALES: dict[str, Callable[[Sequence], list]] = {}


# Tasks whose own labelled sentence pairs are the natural faithfulness set: task -> corpus dataset (core.data.corpus).
PAIR_TASKS = {"snli": "snli", "mrpc": "mrpc"}
SNLI_LABELS = ("entailment", "neutral", "contradiction")


def default_dataset(explainer: Explainer) -> str | None:
    """The dataset faithfulness is scored on by default: the run's own task's pairs ("snli" or "mrpc", whose
    first split in core.data.corpus.DATASET_SPLITS is dev / validation) for a sentence-pair run, or for a model whose
    classes are SNLI's; None (single sentences, the built-in ones) otherwise. A pair classifier fed single
    sentences is scored on inputs it never saw."""
    if explainer.task in PAIR_TASKS:
        return PAIR_TASKS[explainer.task]
    if explainer.task is None and explainer.labels is not None and tuple(l.lower() for l in explainer.labels) == SNLI_LABELS:
        return "snli"
    return None


def rationale_precision(word_scores: np.ndarray, rationale: np.ndarray) -> float:
    """Precision of the top-|rationale| words by score against a human 0/1 rationale [W] (plausibility)."""
    rationale = np.asarray(rationale, dtype=bool)
    k = int(rationale.sum())
    if k == 0:
        return float("nan")
    return float(rationale[ranking(word_scores)[:k]].mean())


def ranking(word_scores: np.ndarray) -> np.ndarray:
    """[W] word indices, highest score first, ties by position (a stable sort)."""
    return np.argsort(-np.asarray(word_scores, dtype=np.float64), kind="stable")


def n_top(fraction: float, n_words: int) -> int:
    return min(n_words, max(1, math.ceil(fraction * n_words - 1e-9)))


@dataclass(frozen=True)
class Faithfulness(validation.CorpusCuts):
    """methods [M] (the random control last, named RANDOM); fractions [K];
    comprehensiveness [M, K], sufficiency [M, K]: means over the examples at each fraction;
    aopc_comprehensiveness [M], aopc_sufficiency [M]: their means over the fractions;
    examples: how many inputs were scored; skipped: inputs with no word; dropped [examples]: word pieces cut off
    each scored input to fit the model's max_length (0 when it fit)."""

    corpus: str
    model: str
    methods: tuple[str, ...]
    fractions: tuple[float, ...]
    comprehensiveness: np.ndarray
    sufficiency: np.ndarray
    examples: int
    skipped: int = 0
    steps: int = DEFAULT_STEPS
    dropped: np.ndarray | None = None
    max_length: int | None = None

    @property
    def aopc_comprehensiveness(self) -> np.ndarray:
        return self.comprehensiveness.mean(axis=1)

    @property
    def aopc_sufficiency(self) -> np.ndarray:
        return self.sufficiency.mean(axis=1)

    def row(self, method: str) -> dict:
        i = self.methods.index(method)
        return {"comprehensiveness": float(self.aopc_comprehensiveness[i]), "sufficiency": float(self.aopc_sufficiency[i])}

    def to_json(self) -> dict:
        """The AOPC per method ("methods", "random") and, per method in order, the curve at each fraction."""
        return {"corpus": self.corpus, "model": self.model, "examples": self.examples, "skipped": self.skipped,
                "fractions": list(self.fractions), "steps": self.steps,
                "methods": {m: self.row(m) for m in self.methods if m != RANDOM}, "random": self.row(RANDOM),
                "curves": {m: {"comprehensiveness": self.comprehensiveness[i].tolist(),
                               "sufficiency": self.sufficiency[i].tolist()} for i, m in enumerate(self.methods)},
                "truncated": self.truncation(),
                "dropped": None if self.dropped is None else self.dropped.tolist(), "max_length": self.max_length}

    @classmethod
    def from_json(cls, d: dict) -> "Faithfulness":
        """The result to_json wrote (the page reads a finished job's result.json back after a server restart)."""
        curves = d["curves"]
        return cls(d["corpus"], d["model"], tuple(curves), tuple(d["fractions"]),
                   np.array([c["comprehensiveness"] for c in curves.values()]),
                   np.array([c["sufficiency"] for c in curves.values()]), d["examples"], d["skipped"], d["steps"],
                   None if d.get("dropped") is None else np.array(d["dropped"], dtype=np.int64), d.get("max_length"))

    def table(self):
        import pandas as pd

        return pd.DataFrame({"method": self.methods, "comprehensiveness (AOPC)": self.aopc_comprehensiveness,
                             "sufficiency (AOPC)": self.aopc_sufficiency})


def _perturbed(tokenized, keep_words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """input ids and type ids with only the special tokens and the pieces of keep_words [W bool]."""
    word_ids = np.asarray(tokenized.word_ids)
    keep = (word_ids < 0) | keep_words[np.maximum(word_ids, 0)]
    return np.asarray(tokenized.input_ids)[keep], np.asarray(tokenized.type_ids)[keep]


def class_probabilities(explainer: Explainer, sequences: list[tuple[np.ndarray, np.ndarray]], batch_size: int = 64) -> np.ndarray:
    """[n, C] class probabilities for (input ids, type ids) sequences, padded per batch."""
    from core.model.classifier import predict_logits, softmax

    return softmax(predict_logits(explainer, sequences, batch_size=batch_size)).astype(np.float64)


def erasure_curves(explainer: Explainer, tokenized, word_scores: np.ndarray, target: int, p_full: float,
                   fractions: Sequence[float] = FRACTIONS) -> tuple[np.ndarray, np.ndarray]:
    """(comprehensiveness [K], sufficiency [K]) of one input for one ranking of its words."""
    n_words = len(tokenized.words)
    order = ranking(word_scores)
    sequences = []
    for fraction in fractions:
        top = np.zeros(n_words, dtype=bool)
        top[order[:n_top(fraction, n_words)]] = True
        sequences.append(_perturbed(tokenized, ~top))
        sequences.append(_perturbed(tokenized, top))
    probs = class_probabilities(explainer, sequences)[:, target]
    return p_full - probs[0::2], p_full - probs[1::2]


def faithfulness(explainer: Explainer, items: Sequence, *, methods: Sequence[str] = DEFAULT_METHODS,
                 fractions: Sequence[float] = FRACTIONS, steps: int = DEFAULT_STEPS, samples: int | None = None, seed: int = 0,
                 corpus: str = "", progress: ProgressCallback = None, should_stop: StopCheck = None) -> Faithfulness:
    """Comprehensiveness and sufficiency of each method's explanations of the predicted class over `items`
    (sentences or (A, B) pairs), plus a random ranking (seeded) as control. steps: ig's; samples: the sampling
    perturbation methods' (None: their defaults); seed: the random ranking's and theirs. Raises NoClassifierHead without a
    head, ValueError for no items or an unknown method."""
    explainer.require_head()
    methods = tuple(methods)
    unknown = [m for m in methods if m not in available_methods(explainer)]
    if unknown:
        raise ValueError(f"unknown methods: {', '.join(unknown)}")
    if not items:
        raise ValueError("no items to score")
    rng = np.random.default_rng(seed)
    names = methods + (RANDOM,)
    comp = np.zeros((len(names), len(fractions)))
    suff = np.zeros((len(names), len(fractions)))
    used = skipped = 0
    dropped = []
    for index, item in enumerate(items):
        check_stop(should_stop)
        text_a, text_b = (item, None) if isinstance(item, str) else (item[0], item[1] or None)
        try:
            tok = prepare(explainer, text_a, text_b)
        except ValueError:
            skipped += 1
            continue
        if not tok.words:
            skipped += 1
            continue
        probs = probabilities(explainer, tok)
        target = int(probs.argmax())
        for m, method in enumerate(names):
            scores = rng.random(len(tok.words)) if method == RANDOM else \
                explain(explainer, text_a, text_b, method, target=target, steps=steps, tokenized=tok, samples=samples,
                        seed=seed).word_scores
            c, s = erasure_curves(explainer, tok, scores, target, float(probs[target]), fractions)
            comp[m] += c
            suff[m] += s
        used += 1
        dropped.append(tok.n_tokens_full - tok.n_tokens)
        if progress is not None:
            progress(index + 1, len(items))
    if used == 0:
        raise ValueError("none of the items has a word to explain")
    return Faithfulness(corpus, explainer.lm.ref, names, tuple(fractions), comp / used, suff / used, used, skipped, steps,
                        np.array(dropped, dtype=np.int64), explainer.lm.max_length)


# ---- the declaration (core.contract) -------------------------------------------------------------------------------

ALL = "all"  # every method of METHODS, as the page's one click


@dataclass(frozen=True)
class FaithfulnessSettings:
    """What `explain-faithfulness`, `core.lens.explain_faithfulness` and the page's faithfulness form offer. Not in
    the page's link (url=None): its URL's methods and steps are the explain tab's (ExplainSettings)."""

    methods: tuple = setting(QUICK_METHODS, f"methods to score, or '{ALL}' for all {len(METHODS)}; default: the quick "
                             "ones (Shapley, KernelSHAP and LIME run ~200 inputs per example)",
                             choices=METHODS + (ALL,), url=None)
    steps: int = setting(20, "integrated-gradients steps per input", low=1, high=1000, url=None)
    samples: int | None = setting(None, "shapley: word orders; kernel-shap, lime: coalitions (default: theirs)",
                                  type="int", low=1, high=5000, url=None)
    seed: int = setting(0, "seed of the corpus sample, of the random control and of the sampling methods",
                        low=0, high=2**31 - 1, url=None)

    @property
    def chosen_methods(self) -> tuple[str, ...]:
        """The methods to score, "all" read as every one of METHODS."""
        return METHODS if ALL in self.methods else tuple(self.methods)


def run_faithfulness(explainer: Explainer, items: Sequence, settings: FaithfulnessSettings, progress=None,
                     should_stop=None, *, corpus: str = "") -> Faithfulness:
    """`faithfulness` under the contract (items: sentences or (A, B) pairs)."""
    return faithfulness(explainer, items, methods=settings.chosen_methods, steps=settings.steps,
                        samples=settings.samples, seed=settings.seed, corpus=corpus, progress=progress,
                        should_stop=should_stop)


ANALYSIS = Analysis(
    name="explain-faithfulness", view="explain", command="explain-faithfulness", lens="explain_faithfulness",
    settings=FaithfulnessSettings, run=run_faithfulness, charts="core.charts.explain:faithfulness_charts",
    title="How faithful is each method?", order=1,
    summary="comprehensiveness / sufficiency (AOPC) of each explanation method over a corpus",
)
