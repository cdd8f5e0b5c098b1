"""Reading dependency treebanks in CoNLL-U and measuring distances in their trees.

Only word lines (integer ID) are kept: multiword-token ranges ("3-4") and empty nodes ("8.1") are skipped, so
`words[i]` is word i+1 of the sentence and `heads` point into the same numbering (0 = root, 1-based).
"""

from __future__ import annotations

import io
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, TextIO

import numpy as np

from core.data.datasets import local_file


UD_EWT_FILES = {
    "dev": "ud_english_ewt/en_ewt-ud-dev.conllu",
    "test": "ud_english_ewt/en_ewt-ud-test.conllu",
}


class TreebankError(ValueError):
    """A CoNLL-U file that cannot be read; the message names the line and what is wrong with it."""


@dataclass(frozen=True)
class Sentence:
    """One sentence of a treebank, word lines only.

    words, upos, deprels: [n] strings; heads: [n] ints, 1-based index of each word's head, 0 for the root.
    sent_id and text come from the `# sent_id =` / `# text =` comments ("" when absent).
    xpos: [n] language-specific tags (the 5th column; Penn Treebank tags in UD EWT), () when built without them;
    Hewitt & Manning's punctuation rule is written in these tags.
    feats: [n] the FEATS column (6th) as written ("Number=Sing|Person=3", "_" for none), () when built without it.
    """

    words: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    upos: tuple[str, ...]
    sent_id: str = ""
    text: str = ""
    xpos: tuple[str, ...] = ()
    feats: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.words)

    @property
    def base_deprels(self) -> tuple[str, ...]:
        """Relations without their subtype ("nmod:poss" -> "nmod"), as most head-finding studies count them."""
        return tuple(rel.split(":", 1)[0] for rel in self.deprels)

    def feature(self, name: str) -> tuple[str | None, ...]:
        """Each word's value of one morphological feature ("Number" -> "Sing"), None where the word has none."""
        values: list[str | None] = []
        for column in self.feats or ("_",) * len(self.words):
            found = None
            for pair in column.split("|"):
                key, _, value = pair.partition("=")
                if key == name and value:
                    found = value
                    break
            values.append(found)
        return tuple(values)


def _parse(lines: Iterable[str], source: str, limit: int | None) -> Iterator[Sentence]:
    words: list[str] = []
    heads: list[int] = []
    deprels: list[str] = []
    upos: list[str] = []
    xpos: list[str] = []
    feats: list[str] = []
    sent_id = text = ""
    count = 0

    def finish() -> Sentence | None:
        if not words:
            return None
        n = len(words)
        for position, head in enumerate(heads, start=1):
            if head < 0 or head > n:
                raise TreebankError(
                    f"{source}: sentence {sent_id or count + 1!s}: word {position} has head {head}, "
                    f"outside 0..{n}; check the HEAD column (7th) of that sentence"
                )
        return Sentence(tuple(words), tuple(heads), tuple(deprels), tuple(upos), sent_id, text, tuple(xpos),
                        tuple(feats))

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            sentence = finish()
            if sentence is not None:
                yield sentence
                count += 1
                if limit is not None and count >= limit:
                    return
            words, heads, deprels, upos, xpos, feats = [], [], [], [], [], []
            sent_id = text = ""
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            if key.strip() == "sent_id":
                sent_id = value.strip()
            elif key.strip() == "text":
                text = value.strip()
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            raise TreebankError(
                f"{source}, line {number}: expected 10 tab-separated CoNLL-U columns, found {len(columns)}; "
                "is the file tab-separated CoNLL-U?"
            )
        token_id = columns[0]
        if "-" in token_id or "." in token_id:
            continue  # multiword range or empty node: not a word of the basic tree
        try:
            index = int(token_id)
            head = int(columns[6])
        except ValueError:
            raise TreebankError(
                f"{source}, line {number}: ID {token_id!r} or HEAD {columns[6]!r} is not an integer"
            ) from None
        if index != len(words) + 1:
            raise TreebankError(
                f"{source}, line {number}: word ID {index} out of order (expected {len(words) + 1}); "
                "a blank line must separate sentences"
            )
        words.append(columns[1])
        upos.append(columns[3])
        xpos.append(columns[4])
        feats.append(columns[5])
        heads.append(head)
        deprels.append(columns[7])
    sentence = finish()
    if sentence is not None:
        yield sentence


def parse_conllu(text: str | TextIO, source: str = "<text>", limit: int | None = None) -> list[Sentence]:
    """Sentences from CoNLL-U given as a string or an open text stream (e.g. an uploaded file)."""
    stream = io.StringIO(text) if isinstance(text, str) else text
    return list(_parse(stream, source, limit))


def read_conllu(path: str | Path, limit: int | None = None) -> list[Sentence]:
    """Sentences of a CoNLL-U file (the first `limit` when given)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"treebank {path} not found; give the path of a .conllu file")
    with path.open(encoding="utf-8-sig") as handle:
        return list(_parse(handle, str(path), limit))


def ud_ewt_path(split: str = "dev") -> Path:
    """The UD English EWT file of the local data folder (raises DataUnavailable when it is missing)."""
    if split not in UD_EWT_FILES:
        raise ValueError(f"UD EWT split {split!r} unknown; choose one of {sorted(UD_EWT_FILES)}")
    return local_file(UD_EWT_FILES[split])


def tree_distances(heads: Iterable[int]) -> np.ndarray:
    """Path lengths between words in the dependency tree: int [n, n], 0 on the diagonal.

    heads: 1-based head of each word, 0 for the root (as `Sentence.heads`). Words not connected to each other
    (a malformed tree) get -1.
    """
    heads = list(heads)
    n = len(heads)
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for child, head in enumerate(heads):
        if head > 0:
            neighbours[child].append(head - 1)
            neighbours[head - 1].append(child)
    distances = np.full((n, n), -1, dtype=np.int64)
    for start in range(n):
        distances[start, start] = 0
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for other in neighbours[node]:
                if distances[start, other] < 0:
                    distances[start, other] = distances[start, node] + 1
                    queue.append(other)
    return distances


def tree_depths(heads: Iterable[int]) -> np.ndarray:
    """Distance of each word from the root word: int [n] (the root word has depth 0; -1 if unreachable)."""
    heads = list(heads)
    depths = np.full(len(heads), -1, dtype=np.int64)
    for start in range(len(heads)):
        node, steps, seen = start, 0, set()
        while heads[node] != 0:
            if node in seen:
                break
            seen.add(node)
            node = heads[node] - 1
            steps += 1
        else:
            depths[start] = steps
    return depths
