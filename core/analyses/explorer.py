"""Dataset explorer: one vector per example of a corpus, projected to 2-D, coloured and cut into slices.

After LIT's embedding projector with slices (PAIR-code/lit): every example becomes one vector ([CLS] or the
mean of its word pieces, at any layer), the vectors are projected with PCA, UMAP or t-SNE, and a selection of
points can be kept as a named slice whose accuracy is compared with the rest of the corpus.

    ex = load_examples("snli:dev:300")                 # items, gold labels, extra columns of a user's file
    vec = example_vectors(lm, ex.items, layer=6)       # ExampleVectors: [N, D]
    pts = project(vec.vectors, "pca")                  # Projection: [N, 2]
    pred = predict(explainer, ex.items)                # Predictions (a classifier head is needed)

No streamlit here.
"""

from __future__ import annotations

# torch and umap imported in functions: importing this module (the CLI's --help, the studies list, the pages) must
# not load them.
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

import numpy as np

from core.data import corpus as corpora, datasets
from core import validation
from core.analyses.projection import _tsne
from core.model.encoding import encode_stream, tokenize
from core.progress import ProgressCallback, StopCheck, check_stop
from core.contract import Analysis, setting

METHODS = ("pca", "umap", "tsne")
METHOD_NAMES = {"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}
POOLINGS = ("cls", "mean")
# Column names read as the gold label of a user's CSV / JSONL, in this order.
LABEL_COLUMNS = ("label", "gold_label", "labels", "class", "target")
# Colourings that need gold labels / a classifier head; a corpus or model without them hides these.
LABEL_COLOURINGS = ("gold label",)
# Where the corpus keeps each annotator's judgment (SNLI 1.0): how many chose the gold label.
AGREEMENT_COLOURING = "annotator agreement"
PREDICTION_COLOURINGS = ("predicted label", "confidence")
BOTH_COLOURINGS = ("correct / wrong",)
ALWAYS_COLOURINGS = ("sentence length", "contains words")


@dataclass(frozen=True)
class Examples:
    """The examples of a corpus spec, in the order of `corpus.resolve(spec).items`.

    items    [N] str or (a, b) pairs, as the encoder takes them
    labels   [N] gold label strings, or None when the source has none
    columns  name -> [N] values of every other column of a user's CSV / JSONL (text columns left out)
    trees    [N] treebank sentences (UD), or ()
    agreement [N] how many annotators chose the gold label ("5/5", ...; Example.agreement, None for an example
             without judgments), or None when no example has them
    """

    name: str
    items: tuple
    labels: tuple[str, ...] | None = None
    columns: dict = field(default_factory=dict)
    trees: tuple = ()
    agreement: tuple[str | None, ...] | None = None

    def __len__(self) -> int:
        return len(self.items)

    @property
    def texts(self) -> list[str]:
        """[N] one line per example: a pair is written 'A ||| B'."""
        return [item if isinstance(item, str) else f"{item[0]} ||| {item[1]}" for item in self.items]

    def to_json(self) -> dict:
        return {"name": self.name, "items": [list(i) if not isinstance(i, str) else i for i in self.items],
                "labels": list(self.labels) if self.labels is not None else None,
                "columns": {k: list(v) for k, v in self.columns.items()}}


def _dataset_examples(spec: str, seed: int, n_items: int) -> list[datasets.Example] | None:
    """The labelled examples behind a dataset spec, row k for item k; None when the spec is no dataset."""
    name, *rest = spec.split(":")
    if name not in ("snli", "mrpc"):
        return None
    split = rest[0] if rest and rest[0] else corpora.DATASET_SPLITS[name][0]
    split = corpora.SPLIT_ALIASES.get((name, split), split)
    n = corpora._parse_n(rest[1], spec) if len(rest) > 1 else corpora.DEFAULT_N
    examples = datasets.snli(split, n, seed) if name == "snli" else datasets.mrpc(split, n, seed)
    # core.data.corpus drops an example only when both its sentences are empty; then the rows no longer line up.
    kept = [e for e in examples if (e.text or "").strip() or (e.text_b or "").strip()]
    return kept if len(kept) == n_items else None




def file_columns(rows: list[dict], n_items: int) -> tuple[tuple[str, ...] | None, dict]:
    """(gold labels or None, other columns) of a CSV / JSONL's rows, when they line up with the corpus items.

    Rows whose text is empty are dropped by core.data.corpus; they are dropped here the same way, so row k of the
    result is item k. Text columns are left out (the items already hold them)."""
    text_keys = set(corpora.TEXT_COLUMNS) | {c for pair in corpora.PAIR_COLUMNS for c in pair}

    def filled(row: dict) -> bool:
        lower = {str(k).strip().lower(): v for k, v in row.items()}
        return any(str(lower.get(k) or "").strip() for k in text_keys if k in lower) or (
            not any(k in lower for k in text_keys) and bool(str(next(iter(row.values()), "") or "").strip()))

    rows = [r for r in rows if filled(r)]
    if len(rows) != n_items or not rows:
        return None, {}
    keys = [k for k in rows[0] if k is not None]
    lower = {str(k).strip().lower(): k for k in keys}
    label_key = next((lower[c] for c in LABEL_COLUMNS if c in lower), None)
    labels = tuple(str(r.get(label_key, "")) for r in rows) if label_key is not None else None
    if labels is not None and not any(labels):
        labels = None
    text_cols = {lower[c] for c in text_keys if c in lower} or {keys[0]}
    columns = {k: tuple(r.get(k) for r in rows) for k in keys if k != label_key and k not in text_cols}
    return labels, columns


def load_examples(spec: str, seed: int = 0) -> Examples:
    """The examples a corpus spec names (core.data.corpus.resolve), with gold labels where the source has them
    (SNLI, MRPC, a `label` column of a CSV / JSONL) and a user file's other columns."""
    spec = spec.strip()
    if spec.lower().endswith((".csv", ".jsonl")) and Path(spec).is_file():
        return _file_examples(Path(spec).name, lambda: Path(spec).open("rb"))
    corpus = corpora.resolve(spec, seed)
    rows = _dataset_examples(spec, seed, len(corpus.items))
    labels = tuple(e.label for e in rows) if rows is not None else None
    agreement = tuple(e.agreement for e in rows) if rows is not None else None
    if agreement is not None and not any(agreement):
        agreement = None
    return Examples(corpus.name, tuple(corpus.items), labels, {}, tuple(corpus.trees), agreement)


def examples_from_upload(filename: str, data: bytes) -> Examples:
    """An uploaded .txt / .csv / .jsonl / .conllu (core.data.corpus.from_upload), with a CSV / JSONL's label and
    other columns."""
    return _file_examples(filename, lambda: io.BytesIO(data))


def _file_examples(filename: str, open_stream: Callable[[], BinaryIO]) -> Examples:
    """A file's examples, read twice line by line (its items, then its rows' other columns) through
    core.data.corpus's bounded readers: never more than settings.max_corpus_bytes() of it at a time."""
    with open_stream() as stream:
        corpus = corpora.from_stream(filename, stream)
    labels, columns = None, {}
    suffix = filename.lower().rsplit(".", 1)[-1]
    if suffix in ("csv", "jsonl"):
        with open_stream() as stream:
            lines = corpora.text_lines(stream, filename)
            if suffix == "csv":
                rows = [dict(r) for r in corpora.csv_rows(lines, filename)[1]]
            else:
                rows = [row for _, row in corpora.jsonl_rows(lines, filename)]
                rows = rows if all(isinstance(r, dict) for r in rows) else []
        if rows:
            labels, columns = file_columns(rows, len(corpus.items))
    return Examples(corpus.name, tuple(corpus.items), labels, columns, tuple(corpus.trees))


# ---- one vector per example ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ExampleVectors:
    """vectors [N, D] float32: example i's vector at `layer` (0 = embeddings), pooled by `pooling`
    ("cls": the first token's vector; "mean": mean over the non-special tokens). lengths [N] int: tokens
    per example, special tokens included; dropped [N] int: word pieces cut off its end to fit the model (0 when
    it fits)."""

    model: str
    layer: int
    pooling: str
    vectors: np.ndarray
    lengths: np.ndarray
    dropped: np.ndarray


def pool_example(hidden: np.ndarray, special_mask: np.ndarray, pooling: str) -> np.ndarray:
    """hidden [T, D] of one layer -> [D]: the first token's vector ("cls") or the mean of the non-special ones."""
    if pooling == "cls":
        return np.asarray(hidden[0], dtype=np.float32)
    if pooling == "mean":
        keep = ~np.asarray(special_mask, dtype=bool)
        return np.asarray(hidden[keep if keep.any() else slice(None)].mean(axis=0), dtype=np.float32)
    raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}; got {pooling!r}")


def example_vectors(lm, items: Sequence, layer: int, pooling: str = "cls", *, batch_size: int = 32,
                    progress: ProgressCallback = None, should_stop: StopCheck = None) -> ExampleVectors:
    """One vector per item, streamed (only one batch of hidden states is held at a time)."""
    if not 0 <= layer <= lm.num_layers:
        raise ValueError(f"layer must be 0..{lm.num_layers} for {lm.ref}; got {layer}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}; got {pooling!r}")
    if not items:
        raise ValueError("no examples: the corpus is empty")
    out = np.zeros((len(items), lm.hidden_size), dtype=np.float32)
    lengths = np.zeros(len(items), dtype=np.int64)
    dropped = np.zeros(len(items), dtype=np.int64)
    for i, enc in encode_stream(lm, list(items), batch_size=batch_size, attentions=False,
                                progress=progress, should_stop=should_stop):
        out[i] = pool_example(enc.hidden_states[layer], enc.special_mask, pooling)
        lengths[i] = enc.n_tokens
        dropped[i] = enc.n_truncated
    return ExampleVectors(lm.ref, layer, pooling, out, lengths, dropped)


@dataclass(frozen=True, eq=False)
class Predictions:
    """A classifier's output per example. labels [C] class names; probabilities [N, C]; predicted [N] class
    names (argmax); confidence [N] the top probability."""

    labels: tuple[str, ...]
    probabilities: np.ndarray

    @property
    def predicted(self) -> tuple[str, ...]:
        return tuple(self.labels[i] for i in self.probabilities.argmax(axis=1))

    @property
    def confidence(self) -> np.ndarray:
        return self.probabilities.max(axis=1)


def predict(explainer, items: Sequence, *, batch_size: int = 32, progress: ProgressCallback = None,
            should_stop: StopCheck = None) -> Predictions:
    """Softmax of the classifier head (core.analyses.explain.Explainer) for every item, batched."""
    from core.model.classifier import predict_logits, softmax

    explainer.require_head()
    logits = predict_logits(explainer, tokenize(explainer.lm, list(items)), batch_size=batch_size, progress=progress,
                            should_stop=should_stop)
    probs = softmax(logits).astype(np.float64)
    return Predictions(tuple(explainer.labels), probs)


# ---- 2-D projection --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Projection:
    """coords [N, 2] float64; explained_variance_ratio [2] for PCA (None otherwise)."""

    method: str
    coords: np.ndarray
    explained_variance_ratio: np.ndarray | None = None


def pca_2d(x: np.ndarray) -> Projection:
    """Centred PCA by SVD; each axis's sign is fixed so its largest-magnitude loading is positive (a sign is
    arbitrary, this one keeps pictures stable between runs)."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) < 2:
        raise ValueError(f"PCA needs at least 2 examples; got {len(x)}")
    centred = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    components = vt[:2]
    signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
    components = components * signs[:, None]
    total = (s ** 2).sum()
    ratio = (s[:2] ** 2) / total if total > 0 else np.zeros(2)
    coords = centred @ components.T
    if coords.shape[1] < 2:
        coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
    return Projection("pca", coords, ratio)


def project(vectors: np.ndarray, method: str = "pca", seed: int = 0) -> Projection:
    """[N, D] -> 2-D by PCA, UMAP (umap-learn, cosine metric) or t-SNE (core.analyses.projection's settings).

    LIT's projector (lit_nlp/components/pca.py, umap.py) fits PCA by an eigendecomposition of the covariance
    (the same axes as the SVD here) and UMAP with umap-learn's defaults, whose metric is euclidean; cosine is used
    here because every other similarity in BERT Lens is cosine, and the anisotropic offset of BERT's vectors
    otherwise dominates euclidean distances."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if method == "pca":
        return pca_2d(vectors)
    if method == "tsne":
        return Projection("tsne", _tsne(vectors, seed, None))
    if method == "umap":
        if len(vectors) < 4:
            raise ValueError(f"UMAP needs at least 4 examples; got {len(vectors)}. Use PCA.")
        import umap

        reducer = umap.UMAP(n_components=2, n_neighbors=min(15, len(vectors) - 1), metric="cosine",
                            random_state=seed, n_jobs=1)
        return Projection("umap", np.asarray(reducer.fit_transform(vectors), dtype=np.float64))
    raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")


@dataclass(frozen=True, eq=False)
class ExplorerResult(validation.CorpusCuts):
    """Everything the projector shows for one model: ids [N] example ids (row numbers of the corpus);
    coords [N, 2]; labels [N] gold labels or None; predictions or None (no classifier head); dropped [N] word
    pieces cut off each example to fit the model's max_length (ExampleVectors.dropped); agreement [N] annotator
    agreement ("5/5", ...) or None (Examples.agreement)."""

    model: str
    corpus: str
    layer: int
    pooling: str
    method: str
    ids: np.ndarray
    coords: np.ndarray
    labels: tuple[str, ...] | None
    lengths: np.ndarray
    predictions: Predictions | None = None
    explained_variance_ratio: np.ndarray | None = None
    dropped: np.ndarray | None = None
    max_length: int | None = None
    agreement: tuple[str | None, ...] | None = None

    def to_json(self) -> dict:
        return {
            "model": self.model, "corpus": self.corpus, "layer": self.layer, "pooling": self.pooling,
            "method": self.method,
            "truncated": self.truncation(),
            "points": [{"id": int(i), "x": float(x), "y": float(y),
                        "label": self.labels[k] if self.labels is not None else None,
                        "agreement": self.agreement[k] if self.agreement is not None else None}
                       for k, (i, (x, y)) in enumerate(zip(self.ids, self.coords))],
        }


def explore(lm, examples: Examples, layer: int, method: str = "pca", pooling: str = "cls", *, explainer=None,
            seed: int = 0, progress: ProgressCallback = None, should_stop: StopCheck = None) -> ExplorerResult:
    """Vectors, projection and (when `explainer` has a classifier head) predictions of every example."""
    n = len(examples)
    total = 2 * n if explainer is not None and explainer.has_head else n

    def step(offset):
        return None if progress is None else (lambda done, _total: progress(offset + done, total))

    vec = example_vectors(lm, examples.items, layer, pooling, progress=step(0), should_stop=should_stop)
    predictions = None
    if explainer is not None and explainer.has_head:
        predictions = predict(explainer, examples.items, progress=step(n), should_stop=should_stop)
    check_stop(should_stop)
    proj = project(vec.vectors, method, seed)
    return ExplorerResult(lm.ref, examples.name, layer, pooling, method, np.arange(n), proj.coords,
                          examples.labels, vec.lengths, predictions, proj.explained_variance_ratio, vec.dropped,
                          lm.max_length, examples.agreement)


# ---- colourings and slices -------------------------------------------------------------------------------------


def contains_words(texts: Sequence[str], words: Sequence[str]) -> np.ndarray:
    """[N] bool: the text contains any of `words` as a whole word, case-insensitively (a bias slice)."""
    wanted = [w.strip().lower() for w in words if w.strip()]
    if not wanted:
        return np.zeros(len(texts), dtype=bool)
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in wanted) + r")\b", re.IGNORECASE)
    return np.array([bool(pattern.search(t)) for t in texts], dtype=bool)


def colourings(has_labels: bool, has_predictions: bool, columns: Sequence[str] = (), has_agreement: bool = False) -> list[str]:
    """The colour choices that make sense: label colourings only with gold labels, annotator agreement only with
    annotators' judgments, prediction ones only with a classifier head, correct / wrong with both; then every
    extra column of a user's file."""
    out = []
    if has_labels:
        out += LABEL_COLOURINGS
    if has_agreement:
        out.append(AGREEMENT_COLOURING)
    if has_predictions:
        out += PREDICTION_COLOURINGS
    if has_labels and has_predictions:
        out += BOTH_COLOURINGS
    return out + list(ALWAYS_COLOURINGS) + [f"column: {c}" for c in columns]


def correct_mask(labels: Sequence[str], predicted: Sequence[str]) -> np.ndarray:
    """[N] bool: prediction equals the gold label."""
    return np.array([str(a) == str(b) for a, b in zip(labels, predicted)], dtype=bool)


@dataclass(frozen=True)
class SliceComparison:
    """A slice against the rest: counts and accuracy (None where a side is empty or no labels/predictions)."""

    name: str
    n_in: int
    n_out: int
    accuracy_in: float | None
    accuracy_out: float | None

    def to_json(self) -> dict:
        return {"name": self.name, "n_in": self.n_in, "n_out": self.n_out,
                "accuracy_in": self.accuracy_in, "accuracy_out": self.accuracy_out}


def slice_masks(n: int, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(in [N] bool, out [N] bool) of a slice given by example ids; they partition 0..N-1. Unknown ids raise."""
    ids = np.asarray(list(ids), dtype=np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise ValueError(f"slice ids must be 0..{n - 1}")
    inside = np.zeros(n, dtype=bool)
    inside[ids] = True
    return inside, ~inside


def agreement_slices(agreement: Sequence[str | None] | None) -> dict[str, list[int]]:
    """Example ids per annotator-agreement level, most agreement first: {"annotators 5/5 agree": [...], ...}
    (examples without judgments in none); {} without judgments. Compare each with compare_slice: models err more
    where people disagree."""
    agreement = list(agreement or ())
    return {f"annotators {a} agree": [i for i, x in enumerate(agreement) if x == a]
            for a in datasets.agreement_levels(agreement)}


def compare_slice(name: str, ids: Sequence[int], correct: np.ndarray | None, n: int) -> SliceComparison:
    """The slice's accuracy and the rest's, from a [N] correct/wrong mask (None: no accuracy)."""
    inside, outside = slice_masks(n, ids)

    def acc(mask):
        return float(correct[mask].mean()) if correct is not None and mask.any() else None

    return SliceComparison(name, int(inside.sum()), int(outside.sum()), acc(inside), acc(outside))


# ---- the declaration (core.contract) -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProjectSettings:
    """What `project` (the CLI), `core.lens.project` and the Dataset explorer's projector let a person choose."""

    layer: int | None = setting(None, "0 = embeddings ... L = last layer (default: last)", type="int", low=0, high=128)
    method: str = setting("pca", "pca, umap or tsne", choices=METHODS)
    pooling: str = setting("cls", "cls: the [CLS] vector; mean: the mean of the non-special word pieces",
                           choices=POOLINGS)
    seed: int = setting(0, "corpus sample seed and UMAP / t-SNE seed", low=0, high=2**31 - 1, url=None)


def run_project(explainer, examples: Examples, settings: ProjectSettings, progress: ProgressCallback = None,
                should_stop: StopCheck = None) -> ExplorerResult:
    """`explore` under the contract: the layer None read as the model's last (core.analyses.explain.Explainer:
    its classifier head, when it has one, adds the predictions)."""
    lm = explainer.lm
    layer = lm.num_layers if settings.layer is None else settings.layer
    if layer > lm.num_layers:
        raise ValueError(f"layer must be within 0…{lm.num_layers} for {lm.ref}")
    return explore(lm, examples, layer, settings.method, settings.pooling, explainer=explainer, seed=settings.seed,
                   progress=progress, should_stop=should_stop)


ANALYSIS = Analysis(
    name="project", view="explorer", command="project", lens="project", settings=ProjectSettings, run=run_project,
    title="Projector", order=0,
    summary="one vector per example of a corpus ([CLS] or mean-pooled) at a layer, projected to 2-D",
)
