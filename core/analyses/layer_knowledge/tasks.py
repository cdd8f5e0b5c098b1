"""Word-level tasks read from a CoNLL-U treebank, and the labelled word vectors every layer gives them.

A task names one label per word: `upos` (universal part of speech), `xpos` (the treebank's own tags; Penn tags in
UD EWT), `deprel` (the word's relation to its head, subtype kept: "nmod:poss") or `morph:FEAT` (the value of one
morphological feature, e.g. `morph:Number` -> Sing / Plur). A word without the feature (an English verb has no
Gender) is left out of a morph task rather than given a made-up label, so the probe's question stays "which value",
not "has one or not". A word's vector is the mean of its word pieces, fed to the tokenizer as the treebank's words
(core.analyses.probe.sentence_vectors), at every layer asked for (0 = the embeddings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.analyses.probe import sentence_vectors
from core.data.treebank import Sentence

TASK_HELP = ("upos | xpos | deprel | morph:FEAT (e.g. morph:Number, morph:Gender, morph:Tense): one label per word "
             "from the treebank; a word's vector is the mean of its word pieces")
PLAIN_TASKS = ("upos", "xpos", "deprel")
_FEATURE = re.compile(r"^morph:([A-Z][A-Za-z0-9\[\]]*)$")


class TaskError(ValueError):
    """A task name BERT Lens cannot read, or a treebank that gives the task nothing to learn."""


def check_task(task: str) -> str:
    """The task name, stripped, when it is one BERT Lens reads; a TaskError naming the choices otherwise."""
    name = (task or "").strip()
    if name in PLAIN_TASKS or _FEATURE.match(name):
        return name
    raise TaskError(f"Task {task!r} unknown; choose upos, xpos, deprel or morph:FEAT with a UD feature name "
                    "such as morph:Number.")


def word_labels(sentence: Sentence, task: str) -> tuple[str | None, ...]:
    """Each word's label for `task`, None where the word has none (a morph feature it lacks, an empty XPOS)."""
    task = check_task(task)
    if task == "upos":
        return tuple(label or None for label in sentence.upos)
    if task == "xpos":
        return tuple(label if label and label != "_" else None for label in sentence.xpos) \
            if sentence.xpos else (None,) * len(sentence)
    if task == "deprel":
        return tuple(label or None for label in sentence.deprels)
    return sentence.feature(_FEATURE.match(task).group(1))


@dataclass(frozen=True)
class LabelledWords:
    """The labelled words of a treebank and their vectors.

    vectors [n_layers, N, D] float32 (layers in `layers` order); labels [N] str; words [N] str, the word forms
    (Hewitt & Liang's control task gives each word type one random label); sentence_of [N] int, the index of each
    word's sentence in the treebank given; n_sentences_skipped: sentences the model could not read whole
    (longer than its input, or a word without a piece).
    """

    task: str
    layers: tuple[int, ...]
    vectors: np.ndarray
    labels: np.ndarray
    words: np.ndarray
    sentence_of: np.ndarray
    n_sentences_skipped: int = 0

    def __len__(self) -> int:
        return len(self.labels)

    def at(self, layer: int) -> np.ndarray:
        """[N, D] the vectors of one layer (its number, 0 = embeddings)."""
        return self.vectors[self.layers.index(layer)]


def labelled_words(lm, sentences: Sequence[Sentence], task: str, layers: Sequence[int], *, batch_size: int = 16,
                   progress=None, should_stop=None) -> LabelledWords:
    """The words of `sentences` that have a label for `task`, with their vectors at each of `layers`.

    One forward pass per batch of sentences gives every layer at once. Raises TaskError when no word has a label
    (morph:Gender on a treebank without that feature, say)."""
    task = check_task(task)
    layers = tuple(int(layer) for layer in layers)
    per_sentence = sentence_vectors(lm, sentences, layers, batch_size=batch_size, progress=progress,
                                    should_stop=should_stop)
    chunks, labels, words, owners = [], [], [], []
    skipped = 0
    for index, (sentence, vectors) in enumerate(zip(sentences, per_sentence)):
        if vectors is None:
            skipped += 1
            continue
        keep = [k for k, label in enumerate(word_labels(sentence, task)) if label is not None]
        if not keep:
            continue
        chunks.append(vectors[:, keep])
        labels.extend(word_labels(sentence, task)[k] for k in keep)
        words.extend(sentence.words[k] for k in keep)
        owners.extend([index] * len(keep))
    if not labels:
        raise TaskError(f"No word of these {len(sentences)} sentences has a {task} label; pick another task or a "
                        "treebank that annotates it.")
    return LabelledWords(task, layers, np.concatenate(chunks, axis=1).astype(np.float32, copy=False),
                         np.array(labels, dtype=object), np.array(words, dtype=object),
                         np.array(owners, dtype=np.int64), skipped)
