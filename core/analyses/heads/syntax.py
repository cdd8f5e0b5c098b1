"""Syntactic heads on a dependency treebank (Clark et al. 2019, section 4.2): how often each head's most-attended
word is the gold head (or dependent) of a word, per relation, against a fixed-offset baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering
from core.analyses.heads.roles import PROTOCOL_HELP, PROTOCOLS, head_label
from core.contract import setting
from core.model.encoding import Words, encode_stream, tokenize
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck
from core.protocols import DEFAULT, check

CLARK_OFFSETS = tuple(range(-3, 3))  # range(-3, 3) in Syntax_Analysis.ipynb: -3..+2
CLARK_MAX_TOKENS = 128  # extract_attention.py --max_sequence_length default: longer examples get no maps
CLARK_POSSESSIVES = ("'s", "s'")  # the words after a poss dependent that trigger his special case
POSS_RELATIONS = ("poss", "nmod:poss")  # Stanford Dependencies' poss; UD's nmod:poss is the same relation
DIRECTIONS = ("dependent→head", "head→dependent")


def predicted_heads(word_att: np.ndarray) -> np.ndarray:
    """Each word's most-attended *other* word, per head: [L, H, W, W] -> int [L, H, W] (0-based word index)."""
    w = word_att.shape[-1]
    masked = np.where(np.eye(w, dtype=bool), -np.inf, word_att)
    return masked.argmax(axis=-1)


def predicted_heads_reverse(word_att: np.ndarray) -> np.ndarray:
    """Clark's "transpose" predictor: for each word, the *other* word that attends to it most, per head:
    [L, H, W, W] -> int [L, H, W] (0-based). The attention map is transposed, not renormalised, as in his code."""
    return predicted_heads(np.swapaxes(word_att, -1, -2))


def clark_hits(guess: np.ndarray, heads: Sequence[int], deprels: Sequence[str], words: Sequence[str]) -> np.ndarray:
    """Clark's `evaluate_predictor` for one sentence: guess int [..., W] (0-based predicted head of every word),
    heads 1-based (0 = ROOT) -> bool [..., W], whether each word's prediction is right.

    A root can never be right (a prediction is always a word). For a poss dependent followed by "'s" or "s'", the
    prediction *of that next word* is scored instead, and (exactly as his code guards it) only where the
    dependent's own prediction is not the sentence's last word."""
    guess = np.asarray(guess)
    n = len(heads)
    gold = np.asarray(heads) - 1  # -1 for ROOT: never predicted
    hits = guess == gold
    for d in range(n - 1):
        if deprels[d] in POSS_RELATIONS and words[d + 1] in CLARK_POSSESSIVES:
            own_not_last = guess[..., d] + 1 < n
            hits[..., d] = np.where(own_not_last, guess[..., d + 1] == gold[d], hits[..., d])
    return hits


def clark_offset_guess(n: int, offset: int) -> np.ndarray:
    """Clark's `offset_predictor`: word i's head is word i + offset, clamped into the sentence; a position left of
    the first word becomes ROOT. int [n], 0-based, -1 = ROOT."""
    return np.array([max(0, min(i + offset + 1, n)) - 1 for i in range(n)])


@dataclass(frozen=True)
class SyntaxHeads:
    """Which head finds each dependency relation's head word best.

    relations       [R] relation names (bertlens: subtypes dropped unless asked; clark: subtypes kept, since UD's
                    nmod:poss, nsubj:pass, compound:prt... are Stanford Dependencies' poss, nsubjpass, prt...),
                    "all" last: every relation together
    counts          int [R]: words scored with that relation (bertlens: root words excluded; clark: every word)
    accuracy        float64 [R, layer, head]: share of those words whose predicted head is the gold head
                    (bertlens: dependent→head; clark: the better of the two directions, per relation and head)
    directional     float64 [R, 2, layer, head] under clark: accuracy of each direction (DIRECTIONS order);
                    None under bertlens
    best_layer, best_head  int [R]: argmax of accuracy per relation; best_accuracy float64 [R]; best_direction
    baseline_offset int [R]: the relative position (head index - dependent index) that is most often right
                    (bertlens: any offset seen; clark: -3..+2, ties to the larger offset as his max())
    baseline_accuracy float64 [R]: accuracy of always predicting that offset
    n_sentences used; n_skipped sentences left out (longer than the model's max length, or 128 pieces: clark)
    treebank        the corpus spec or file the sentences came from, when known ("" otherwise)
    protocol        "bertlens" or "clark"
    """

    model: str
    relations: tuple[str, ...]
    counts: np.ndarray
    accuracy: np.ndarray
    baseline_offset: np.ndarray
    baseline_accuracy: np.ndarray
    n_sentences: int
    n_skipped: int
    treebank: str = ""
    protocol: str = DEFAULT
    directional: np.ndarray | None = None

    @property
    def best_layer(self) -> np.ndarray:
        flat = self.accuracy.reshape(len(self.relations), -1).argmax(axis=-1)
        return flat // self.accuracy.shape[2]

    @property
    def best_head(self) -> np.ndarray:
        flat = self.accuracy.reshape(len(self.relations), -1).argmax(axis=-1)
        return flat % self.accuracy.shape[2]

    @property
    def best_accuracy(self) -> np.ndarray:
        return self.accuracy.reshape(len(self.relations), -1).max(axis=-1)

    @property
    def best_direction(self) -> list[str]:
        """The direction of each relation's best head (always dependent→head under bertlens; a tie between the
        two directions goes to dependent→head)."""
        if self.directional is None:
            return [DIRECTIONS[0]] * len(self.relations)
        r = np.arange(len(self.relations))
        d = self.directional[r, :, self.best_layer, self.best_head]  # [R, 2]
        return [DIRECTIONS[int(k)] for k in (d[:, 1] > d[:, 0])]

    def label(self, r: int) -> str:
        """The best head of relation index r, named as the protocol names heads ("8-10" under clark)."""
        return head_label(int(self.best_layer[r]), int(self.best_head[r]), self.protocol)

    def to_json(self) -> dict:
        rows = []
        directions = self.best_direction
        for r, name in enumerate(self.relations):
            rows.append({
                "relation": name, "count": int(self.counts[r]), "layer": numbering.shown(self.best_layer[r]),
                "head": int(self.best_head[r]), "accuracy": float(self.best_accuracy[r]),
                "baseline_offset": int(self.baseline_offset[r]), "baseline_accuracy": float(self.baseline_accuracy[r]),
                "label": self.label(r), "direction": directions[r],
            })
        return {"model": self.model, "relations": rows, "n_sentences": self.n_sentences, "n_skipped": self.n_skipped,
                "treebank": self.treebank, "protocol": self.protocol}


class SyntaxTally:
    """Running counts for `SyntaxHeads`; `add` one sentence's word-level maps at a time.

    subtypes None: the protocol's choice (bertlens drops them, clark keeps them)."""

    def __init__(self, subtypes: bool | None = None, protocol: str = DEFAULT):
        self.protocol = check(protocol, PROTOCOLS)
        self.subtypes = (protocol == "clark") if subtypes is None else subtypes
        self.correct: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}
        self.offsets: dict[str, dict[int, int]] = {}
        self.n_sentences = 0

    def _name(self, rel: str) -> str:
        return rel if self.subtypes else rel.split(":", 1)[0]

    def _count(self, key: str, hit: np.ndarray) -> None:
        if key not in self.correct:
            self.correct[key] = np.zeros(hit.shape, dtype=np.int64)
            self.counts[key] = 0
            self.offsets[key] = {}
        self.correct[key] += hit
        self.counts[key] += 1

    def add(self, word_att: np.ndarray, heads: Sequence[int], deprels: Sequence[str],
            words: Sequence[str] | None = None) -> None:
        """word_att [L, H, W, W]; heads 1-based (0 = root), deprels [W], words [W] (needed under clark, for the
        poss rule), as `core.data.treebank.Sentence`."""
        if word_att.shape[-1] != len(heads):
            raise ValueError(f"attention covers {word_att.shape[-1]} words, the sentence has {len(heads)}")
        if self.protocol == "clark":
            self._add_clark(word_att, heads, deprels, words)
        else:
            self._add_bertlens(word_att, heads, deprels)
        self.n_sentences += 1

    def _add_bertlens(self, word_att: np.ndarray, heads: Sequence[int], deprels: Sequence[str]) -> None:
        guess = predicted_heads(word_att)  # [L, H, W]
        for d, (head, rel) in enumerate(zip(heads, deprels)):
            if head == 0:
                continue
            hit = (guess[:, :, d] == head - 1).astype(np.int64)
            offset = (head - 1) - d
            for key in (self._name(rel), "all"):
                self._count(key, hit)
                self.offsets[key][offset] = self.offsets[key].get(offset, 0) + 1

    def _add_clark(self, word_att: np.ndarray, heads: Sequence[int], deprels: Sequence[str],
                   words: Sequence[str] | None) -> None:
        if words is None or len(words) != len(heads):
            raise ValueError("the Clark protocol needs the sentence's words (for his poss rule)")
        n = len(heads)
        guesses = np.stack([predicted_heads(word_att), predicted_heads_reverse(word_att)], axis=0)  # [2, L, H, W]
        hits = clark_hits(guesses, heads, deprels, words).astype(np.int64)
        base = np.stack([clark_hits(clark_offset_guess(n, o), heads, deprels, words) for o in CLARK_OFFSETS])
        for d, rel in enumerate(deprels):
            for key in (self._name(rel), "all"):
                self._count(key, hits[..., d])
                for k, o in enumerate(CLARK_OFFSETS):
                    self.offsets[key][o] = self.offsets[key].get(o, 0) + int(base[k, d])

    def result(self, model: str, n_skipped: int = 0) -> SyntaxHeads:
        if not self.correct:
            raise ValueError("no dependents seen: the treebank had no sentences with a non-root word")
        names = sorted((k for k in self.correct if k != "all"), key=lambda k: -self.counts[k])
        names.append("all")
        counts = np.array([self.counts[k] for k in names], dtype=np.int64)
        scores = np.stack([self.correct[k] / c for k, c in zip(names, counts)])
        if self.protocol == "clark":
            directional = scores  # [R, 2, L, H]
            accuracy = directional.max(axis=1)
            # His max((score, offset)): the larger offset wins a tie. Every offset is tallied, right or not.
            best = [max(self.offsets[k].items(), key=lambda item: (item[1], item[0])) for k in names]
        else:
            directional = None
            accuracy = scores
            # Ties between offsets go to the nearer one, then to the left.
            best = [max(self.offsets[k].items(), key=lambda item: (item[1], -abs(item[0]), -item[0])) for k in names]
        return SyntaxHeads(
            model, tuple(names), counts, accuracy,
            np.array([o for o, _ in best], dtype=np.int64),
            np.array([n / c for (_, n), c in zip(best, counts)]),
            self.n_sentences, n_skipped, protocol=self.protocol, directional=directional,
        )


@dataclass(frozen=True)
class SyntaxSettings:
    """The `syntax-heads` analysis's settings, declared once (core.contract)."""

    # None: the protocol's choice (bertlens drops subtypes, clark keeps them: SyntaxTally)
    subtypes: bool | None = setting(None, "keep relation subtypes (nmod:poss) apart (left out: off under the "
                                    "bertlens protocol, always on under clark)", type="bool", url=None)
    protocol: str = setting(DEFAULT, PROTOCOL_HELP, choices=PROTOCOLS, url=None)  # the page's link: a bool switch
    batch_size: int = setting(16, "sentences encoded at once", low=1, high=4096, url=None)


def run_syntax_heads(lm: LoadedModel, sentences: Sequence, settings: SyntaxSettings = SyntaxSettings(),
                     progress: ProgressCallback = None, should_stop: StopCheck = None) -> SyntaxHeads:
    """`syntax_heads` with its declared settings (the analysis's run)."""
    return syntax_heads(lm, sentences, batch_size=settings.batch_size, subtypes=settings.subtypes,
                        protocol=settings.protocol, progress=progress, should_stop=should_stop)


def syntax_heads(
    lm: LoadedModel,
    sentences: Sequence,
    *,
    batch_size: int = 16,
    subtypes: bool | None = None,
    protocol: str = DEFAULT,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> SyntaxHeads:
    """Clark et al.'s head finder on treebank sentences (`core.data.treebank.Sentence`): the words are fed as the
    treebank splits them (`Words`), so every word piece maps to exactly one gold word; word-level attention is
    `Encoding.word_attention` (special tokens dropped; to a word = sum over its pieces, from a word = mean, as
    the paper's section 4.1). Sentences longer than the model reads (clark: than 128 pieces) are skipped."""
    check(protocol, PROTOCOLS)
    if not sentences:
        raise ValueError("the treebank has no sentences")
    tally = SyntaxTally(subtypes, protocol)
    limit = min(lm.max_length, CLARK_MAX_TOKENS) if protocol == "clark" else lm.max_length
    # Tokenized once: the lengths decide what is skipped, and the same tokens are fed to the model.
    tokenized = tokenize(lm, [Words(s.words) for s in sentences])
    kept = [i for i, t in enumerate(tokenized) if t.n_tokens_full <= limit]
    if not kept:
        raise ValueError(f"every sentence is longer than {limit} word pieces; give shorter sentences")
    for index, enc in encode_stream(
        lm, [tokenized[i] for i in kept], batch_size=batch_size, hidden_states=False,
        progress=progress, should_stop=should_stop,
    ):
        sentence = sentences[kept[index]]
        tally.add(enc.word_attention(), sentence.heads, sentence.deprels, sentence.words)
    return tally.result(lm.ref, len(sentences) - len(kept))
