"""Corpora for every corpus-level analysis: the app's own sentences, pasted or uploaded text, files, SNLI, MRPC
and UD English EWT (with its dependency trees).

`resolve(spec)` is the one parser of corpus specs (every `--corpus` of the CLI, every page's source picker):

    (the grammar is GRAMMAR below: it is also the help of every --corpus and the tail of every error)

Every source ends as a `Corpus`: the original items in order (sentences or (a, b) pairs, as the analyses of
attention take them), the unique sentences plus the positive pairs among them (anisotropy, similarity), and for
treebanks the parsed trees (syntax heads, probe). Bad input raises `CorpusError` (a ValueError) whose message
names the problem and the fix; a dataset missing from the data folder raises core.data.datasets.DataUnavailable.
No streamlit here.

    from core.data import corpus
    c = corpus.resolve("snli:dev:200", seed=0)    # 200 seeded SNLI dev pairs
    c = corpus.resolve("ud:dev:50")               # 50 seeded EWT dev sentences, c.trees holds their trees
    c = corpus.from_text("One.\\nTwo.")           # pasted text: one sentence per line (long lines split at . ! ?)
    c = corpus.from_upload("x.csv", raw_bytes)    # an uploaded .txt / .csv / .jsonl / .conllu
    c = corpus.resolve("big.csv", limit=5)        # a file is streamed: reading stops once 5 sentences are in

Every file is read line by line and never beyond settings.max_corpus_bytes() (BERTLENS_MAX_CORPUS_BYTES, 32 MB).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Sequence, Union

from core import settings
from core.data import datasets
from core.data.treebank import Sentence, TreebankError, parse_conllu, read_conllu, ud_ewt_path
from core.validation import check_count, nesting_problem

Item = Union[str, tuple[str, str]]

# Header names that mark the text column(s) of an uploaded CSV, checked in this order.
TEXT_COLUMNS = ("sentence", "text", "sentence1", "premise", "text_a", "question1", "review")
PAIR_COLUMNS = (("sentence1", "sentence2"), ("premise", "hypothesis"), ("text_a", "text_b"), ("question1", "question2"))
# Labels that mean "the two sentences say the same thing": only these pairs count as positives.
POSITIVE_LABELS = {"snli": {"entailment"}, "mrpc": {"1"}}

DEFAULT_N = 500
# Splits each dataset offers, the first being the default; "dev" is accepted for MRPC's GLUE validation split.
DATASET_SPLITS = {"snli": ("dev", "train", "test"), "mrpc": ("validation", "train", "test"), "ud": ("dev", "test")}
SPLIT_ALIASES = {("mrpc", "dev"): "validation"}
FILE_SUFFIXES = (".txt", ".csv", ".jsonl", ".conllu")
BUILTIN_FILE = Path(__file__).parent / "sentences.txt"
GRAMMAR = """A corpus spec is one of:
    builtin                  the ~440 sentences written for BERT Lens (core/data/sentences.txt)
    PATH.txt                 one sentence per line (long lines are split at . ! ?)
    PATH.csv                 a header row, then a text column (sentence, text, ...) or two for pairs
                             (sentence1/sentence2, premise/hypothesis, text_a/text_b, question1/question2)
    PATH.jsonl               one JSON object per line with the same keys as the CSV columns, or one JSON string
    PATH.conllu              a CoNLL-U treebank: its sentences with their dependency trees
    snli[:SPLIT[:N]]         SNLI pairs; SPLIT train | dev | test (default dev)
    mrpc[:SPLIT[:N]]         MRPC pairs; SPLIT train | validation (= dev) | test (default validation)
    ud[:SPLIT[:N]]           UD English EWT sentences with their dependency trees; SPLIT dev | test (default dev)
    N                        a seeded random sample of N items (default 500; 'all' for every item)"""

# The one help text of every `--corpus` option.
CLI_HELP = ("builtin | a .txt/.csv/.jsonl/.conllu file | snli[:SPLIT[:N]] | mrpc[:SPLIT[:N]] | ud[:SPLIT[:N]] "
            f"(UD English EWT with trees); N = seeded sample size (default {DEFAULT_N}, or 'all')")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


class CorpusError(ValueError):
    """The text given cannot be turned into a corpus; the message says why and what to do."""


@dataclass(frozen=True)
class Corpus:
    """A corpus as every analysis needs it.

    name        where it came from, for captions
    sentences   [S] unique, whitespace-normalised sentences in first-seen order (anisotropy, similarity, PCA)
    pairs       [P] (i, j) indices into sentences: the two sides of a positive pair (entailment, paraphrase)
    items       [I] the original inputs in order, each a sentence or an (a, b) pair, repeats kept (attention
                statistics take pairs as one two-segment input); empty when built with sentences only, then
                it reads as `sentences`
    trees       [I] or empty: core.data.treebank.Sentence (words, heads, deprels) of each item, for treebank sources
    """

    name: str
    sentences: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = ()
    items: tuple[Item, ...] = ()
    trees: tuple["Sentence", ...] = ()

    def __post_init__(self) -> None:
        if not self.items:
            object.__setattr__(self, "items", tuple(self.sentences))
        if self.trees and len(self.trees) != len(self.items):
            raise ValueError(f"Corpus {self.name}: {len(self.trees)} trees for {len(self.items)} items; give one tree per item")

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def inputs(self) -> list[Item]:
        """The items as text inputs for the encoder: a str, or an (a, b) tuple for a pair."""
        return list(self.items)

    @property
    def digest(self) -> str:
        """Short content hash: equal corpora share cached results whatever their name."""
        h = hashlib.sha256()
        for s in self.sentences:
            h.update(s.encode("utf-8"))
            h.update(b"\n")
        h.update(repr(self.pairs).encode("ascii"))
        # Only when they add something, so a corpus of plain sentences keeps the digest it always had.
        if self.items != self.sentences:
            h.update(repr(self.items).encode("utf-8"))
        if self.trees:
            h.update(repr([(t.words, t.heads, t.deprels) for t in self.trees]).encode("utf-8"))
        return h.hexdigest()[:16]

    def head(self, limit: int | None) -> "Corpus":
        """The first `limit` sentences, keeping only the pairs, items and trees that fall inside them."""
        if limit is None or check_count(limit, "limit") >= len(self.sentences):
            return self
        kept = set(self.sentences[:limit])
        pairs = tuple((i, j) for i, j in self.pairs if i < limit and j < limit)
        keep = [k for k, item in enumerate(self.items) if all(_norm(t) in kept for t in _texts(item))]
        items = tuple(self.items[k] for k in keep) or tuple(self.sentences[:limit])
        return Corpus(self.name, self.sentences[:limit], pairs, items,
                      tuple(self.trees[k] for k in keep) if self.trees and keep else ())

    def take(self, n: int | None) -> "Corpus":
        """The first `n` items (an input count, where `head` counts unique sentences), with their trees and the
        positive pairs among them."""
        if n is None or check_count(n, "limit") >= len(self.items):
            return self
        positive_texts = {(self.sentences[i], self.sentences[j]) for i, j in self.pairs}
        items = self.items[:n]
        positive = [not isinstance(it, str) and (_norm(it[0]), _norm(it[1])) in positive_texts for it in items]
        return from_items(items, self.name, positive, trees=self.trees[:n] if self.trees else ())


def _norm(text: str) -> str:
    return " ".join(text.split())


def _texts(item: Item) -> tuple[str, ...]:
    return (item,) if isinstance(item, str) else tuple(item)


def from_items(items: Iterable[Item], name: str, positive: Sequence[bool] | None = None,
               trees: Sequence["Sentence"] = ()) -> Corpus:
    """Sentences and (a, b) pairs -> Corpus. Repeated sentences are kept once in `sentences` (SNLI repeats each
    premise for three hypotheses, and a repeated sentence would look like a perfectly similar second context)
    but every item stays in `items`. `positive[k]` says whether the k-th item, if a pair, is a positive pair
    (default: all are); `trees[k]` is the k-th item's tree, when the source has them."""
    items = tuple(items)
    index: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []

    def add(text: str) -> int | None:
        text = _norm(text)
        if not text:
            return None
        return index.setdefault(text, len(index))

    kept: list[Item] = []
    kept_trees = []
    for k, item in enumerate(items):
        if isinstance(item, str):
            if add(item) is not None:
                kept.append(item)
                kept_trees.extend(trees[k:k + 1])
            continue
        a, b = add(item[0]), add(item[1])
        if a is not None or b is not None:
            kept.append(item if a is not None and b is not None else item[0] if a is not None else item[1])
            kept_trees.extend(trees[k:k + 1])
        if a is not None and b is not None and a != b and (positive is None or positive[k]):
            pairs.append((a, b))
    if not index:
        raise CorpusError(f"{name} has no sentences: give at least two non-empty lines.")
    return Corpus(name, tuple(index), tuple(dict.fromkeys(pairs)), tuple(kept), tuple(kept_trees))


def split_sentences(text: str) -> list[str]:
    """One sentence per line; a line holding several sentences is split after . ! ? before a capital."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(part.strip() for part in _SENTENCE_END.split(line.strip()) if part.strip())
    return out


def from_text(text: str, name: str = "pasted text", min_sentences: int = 2) -> Corpus:
    return _text_corpus(text.splitlines(), name, None, min_sentences)


def _text_corpus(lines: Iterable[str], name: str, limit: int | None, min_sentences: int = 2) -> Corpus:
    sentences = _collect((part for line in lines for part in split_sentences(line)), limit)
    if len(sentences) < min_sentences:
        raise CorpusError(
            f"{name} has {len(sentences)} sentence(s); comparing contexts needs at least {min_sentences}. "
            "Paste more text, one sentence per line."
        )
    return from_items(sentences, name)


def _collect(items: Iterable[Item], limit: int | None) -> list[Item]:
    """The items, read one at a time and no further than `limit` needs: until `limit` unique sentences AND
    `limit` items are in (Corpus.head counts the first, Corpus.take the second), so both cut the same corpus
    as from a whole read. Repeats of those sentences further down the file are not read."""
    if limit is None:
        return list(items)
    limit = max(limit, 2)  # every reader wants two sentences at least, whatever a caller's head / take keeps
    kept: list[Item] = []
    seen: set[str] = set()
    filled = 0
    for item in items:
        kept.append(item)
        seen.update(t for t in map(_norm, _texts(item)) if t)
        filled += _filled(item)
        if len(seen) >= limit and filled >= limit:
            break
    return kept


def from_csv(data: str, name: str = "uploaded CSV", column: str | None = None, column_b: str | None = None,
             limit: int | None = None) -> Corpus:
    """A CSV with a header. Text comes from `column` (or the first known text column, else the first column);
    a second column (`column_b`, or a known pair such as sentence1/sentence2) makes pairs."""
    return _csv_corpus(io.StringIO(data), name, column, column_b, limit)


def csv_rows(lines: Iterable[str], name: str) -> tuple[list[str], Iterator[dict]]:
    """(header, rows one at a time) of a CSV given line by line; a malformed row raises CorpusError naming its line."""
    reader = csv.DictReader(lines)

    def failed(err: csv.Error) -> CorpusError:
        # reader.reader: DictReader.line_num is only updated after a row succeeds, so it names the line before.
        return CorpusError(f"{name} is not a readable CSV ({err}, line {reader.reader.line_num}); save it as "
                           "comma-separated UTF-8 text with a header row.")

    try:
        header = [h for h in (reader.fieldnames or []) if h is not None]
    except csv.Error as err:
        raise failed(err) from None

    def rows() -> Iterator[dict]:
        try:
            yield from reader
        except csv.Error as err:
            raise failed(err) from None

    return header, rows()


def _csv_corpus(lines: Iterable[str], name: str, column: str | None, column_b: str | None,
                limit: int | None) -> Corpus:
    header, rows = csv_rows(lines, name)
    if not header:
        raise CorpusError(f"{name} has no header row: put column names (e.g. 'sentence') on the first line.")
    column, column_b = _text_columns(header, column, column_b, header[0])
    for wanted in (column, column_b):
        if wanted is not None and wanted not in header:
            raise CorpusError(f"{name} has no column '{wanted}'; its columns are: {', '.join(header)}.")
    if column_b is None:
        items = _collect((r.get(column) or "" for r in rows), limit)
    else:
        items = _collect(((r.get(column) or "", r.get(column_b) or "") for r in rows), limit)
    corpus = from_items(items, name) if any(_filled(i) for i in items) else None
    if corpus is None or len(corpus) < 2:
        raise CorpusError(f"Column '{column}' of {name} has fewer than two sentences; pick the column that holds text.")
    return corpus


def _text_columns(header: Sequence, column, column_b, fallback) -> tuple:
    """The text column(s) of a table: those asked for, else a known pair (sentence1/sentence2 ...), else the first
    known text column (TEXT_COLUMNS), else `fallback`."""
    if column is not None or column_b is not None:
        return column, column_b
    lower = {str(h).strip().lower(): h for h in header}
    pair = next(((lower[a], lower[b]) for a, b in PAIR_COLUMNS if a in lower and b in lower), None)
    return pair or (next((lower[c] for c in TEXT_COLUMNS if c in lower), fallback), None)


def _filled(item: Item) -> bool:
    return bool(item.strip()) if isinstance(item, str) else bool(item[0].strip() or item[1].strip())


def from_jsonl(data: str, name: str = "uploaded JSONL", limit: int | None = None) -> Corpus:
    """JSON Lines: each line an object whose keys are read like CSV columns (a known pair such as
    sentence1/sentence2 makes pairs, else the first known text key), or a plain JSON string."""
    return _jsonl_corpus(data.splitlines(), name, limit)


def jsonl_rows(lines: Iterable[str], name: str) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON) of each non-blank line, one at a time; a line that is no JSON, or too deep or
    with too long a number to parse safely, raises CorpusError."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        problem = nesting_problem(line)  # before json.loads, which recurses: a deep line is a RecursionError
        if problem:
            raise CorpusError(f"{name}: {problem.replace('(line 1)', f'(line {number})')}; give one flat JSON "
                              "object per line.")
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{name}, line {number} is not JSON ({err.msg}); give one JSON object per line, "
                              'e.g. {"text": "A sentence."}.') from None


def _jsonl_item(number: int, row, name: str) -> Item:
    if isinstance(row, str):
        return row
    if not isinstance(row, dict):
        raise CorpusError(f"{name}, line {number}: expected a JSON object or string, got {type(row).__name__}.")
    lower = {str(k).strip().lower(): v for k, v in row.items()}
    pair = next(((a, b) for a, b in PAIR_COLUMNS if a in lower and b in lower), None)
    if pair is not None:
        return (str(lower[pair[0]] or ""), str(lower[pair[1]] or ""))
    key = next((c for c in TEXT_COLUMNS if c in lower), None)
    if key is None:
        raise CorpusError(f"{name}, line {number} has no text key; use one of {', '.join(TEXT_COLUMNS)} "
                          f"(or a pair such as sentence1/sentence2); its keys are: {', '.join(map(str, row))}.")
    return str(lower[key] or "")


def _jsonl_corpus(lines: Iterable[str], name: str, limit: int | None) -> Corpus:
    items = _collect((_jsonl_item(number, row, name) for number, row in jsonl_rows(lines, name)), limit)
    corpus = from_items(items, name) if any(_filled(i) for i in items) else None
    if corpus is None or len(corpus) < 2:
        raise CorpusError(f"{name} has fewer than two sentences; give one JSON object per line.")
    return corpus


def from_treebank(sentences: Sequence["Sentence"], name: str) -> Corpus:
    """Treebank sentences as a corpus: each item is the sentence's text (its words joined when the file has no
    `# text =` line) and `trees` keeps the parsed sentences."""
    if not sentences:
        raise CorpusError(f"{name} has no sentences: give a CoNLL-U file with word lines.")
    return from_items([t.text or " ".join(t.words) for t in sentences], name, trees=sentences)


def from_upload(filename: str, data: bytes, limit: int | None = None) -> Corpus:
    """An uploaded .txt (one sentence per line), .csv (see from_csv), .jsonl (see from_jsonl) or .conllu; with
    `limit`, read no further than the first `limit` sentences need (see _collect)."""
    return from_stream(filename, io.BytesIO(data), limit)


def from_stream(filename: str, stream: BinaryIO, limit: int | None = None) -> Corpus:
    """A .txt / .csv / .jsonl / .conllu read line by line from a binary stream, up to settings.max_corpus_bytes()
    and no further than `limit` needs (see _collect): `--limit 5` on a 300 MB file reads a few lines."""
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    lines = text_lines(stream, filename)
    if suffix == "csv":
        return _csv_corpus(lines, filename, None, None, limit)
    if suffix == "jsonl":
        return _jsonl_corpus(lines, filename, limit)
    if suffix == "conllu":
        try:
            return from_treebank(parse_conllu(lines, source=filename, limit=limit), filename)
        except TreebankError as err:
            raise CorpusError(str(err)) from None
    if suffix in ("txt", "text", ""):
        return _text_corpus(lines, filename, limit)
    raise CorpusError(f"{filename}: only .txt (one sentence per line), .csv, .jsonl and .conllu files can be read.")


def text_lines(stream: BinaryIO, name: str, max_bytes: int | None = None) -> Iterator[str]:
    """The lines of a UTF-8 file (a leading BOM dropped, line ends kept), decoded one at a time. At most
    `max_bytes` (default settings.max_corpus_bytes()) are ever read, one line included: a file that needs more
    raises CorpusError saying how to read less, so no file, whatever its size or shape, fills the memory."""
    budget = settings.max_corpus_bytes() if max_bytes is None else max_bytes
    offset = 0
    while True:
        raw = stream.readline(budget - offset + 1)
        if not raw:
            return
        if offset + len(raw) > budget:
            raise CorpusError(
                f"{name} is larger than the {budget / 2 ** 20:.0f} MB of a corpus file BERT Lens reads "
                "(BERTLENS_MAX_CORPUS_BYTES): give --limit N (or a smaller sample) to read only its first N "
                "sentences, or split the file.")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorpusError(f"{name} is not UTF-8 text (byte {offset + err.start}); save it as UTF-8 and upload "
                              "again.") from None
        yield line.removeprefix("\ufeff") if offset == 0 else line
        offset += len(raw)


def from_file(path: str | Path, limit: int | None = None) -> Corpus:
    """A file on disk, read like an upload but streamed from the disk (see from_stream)."""
    file = Path(path)
    if not file.is_file():
        raise CorpusError(f"{path} not found: give the path of an existing .txt, .csv, .jsonl or .conllu file.\n{GRAMMAR}")
    with file.open("rb") as stream:
        return from_stream(file.name, stream, limit)


def from_dataset(name: str, split: str = "dev", limit: int | None = DEFAULT_N, seed: int = 0) -> Corpus:
    """`limit` seeded items of SNLI or MRPC pairs (entailment / paraphrase pairs become `pairs`), or of UD English
    EWT sentences with their trees. Raises datasets.DataUnavailable when the data folder lacks the file."""
    if name not in DATASET_SPLITS:
        raise CorpusError(f"Unknown dataset '{name}': use one of {', '.join(DATASET_SPLITS)}.\n{GRAMMAR}")
    split = SPLIT_ALIASES.get((name, split), split)
    if split not in DATASET_SPLITS[name]:
        raise CorpusError(f"{name} has no split '{split}': use one of {', '.join(DATASET_SPLITS[name])}.\n{GRAMMAR}")
    if name == "ud":
        trees = datasets.seeded_subset(read_conllu(ud_ewt_path(split)), limit, seed)
        return from_treebank(trees, f"UD EWT {split}")
    examples = datasets.snli(split, limit, seed) if name == "snli" else datasets.mrpc(split, limit, seed)
    positive = [e.label in POSITIVE_LABELS[name] for e in examples]
    return from_items([(e.text, e.text_b or "") for e in examples], f"{name.upper()} {split}", positive)


def builtin(limit: int | None = None) -> Corpus:
    """The app's own sentences (core/data/sentences.txt, written for BERT Lens, not taken from a dataset):
    everyday English where many words (bank, play, light, ...) recur in several senses and settings, so
    self-similarity has words with enough contexts."""
    return from_items(builtin_sentences(), "built-in sentences").head(limit)


def builtin_sentences() -> tuple[str, ...]:
    lines = BUILTIN_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


def require_trees(corpus: Corpus) -> list["Sentence"]:
    """The treebank sentences of a corpus, for analyses of syntax; a corpus without trees is an error."""
    if not corpus.trees:
        raise CorpusError(f"{corpus.name} has no dependency trees; give ud[:SPLIT[:N]] (UD English EWT) or a "
                          ".conllu file.")
    return list(corpus.trees)


def corpus_of(source, *, text_column=None, text_b_column=None, seed: int = 0, name: str | None = None,
              limit: int | None = None, default_n: int = DEFAULT_N) -> Corpus:
    """The Corpus of what a notebook user has (core.lens calls it first):

    - a Corpus, returned as it is;
    - a corpus spec (str): resolve(source, seed, default_n=default_n), the GRAMMAR every --corpus reads;
    - a list (any iterable) of sentences and / or (a, b) pairs;
    - a pandas Series of sentences;
    - a pandas DataFrame: sentences from `text_column` (pairs with `text_b_column`); left out, a known pair of
      columns (sentence1/sentence2, premise/hypothesis ...), else the first known text column ("sentence", "text",
      ... TEXT_COLUMNS), else the first column that holds strings.

    Missing values (None, NaN) are skipped; anything else that is not text raises CorpusError naming the item."""
    if isinstance(source, Corpus):
        return source
    if isinstance(source, str):
        return resolve(source, seed, limit=limit, default_n=default_n)  # a file: read no further than `limit` needs
    columns = getattr(source, "columns", None)
    if columns is not None:  # a pandas DataFrame (duck-typed: reading one needs no pandas import here)
        texts = [c for c in columns if any(isinstance(v, str) for v in source[c])]
        column, column_b = _text_columns(list(columns), text_column, text_b_column, texts[0] if texts else None)
        for wanted in (column, column_b):
            if wanted is not None and wanted not in columns:
                raise CorpusError(f"The DataFrame has no column {wanted!r}; its columns are: "
                                  f"{', '.join(map(str, columns))}. Name the text column with text_column=.")
        if column is None:
            raise CorpusError("The DataFrame has no column of text; name one with text_column=.")
        values = source[column].tolist()
        raw = values if column_b is None else list(zip(values, source[column_b].tolist()))
        name = name or f"DataFrame column '{column}'" + (f" / '{column_b}'" if column_b is not None else "")
    elif isinstance(source, Iterable):
        raw = list(source)
        series = getattr(source, "name", None)
        name = name or (f"Series '{series}'" if series is not None else f"{len(raw)} notebook inputs")
    else:
        raise CorpusError(f"Cannot read a corpus from {type(source).__name__} {str(source)[:40]!r}: give a corpus spec (e.g. 'builtin'), "
                          "a list of sentences or (a, b) pairs, or a pandas Series / DataFrame with a text column.")
    return from_items([_notebook_item(value, k, name) for k, value in enumerate(raw)], name)


def _notebook_item(value, k: int, name: str) -> Item:
    """One input of corpus_of: a sentence, an (a, b) pair, or "" for a missing value (None, NaN, pandas.NA), which
    from_items leaves out."""
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        parts = [_notebook_item(part, k, name) for part in value] if len(value) == 2 else []
        if parts and all(isinstance(part, str) for part in parts):
            return (parts[0], parts[1])
    else:
        try:
            missing = value is None or bool(value != value)
        except TypeError:  # pandas.NA: its comparisons are NA, which has no truth value
            missing = True
        if missing:
            return ""
    raise CorpusError(f"{name}, item {k}: expected a sentence (str) or an (a, b) pair of sentences, got "
                      f"{type(value).__name__} {str(value)[:60]!r}.")


def _parse_n(text: str, spec: str) -> int | None:
    if text.lower() == "all":
        return None
    if not text.isdigit() or int(text) < 1:
        raise CorpusError(f"Corpus '{spec}': N must be a whole number of at least 1, or 'all'; got '{text}'.\n{GRAMMAR}")
    return int(text)


def resolve(spec: str, seed: int = 0, limit: int | None = None, default_n: int = DEFAULT_N) -> Corpus:
    """The corpus a spec names (see GRAMMAR); `seed` picks the sample of a dataset (same seed, same items). A file
    is read no further than its first `limit` sentences or items need (a caller still cuts with head / take);
    a dataset's sample is its N, whatever `limit`; a dataset spec without N samples `default_n` items (an analysis
    whose quality needs more than the grammar's 500, such as fit-mlm-head and sae-train, passes its own)."""
    spec = (spec or "").strip()
    if not spec:
        raise CorpusError(f"No corpus given.\n{GRAMMAR}")
    if spec == "builtin":
        return builtin()
    if spec.lower().endswith(FILE_SUFFIXES):
        return from_file(spec, None if limit is None else check_count(limit, "limit"))
    name, *rest = spec.split(":")
    if name in DATASET_SPLITS:
        if len(rest) > 2:
            raise CorpusError(f"Corpus '{spec}' has too many ':' parts; write {name}[:SPLIT[:N]].\n{GRAMMAR}")
        split = rest[0] if rest and rest[0] else DATASET_SPLITS[name][0]
        n = _parse_n(rest[1], spec) if len(rest) > 1 else default_n
        return from_dataset(name, split, limit=n, seed=seed)
    if Path(spec).is_file():
        raise CorpusError(f"{spec}: only .txt, .csv, .jsonl and .conllu files can be read; rename or convert it.\n{GRAMMAR}")
    raise CorpusError(f"Unknown corpus '{spec}': not a dataset name and not a file ending in "
                      f"{', '.join(FILE_SUFFIXES)}.\n{GRAMMAR}")
