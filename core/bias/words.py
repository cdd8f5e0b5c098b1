"""Word lists and what they match: parsing, whole-word matching, and the three training sets (full, biased,
control) of the biased-training-data experiment.

Two filters (a `protocol`, see core.protocols):
    bertlens  whole-word and case-insensitive, in premise or hypothesis ("Woman" and "woman's" match "woman";
              "womanhood" does not): removes 28.6 % of the local SNLI train subset with the slides' words.
    slides    the CS4650 slides' filter as their batch counts imply (17,168 -> 13,197 batches: 23.1 % removed):
              a case-sensitive match of whole whitespace-separated tokens of the premise only ("Woman", "woman."
              and "woman's" do not match "woman"): removes 23.1 % of the same subset.
BERT Lens's filter stays the default because it removes what a reader means by "pairs that mention women";
the slides' one is there to reproduce their numbers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from core.bias_settings import DEFAULT_WORDS, FILTERS  # declared once, with the bias settings
from core.data.datasets import Example
from core.validation import whole_match
from core.safe_text import markdown_text

WORD = re.compile(r"[^\W_](?:[\w'-]*[^\W_])?")  # matched whole (validation.whole_match)

# ---- word matching -----------------------------------------------------------------------------------


FILTER_TITLES = {
    "bertlens": "whole words, any capitalisation, in premise or hypothesis",
    "slides": "the slides' filter: whole space-separated tokens, exact case, premise only",
}


def check_filter(protocol: str) -> str:
    if protocol not in FILTERS:
        raise ValueError(f"Unknown filter protocol '{protocol}'; choose one of: {', '.join(FILTERS)}.")
    return protocol


def parse_words(words: str | Iterable[str], keep_case: bool = False) -> tuple[str, ...]:
    """De-duplicated words from a list or a comma/space/newline separated string, lower-cased unless keep_case
    (the slides' filter is case-sensitive).

    Raises ValueError naming any entry that is not a single word (letters, digits, inner ' or -)."""
    items = re.split(r"[,\s]+", words) if isinstance(words, str) else [str(w) for w in words]
    cleaned = [w.strip() if keep_case else w.strip().lower() for w in items if w and w.strip()]
    bad = [w for w in cleaned if not whole_match(WORD, w)]
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


def matcher(words: Iterable[str], protocol: str = "bertlens") -> Callable[[Example], bool]:
    """The filter of `protocol` as a predicate on one example (see the module docstring)."""
    if check_filter(protocol) == "slides":
        listed = frozenset(parse_words(words, keep_case=True))
        return lambda e: any(token in listed for token in e.text.split())
    pattern = word_pattern(words)
    return lambda e: bool(pattern.search(example_texts(e)))


def match_mask(examples: Sequence[Example], words: Iterable[str], protocol: str = "bertlens") -> np.ndarray:
    """mask [n] bool: example i passes the filter of `protocol` (default: a listed word in premise or hypothesis)."""
    hit = matcher(words, protocol)
    return np.fromiter((hit(e) for e in examples), dtype=bool, count=len(examples))


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


def word_matches(examples: Sequence[Example], words: Iterable[str], protocol: str = "bertlens") -> WordMatches:
    words = parse_words(words, keep_case=check_filter(protocol) == "slides")
    per_word = {w: int(match_mask(examples, [w], protocol).sum()) for w in words}
    return WordMatches(words, match_mask(examples, words, protocol), per_word)


def highlight(text: str, words: Iterable[str], protocol: str = "bertlens") -> str:
    """The text as Markdown with every match in **bold**, all of it escaped (core.safe_text: a premise is shown as
    written, never as a link or an image). Under "slides" a match is a whole space-separated token of exactly that
    case (pass only premises: the slides' filter ignores hypotheses)."""
    if check_filter(protocol) == "slides":
        listed = set(parse_words(words, keep_case=True))
        matches = [m for m in re.finditer(r"\S+", text) if m.group(0) in listed]
    else:
        matches = list(word_pattern(words).finditer(text))
    pieces, last = [], 0
    for m in matches:
        pieces += [markdown_text(text[last:m.start()]), f"**{markdown_text(m.group(0))}**"]
        last = m.end()
    return "".join(pieces) + markdown_text(text[last:])


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


def training_sets(train: Sequence[Example], words: Iterable[str], seed: int = 0, protocol: str = "bertlens") -> TrainingSets:
    matched = match_mask(train, words, protocol)
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


