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

    from core.analyses.similarity import compare_models
    result = compare_models(load_model("all-MiniLM-L6-v2"), load_model("my-snli-run"), sentences)
    result.rsa            # [layers] A's layer l vs B's layer l
    result.rsa_cross      # [layers_a, layers_b]
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from core.model import distributed, overlap
from core.model.encoding import encode_share_batches, pool_batch_words, tokenize
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck, check_stop
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.protocols import check as check_protocol
from core.analyses.changes import DEFAULT_MAX_WORDS  # declared once, with the compare settings
from core.analyses.changes import SIMILARITY_PROTOCOLS as PROTOCOLS
from core.analyses.changes import CompareSettings


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
            # The processes this command ran on (core.model.distributed); the result itself is the same for any number.
            "world_size": distributed.current().world_size,
        }


def similarity_from_vectors(a: np.ndarray, b: np.ndarray, model_a: str = "A", model_b: str = "B", n_sentences: int = 0) -> Similarity:
    """Word vectors of both models for the same N words: a [La+1, N, Da], b [Lb+1, N, Db] -> Similarity."""
    if a.shape[1] != b.shape[1]:
        raise SimilarityError(f"Model A has {a.shape[1]} words and model B {b.shape[1]}; both must read the same words.")
    if a.shape[1] < 3:
        raise SimilarityError(f"Only {a.shape[1]} words to compare; give at least a few sentences.")
    rsa_a, cka_a = full_signatures(a)
    rsa_b, cka_b = full_signatures(b)
    return Similarity(model_a, model_b, _dot_rows(rsa_a, rsa_b), _dot_rows(cka_a, cka_b), a.shape[1], n_sentences)


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """RSA of two sets of vectors for the same N items: x [N, Dx], y [N, Dy] -> Pearson r of their cosine
    similarities over the pairs of items."""
    return float(_dot_rows(full_signatures(np.asarray(x)[None])[0], full_signatures(np.asarray(y)[None])[0])[0, 0])


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of x [N, Dx] and y [N, Dy] (rows are the same items)."""
    return float(_dot_rows(full_signatures(np.asarray(x)[None])[1], full_signatures(np.asarray(y)[None])[1])[0, 0])


# --- signatures: each layer's N x N matrix as one unit-norm row, so a dot product of two rows is RSA or CKA ----
# The whole symmetric matrix in float32 rather than its upper triangle: gathering a triangle (fancy indexing of
# N^2 / 2 entries) and its float64 copies cost more than the matrix product itself. Its Frobenius inner products
# are twice the triangle's (CKA's sqrt(2)-weighted triangle is exactly the full matrix), so after scaling to unit
# norm the dot products are the same RSA and CKA.
_CHUNK = 1 << 14  # columns per float32 product (two [L, _CHUNK] blocks stay in cache); chunks add up in float64


def _dot_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [La, M], b [Lb, M] float32 -> [La, Lb] float64: float32 products of _CHUNK columns, summed in float64."""
    out = np.zeros((len(a), len(b)))
    for start in range(0, a.shape[1], _CHUNK):
        out += a[:, start : start + _CHUNK] @ b[:, start : start + _CHUNK].T
    return out


def _unit_norm(matrix: np.ndarray, floor: float) -> None:
    """Scale a float32 matrix in place to Frobenius norm 1; NaN everywhere when its norm is below `floor` (a
    constant matrix has no pattern to correlate)."""
    flat = matrix.reshape(1, -1)
    norm = float(np.sqrt(_dot_rows(flat, flat)[0, 0]))
    if not np.isfinite(norm) or norm < floor:
        matrix.fill(np.nan)
    else:
        matrix *= np.float32(1.0 / norm)


def full_signatures(vectors: np.ndarray, should_stop: StopCheck = None, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """vectors [L+1, N, D] -> (rsa [L+1, N*N], cka [L+1, N*N]) float32: the dot product of two layers' rows is
    their RSA (Pearson of the cosine similarities over the off-diagonal pairs) or linear CKA (centred Gram
    matrices); a constant matrix (one word, identical vectors) gives NaN, not a fake 0 or 1. threads > 1: layers shared among that many threads, numpy's BLAS held to
    one thread each (for a caller that knows the cores are otherwise idle)."""
    n_layers, n, _ = vectors.shape
    rsa_rows = np.empty((n_layers, n * n), dtype=np.float32)
    cka_rows = np.empty((n_layers, n * n), dtype=np.float32)

    def one(layer: int) -> None:
        check_stop(should_stop)
        _layer_signatures(np.asarray(vectors[layer], dtype=np.float64), rsa_rows[layer].reshape(n, n),
                          cka_rows[layer].reshape(n, n))

    if threads > 1 and n_layers > 1:
        with overlap.one_blas_thread(), ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(one, range(n_layers)))
    else:
        for layer in range(n_layers):
            one(layer)
    return rsa_rows, cka_rows


def _layer_signatures(x: np.ndarray, cosine: np.ndarray, gram: np.ndarray) -> None:
    """One layer's x [N, D] float64 -> cosine and gram [N, N] float32 filled in place (see full_signatures).

    One matrix product serves both: the centred Gram K = Xc Xc^T (centred in float64 first, so no float32
    cancellation), then X X^T = K + b 1^T + 1 b^T + |mu|^2 (b = Xc mu: only additions to K, no cancellation)
    scaled by 1 / (|x_i| |x_j|) is the cosine matrix, to float32 rounding like a product of unit vectors."""
    n = len(x)
    mean = x.mean(axis=0)
    centred = x - mean
    centred32 = centred.astype(np.float32)
    np.matmul(centred32, centred32.T, out=gram)
    shift = (centred @ mean).astype(np.float32)
    np.add(gram, shift[:, None], out=cosine)
    cosine += shift[None, :]
    cosine += np.float32(mean @ mean)
    norms = np.linalg.norm(x, axis=1)
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0).astype(np.float32)  # zero vector: cos 0
    cosine *= inverse[:, None]
    cosine *= inverse[None, :]
    np.fill_diagonal(cosine, 0.0)
    mean_cosine = cosine.sum(dtype=np.float64) / (n * (n - 1))  # over the off-diagonal pairs
    cosine -= np.float32(mean_cosine)
    np.fill_diagonal(cosine, 0.0)
    _unit_norm(cosine, 1e-12 * np.sqrt(2.0))  # the triangle's floor: the full matrix holds each pair twice
    _unit_norm(gram, 1e-12)


# --- from models ---------------------------------------------------------------------------------------------
def sentence_words(lm: LoadedModel, text: str) -> tuple[tuple[str, ...], bool]:
    """How `encode` splits a sentence into words for this model, and whether it fits the model's length."""
    tokenized = tokenize(lm, [text])[0]
    return tokenized.words, tokenized.n_tokens_full <= lm.max_length


def _tokenized_alike(models: Sequence[LoadedModel], texts: Sequence[str]) -> Iterator[list | None]:
    """For each text in order, every model's Tokenized, or None when a model would cut it short or the models split
    it into different words. Tokenized 256 texts at a time, only as far as the caller reads, and once per
    tokenization key (a base model and its fine-tuned runs share one tokenizer call)."""
    keys = [_tokenization_key(lm) for lm in models]
    for offset in range(0, len(texts), 256):
        part = texts[offset : offset + 256]
        by_key: dict = {}
        tokenized = [by_key[key] if key in by_key else by_key.setdefault(key, tokenize(lm, part)) for lm, key in zip(models, keys)]
        for j in range(len(part)):
            items = [t[j] for t in tokenized]
            too_long = any(item.n_tokens_full > lm.max_length for item, lm in zip(items, models))
            yield None if too_long or len({item.words for item in items}) != 1 else items


def _sampled(models: Sequence[LoadedModel], sentences: Sequence[str], max_words: int, seed: int, protocol: str):
    """The sample compare_many reads: ([model][sentence read] Tokenized, per sentence read the indices of its kept
    words, sentences skipped), sentences in corpus order. Only sentences every model splits into the same words and
    reads whole can be drawn.

    bertlens: sentences in a seeded random order (sample_words' order over the non-empty sentences), skipping the
    ones that cannot be drawn, until `max_words` words are gathered; only the sentences walked are tokenized, so a
    large corpus costs no more than a small one. When every sentence can be drawn this is sample_words' own choice.
    Skipped counts the sentences walked past. merchant: a uniform draw over every word needs them all tokenized."""
    if protocol != DEFAULT_PROTOCOL:
        _, skipped, tokenized = _shared(models, sentences, None)
        keep_all = sample_words([len(item.words) for item in tokenized[0]], max_words, seed, protocol)
        chosen = [k for k, kept in enumerate(keep_all) if len(kept)]
        return [[items[c] for c in chosen] for items in tokenized], [keep_all[c] for c in chosen], skipped
    _, read, keep, skipped = _walked_sample(models, sentences, max_words, seed)
    return read, keep, skipped


def _walked_sample(models: Sequence[LoadedModel], inputs: Sequence, max_words: int, seed: int):
    """The bertlens sample of _sampled, with where each input read sits in `inputs`: (positions, read, keep,
    skipped). inputs: sentences, or (a, b) pairs (then every word of both sides is a word of the sample, read in
    its pair)."""
    positions = [i for i, item in enumerate(inputs) if any(text.strip() for text in _texts_of(item))]
    order = np.random.default_rng(seed).permutation(len(positions))
    walk = _tokenized_alike(models, [inputs[positions[i]] for i in order])
    picked: list[tuple[int, list]] = []
    skipped = gathered = 0
    for index in order:
        if gathered >= max_words:
            break
        items = next(walk)
        if items is None:
            skipped += 1
        elif items[0].words:
            picked.append((int(index), items))
            gathered += len(items[0].words)
    picked.sort(key=lambda pair: pair[0])
    read = [[items[m] for _, items in picked] for m in range(len(models))]
    return ([positions[index] for index, _ in picked], read, [np.arange(len(items[0].words)) for _, items in picked],
            skipped)


def sample_inputs(lm: LoadedModel, inputs: Sequence, max_words: int = DEFAULT_MAX_WORDS, seed: int = 0):
    """compare's seeded word sample (protocol bertlens) of one model's reading of `inputs` (sentences or pairs), as
    (positions in `inputs` of the inputs read, their Tokenized, per input read the indices of its kept words,
    inputs skipped): for a caller that feeds those inputs in a pass of its own (the time-lapse's one pass a frame)
    and builds a `Reference` from the vectors with `Reference.of_vectors`."""
    positions, read, keep, skipped = _walked_sample([lm], list(inputs), max_words, seed)
    _check_enough(keep, inputs)
    return positions, read[0], keep, skipped


def _texts_of(item) -> tuple[str, ...]:
    return tuple(t for t in item if t) if isinstance(item, tuple) else (str(item),)


def shared_sentences(models: Sequence[LoadedModel], sentences: Sequence[str], max_words: int | None = DEFAULT_MAX_WORDS
                     ) -> tuple[list[str], int]:
    """Sentences, in order, that every model splits into the same words and reads whole, until `max_words`
    words are gathered (None: all of them). Returns (sentences, how many were skipped for a tokenizer mismatch
    or length)."""
    chosen, skipped, _ = _shared(models, sentences, max_words)
    return chosen, skipped


def _tokenization_key(lm: LoadedModel):
    """Equal for two models whose tokenize() gives the same items: the same fast tokenizer (its full JSON, vocabulary
    and normalisation included) and the same length limit."""
    backend = getattr(lm.tokenizer, "backend_tokenizer", None)
    return (backend.to_str() if backend is not None else id(lm.tokenizer), lm.max_length)


def _shared(models: Sequence[LoadedModel], sentences: Sequence[str], max_words: int | None):
    """shared_sentences, plus each model's Tokenized of the chosen sentences ([model][sentence]), reused by the
    forward passes (see _tokenized_alike)."""
    texts = [text for text in sentences if text.strip()]
    chosen: list[str] = []
    kept: list[list] = [[] for _ in models]
    skipped = total = 0
    walk = _tokenized_alike(models, texts)
    for text in texts:
        if max_words is not None and total >= max_words:
            break
        items = next(walk)
        if items is None:
            skipped += 1
            continue
        chosen.append(text)
        for m, item in enumerate(items):
            kept[m].append(item)
        total += len(items[0].words)
    return chosen, skipped, kept


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
    sentences: Sequence,
    *,
    keep: Sequence[np.ndarray] | None = None,
    batch_size: int = 32,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> WordVectors:
    """Each word's vector at every layer (pieces averaged, special tokens out), sentence by sentence in order.
    sentences: str, or core.model.encoding.Tokenized of this model (not tokenized again). keep: per sentence, the
    indices of the words to keep (all when None). Streams the forward passes a batch at a time (pieces pooled
    for the whole batch, core.model.encoding.pool_batch_words): only the kept word vectors are held."""
    mine = {}
    for batch in encode_share_batches(lm, list(sentences), batch_size=batch_size, attentions=False,
                                                  progress=progress, should_stop=should_stop):
        for i, rows, words in batch_word_rows(batch):
            mine[i] = kept_rows(rows, words, None if keep is None else keep[i])
    # Several ranks: each encoded its share; every rank gets all sentences back, in order (core.model.distributed).
    return assembled(distributed.current().gather_indexed(len(sentences), mine), sentences)


def batch_word_rows(batch) -> Iterator[tuple[int, np.ndarray, tuple[str, ...]]]:
    """(input index, word vectors [W, L+1, D], words) of each row of an EncodedBatch (pieces pooled for the whole
    batch at once, core.model.encoding.pool_batch_words)."""
    vectors, units = pool_batch_words(batch)  # [U, L+1, D], [B]
    for i, item, start, n in zip(batch.indices, batch.items, np.cumsum(units) - units, units):
        yield i, vectors[start : start + n], item.words


def kept_rows(rows: np.ndarray, words: tuple[str, ...], keep: np.ndarray | None) -> tuple[np.ndarray, tuple]:
    """One input's rows and words, only the `keep` indices (all when None)."""
    return (rows, words) if keep is None else (rows[keep], tuple(words[k] for k in keep))


def assembled(parts: Sequence[tuple[np.ndarray, tuple]], sentences: Sequence) -> WordVectors:
    """WordVectors of (rows, words) per input read, in the order of `sentences` (str, pairs or Tokenized)."""
    vectors = np.ascontiguousarray(np.concatenate([rows for rows, _ in parts]).transpose(1, 0, 2))  # [L+1, N, D]
    sentence = np.repeat(np.arange(len(parts)), [len(rows) for rows, _ in parts])
    texts = tuple(getattr(t, "text_a", t) for t in sentences)
    return WordVectors(vectors, sentence, tuple(w for _, words in parts for w in words), texts)


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


def run_compare(models: tuple[LoadedModel, LoadedModel], sentences: Sequence[str], settings: CompareSettings,
                progress: ProgressCallback = None, should_stop: StopCheck = None) -> Similarity:
    """The declared compare's run (core.analyses.changes): compare_models of models (A, B) with its settings."""
    a, b = models
    return compare_models(a, b, sentences, max_words=settings.max_words, seed=settings.seed,
                          protocol=settings.protocol, progress=progress, should_stop=should_stop)


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
    models = [base, *others]
    read, keep, skipped = _sampled(models, sentences, max_words, seed, protocol)
    _check_enough(keep, sentences)
    total = len(keep) * len(models)

    def stage(k: int) -> ProgressCallback:
        if progress is None:
            return None
        return lambda done, _n: progress(k * len(keep) + done, total)

    def vectors_of(k: int) -> WordVectors:
        return word_vectors(models[k], read[k], keep=keep, progress=stage(k),
                            should_stop=should_stop)

    base_vectors = vectors_of(0)
    # The base's signatures are computed beside the next model's forward pass when a core would idle during it
    # (core.model.overlap), else on every core before it; each other model's on every core once its forward is done.
    if overlap.overlap_pays(base):
        base_signatures = overlap.background(base, full_signatures, base_vectors.vectors, should_stop)
    else:
        base_signatures = overlap.done(full_signatures(base_vectors.vectors, should_stop, threads=overlap.cores()))
    results = []
    for k, other in enumerate(others, start=1):
        vectors = vectors_of(k)
        reference = Reference(base.ref, tuple(read[0]), tuple(keep), skipped, protocol, seed, base_vectors,
                              *base_signatures.result())
        results.append(reference.versus(other.ref, vectors, should_stop))
    return results


def _check_enough(keep: Sequence, sentences: Sequence[str]) -> None:
    if len(keep) < 2:
        raise SimilarityError(
            f"Only {len(keep)} of {len(sentences)} sentences can be compared (the models split the others into "
            "different words, or they are too long); give more sentences, or models that share a tokenizer."
        )


@dataclass(frozen=True, eq=False)
class Reference:
    """The base model's side of compare_many, kept to compare it with many models later (a time-lapse of a
    training run: the same model at N steps) without encoding the base again.

    read        [S] the base's Tokenized of each sentence read; keep [S] the indices of each one's kept words
    vectors     the base's WordVectors of the sample; rsa, cka [L+1, N*N] its signatures (full_signatures)
    """

    model: str
    read: tuple
    keep: tuple
    skipped: int
    protocol: str
    seed: int
    vectors: WordVectors
    rsa: np.ndarray
    cka: np.ndarray
    tokenization: object = None  # _tokenization_key of the base: who may be compared by `compare`

    def versus(self, other: str, vectors: WordVectors, should_stop: StopCheck = None) -> Similarity:
        """Similarity of the base with a model whose WordVectors of the same sample are `vectors`."""
        if vectors.words != self.vectors.words:
            raise SimilarityError(f"{other} split the sentences into other words than {self.model}.")
        rsa_o, cka_o = full_signatures(vectors.vectors, should_stop, threads=overlap.cores())
        return Similarity(self.model, other, _dot_rows(self.rsa, rsa_o), _dot_rows(self.cka, cka_o),
                          self.vectors.n_words, len(self.keep), self.skipped, self.protocol, self.seed)

    def compare(self, other: LoadedModel, *, progress: ProgressCallback = None,
                should_stop: StopCheck = None) -> tuple[Similarity, WordVectors]:
        """compare_models(base, other, ...) on the same sample, for a model with the base's tokenizer (the base's
        tokens are fed to it as they are); also returns the other model's word vectors."""
        if _tokenization_key(other) != self.tokenization:
            raise SimilarityError(f"{other.ref} does not share {self.model}'s tokenizer; use compare_models.")
        vectors = word_vectors(other, self.read, keep=self.keep, progress=progress, should_stop=should_stop)
        return self.versus(other.ref, vectors, should_stop), vectors

    @classmethod
    def of(cls, base: LoadedModel, sentences: Sequence[str], *, max_words: int = DEFAULT_MAX_WORDS, seed: int = 0,
           protocol: str = DEFAULT_PROTOCOL, progress: ProgressCallback = None,
           should_stop: StopCheck = None) -> "Reference":
        """The base encoded once on the sample compare_models(base, other, sentences, ...) reads for any `other`
        that shares its tokenizer (the sample depends only on how the models split the sentences)."""
        check_protocol(protocol, PROTOCOLS)
        read, keep, skipped = _sampled([base], sentences, max_words, seed, protocol)
        _check_enough(keep, sentences)
        vectors = word_vectors(base, read[0], keep=keep, progress=progress, should_stop=should_stop)
        return cls.of_vectors(base, read[0], keep, skipped, vectors, seed=seed, protocol=protocol,
                              should_stop=should_stop)

    @classmethod
    def of_vectors(cls, base: LoadedModel, read: Sequence, keep: Sequence, skipped: int, vectors: WordVectors, *,
                   seed: int = 0, protocol: str = DEFAULT_PROTOCOL, should_stop: StopCheck = None) -> "Reference":
        """The Reference of a sample (sample_inputs) whose vectors the caller encoded in a pass of its own."""
        rsa_rows, cka_rows = full_signatures(vectors.vectors, should_stop, threads=overlap.cores())
        return cls(base.ref, tuple(read), tuple(keep), skipped, protocol, seed, vectors, rsa_rows, cka_rows,
                   _tokenization_key(base))
