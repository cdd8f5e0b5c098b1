"""The fine-tuned-attention blog's four head roles, measured per head over SemEval-14 QA-M pairs (reference 002).

The blog looked at a BERT fine-tuned on Sun et al.'s QA-M task with bertviz and named heads (bertviz numbering,
layer-head from 0): 9-8 points the question's aspect word at the review's aspect term, 9-0 at the aspect and its
sentiment words, 10-3 at "the other aspect and their related words that are not available in the question",
and heads that look for an absent aspect rest on [SEP]. Each role becomes one mass of the aspect word's
attention row (core.analyses.aspect_heads.aspect_rows: its query tokens' rows averaged), per head:

- aspect term: mass on the review's aspect-term tokens, over present aspects whose terms are certainly theirs
  (the review names exactly one category, as core.analyses.aspect_heads scores it);
- sentiment words: mass on the review's words in the shipped lexicon (core/data/sentiment_lexicon.tsv, a VADER
  subset; its header gives source and licence), over the same present pairs that have one;
- other aspect's terms: for an absent aspect asked of such a review, mass on the terms of the category the review
  does name. SemEval-14 does not link terms to categories, so a review naming two categories (the blog's
  service-vs-food pictures) cannot be split; the one-category reviews asked about another category can;
- absent aspects: where the row of an absent aspect goes ([CLS], [SEP], question, review), beside present ones.

Each mass comes with its uniform baseline (the mass had the row been flat: the measured tokens / all tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from core import numbering
from core.analyses.aspect_heads import ABSENT_PARTS, AspectPair, aspect_rows, review_mask, row_parts
from core.model.encoding import encode_stream
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck

MEASURES = ("aspect term", "sentiment words", "other aspect's terms")
LEXICON_FILE = Path(__file__).resolve().parent.parent / "data" / "sentiment_lexicon.tsv"
# A named head "holds its role" when it ranks in this top share of all heads on its measure and beats the
# uniform baseline: the blog reports what bertviz showed for a few examples, no numbers, so the bar is ours.
TOP_SHARE = 0.10


@lru_cache(maxsize=1)
def sentiment_lexicon() -> Mapping[str, float]:
    """word -> mean valence (-4 .. 4) of the shipped VADER subset (lower-case words)."""
    out = {}
    for line in LEXICON_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            word, valence = line.split("\t")
            out[word] = float(valence)
    return out


def sentiment_words(words: Sequence[str], lexicon: Mapping[str, float]) -> tuple[int, ...]:
    """Indices of the words (lower-cased) found in the lexicon."""
    return tuple(i for i, w in enumerate(words) if w.lower() in lexicon)


def top_count(n_heads: int) -> int:
    """How many heads make the top TOP_SHARE (at least one): 15 of BERT-base's 144."""
    return max(1, math.ceil(TOP_SHARE * n_heads))


@dataclass(frozen=True)
class AspectRoles:
    """The four roles per head of one model, L layers × H heads.

    score          float64 [len(MEASURES), L, H] mean mass of the aspect word's row on each measure's tokens
    baseline       float64 [len(MEASURES)] the same mass had the row been uniform (does not depend on the head)
    n_pairs        int [len(MEASURES)] pairs each measure averages over
    absent_parts   float64 [len(ABSENT_PARTS), L, H] mean mass of absent aspects' rows on [CLS], [SEP], question
                   words, review words
    present_parts  the same over the present pairs of the aspect-term measure, for contrast
    n_absent       absent pairs behind absent_parts
    """

    model: str
    score: np.ndarray
    baseline: np.ndarray
    n_pairs: np.ndarray
    absent_parts: np.ndarray
    present_parts: np.ndarray
    n_absent: int

    def rank(self, measure: str, layer: int, head: int) -> int:
        """1 + the heads scoring strictly higher on `measure` (1 = the best head)."""
        scores = self.score[MEASURES.index(measure)]
        return int((scores > scores[layer, head]).sum()) + 1

    def holds(self, measure: str, layer: int, head: int) -> bool:
        """Whether the head is in the top TOP_SHARE of heads on `measure` and above its uniform baseline."""
        m = MEASURES.index(measure)
        return (self.rank(measure, layer, head) <= top_count(self.score[m].size)
                and bool(self.score[m, layer, head] > self.baseline[m]))

    def top_heads(self, measure: str, k: int = 5) -> list[tuple[int, int, float]]:
        scores = self.score[MEASURES.index(measure)]
        order = np.argsort(-scores, axis=None, kind="stable")[:k]
        return [(int(i // scores.shape[1]), int(i % scores.shape[1]), float(scores.ravel()[i])) for i in order]

    def to_json(self) -> dict:
        return {"model": self.model, "n_absent": self.n_absent,
                "measures": {m: {"score": self.score[i].round(6).tolist(), "baseline": round(float(self.baseline[i]), 6),
                                 "n_pairs": int(self.n_pairs[i]),
                                 "top_heads": [{"layer": numbering.shown(l), "head": h, "score": round(s, 6)}
                                               for l, h, s in self.top_heads(m)]}
                             for i, m in enumerate(MEASURES)},
                "absent_parts": {p: self.absent_parts[i].round(6).tolist() for i, p in enumerate(ABSENT_PARTS)},
                "present_parts": {p: self.present_parts[i].round(6).tolist() for i, p in enumerate(ABSENT_PARTS)}}


def aspect_roles(lm: LoadedModel, pairs: Sequence[AspectPair], *, batch_size: int = 16,
                 lexicon: Mapping[str, float] | None = None, progress: ProgressCallback = None,
                 should_stop: StopCheck = None) -> AspectRoles:
    """The four roles over `pairs` (core.analyses.aspect_heads.semeval_pairs); pairs no measure uses are not fed."""
    lexicon = sentiment_lexicon() if lexicon is None else lexicon
    used = [p for p in pairs if p.span_words or p.other_words or not p.present]
    if not any(p.span_words for p in used) or not any(not p.present for p in used):
        raise ValueError("need present aspects with certain term spans and absent aspects: give more reviews")
    sums: np.ndarray | None = None
    base, counts = np.zeros(len(MEASURES)), np.zeros(len(MEASURES), dtype=int)
    absent_sum = present_sum = None
    for index, enc in encode_stream(lm, [p.inputs for p in used], batch_size=batch_size, hidden_states=False,
                                    progress=progress, should_stop=should_stop):
        p = used[index]
        ids, special = np.asarray(enc.word_ids), np.asarray(enc.special_mask, dtype=bool)
        n_q = len(p.question_words)
        rows = aspect_rows(enc.attentions, ids, special, p.aspect_words)
        if sums is None:
            sums = np.zeros((len(MEASURES),) + rows.shape[:2])
            absent_sum, present_sum = np.zeros((len(ABSENT_PARTS),) + rows.shape[:2]), np.zeros((len(ABSENT_PARTS),) + rows.shape[:2])
        parts = row_parts(rows, special, enc.segment_ids)
        if not p.present:
            absent_sum += parts
        words = {0: p.span_words, 1: sentiment_words(p.review_words, lexicon) if p.span_words else (),
                 2: p.other_words}
        for m, chosen in words.items():
            mask = review_mask(ids, special, n_q, chosen)
            if mask.any():  # none: no such words, or truncated away
                sums[m] += rows[..., mask].sum(axis=-1)
                base[m] += mask.sum() / len(ids)
                counts[m] += 1
                if m == 0:
                    present_sum += parts
    n_absent = sum(not p.present for p in used)
    per = np.maximum(counts, 1)
    return AspectRoles(lm.ref, sums / per[:, None, None], base / per, counts, absent_sum / max(n_absent, 1),
                       present_sum / per[0], n_absent)
