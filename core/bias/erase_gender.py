"""Erase gender from a classification run and score its flip rate again (issue 49; the Bias page's "Erase gender").

The concept is the swap list's own (core.bias.swaps): a word of a pair's first side is "female", of its second side
"male" (woman / man, she / he, her / his ...). UD English EWT marks Gender only on pronouns (about 400 words in its
dev split, 47 of them Fem, some ten word types), too few and too narrow for the nouns the swaps exchange, so the
eraser is fitted on the run's own vectors of the listed words where they occur in a corpus's sentences (each word's
vector the mean of its pieces, as the treebank tasks'), label = which list. LEACE (core.analyses.layer_knowledge
.erasure) then removes the one direction a linear classifier could tell the two lists apart by, and the run
classifies the original and the swapped test examples with that layer's output erased for every token: the flip
rate before and after.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering, training
from core.analyses.layer_knowledge.erasure import (SavedEraser, check_free_name, default_name, erasers_dir, erasing,
                                                   fit_leace, load_eraser, majority_accuracy, probe_accuracy,
                                                   save_eraser)
from core.analyses.probe import sentence_vectors
from core.bias.experiment import predict_labels
from core.bias.flips import corpus_flips, item_examples
from core.bias.swaps import DEFAULT_SWAPS, counterfactuals, parse_swaps
from core.data.datasets import Example
from core.data.treebank import Sentence
from core.progress import ProgressCallback, StopCheck, check_stop

TASK = "gender-words"
LABELS = ("female", "male")
WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
HELD_OUT_SHARE = 0.2
MIN_WORDS = 20


class EraseGenderError(ValueError):
    """The eraser cannot be fitted or does not fit the run; the message says why."""


def word_lists(swaps=DEFAULT_SWAPS) -> dict[str, str]:
    """{word: "female" | "male"} of a swap list (a pair's first word female, its second male)."""
    lists: dict[str, str] = {}
    for female, male in parse_swaps(swaps):
        lists.setdefault(female, "female")
        lists.setdefault(male, "male")
    return lists


def _as_sentence(text: str) -> Sentence:
    words = tuple(WORD.findall(text))
    n = len(words)
    return Sentence(words, (0,) * n, ("_",) * n, ("_",) * n, text=text)


@dataclass(frozen=True)
class GenderWords:
    """The listed words found in the texts: vectors [N, D] at one layer, labels [N] (female / male), and which
    sentence each came from (a held-out share of sentences checks the eraser)."""

    vectors: np.ndarray
    labels: np.ndarray
    sentence_of: np.ndarray


def gender_words(lm, texts: Sequence[str], layer_shown: int, swaps=DEFAULT_SWAPS, *, progress=None,
                 should_stop: StopCheck = None) -> GenderWords:
    """The run's vectors at layer `layer_shown` (0 = embeddings) of every listed word in `texts`."""
    lists = word_lists(swaps)
    sentences = [_as_sentence(t) for t in texts if any(w.lower() in lists for w in WORD.findall(t))]
    per_sentence = sentence_vectors(lm, sentences, [layer_shown], progress=progress, should_stop=should_stop)
    vectors, labels, owners = [], [], []
    for index, (sentence, found) in enumerate(zip(sentences, per_sentence)):
        if found is None:
            continue
        for k, word in enumerate(sentence.words):
            label = lists.get(word.lower())
            if label is not None:
                vectors.append(found[0, k])
                labels.append(label)
                owners.append(index)
    counts = {label: labels.count(label) for label in LABELS}
    if min(counts.values()) < MIN_WORDS:
        raise EraseGenderError(f"the texts hold {counts['female']} female and {counts['male']} male listed words; "
                               f"fitting needs at least {MIN_WORDS} of each: give more sentences (e.g. snli:train:5000)")
    return GenderWords(np.stack(vectors).astype(np.float32), np.array(labels, dtype=object),
                       np.array(owners, dtype=np.int64))


@dataclass(frozen=True)
class GenderEraserFit:
    """A fitted gender eraser: where it is saved, and a fresh probe's accuracy on held-out words before / after
    beside the majority list."""

    saved: SavedEraser
    n_words: int
    majority: float
    probe_before: float
    probe_after: float

    def to_json(self) -> dict:
        return {"name": self.saved.name, "path": self.saved.path, "layer": self.saved.layer, "task": TASK,
                "n_words": self.n_words, "majority": round(self.majority, 4),
                "probe_before": round(self.probe_before, 4), "probe_after": round(self.probe_after, 4),
                "rank": self.saved.eraser.rank}


def fit_gender_eraser(lm, texts: Sequence[str], layer_index: int, swaps=DEFAULT_SWAPS, *, out: str | None = None,
                      seed: int = 0, progress: ProgressCallback = None,
                      should_stop: StopCheck = None) -> GenderEraserFit:
    """Fit LEACE for female / male listed words on the output of transformer layer `layer_index` (array index) of
    `lm` (a run's encoder), check it on a seeded held-out fifth of the sentences, and save it (models_cache/erasers,
    `out` or a free default name)."""
    if not 0 <= layer_index < lm.num_layers:
        raise EraseGenderError(f"layer {numbering.shown(layer_index)}: this model's transformer layers are "
                               f"1..{lm.num_layers}")
    shown = numbering.shown(layer_index)
    folder = check_free_name(out) if out else erasers_dir() / default_name(lm.ref, "gender", shown)
    found = gender_words(lm, texts, shown, swaps, progress=progress, should_stop=should_stop)
    check_stop(should_stop)
    sentences = np.unique(found.sentence_of)
    held = set(np.random.default_rng(seed).permutation(sentences)[: max(1, int(HELD_OUT_SHARE * len(sentences)))])
    test = np.array([owner in held for owner in found.sentence_of])
    train_x, train_y = found.vectors[~test], found.labels[~test]
    eraser = fit_leace(train_x, train_y, LABELS)
    majority = majority_accuracy(train_y, found.labels[test])
    before = probe_accuracy(train_x, train_y, found.vectors[test], found.labels[test], seed)
    after = probe_accuracy(eraser.erase(train_x), train_y, eraser.erase(found.vectors[test]), found.labels[test],
                           seed)
    config = {"model": lm.ref, "layer": shown, "task": TASK, "labels": list(LABELS), "rank": eraser.rank,
              "swaps": [list(p) for p in parse_swaps(swaps)], "n_train": int((~test).sum())}
    save_eraser(eraser, folder, config)
    return GenderEraserFit(SavedEraser(folder.name, str(folder), config, eraser), len(found.labels), majority,
                           before, after)


@dataclass(frozen=True)
class ErasedFlips:
    """A run's flip rate on swapped examples as it is and with an eraser applied at its layer (every token)."""

    eraser: str
    layer: int  # shown 1..L
    task: str
    swappable: int
    flips_before: int
    flips_after: int

    @property
    def flip_rate_before(self) -> float:
        return self.flips_before / self.swappable if self.swappable else float("nan")

    @property
    def flip_rate_after(self) -> float:
        return self.flips_after / self.swappable if self.swappable else float("nan")

    def to_json(self) -> dict:
        def rate(value):
            return None if np.isnan(value) else round(value, 6)

        return {"eraser": self.eraser, "layer": self.layer, "task": self.task, "swappable": self.swappable,
                "flips_before": self.flips_before, "flips_after": self.flips_after,
                "flip_rate_before": rate(self.flip_rate_before), "flip_rate_after": rate(self.flip_rate_after)}


def check_fits(saved: SavedEraser, clf) -> int:
    """The array index of the layer the eraser erases in this run; EraseGenderError when it does not fit."""
    size, layers = clf.encoder.hidden_size, clf.encoder.num_layers
    if saved.eraser.bias.shape[0] != size:
        raise EraseGenderError(f"eraser {saved.name} was fitted on {saved.eraser.bias.shape[0]}-wide vectors; "
                               f"{clf.encoder.ref} has {size}: fit one on this run")
    if not 1 <= saved.layer <= layers:
        raise EraseGenderError(f"eraser {saved.name} erases layer {saved.layer}; {clf.encoder.ref} has 1..{layers}")
    return numbering.index_of(saved.layer)


def erased_flips(clf, examples: Sequence[Example], saved: SavedEraser | str, swaps=DEFAULT_SWAPS, *,
                 batch_size: int = 64, should_stop: StopCheck = None) -> ErasedFlips:
    """The flips of `clf` (a LoadedClassifier) on the swappable `examples`, without and with the eraser (a
    SavedEraser or a saved eraser's name)."""
    saved = load_eraser(saved) if isinstance(saved, str) else saved
    index = check_fits(saved, clf)
    cf = counterfactuals(list(examples), parse_swaps(swaps))
    originals = [examples[i] for i in cf.indices]
    labels = tuple(clf.labels)
    counts = []
    for eraser in (None, saved.eraser):
        check_stop(should_stop)
        if eraser is None:
            before = predict_labels(clf, originals, labels, batch_size=batch_size, should_stop=should_stop)
            after = predict_labels(clf, cf.examples, labels, batch_size=batch_size, should_stop=should_stop)
        else:
            with erasing(clf.model, index, eraser):
                before = predict_labels(clf, originals, labels, batch_size=batch_size, should_stop=should_stop)
                after = predict_labels(clf, cf.examples, labels, batch_size=batch_size, should_stop=should_stop)
        counts.append(int((before != after).sum()))
    return ErasedFlips(saved.name, saved.layer, str(saved.config.get("task", "")), len(originals), *counts)


@dataclass(frozen=True)
class CorpusFlipsErased:
    """`bias --corpus C --model RUN --erase NAME`: the corpus's flips (core.bias.flips.CorpusFlips) and the same
    swaps scored again with the eraser applied ("erased")."""

    flips: object  # CorpusFlips
    erased: ErasedFlips

    def truncation_notice(self):
        return self.flips.truncation_notice()

    def to_json(self) -> dict:
        return {**self.flips.to_json(), "erased": self.erased.to_json()}


def corpus_flips_erased(corpus, run: str, eraser: str, swaps=DEFAULT_SWAPS, *, device: str | None = None,
                        should_stop: StopCheck = None) -> CorpusFlipsErased:
    """core.bias.flips.corpus_flips, and the flip rate on the same items with the saved eraser `eraser` applied."""
    saved = load_eraser(eraser)  # a missing name is refused before the run loads
    flips = corpus_flips(corpus, run, swaps, device=device, should_stop=should_stop)
    clf = training.load_classifier(run, device=device, attention="sdpa")
    examples = item_examples(getattr(corpus, "items", ()) or corpus.sentences)
    return CorpusFlipsErased(flips, erased_flips(clf, examples, saved, swaps, should_stop=should_stop))
