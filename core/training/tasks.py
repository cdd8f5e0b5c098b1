"""Training data for the fine-tuning engine: built-in tasks and user files, as labelled `Example`s.

Built-in tasks (labels in a fixed order, which is the classifier's class order):
    snli   premise/hypothesis -> entailment, neutral, contradiction (gold label "-" dropped); eval on dev
    mrpc   sentence pair -> "0" (not a paraphrase), "1" (paraphrase); eval on GLUE validation
    drugs  Druglib review text -> effectiveness_score "1".."5" (the CS4650 slides' second experiment); eval on test
    drugs-rating   Druglib review text -> overall rating 1-10 in five buckets "1-2".."9-10": the closest local
           label to the slides' WebMD "Satisfaction" stars (DRUG_RATING_DIFFERENCES says what differs); eval on test
    drugs-rating3  the same rating in three buckets "1-4", "5-6", "7-10" (the slides' printed head has 3 outputs,
           perhaps copied from their SNLI printout: their text says six satisfaction levels)
    absa   SemEval-14 restaurants (aspect category, sentence) -> positive, negative, neutral; eval on test
           ("conflict", 5 % of the aspects, is dropped, as most BERT-pair setups report three-way results)
    absa_qa  the same reviews as Sun et al. 2019's QA-M (the fine-tuned-attention blog's task): one question per
           aspect category for every review, -> positive, negative, neutral, or none when the review does not
           talk about it (core.analyses.aspect_heads builds the pairs); eval on test
A user file is a CSV, TSV or JSON Lines file (optionally .gz) with columns `text`, `label` and optionally
`text_b`; a `split` column with values train / test (or dev, validation) chooses the eval rows, otherwise a
seeded 20 % hold-out is used.

Sources: snli and mrpc come from the Hugging Face hub through `datasets` when it is reachable and from the
local data folder (BERTLENS_DATA, laid out like shared/data) otherwise; drugs* and absa are local only.
Every problem raises TaskError (a ValueError) whose message names the problem and the fix.
"""

from __future__ import annotations

# datasets (Hugging Face) imported in functions: only a task read from the hub needs it (~0.6 s to import).
import csv
import gzip
import io
import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.analyses.aspect_heads import semeval_pairs
from core.data import datasets as local_data
from core.data.datasets import DataUnavailable, Example
from core import settings
from core.files import write_bytes_atomic
from core.model.loading import hub_reachable
from core.validation import nesting_problem

BUILTIN_TASKS = ("snli", "mrpc", "drugs", "drugs-rating", "drugs-rating3", "absa", "absa_qa")
# Druglib's overall rating (1-10) cut into buckets: (first, last) rating per label, inclusive.
RATING_BUCKETS = {
    "drugs-rating": {"1-2": (1, 2), "3-4": (3, 4), "5-6": (5, 6), "7-8": (7, 8), "9-10": (9, 10)},
    "drugs-rating3": {"1-4": (1, 4), "5-6": (5, 6), "7-10": (7, 10)},
}
# What differs between the local stand-in and the slides' drug experiment (shown on the page and by the CLI).
DRUG_RATING_DIFFERENCES = (
    "label: the slides predict WebMD's 'Satisfaction' field (their text says 'satisfaction level (1,2,3,4,5,6)'; "
    "WebMD shows 1-5 stars); how many classes their model had is uncertain: the printed classifier has 3 outputs, "
    "but that printout is identical to their SNLI one and may be a copy. Druglib has no satisfaction field, so its "
    "overall 'rating' 1-10 stands in, cut into 5 buckets of two (drugs-rating) or 3 buckets 1-4 / 5-6 / 7-10 "
    "(drugs-rating3)",
    "corpus: the slides' 'MedWeb' data has WebMD's columns (Age, Condition, Drug, EaseofUse, Effectiveness, Reviews, "
    "Satisfaction, Sex, Sides) and 7,021 train / 1,505 validation batches (up to 224,672 training reviews at batch "
    "32); Druglib.com has 3,107 train reviews and 895 whole test reviews (shared/data README), about 70x fewer",
    "text: the slides feed WebMD's one 'Reviews' field; Druglib splits a review in benefits, side effects and "
    "comments, joined here in that order",
    "split: the slides score a 'test dataset' (their accuracies are exact fractions of 337,120: either that many "
    "test reviews or a mean over 1,505 batches, see the slides-layer12-drugs reference); here the Druglib test "
    "split is scored",
    "balance: Druglib ratings lean high (train 1-2: 408, 3-4: 253, 5-6: 316, 7-8: 908, 9-10: 1,222 reviews), so "
    "compare accuracy with the majority baseline, not with the slides' 58.9 %",
)
TASK_LABELS = {
    "snli": ("entailment", "neutral", "contradiction"),
    "mrpc": ("0", "1"),
    "drugs": ("1", "2", "3", "4", "5"),
    "drugs-rating": tuple(RATING_BUCKETS["drugs-rating"]),
    "drugs-rating3": tuple(RATING_BUCKETS["drugs-rating3"]),
    "absa": ("positive", "negative", "neutral"),
    "absa_qa": ("positive", "negative", "neutral", "none"),
}
TASK_TITLES = {
    "snli": "SNLI: does the premise entail the hypothesis? (3 classes)",
    "mrpc": "MRPC: are the two sentences paraphrases? (2 classes)",
    "drugs": "Drug reviews: review text -> effectiveness 1-5 (Druglib)",
    "drugs-rating": "Drug reviews: review text -> rating in 5 buckets (Druglib; closest to the slides' satisfaction)",
    "drugs-rating3": "Drug reviews: review text -> rating in 3 buckets 1-4 / 5-6 / 7-10 (Druglib)",
    "absa": "Aspect sentiment: (aspect, restaurant review) -> polarity (SemEval-14)",
    "absa_qa": "Aspect questions (Sun et al. QA-M): (question about an aspect, review) -> polarity or none",
}
EVAL_SPLIT = {"snli": "dev", "mrpc": "validation", "drugs": "test", "drugs-rating": "test", "drugs-rating3": "test",
              "absa": "test", "absa_qa": "test"}
USER_FILE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".ndjson")
HOLDOUT_FRACTION = 0.2
EVAL_SPLIT_NAMES = {"test", "dev", "validation", "eval"}
LINE_KEY = "__line__"  # the file line a user row came from, for messages


class TaskError(ValueError):
    """The task's data is missing or malformed; the message says which file, which rows, and the fix."""


@dataclass(frozen=True)
class TaskData:
    """A task ready for training: examples plus the label order (class index i is labels[i])."""

    task: str  # built-in name, or the user file's path
    labels: tuple[str, ...]
    train: tuple[Example, ...]
    eval: tuple[Example, ...]
    eval_split: str  # which split `eval` is, e.g. "dev" or "20% hold-out"
    source: str  # "hub", "local" or "file"
    pairs: bool  # whether examples carry text_b

    def label_index(self, label: str) -> int:
        return self.labels.index(label)


def is_user_file(task: str) -> bool:
    return task not in BUILTIN_TASKS


def save_user_file(name: str, data: bytes) -> Path:
    """Keep an uploaded task file as models_cache/uploads/<a folder of its own>/<the name the user gave it>: a
    recipe names its task file by path, and every message about the file names it by path.name, so the user reads
    their own file's name (a time stamp prefixed to it showed as "1795871913-wrong_cols.csv", issue 48)."""
    own_name = Path(str(name).replace("\\", "/")).name.strip() or "upload.csv"
    folder = settings.cache_dir() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=folder)) / own_name
    write_bytes_atomic(path, data)
    return path


def load_task(
    task: str,
    *,
    train_limit: int | None = None,
    eval_limit: int | None = None,
    seed: int = 0,
    source: str = "auto",
    eval_split: str | None = None,
) -> TaskData:
    """Train and eval examples of a built-in task or a user file.

    train_limit / eval_limit: a seeded subset (same seed, same examples). source: "auto" (hub when
    reachable, else local), "hub" or "local"; ignored for user files and the local-only tasks.
    eval_split: None for the task's own (EVAL_SPLIT), or "test" for its test split (the slides' protocol);
    a user file's eval rows are always its split column's (or the hold-out).
    """
    if eval_split not in (None, "test"):
        raise TaskError(f"eval_split {eval_split!r} must be empty or 'test'.")
    if is_user_file(task):
        train, evaluation, split_name, labels = read_user_task(Path(task), seed=seed)
        used = "file"
    else:
        used = _pick_source(task, source)
        train, evaluation = _builtin(task, used, eval_split)
        labels, split_name = TASK_LABELS[task], eval_split or EVAL_SPLIT[task]
    train = local_data.seeded_subset(train, train_limit, seed)
    evaluation = local_data.seeded_subset(evaluation, eval_limit, seed)
    if not train:
        raise TaskError(f"Task '{task}' has no training examples; check its data file.")
    pairs = any(e.text_b for e in train)
    return TaskData(task, tuple(labels), tuple(train), tuple(evaluation), split_name, used, pairs)


def _pick_source(task: str, source: str) -> str:
    if source not in ("auto", "hub", "local"):
        raise TaskError(f"Unknown data source '{source}'; use auto, hub or local.")
    if task not in ("snli", "mrpc") or source == "local":
        return "local"
    if hub_reachable():
        return "hub"
    if source == "hub":
        raise TaskError(
            f"The Hugging Face hub is unreachable, so '{task}' cannot be read from it; "
            "use the local data folder (source 'local' or 'auto', env BERTLENS_DATA)."
        )
    return "local"


def _builtin(task: str, source: str, eval_split: str | None = None) -> tuple[list[Example], list[Example]]:
    """(train, eval) examples; eval is the task's EVAL_SPLIT, or its test split when eval_split is "test"."""
    test = eval_split == "test"
    try:
        if source == "hub":
            return _hub_split(task, "train"), _hub_split(task, "test" if test else "validation")
        if task == "snli":
            return local_data.snli("train"), local_data.snli("test" if test else "dev")
        if task == "mrpc":
            return local_data.mrpc("train"), local_data.mrpc("test" if test else "validation")
        if task.startswith("drugs"):
            label = "effectiveness" if task == "drugs" else task
            return drug_reviews("train", label=label), drug_reviews("test", label=label)
        if task == "absa_qa":
            return absa_questions("train"), absa_questions("test")
        return absa_restaurants("train"), absa_restaurants("test")
    except DataUnavailable as err:
        raise TaskError(
            f"Data for '{task}' is missing: {err} With internet, snli and mrpc also load from the hub."
        ) from err


def _hub_split(task: str, split: str) -> list[Example]:
    from datasets import load_dataset

    try:
        if task == "snli":
            rows = load_dataset("stanfordnlp/snli", split=split)
            names = TASK_LABELS["snli"]  # the hub's 0/1/2 order; -1 means no gold label
            return [Example(r["premise"], r["hypothesis"], names[r["label"]]) for r in rows if r["label"] >= 0]
        rows = load_dataset("nyu-mll/glue", "mrpc", split=split)
        return [Example(r["sentence1"], r["sentence2"], str(r["label"])) for r in rows if r["label"] >= 0]
    except Exception as err:  # network errors, missing configs
        raise TaskError(f"Could not read '{task}' ({split}) from the hub: {err}") from err


def rating_bucket(rating: int, task: str) -> str:
    """The label of a Druglib rating (1-10) under a rating task's buckets (RATING_BUCKETS)."""
    for label, (first, last) in RATING_BUCKETS[task].items():
        if first <= int(rating) <= last:
            return label
    raise TaskError(f"rating {rating!r} is outside 1-10; the Druglib file looks damaged")


def drug_reviews(split: str, limit: int | None = None, seed: int = 0, label: str = "effectiveness") -> list[Example]:
    """Druglib reviews: the benefits, side-effects and comments texts joined -> effectiveness_score "1".."5"
    (label "effectiveness"), or the rating 1-10 in buckets (label "drugs-rating" or "drugs-rating3")."""
    name = {"train": "druglib_train.jsonl.gz", "test": "druglib_test_intact.jsonl.gz"}[split]
    rows = local_data.read_jsonl_gz(local_data.local_file(f"drug_reviews_druglib/{name}"))
    examples = []
    for r in rows:
        parts = [" ".join(str(r.get(k) or "").split()) for k in ("benefits_review", "side_effects_review", "comments_review")]
        text = " ".join(p for p in parts if p)
        if text:
            target = str(int(r["effectiveness_score"])) if label == "effectiveness" else rating_bucket(r["rating"], label)
            examples.append(Example(text, None, target))
    return local_data.seeded_subset(examples, limit, seed)


def absa_restaurants(split: str, limit: int | None = None, seed: int = 0) -> list[Example]:
    """SemEval-14 restaurants as (aspect category, sentence) -> polarity; "conflict" aspects dropped."""
    name = {"train": "restaurants_train.jsonl.gz", "test": "restaurants_test.jsonl.gz"}[split]
    rows = local_data.read_jsonl_gz(local_data.local_file(f"semeval2014_absa_restaurants/{name}"))
    examples = [
        Example(a["category"], r["text"], a["polarity"])
        for r in rows
        for a in r["aspect_categories"]
        if a["polarity"] in TASK_LABELS["absa"]
    ]
    return local_data.seeded_subset(examples, limit, seed)


def absa_questions(split: str) -> list[Example]:
    """SemEval-14 restaurants as Sun et al.'s QA-M pairs (question, review) -> polarity or "none"."""
    return [Example(" ".join(p.question_words), p.review, p.label) for p in semeval_pairs(split)]


# ---- user files -------------------------------------------------------------------------------------


def _open_text(path: Path) -> str:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except OSError as err:
            raise TaskError(f"{path.name} ends in .gz but is not gzip data ({err}); decompress it or rename it.") from err
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TaskError(f"{path.name} is not UTF-8 text (byte {err.start}); save it as UTF-8.") from err


def read_user_rows(path: Path) -> list[dict]:
    """Rows of a CSV/TSV/JSONL file as dicts, with the file's format problems turned into TaskErrors."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TaskError(
            f"'{path}' is neither a built-in task ({', '.join(BUILTIN_TASKS)}) nor an existing file. "
            "Give a task name or the path of a CSV/JSONL file with text and label columns."
        )
    suffix = path.suffixes[-2] if path.suffix == ".gz" and len(path.suffixes) > 1 else path.suffix
    suffix = suffix.lower()
    if suffix not in USER_FILE_SUFFIXES:
        raise TaskError(
            f"{path.name}: unknown file type '{suffix or '(none)'}'. Use .csv, .tsv or .jsonl "
            "(optionally gzipped) with columns text, label and optionally text_b."
        )
    content = _open_text(path)
    if not content.strip():
        raise TaskError(f"{path.name} is empty. It needs a header line (text,label[,text_b]) and at least two rows.")
    if suffix in (".jsonl", ".json", ".ndjson"):
        problem = nesting_problem(content)  # before json.loads, which recurses
        if problem:
            raise TaskError(f"{path.name}: {problem}. Each line must be one flat object.")
        rows = []
        for number, line in enumerate(content.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise TaskError(
                    f"{path.name}, line {number}: not valid JSON ({err.msg}). Each line must be one object "
                    'such as {"text": "...", "label": "..."}.'
                ) from err
            if not isinstance(row, dict):
                raise TaskError(f"{path.name}, line {number}: expected a JSON object, got {type(row).__name__}.")
            rows.append({**row, LINE_KEY: number})
        return rows
    delimiter = "\t" if suffix == ".tsv" else ","
    reader = csv.DictReader(io.StringIO(content), delimiter=delimiter)
    rows = []
    try:
        for row in reader:
            if None in row:  # more cells than header columns
                raise TaskError(
                    f"{path.name}, line {reader.line_num}: {len(row) - 1 + len(row[None])} cells but the header "
                    f"has {len(reader.fieldnames)} columns. Quote cells that contain '{delimiter}'."
                )
            rows.append({**row, LINE_KEY: reader.line_num})
    except csv.Error as err:
        # reader.reader: DictReader.line_num is only updated after a row succeeds, so it names the line before.
        raise TaskError(f"{path.name}, line {reader.reader.line_num}: unreadable CSV ({err}).") from err
    return rows


def _clean(value) -> str:
    return "" if value is None else str(value).strip()


def examples_from_rows(rows: list[dict], name: str, known_labels: tuple[str, ...] | None = None) -> list[Example]:
    """Validate user rows: required columns, empty cells, labels outside `known_labels` (when given)."""
    if not rows:
        raise TaskError(f"{name} has a header but no rows; add labelled examples.")
    columns = [c for c in rows[0].keys() if c != LINE_KEY]
    missing = [c for c in ("text", "label") if c not in columns]
    if missing:
        raise TaskError(
            f"{name} has no {' and no '.join(repr(c) for c in missing)} column (columns found: "
            f"{', '.join(map(repr, columns)) or 'none'}). Rename the columns to text, label "
            "and optionally text_b."
        )
    examples, empty_text, empty_label = [], [], []
    for position, row in enumerate(rows, start=1):
        number = row.get(LINE_KEY, position)
        text, label = _clean(row.get("text")), _clean(row.get("label"))
        if not text:
            empty_text.append(number)
        if not label:
            empty_label.append(number)
        examples.append(Example(text, _clean(row.get("text_b")) or None, label))
    for problem, numbers in (("an empty text", empty_text), ("an empty label", empty_label)):
        if numbers:
            shown = ", ".join(map(str, numbers[:10])) + (" …" if len(numbers) > 10 else "")
            raise TaskError(
                f"{name}: {len(numbers)} row(s) have {problem} (lines {shown}); fill them in or remove them."
            )
    if known_labels is not None:
        unknown = sorted({e.label for e in examples} - set(known_labels))
        if unknown:
            raise TaskError(
                f"{name}: label(s) {', '.join(map(repr, unknown))} do not occur in the training rows "
                f"(known: {', '.join(map(repr, known_labels))}); fix the spelling or add training examples."
            )
    return examples


def _sorted_labels(labels: set[str]) -> tuple[str, ...]:
    """Numeric labels in numeric order ("2" before "10"), other labels alphabetically."""
    try:
        return tuple(sorted(labels, key=float))
    except ValueError:
        return tuple(sorted(labels))


def read_user_task(path: Path, seed: int = 0) -> tuple[list[Example], list[Example], str, tuple[str, ...]]:
    """(train, eval, eval split name, labels) of a user file; see the module docstring for the layout."""
    rows = read_user_rows(path)
    name = Path(path).name
    if rows and "split" in rows[0]:
        is_eval = [_clean(r.get("split")).lower() in EVAL_SPLIT_NAMES for r in rows]
        train_rows = [r for r, e in zip(rows, is_eval) if not e]
        eval_rows = [r for r, e in zip(rows, is_eval) if e]
        if not train_rows or not eval_rows:
            raise TaskError(
                f"{name}: the split column must mark some rows 'train' and some 'test' (or dev/validation); "
                f"found {len(train_rows)} train and {len(eval_rows)} eval rows."
            )
        train = examples_from_rows(train_rows, name)
        labels = _sorted_labels({e.label for e in train})
        evaluation = examples_from_rows(eval_rows, name, labels)
        split_name = "split column"
    else:
        examples = examples_from_rows(rows, name)
        labels = _sorted_labels({e.label for e in examples})
        order = list(range(len(examples)))
        random.Random(seed).shuffle(order)
        n_eval = max(1, round(HOLDOUT_FRACTION * len(examples)))
        evaluation = [examples[i] for i in sorted(order[:n_eval])]
        train = [examples[i] for i in sorted(order[n_eval:])]
        split_name = f"{int(HOLDOUT_FRACTION * 100)}% hold-out"
    if len(labels) < 2:
        raise TaskError(
            f"{name}: every training row has the label {labels[0]!r}; a classifier needs at least two labels."
        )
    if len(train) < 2:
        raise TaskError(f"{name}: only {len(train)} training row(s); add more labelled examples.")
    return train, evaluation, split_name, labels



def classification_data(recipe) -> TaskData:
    """The classification data a Recipe trains on (with an evaluation split, or a TaskError)."""
    data = load_task(recipe.task, train_limit=recipe.train_limit, eval_limit=recipe.eval_limit, seed=recipe.seed,
                     source=recipe.data_source, eval_split=recipe.eval_split)
    if not data.eval:
        shown = Path(recipe.task).name if is_user_file(recipe.task) else recipe.task  # the user's name, not our path
        raise TaskError(f"Task '{shown}' has no evaluation examples.")
    return data


def check_user_file(recipe) -> None:
    """Read a user task file as training will, raising its TaskError now: called before a run folder exists, so a
    broken file leaves nothing behind. Built-in tasks are read when training starts (they are ours, and big)."""
    if not is_user_file(recipe.task):
        return
    if recipe.is_contrastive:
        contrastive_data(recipe)
    else:
        classification_data(recipe)

# ---- contrastive data ---------------------------------------------------------------------------------

CONTRASTIVE_EVAL_DEFAULT = 1000


@dataclass(frozen=True)
class Triple:
    """One SimCSE item: the anchor, its positive (None: the anchor itself, unsupervised) and a hard negative."""

    anchor: str
    positive: str | None = None
    negative: str | None = None


@dataclass(frozen=True)
class ContrastiveData:
    """train: SimCSE items. eval_pairs: held-out (sentence, positive partner) pairs for the similarity
    report; eval_sentences: held-out sentences when the task has no pairs."""

    task: str
    mode: str  # "unsup" | "sup"
    train: tuple[Triple, ...]
    eval_pairs: tuple[tuple[str, str], ...]
    eval_sentences: tuple[str, ...]
    source: str


def _positive_pairs(task: str, examples: list[Example]) -> list[tuple[str, str]]:
    """Pairs whose two sides mean the same: SNLI entailment, MRPC paraphrase, any pair of a user file."""
    wanted = {"snli": {"entailment"}, "mrpc": {"1"}}.get(task)
    return [(e.text, e.text_b) for e in examples if e.text_b and (wanted is None or e.label in wanted)]


def _snli_triples(examples: list[Example]) -> list[Triple]:
    """Entailment pairs, each with a contradiction hypothesis of the same premise as hard negative when the
    data has one (the local 20k subset of SNLI train has one for ~6 % of premises; the full split for all)."""
    contradictions: dict[str, str] = {}
    for e in examples:
        if e.label == "contradiction":
            contradictions.setdefault(e.text, e.text_b)
    return [Triple(e.text, e.text_b, contradictions.get(e.text)) for e in examples if e.label == "entailment"]


def _unique(texts) -> list[str]:
    return list(dict.fromkeys(t for t in texts if t))


def load_contrastive(
    task: str, mode: str, *, train_limit: int | None = None, eval_limit: int | None = None, seed: int = 0, source: str = "auto"
) -> ContrastiveData:
    """SimCSE data. unsup: every distinct sentence of the task's training split. sup: positive pairs (SNLI
    entailment with contradiction hard negatives, MRPC paraphrases, or a user file's text/text_b rows with an
    optional text_neg column). A user file needs only `text` (unsup) or `text` + `text_b` (sup)."""
    if mode not in ("unsup", "sup"):
        raise TaskError(f"contrastive mode {mode!r} is not 'unsup' or 'sup'")
    eval_limit = eval_limit or CONTRASTIVE_EVAL_DEFAULT
    if is_user_file(task):
        return _user_contrastive(Path(task), mode, train_limit, eval_limit, seed)
    used = _pick_source(task, source)
    train, evaluation = _builtin(task, used)
    if mode == "sup":
        if task == "snli":
            items = _snli_triples(train)
        elif task == "mrpc":
            items = [Triple(a, b) for a, b in _positive_pairs(task, train)]
        else:
            raise TaskError(f"Supervised SimCSE needs positive pairs; '{task}' has none. Use snli, mrpc or unsup mode.")
    else:
        items = [Triple(t) for t in _unique(x for e in train for x in (e.text, e.text_b))]
    pairs = local_data.seeded_subset(_positive_pairs(task, evaluation), eval_limit, seed)
    sentences = [] if pairs else local_data.seeded_subset(_unique(e.text_b or e.text for e in evaluation), eval_limit, seed)
    items = local_data.seeded_subset(items, train_limit, seed)
    return ContrastiveData(task, mode, tuple(items), tuple(pairs), tuple(sentences), used)


def _user_contrastive(path: Path, mode: str, train_limit, eval_limit, seed) -> ContrastiveData:
    rows = read_user_rows(path)
    name = path.name
    if not rows:
        raise TaskError(f"{name} has a header but no rows; add sentences.")
    columns = [c for c in rows[0] if c != LINE_KEY]
    needed = ["text", "text_b"] if mode == "sup" else ["text"]
    missing = [c for c in needed if c not in columns]
    if missing:
        raise TaskError(
            f"{name} has no {' and no '.join(map(repr, missing))} column (columns found: {', '.join(map(repr, columns))}). "
            + ("Supervised SimCSE needs text and text_b (a positive) and optionally text_neg." if mode == "sup" else "Unsupervised SimCSE needs a text column.")
        )
    items = []
    for position, row in enumerate(rows, start=1):
        text, partner = _clean(row.get("text")), _clean(row.get("text_b")) or None
        if not text or (mode == "sup" and not partner):
            raise TaskError(f"{name}, line {row.get(LINE_KEY, position)}: empty {'text' if not text else 'text_b'}; fill it in or remove the row.")
        items.append(Triple(text, partner if mode == "sup" else None, (_clean(row.get("text_neg")) or None) if mode == "sup" else None))
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_eval = max(1, round(HOLDOUT_FRACTION * len(items)))
    held_out = [rows[i] for i in sorted(order[:n_eval])]
    train = [items[i] for i in sorted(order[n_eval:])]
    if len(train) < 2:
        raise TaskError(f"{name}: only {len(train)} training row(s) after the 20% hold-out; add more rows.")
    pairs = [(_clean(r["text"]), _clean(r.get("text_b"))) for r in held_out if _clean(r.get("text_b"))]
    sentences = [] if len(pairs) > 1 else [_clean(r["text"]) for r in held_out]
    return ContrastiveData(
        str(path), mode, tuple(local_data.seeded_subset(train, train_limit, seed)),
        tuple(pairs[:eval_limit]) if len(pairs) > 1 else (), tuple(sentences[:eval_limit]), "file",
    )


def contrastive_data(recipe) -> ContrastiveData:
    """The SimCSE data a contrastive Recipe trains on."""
    return load_contrastive(recipe.task, recipe.objective.split("-", 1)[1], train_limit=recipe.train_limit,
                            eval_limit=recipe.eval_limit, seed=recipe.seed, source=recipe.data_source)
