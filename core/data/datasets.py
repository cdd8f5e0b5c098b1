"""Reading the public datasets from a local data folder laid out like ../shared/data (env BERTLENS_DATA).

Every reader returns plain `Example`s; a missing file raises DataUnavailable naming the file and the fix.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from core import settings

LOCAL_FILES = {
    ("snli", "train"): "snli/snli_1.0_train_subset.jsonl.gz",
    ("snli", "dev"): "snli/snli_1.0_dev.jsonl.gz",
    ("snli", "test"): "snli/snli_1.0_test.jsonl.gz",
    ("mrpc", "train"): "mrpc/msr_paraphrase_train.jsonl.gz",
    ("mrpc", "test"): "mrpc/msr_paraphrase_test.jsonl.gz",
}


class DataUnavailable(FileNotFoundError):
    """A dataset is neither in the local data folder nor reachable."""


@dataclass(frozen=True)
class Example:
    """One labelled example; annotator_labels: every annotator's judgment where the data keeps them (SNLI 1.0's
    `annotator_labels`: five for dev and test pairs, the author's one for most train pairs), else ()."""

    text: str
    text_b: str | None
    label: str
    annotator_labels: tuple[str, ...] = ()

    @property
    def agreement(self) -> str | None:
        """How many annotators chose the gold label, as "k/n" (SNLI: "5/5", "4/5" or "3/5"); None with fewer than
        two judgments, where agreement says nothing."""
        if len(self.annotator_labels) < 2:
            return None
        return f"{sum(j == self.label for j in self.annotator_labels)}/{len(self.annotator_labels)}"


def agreement_levels(agreement: Iterable[str | None]) -> list[str]:
    """The distinct Example.agreement levels present ("5/5", "4/5", ...), most agreement first; None left out."""
    def share(level: str) -> float:
        agreeing, judgments = level.split("/")
        return int(agreeing) / int(judgments)

    return sorted({a for a in agreement if a}, key=lambda a: (-share(a), a))


def local_file(relative: str) -> Path:
    path = settings.data_dir() / relative
    if not path.is_file():
        raise DataUnavailable(
            f"{path} not found. Point BERTLENS_DATA at a folder laid out like shared/data "
            "(see README, 'Running offline')."
        )
    return path


# The most rows a dataset file may hold: SNLI's full training set has 550,152; a seeded sample is drawn from a
# list of every row, so a file (or a gzip bomb) in a data folder must not be endless.
MAX_ROWS = 2_000_000


def read_jsonl_gz(path: Path, max_rows: int = MAX_ROWS) -> Iterator[dict]:
    """The rows of a gzipped JSON Lines file, one at a time; past `max_rows` rows DataUnavailable says so (pages and the CLI show it as a missing dataset)."""
    rows = 0
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows += 1
                if rows > max_rows:
                    raise DataUnavailable(f"{path} holds more than {max_rows:,} rows, more than any dataset BERT Lens "
                                     "reads; point BERTLENS_DATA at a folder laid out like shared/data.")
                yield json.loads(line)


def seeded_subset(items: list, limit: int | None, seed: int = 0) -> list:
    """The same `limit` items for the same seed, in a shuffled order; all items when limit is None."""
    if limit is None or limit >= len(items):
        return list(items)
    rng = random.Random(seed)
    return rng.sample(items, limit)


def snli(split: str, limit: int | None = None, seed: int = 0) -> list[Example]:
    """SNLI premise/hypothesis pairs; gold label '-' (no majority) is dropped."""
    rows = read_jsonl_gz(local_file(LOCAL_FILES[("snli", split)]))
    examples = [_snli_example(r) for r in rows]
    return seeded_subset([e for e in examples if e.label != "-"], limit, seed)


def _snli_example(row: dict) -> Example:
    """A row of the local files (premise, hypothesis, label) or of SNLI 1.0's own jsonl (sentence1, sentence2,
    gold_label), with its annotator_labels where the row has them."""
    def field(name: str, original: str):
        return row[name] if name in row else row[original]

    judgments = tuple(str(j) for j in row.get("annotator_labels") or () if str(j).strip())
    return Example(field("premise", "sentence1"), field("hypothesis", "sentence2"), field("label", "gold_label"),
                   judgments)


def mrpc(split: str, limit: int | None = None, seed: int = 0) -> list[Example]:
    """MRPC sentence pairs, label "1" paraphrase / "0" not. split: train, validation (GLUE's), or test."""
    file_split = "test" if split == "test" else "train"
    rows = read_jsonl_gz(local_file(LOCAL_FILES[("mrpc", file_split)]))
    if split in ("train", "validation"):
        rows = (r for r in rows if r["glue_split"] == split)
    examples = [Example(r["sentence1"], r["sentence2"], str(r["label"])) for r in rows]
    return seeded_subset(examples, limit, seed)
