"""Which layers did fine-tuning change? Representational similarity between two models, layer by layer.

Both models read the same sentences; each word gets one vector per layer (its word pieces averaged, special
tokens left out). Two measures compare the models on those words:

- RSA (Merchant et al. 2020): each model's word-by-word cosine-similarity matrix over all words of the
  sentence set, then the Pearson correlation between the two matrices' upper triangles (diagonal left out).
- Linear CKA (Kornblith et al. 2019): <Kc, Lc>_F / (||Kc||_F ||Lc||_F), Kc = H X X^T H the centred linear Gram
  matrix of one model's word vectors. Invariant to orthogonal rotation and isotropic scaling.

Both reduce to one dot product between normalised "signatures" of a layer (a flattened triangle of a Gram
matrix), so every layer of A against every layer of B is one matrix product. The signatures cost
O(words^2) memory per layer, hence the `max_words` cap.

Which words, under `protocol` (both seeded by `seed`, so a run is repeatable and the sample is not the corpus's
first lines):
- "bertlens": whole sentences in a seeded random order until `max_words` words are gathered (every word of a
  chosen sentence is kept, so the words read as sentences).
- "merchant": `max_words` words drawn uniformly at random from all words of the corpus, each read in its own
  sentence: RSA's stimuli are a random sample of words, as in Merchant et al. (2020).
Only sentences that both tokenizers split into the same words (and that fit the models) are eligible.

    from core.similarity import compare_models
    result = compare_models(load_model("all-MiniLM-L6-v2"), load_model("my-snli-run"), sentences)
    result.rsa            # [layers] A's layer l vs B's layer l
    result.rsa_cross      # [layers_a, layers_b]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import distributed
from core.encoding import tokenize
from core.models import LoadedModel
from core.progress import ProgressCallback, StopCheck, check_stop
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.protocols import check as check_protocol

DEFAULT_MAX_WORDS = 1500
PROTOCOLS = (DEFAULT_PROTOCOL, "merchant")


class SimilarityError(ValueError):
    """The two models cannot be compared on this corpus; the message says why and what to do."""


@dataclass(frozen=True, eq=False)
class WordVectors:
    """Word-level vectors of a sentence set, one per word and layer (word pieces averaged).

    vectors     [L+1, N, D] float32, layer 0 = input embeddings
    sentence    [N] int: index of each word's sentence in `sentences`
    words       [N] the words as the tokenizer splits them (punctuation marks are words of their own)
    sentences   [S] the sentences that were read
    """

    vectors: np.ndarray
    sentence: np.ndarray
    words: tuple[str, ...]
    sentences: tuple[str, ...]

    @property
    def n_words(self) -> int:
        return self.vectors.shape[1]


@dataclass(frozen=True, eq=False)
class Similarity:
    """RSA and linear CKA between model A and model B on the same words.

    rsa_cross   [La+1, Lb+1] RSA of A's layer i vs B's layer j (layer 0 = embeddings)
    cka_cross   [La+1, Lb+1] linear CKA, same layout
    rsa, cka    [min(La, Lb)+1] the diagonal: layer l of A vs layer l of B
    layers      [min(La, Lb)+1] layer numbers of rsa and cka
    n_words, n_sentences: what the measures were computed on; n_skipped: sentences left out because the two
    tokenizers split them into different words (or they were longer than a model reads)
    protocol, seed: how the words were sampled (see the module docstring)
    """

    model_a: str
    model_b: str
    rsa_cross: np.ndarray
    cka_cross: np.ndarray
    n_words: int
    n_sentences: int
    n_skipped: int = 0
    protocol: str = DEFAULT_PROTOCOL
    seed: int = 0

    @property
    def layers(self) -> np.ndarray:
        return np.arange(min(self.rsa_cross.shape))

    @property
    def rsa(self) -> np.ndarray:
        n = len(self.layers)
        return np.diagonal(self.rsa_cross[:n, :n]).copy()

    @property
    def cka(self) -> np.ndarray:
        n = len(self.layers)
        return np.diagonal(self.cka_cross[:n, :n]).copy()

    def to_json(self) -> dict:
        return {
            "model_a": self.model_a,
            "model_b": self.model_b,
            "layers": self.layers.tolist(),
            "rsa": self.rsa.tolist(),
            "cka": self.cka.tolist(),
            "rsa_cross": self.rsa_cross.tolist(),
            "cka_cross": self.cka_cross.tolist(),
            "n_words": self.n_words,
            "n_sentences": self.n_sentences,
            "n_skipped": self.n_skipped,
            "protocol": self.protocol,
            "seed": self.seed,
            # The processes this command ran on (core.distributed); the result itself is the same for any number.
            "world_size": distributed.current().world_size,
        }


# --- the two measures on plain arrays -----------------------------------------------------------------------
def rsa_signature(x: np.ndarray) -> np.ndarray:
    """x [N, D] -> [N(N-1)/2] float32: the upper triangle of the cosine-similarity matrix, z-scored and divided
    by sqrt(length), so the dot product of two signatures is the Pearson correlation of the triangles."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = x / np.where(norms > 0, norms, 1.0)
    upper = (unit @ unit.T)[np.triu_indices(len(x), k=1)]
    return _standardise(upper - upper.mean())


def cka_signature(x: np.ndarray) -> np.ndarray:
    """x [N, D] -> [N(N+1)/2] float32: the centred linear Gram matrix H X X^T H as its upper triangle with the
    diagonal (off-diagonal entries weighted sqrt(2), since the full matrix holds each twice), unit length,
    so the dot product of two signatures is linear CKA."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0, keepdims=True)
    gram = centred @ centred.T
    rows, cols = np.triu_indices(len(x), k=0)
    weights = np.where(rows == cols, 1.0, np.sqrt(2.0))
    return _standardise(gram[rows, cols] * weights)


def _standardise(values: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(values)
    # A constant matrix (one word, or identical vectors) has no pattern to correlate: NaN, not a fake 0 or 1.
    if not np.isfinite(norm) or norm < 1e-12:
        return np.full(values.shape, np.nan, dtype=np.float32)
    return (values / norm).astype(np.float32)


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """RSA of two sets of vectors for the same N items: x [N, Dx], y [N, Dy] -> Pearson r."""
    return float(np.dot(rsa_signature(x).astype(np.float64), rsa_signature(y).astype(np.float64)))


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of x [N, Dx] and y [N, Dy] (rows are the same items)."""
    return float(np.dot(cka_signature(x).astype(np.float64), cka_signature(y).astype(np.float64)))


def layer_signatures(vectors: np.ndarray, should_stop: StopCheck = None) -> tuple[np.ndarray, np.ndarray]:
    """vectors [L+1, N, D] -> (rsa [L+1, N(N-1)/2], cka [L+1, N(N+1)/2]) float32."""
    rsa_rows, cka_rows = [], []
    for layer in vectors:
        check_stop(should_stop)
        rsa_rows.append(rsa_signature(layer))
        cka_rows.append(cka_signature(layer))
    return np.stack(rsa_rows), np.stack(cka_rows)


def cross_layer(signatures_a: np.ndarray, signatures_b: np.ndarray, step: int = 1 << 20) -> np.ndarray:
    """[La+1, M] x [Lb+1, M] -> [La+1, Lb+1] dot products, accumulated in float64 `step` columns at a time
    (float32 sums over millions of entries would lose the last digits of a correlation near 1)."""
    out = np.zeros((len(signatures_a), len(signatures_b)))
    for start in range(0, signatures_a.shape[1], step):
        out += signatures_a[:, start : start + step].astype(np.float64) @ signatures_b[:, start : start + step].astype(np.float64).T
    return out


def similarity_from_vectors(a: np.ndarray, b: np.ndarray, model_a: str = "A", model_b: str = "B", n_sentences: int = 0) -> Similarity:
    """Word vectors of both models for the same N words: a [La+1, N, Da], b [Lb+1, N, Db] -> Similarity."""
    if a.shape[1] != b.shape[1]:
        raise SimilarityError(f"Model A has {a.shape[1]} words and model B {b.shape[1]}; both must read the same words.")
    if a.shape[1] < 3:
        raise SimilarityError(f"Only {a.shape[1]} words to compare; give at least a few sentences.")
    rsa_a, cka_a = layer_signatures(a)
    rsa_b, cka_b = layer_signatures(b)
    return Similarity(model_a, model_b, cross_layer(rsa_a, rsa_b), cross_layer(cka_a, cka_b), a.shape[1], n_sentences)


# --- from models ---------------------------------------------------------------------------------------------
def sentence_words(lm: LoadedModel, text: str) -> tuple[tuple[str, ...], bool]:
    """How `encode` splits a sentence into words for this model, and whether it fits the model's length."""
    tokenized = tokenize(lm, [text])[0]
    return tokenized.words, tokenized.n_tokens_full <= lm.max_length


def shared_sentences(models: Sequence[LoadedModel], sentences: Sequence[str], max_words: int | None = DEFAULT_MAX_WORDS
                     ) -> tuple[list[str], int]:
    """Sentences, in order, that every model splits into the same words and reads whole, until `max_words`
    words are gathered (None: all of them). Returns (sentences, how many were skipped for a tokenizer mismatch
    or length)."""
    chosen: list[str] = []
    skipped = total = 0
    for text in sentences:
        if max_words is not None and total >= max_words:
            break
        if not text.strip():
            continue
        splits = [sentence_words(lm, text) for lm in models]
        if any(not fits for _, fits in splits) or len({words for words, _ in splits}) != 1:
            skipped += 1
            continue
        chosen.append(text)
        total += len(splits[0][0])
    return chosen, skipped


def sample_words(word_counts: Sequence[int], max_words: int, seed: int = 0, protocol: str = DEFAULT_PROTOCOL
                 ) -> list[np.ndarray]:
    """Which words to compare: per sentence, the sorted indices of its kept words (empty: sentence not read).

    bertlens: sentences in a seeded random order, all their words, until `max_words` are gathered.
    merchant: `max_words` of all the words, drawn uniformly without replacement (all of them when fewer)."""
    check_protocol(protocol, PROTOCOLS)
    rng = np.random.default_rng(seed)
    counts = np.asarray(word_counts, dtype=np.int64)
    keep = [np.empty(0, dtype=np.int64) for _ in counts]
    if protocol == "merchant":
        total = int(counts.sum())
        picked = np.sort(rng.choice(total, size=min(max_words, total), replace=False))
        starts = np.concatenate([[0], np.cumsum(counts)])
        sentence = np.searchsorted(starts, picked, side="right") - 1
        for i in np.unique(sentence):
            keep[i] = picked[sentence == i] - starts[i]
        return keep
    gathered = 0
    for i in rng.permutation(len(counts)):
        if gathered >= max_words:
            break
        keep[i] = np.arange(counts[i])
        gathered += int(counts[i])
    return keep


def word_vectors(
    lm: LoadedModel,
    sentences: Sequence[str],
    *,
    keep: Sequence[np.ndarray] | None = None,
    batch_size: int = 32,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> WordVectors:
    """Each word's vector at every layer (pieces averaged, special tokens out), sentence by sentence in order.
    keep: per sentence, the indices of the words to keep (all when None). Streams the forward passes: only the
    kept word vectors are held."""
    per_sentence: list[np.ndarray | None] = [None] * len(sentences)
    words: list[tuple[str, ...] | None] = [None] * len(sentences)
    mine = {}
    for i, enc in distributed.encode_share(lm, list(sentences), batch_size=batch_size, attentions=False, progress=progress,
                                           should_stop=should_stop):
        vectors, kept_words = enc.word_vectors(), enc.words
        if keep is not None:
            vectors, kept_words = vectors[:, keep[i]], tuple(kept_words[k] for k in keep[i])
        mine[i] = (vectors, kept_words)
    # Several ranks: each encoded its share; every rank gets all sentences back, in order (core.distributed).
    for i, (vectors, kept_words) in enumerate(distributed.current().gather_indexed(len(sentences), mine)):
        per_sentence[i] = vectors
        words[i] = kept_words
    vectors = np.concatenate(per_sentence, axis=1)
    sentence = np.concatenate([np.full(v.shape[1], i) for i, v in enumerate(per_sentence)])
    return WordVectors(vectors, sentence, tuple(w for ws in words for w in ws), tuple(sentences))


def compare_models(
    a: LoadedModel,
    b: LoadedModel,
    sentences: Sequence[str],
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    seed: int = 0,
    protocol: str = DEFAULT_PROTOCOL,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> Similarity:
    """RSA and CKA of model A vs model B, every layer against every layer, on a seeded sample of `max_words`
    words of `sentences` (see `sample_words`). progress(done, total) counts sentences over both models."""
    return compare_many(a, [b], sentences, max_words=max_words, seed=seed, protocol=protocol, progress=progress,
                        should_stop=should_stop)[0]


def compare_many(
    base: LoadedModel,
    others: Sequence[LoadedModel],
    sentences: Sequence[str],
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    seed: int = 0,
    protocol: str = DEFAULT_PROTOCOL,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> list[Similarity]:
    """One base model against several (e.g. fine-tuned runs): the base is encoded once, and every comparison
    uses the same seeded sample of words (from sentences all models split alike)."""
    check_protocol(protocol, PROTOCOLS)
    eligible, skipped = shared_sentences([base, *others], sentences, None)
    counts = [len(sentence_words(base, text)[0]) for text in eligible]
    keep_all = sample_words(counts, max_words, seed, protocol)
    chosen = [text for text, k in zip(eligible, keep_all) if len(k)]
    keep = [k for k in keep_all if len(k)]
    if len(chosen) < 2:
        raise SimilarityError(
            f"Only {len(chosen)} of {len(sentences)} sentences can be compared (the models split the others into "
            "different words, or they are too long); give more sentences, or models that share a tokenizer."
        )
    total = len(chosen) * (1 + len(others))

    def stage(k: int) -> ProgressCallback:
        if progress is None:
            return None
        return lambda done, _n: progress(k * len(chosen) + done, total)

    base_vectors = word_vectors(base, chosen, keep=keep, progress=stage(0), should_stop=should_stop)
    base_rsa, base_cka = layer_signatures(base_vectors.vectors, should_stop)
    results = []
    for k, other in enumerate(others, start=1):
        vectors = word_vectors(other, chosen, keep=keep, progress=stage(k), should_stop=should_stop)
        if vectors.words != base_vectors.words:
            raise SimilarityError(f"{other.ref} split the sentences into other words than {base.ref}.")
        rsa_o, cka_o = layer_signatures(vectors.vectors, should_stop)
        results.append(
            Similarity(base.ref, other.ref, cross_layer(base_rsa, rsa_o), cross_layer(base_cka, cka_o),
                       base_vectors.n_words, len(chosen), skipped, protocol, seed)
        )
    return results
