"""Aspect heads (the fine-tuned-attention blog, on Sun et al. 2019's "auxiliary sentence" task).

The task as Sun et al.'s QA-M builds it from SemEval-14 restaurants: every review is paired with one question per
aspect category, "what do you think of the CATEGORY of it ?" (anecdotes/miscellaneous is asked as "anecdotes",
as their generator writes it); the label is the category's polarity, or "none" when the review does not talk
about the category ("conflict" aspects are dropped, as the `absa` task does).

The score: the blog saw head 9-8 (bertviz numbering, from 0) point the question's aspect word ("service") at the
aspect term of the review ("waiter"). SemEval-14 gives the terms' character spans but not which category a term
belongs to, so a review is scored only when that is certain: it names exactly one category (not
anecdotes/miscellaneous) and has aspect terms, which are then that category's mentions. Per head, the score of a
present aspect is the attention the question's aspect-word tokens pay to the tokens of the review's term spans
(summed over the span tokens, averaged over the aspect-word tokens, then over examples). For absent aspects
("none") the same aspect-word rows are split into [CLS], [SEP], question and review mass: the blog's no-op heads
put it on [SEP].
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice
from typing import Iterable, Sequence

import numpy as np

from core import numbering
from core.data import datasets as local_data
from core.model.encoding import Words, encode, encode_stream
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck

CATEGORIES = ("food", "service", "price", "ambience", "anecdotes/miscellaneous")
QA_LABELS = ("positive", "negative", "neutral", "none")
ABSENT_PARTS = ("cls", "sep", "question", "review")
_WORD = re.compile(r"\w+|[^\w\s]")


def category_word(category: str) -> str:
    return category.split("/", 1)[0]


def question(category: str) -> str:
    return f"what do you think of the {category_word(category)} of it ?"


def split_words(text: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """Words (runs of word characters, or one punctuation mark) and their character spans."""
    found = list(_WORD.finditer(text))
    return tuple(m.group() for m in found), tuple(m.span() for m in found)


@dataclass(frozen=True)
class AspectPair:
    """One (question, review) pair. question_words / review_words: the words fed to the model (Words pair);
    aspect_words: indices into question_words of the aspect word; span_words: indices into review_words
    inside an aspect-term span (empty when the pair is not scored: absent, or the term's category unknown);
    other_words: for an absent aspect, the review's words inside the term spans of the one other category it
    names (the blog's "opposite aspect"; empty unless that category is certain, as for span_words)."""

    category: str
    label: str
    question_words: tuple[str, ...]
    review_words: tuple[str, ...]
    aspect_words: tuple[int, ...]
    span_words: tuple[int, ...]
    review: str = ""  # the review as written (training feeds the text, the scorer the words)
    other_words: tuple[int, ...] = ()

    @property
    def present(self) -> bool:
        return self.label != "none"

    @property
    def inputs(self) -> tuple[Words, Words]:
        return Words(self.question_words), Words(self.review_words)


def build_pairs(rows: Iterable[dict]) -> list[AspectPair]:
    """Every (category question, review) pair of SemEval-14 rows (dicts with text, aspect_terms with start/end,
    aspect_categories with polarity), absent categories labelled "none", conflict dropped."""
    out = []
    for r in rows:
        words, spans = split_words(r["text"])
        named = {a["category"]: a["polarity"] for a in r["aspect_categories"]}
        certain = len(named) == 1 and "anecdotes/miscellaneous" not in named and r["aspect_terms"]
        span_words = tuple(sorted({i for t in (r["aspect_terms"] if certain else ()) for i, (s, e) in enumerate(spans)
                                   if s < t["end"] and e > t["start"]}))
        for category in CATEGORIES:
            label = named.get(category, "none")
            if label not in QA_LABELS:
                continue
            q = tuple(question(category).split())
            out.append(AspectPair(category, label, q, words, (q.index(category_word(category)),),
                                  span_words if label != "none" else (), r["text"],
                                  span_words if label == "none" else ()))
    return out


def semeval_pairs(split: str = "test", reviews: int | None = None) -> list[AspectPair]:
    """The pairs of the split's first `reviews` reviews (all when None), in file order."""
    name = {"train": "restaurants_train.jsonl.gz", "test": "restaurants_test.jsonl.gz"}[split]
    rows = local_data.read_jsonl_gz(local_data.local_file(f"semeval2014_absa_restaurants/{name}"))
    return build_pairs(islice(rows, reviews))


def aspect_rows(attentions: np.ndarray, word_ids: np.ndarray, special_mask: np.ndarray,
                aspect_words: Sequence[int]) -> np.ndarray:
    """The aspect word's attention rows, float64 [L, H, T]: its query tokens' rows averaged (each sums to 1)."""
    ids = np.asarray(word_ids)
    queries = np.flatnonzero(np.isin(ids, list(aspect_words)) & ~np.asarray(special_mask, dtype=bool))
    if not len(queries):
        raise ValueError("the aspect word has no token")
    return np.asarray(attentions, dtype=np.float64)[:, :, queries, :].mean(axis=2)


def review_mask(word_ids: np.ndarray, special_mask: np.ndarray, n_question_words: int,
                review_words: Sequence[int]) -> np.ndarray:
    """bool [T]: the tokens of the given review words (review word w is word id n_question_words + w)."""
    ids = np.asarray(word_ids)
    return np.isin(ids, [n_question_words + w for w in review_words]) & ~np.asarray(special_mask, dtype=bool)


def pair_scores(attentions: np.ndarray, word_ids: np.ndarray, special_mask: np.ndarray, segment_ids: np.ndarray,
                n_question_words: int, aspect_words: Sequence[int], span_words: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """For one encoded pair: (span score float64 [L, H], absent parts float64 [len(ABSENT_PARTS), L, H]).
    The aspect-word rows (query tokens of the aspect words) averaged; span score = their mass on the review's
    span tokens (review word index w is word id n_question_words + w); parts = mass on [CLS], [SEP], the
    question's and the review's word tokens."""
    ids = np.asarray(word_ids)
    special = np.asarray(special_mask, dtype=bool)
    rows = aspect_rows(attentions, ids, special, aspect_words)
    span = review_mask(ids, special, n_question_words, span_words)
    return rows[..., span].sum(axis=-1), row_parts(rows, special, segment_ids)


def row_parts(rows: np.ndarray, special_mask: np.ndarray, segment_ids: np.ndarray) -> np.ndarray:
    """float64 [len(ABSENT_PARTS), L, H]: the mass of aspect rows [L, H, T] on [CLS], [SEP], the question's and
    the review's word tokens."""
    special = np.asarray(special_mask, dtype=bool)
    cls = np.zeros(len(special), dtype=bool)
    cls[0] = special[0]
    sep = special & ~cls
    seg = np.asarray(segment_ids)
    masks = (cls, sep, ~special & (seg == 0), ~special & (seg == 1))
    return np.stack([rows[..., m].sum(axis=-1) for m in masks])


@dataclass(frozen=True)
class AspectHeads:
    """Per-head aspect scores of one model, L layers × H heads.

    span_score    float64 [L, H] mean over scored present pairs of the aspect word's mass on the term span
    span_baseline float64 [L, H] the same mass had the aspect word attended uniformly (span tokens / tokens)
    absent_parts  float64 [len(ABSENT_PARTS), L, H] mean over absent pairs of the aspect word's mass on
                  [CLS], [SEP], question words, review words
    present_parts the same over the present (scored) pairs, for contrast
    """

    model: str
    span_score: np.ndarray
    span_baseline: np.ndarray
    absent_parts: np.ndarray
    present_parts: np.ndarray
    n_present: int
    n_absent: int
    split: str = "test"

    def top_heads(self, k: int = 5) -> list[tuple[int, int, float]]:
        order = np.argsort(-self.span_score, axis=None)[:k]
        h = self.span_score.shape[1]
        return [(int(i // h), int(i % h), float(self.span_score.ravel()[i])) for i in order]

    def to_json(self) -> dict:
        return {"model": self.model, "split": self.split, "n_present": self.n_present, "n_absent": self.n_absent,
                "span_score": self.span_score.round(6).tolist(), "span_baseline": self.span_baseline.round(6).tolist(),
                "absent_parts": {p: self.absent_parts[i].round(6).tolist() for i, p in enumerate(ABSENT_PARTS)},
                "present_parts": {p: self.present_parts[i].round(6).tolist() for i, p in enumerate(ABSENT_PARTS)},
                "top_heads": [{"layer": numbering.shown(l), "head": h, "score": round(s, 6)} for l, h, s in self.top_heads()]}


def aspect_heads(lm: LoadedModel, pairs: Sequence[AspectPair], *, batch_size: int = 16, split: str = "test",
                 progress: ProgressCallback = None, should_stop: StopCheck = None) -> AspectHeads:
    """Scores over the scored present pairs and the absent ones (other pairs are not fed to the model)."""
    used = [p for p in pairs if (p.present and p.span_words) or not p.present]
    if not any(p.present for p in used) or not any(not p.present for p in used):
        raise ValueError("need both present aspects with term spans and absent aspects")
    span_sum = base_sum = absent_sum = present_sum = None
    n_present = n_absent = 0
    for index, enc in encode_stream(lm, [p.inputs for p in used], batch_size=batch_size, hidden_states=False,
                                    progress=progress, should_stop=should_stop):
        p = used[index]
        ids = np.asarray(enc.word_ids)
        n_q = len(p.question_words)
        span_ids = [n_q + w for w in p.span_words]
        if p.present and not np.isin(ids, span_ids).any():
            continue  # the term was truncated away
        score, parts = pair_scores(enc.attentions, enc.word_ids, enc.special_mask, enc.segment_ids, n_q,
                                   p.aspect_words, p.span_words)
        if span_sum is None:
            span_sum, base_sum = np.zeros_like(score), np.zeros_like(score)
            absent_sum, present_sum = np.zeros_like(parts), np.zeros_like(parts)
        if p.present:
            span_sum += score
            base_sum += np.isin(ids, span_ids).sum() / len(ids)
            present_sum += parts
            n_present += 1
        else:
            absent_sum += parts
            n_absent += 1
    return AspectHeads(lm.ref, span_sum / max(n_present, 1), base_sum / max(n_present, 1),
                       absent_sum / max(n_absent, 1), present_sum / max(n_present, 1), n_present, n_absent, split)


@dataclass(frozen=True)
class AspectRow:
    """One pair's aspect-word attention in one head: tokens [T], weights float64 [T] (the aspect word's token
    rows averaged, so they sum to 1), kinds [T] in ("[CLS]", "[SEP]", "question", "aspect word", "review",
    "aspect term")."""

    tokens: tuple[str, ...]
    weights: np.ndarray
    kinds: tuple[str, ...]
    layer: int
    head: int


def aspect_row(lm: LoadedModel, pair: AspectPair, layer: int, head: int) -> AspectRow:
    """Where the aspect word of one pair looks in one head (the blog's bertviz view, as numbers)."""
    enc = encode(lm, pair.inputs, hidden_states=False)
    ids = np.asarray(enc.word_ids)
    n_q = len(pair.question_words)
    rows = np.flatnonzero(np.isin(ids, list(pair.aspect_words)) & ~enc.special_mask)
    weights = enc.attentions[layer, head][rows].astype(np.float64).mean(axis=0)
    kinds = []
    for t, (i, special) in enumerate(zip(ids, enc.special_mask)):
        if special:
            kinds.append("[CLS]" if t == 0 else "[SEP]")
        elif i < n_q:
            kinds.append("aspect word" if i in pair.aspect_words else "question")
        else:
            kinds.append("aspect term" if i - n_q in pair.span_words else "review")
    return AspectRow(tuple(enc.tokens), weights, tuple(kinds), layer, head)
