"""Layerwise projection of token vectors to 2-D, after VisBERT (van Aken et al. 2019): PCA or t-SNE, per layer.

Three ways to fit:
- "joint" (BERT Lens's default): one PCA fitted on the token vectors of every layer pooled together, so all
  layers share one mean and one pair of axes and a token's path across the layer slider is a real movement in
  one plane. Not what VisBERT does; chosen because it lets layers be compared on one picture.
- "per-layer" (VisBERT's choice): a new PCA fitted per layer; each layer gets the best plane for itself, but axes
  are not comparable across layers (a flip or rotation between layers means nothing).
- "tsne": scikit-learn's t-SNE per layer, seeded; keeps neighbourhoods, not distances, and has no variance to report.

Protocols (`core.protocols`): "bertlens" lets the caller pick any fit (joint by default, optionally on a
background corpus); "visbert" is VisBERT's: a new PCA per layer fitted on the one input's own tokens (no
background, no shared axes).

PCA can be fitted on a background set of vectors (e.g. SNLI sentences) and the user's tokens projected into it,
so a few sentences are seen against the space of ordinary text instead of defining it themselves.

PCA is computed here with numpy (eigen-decomposition of the covariance in float64, so a large background is
folded into a [D, D] matrix instead of being held whole); tests check it against scikit-learn's PCA.
"""

from __future__ import annotations

# sklearn imported in functions: importing this module (the CLI's --help, the studies list, the pages) must not load
# them.
from dataclasses import dataclass, replace
from typing import Iterable, Literal, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from core.model.encoding import encode, encode_stream
from core.progress import ProgressCallback, StopCheck, check_stop
from core.protocols import check
from core.contract import Analysis, setting

Method = Literal["joint", "per-layer", "tsne"]
METHODS: tuple[str, ...] = ("joint", "per-layer", "tsne")
PROTOCOLS: tuple[str, ...] = ("bertlens", "visbert")
METHOD_LABELS = {
    "joint": "joint PCA over all layers (BERT Lens's choice: shared axes, layers comparable)",
    "per-layer": "a new PCA per layer (VisBERT's choice: axes not comparable across layers)",
    "tsne": "t-SNE per layer",
}


def protocol_method(protocol: str, method: str | None = None) -> str:
    """The fit a protocol uses: visbert -> "per-layer" (any other explicit choice is refused); bertlens -> the
    given method, "joint" by default."""
    check(protocol, PROTOCOLS)
    if protocol == "visbert":
        if method not in (None, "per-layer"):
            raise ValueError(f"The visbert protocol fits a new PCA per layer; it cannot use the {method!r} fit.")
        return "per-layer"
    return method or "joint"

@dataclass(frozen=True, eq=False)
class TokenVectors:
    """Every kept token of a set of encoded inputs, with its vector at every layer. Shapes (N = tokens, D = dim):

    vectors     [layer, N, D] float32: hidden states, layer 0 = input embeddings, 1..L = transformer layers
    tokens      [N] word pieces as the tokenizer writes them
    sentence    [N] int: which input (0-based) the token comes from
    position    [N] int: the token's index within its input's tokens (specials counted)
    segment     [N] int: 0 = sentence A, 1 = sentence B of a pair
    is_special  [N] bool: [CLS], [SEP] ...
    is_punct    [N] bool: the piece is only punctuation (Unicode category P*)
    word        [N] str: the whole word the piece belongs to, "" for special tokens
    """

    vectors: np.ndarray
    tokens: tuple[str, ...]
    sentence: np.ndarray
    position: np.ndarray
    segment: np.ndarray
    is_special: np.ndarray
    is_punct: np.ndarray
    word: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class LayerProjection:
    """Token vectors of every layer in 2-D. Shapes (layer = hidden-state index, N = tokens shown):

    coords                    [layer, N, 2] float64: x, y of each token at each layer
    explained_variance_ratio  [layer, 2] float64: share of layer l's variance (over the vectors the projection
                              was fitted on, i.e. the background when there is one) along each of the 2 axes.
                              per-layer: exactly PCA's explained_variance_ratio_ for that layer's fit.
                              joint: var(layer l's vectors · axis k) / total variance of layer l's vectors, for the
                              2 shared axes; the two values sum to at most 1 and can be far lower than a per-layer
                              fit's, because the joint axes follow what changes most across all layers.
                              tsne: NaN (t-SNE has no such quantity).
    joint_explained_variance_ratio  [2] float64: the joint fit's own ratio over all layers pooled; None otherwise
    layers                    [layer] int: hidden-state index (0 = embeddings)
    method                    "joint", "per-layer" or "tsne"
    n_fit                     number of vectors per layer the projection was fitted on
    background                True when fitted on a background set rather than on the shown tokens
    tokens, sentence, position, segment, is_special, is_punct, word: per shown token, as in TokenVectors
    model                     the model's reference, when known ("" otherwise)
    background_name           the corpus spec of the background, when there is one
    protocol                  "bertlens" or "visbert" (a new PCA per layer on the input itself)
    """

    coords: np.ndarray
    explained_variance_ratio: np.ndarray
    joint_explained_variance_ratio: np.ndarray | None
    layers: np.ndarray
    method: str
    n_fit: int
    background: bool
    tokens: tuple[str, ...]
    sentence: np.ndarray
    position: np.ndarray
    segment: np.ndarray
    is_special: np.ndarray
    is_punct: np.ndarray
    word: tuple[str, ...]
    model: str = ""
    background_name: str | None = None
    protocol: str = "bertlens"

    @property
    def method_label(self) -> str:
        """What the fit is, in words, for chart titles and captions."""
        return METHOD_LABELS[self.method]

    @property
    def labels(self) -> list[str]:
        """Unique token labels ("s1·3·bank"): input, position in that input, piece."""
        return [f"s{s}·{p}·{t}" for s, p, t in zip(self.sentence, self.position, self.tokens)]

    def to_json(self) -> dict:
        """Plain JSON types; NaN (t-SNE's missing variance ratios) becomes null."""
        out = {
            "model": self.model,
            "fit": self.method,
            "protocol": self.protocol,
            "background": self.background_name,
            "n_fit": int(self.n_fit),
            "tokens": list(self.tokens),
            "sentence": self.sentence.tolist(),
            "position": self.position.tolist(),
            "segment": self.segment.tolist(),
            "layers": self.layers.tolist(),
            "coords": self.coords.tolist(),
            "explained_variance_ratio": [[None if np.isnan(v) else float(v) for v in row]
                                         for row in self.explained_variance_ratio],
        }
        if self.joint_explained_variance_ratio is not None:
            out["joint_explained_variance_ratio"] = self.joint_explained_variance_ratio.tolist()
        return out


def collect_tokens(encodings: Sequence, *, keep_special: bool = True, keep_punct: bool = True) -> TokenVectors:
    """Pool the tokens of several Encodings (each with hidden_states) into one TokenVectors.

    By default every word piece is kept, special tokens included, so the order lines up with the tokenizer's.
    """
    if not encodings:
        raise ValueError("No sentences to project: type at least one sentence.")
    n_layers = {e.hidden_states.shape[0] for e in encodings}
    if len(n_layers) != 1:
        raise ValueError(f"Encodings come from models with different layer counts: {sorted(n_layers)}.")
    parts, tokens, sentence, position, segment, special, punct, word = [], [], [], [], [], [], [], []
    for index, enc in enumerate(encodings):
        if enc.hidden_states is None:
            raise ValueError("An encoding has no hidden states: encode with hidden_states=True.")
        punct_mask = enc.punctuation_mask
        keep = np.ones(enc.n_tokens, dtype=bool)
        if not keep_special:
            keep &= ~enc.special_mask
        if not keep_punct:
            keep &= ~punct_mask
        kept = np.flatnonzero(keep)
        parts.append(enc.hidden_states[:, kept])
        tokens.extend(enc.tokens[i] for i in kept)
        sentence.extend([index] * len(kept))
        position.extend(kept.tolist())
        segment.extend(enc.segment_ids[kept].tolist())
        special.extend(enc.special_mask[kept].tolist())
        punct.extend(punct_mask[kept].tolist())
        word.extend(enc.words[enc.word_ids[i]] if enc.word_ids[i] >= 0 else "" for i in kept)
    return TokenVectors(
        vectors=np.concatenate(parts, axis=1).astype(np.float32, copy=False),
        tokens=tuple(tokens),
        sentence=np.array(sentence, dtype=np.int64),
        position=np.array(position, dtype=np.int64),
        segment=np.array(segment, dtype=np.int64),
        is_special=np.array(special, dtype=bool),
        is_punct=np.array(punct, dtype=bool),
        word=tuple(word),
    )


@dataclass(frozen=True)
class _Moments:
    """Enough statistics of a set of vectors to fit a PCA: count, sum [D], sum of outer products [D, D]."""

    n: int
    total: np.ndarray
    outer: np.ndarray

    @staticmethod
    def of(x: np.ndarray) -> "_Moments":
        x = np.asarray(x, dtype=np.float64)
        return _Moments(len(x), x.sum(axis=0), x.T @ x)

    def __add__(self, other: "_Moments") -> "_Moments":
        return _Moments(self.n + other.n, self.total + other.total, self.outer + other.outer)

    @property
    def mean(self) -> np.ndarray:
        return self.total / self.n

    @property
    def covariance(self) -> np.ndarray:
        """Sample covariance (ddof=1, as scikit-learn's PCA)."""
        mean = self.mean
        return (self.outer - self.n * np.outer(mean, mean)) / (self.n - 1)


@dataclass(frozen=True)
class _PCA:
    mean: np.ndarray  # [D]
    components: np.ndarray  # [2, D], orthonormal rows
    explained_variance_ratio: np.ndarray  # [2] over the fit set

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.mean) @ self.components.T


def _fit_pca(moments: _Moments) -> _PCA:
    if moments.n < 3:
        raise ValueError(f"PCA needs at least 3 token vectors per layer to fit 2 axes; got {moments.n}. Add words.")
    cov = (moments.covariance + moments.covariance.T) / 2
    values, vectors = np.linalg.eigh(cov)
    top = np.argsort(values)[::-1][:2]
    components = vectors[:, top].T.copy()
    # Sign convention of scikit-learn (svd_flip, v-based): each axis's largest loading is positive, so the
    # picture does not flip at random between runs or models.
    signs = np.sign(components[np.arange(2), np.abs(components).argmax(axis=1)])
    components *= np.where(signs == 0, 1.0, signs)[:, None]
    total = max(float(np.trace(cov)), np.finfo(np.float64).tiny)
    ratio = np.clip(values[top], 0.0, None) / total
    return _PCA(moments.mean, components, ratio)


def _variance_share(moments: _Moments, components: np.ndarray) -> np.ndarray:
    """Share of a set's variance that lies along each orthonormal axis: (v·C·v) / trace(C)."""
    cov = moments.covariance
    total = max(float(np.trace(cov)), np.finfo(np.float64).tiny)
    return np.einsum("kd,de,ke->k", components, cov, components) / total


def _tsne(x: np.ndarray, seed: int, perplexity: float | None) -> np.ndarray:
    from sklearn.manifold import TSNE
    n = len(x)
    if n < 4:
        raise ValueError(f"t-SNE needs at least 4 tokens; got {n}. Add words or use PCA.")
    # scikit-learn requires perplexity < n; about n/3 keeps a short sentence from collapsing to a ring.
    perplexity = min(perplexity or 30.0, max(1.0, (n - 1) / 3))
    # PCA initialisation keeps the map's orientation stable from layer to layer; with it the seed only reaches
    # the initial PCA's randomized solver, so results hardly depend on it, but they are exactly reproducible.
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed, max_iter=500)
    # One thread: for a few hundred tokens OpenMP's threads only wait on each other, and on a busy machine that
    # waiting took 85 s instead of 0.8 s for 7 layers x 40 tokens (bench/RESULTS.md).
    with threadpool_limits(limits=1):
        return tsne.fit_transform(np.asarray(x, dtype=np.float64))


def project_vectors(
    vectors: np.ndarray,
    method: Method = "joint",
    *,
    background: np.ndarray | Iterable[np.ndarray] | None = None,
    seed: int = 0,
    perplexity: float | None = None,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """vectors [layer, N, D] -> (coords [layer, N, 2], explained_variance_ratio [layer, 2], joint ratio [2] | None,
    number of vectors fitted per layer).

    background: [layer, M, D], or an iterable of [layer, M_i, D] chunks (a corpus streamed batch by batch);
    PCA is fitted on it instead of on `vectors`, which are then projected into it. t-SNE cannot place new points
    into an existing map, so it takes no background.
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 3:
        raise ValueError(f"vectors must be [layer, token, dim]; got shape {vectors.shape}.")
    n_layers, n_tokens, dim = vectors.shape
    if method not in METHODS:
        raise ValueError(f"Unknown projection {method!r}: use one of {', '.join(METHODS)}.")
    if n_tokens == 0:
        raise ValueError("No tokens left to project: show special tokens or punctuation, or type more words.")

    if method == "tsne":
        if background is not None:
            raise ValueError("t-SNE cannot project new tokens into a background map: use PCA with a background.")
        coords = np.empty((n_layers, n_tokens, 2))
        for layer in range(n_layers):
            check_stop(should_stop)
            coords[layer] = _tsne(vectors[layer], seed, perplexity)
            if progress is not None:
                progress(layer + 1, n_layers)
        return coords, np.full((n_layers, 2), np.nan), None, n_tokens

    if background is None:
        fit_moments = [_Moments.of(vectors[layer]) for layer in range(n_layers)]
    else:
        chunks = [background] if isinstance(background, np.ndarray) else background
        fit_moments = None
        for chunk in chunks:
            check_stop(should_stop)
            chunk = np.asarray(chunk)
            if chunk.ndim != 3 or chunk.shape[0] != n_layers or chunk.shape[2] != dim:
                raise ValueError(
                    f"Background vectors have shape {chunk.shape}, but the tokens have {n_layers} layers of "
                    f"dimension {dim}: fit the background with the same model."
                )
            moments = [_Moments.of(chunk[layer]) for layer in range(n_layers)]
            fit_moments = moments if fit_moments is None else [a + b for a, b in zip(fit_moments, moments)]
        if fit_moments is None or fit_moments[0].n == 0:
            raise ValueError("The background is empty: pick a background with sentences in it.")
    n_fit = fit_moments[0].n

    coords = np.empty((n_layers, n_tokens, 2))
    ratio = np.empty((n_layers, 2))
    if method == "joint":
        pooled = fit_moments[0]
        for moments in fit_moments[1:]:
            pooled = pooled + moments
        pca = _fit_pca(pooled)
        for layer in range(n_layers):
            coords[layer] = pca.transform(vectors[layer])
            ratio[layer] = _variance_share(fit_moments[layer], pca.components)
        return coords, ratio, pca.explained_variance_ratio, n_fit

    for layer in range(n_layers):
        check_stop(should_stop)
        pca = _fit_pca(fit_moments[layer])
        coords[layer] = pca.transform(vectors[layer])
        ratio[layer] = pca.explained_variance_ratio
    return coords, ratio, None, n_fit


def layerwise_projection(
    tokens: TokenVectors,
    method: Method | None = None,
    *,
    protocol: str = "bertlens",
    background: np.ndarray | Iterable[np.ndarray] | None = None,
    seed: int = 0,
    perplexity: float | None = None,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> LayerProjection:
    """Project every layer of `tokens` to 2-D (see project_vectors) and keep each token's labels alongside.
    method None: the protocol's (bertlens: joint; visbert: per-layer, fitted on `tokens` only)."""
    method = protocol_method(protocol, method)
    if protocol == "visbert" and background is not None:
        raise ValueError("The visbert protocol fits each layer's PCA on the input itself: leave out the background.")
    coords, ratio, joint_ratio, n_fit = project_vectors(
        tokens.vectors,
        method,
        background=background,
        seed=seed,
        perplexity=perplexity,
        progress=progress,
        should_stop=should_stop,
    )
    return LayerProjection(
        coords=coords,
        explained_variance_ratio=ratio,
        joint_explained_variance_ratio=joint_ratio,
        layers=np.arange(tokens.vectors.shape[0]),
        method=method,
        n_fit=n_fit,
        background=background is not None,
        tokens=tokens.tokens,
        sentence=tokens.sentence,
        position=tokens.position,
        segment=tokens.segment,
        is_special=tokens.is_special,
        is_punct=tokens.is_punct,
        word=tokens.word,
        protocol=protocol,
    )


def background_vectors(
    lm,
    sentences: Sequence[str],
    *,
    keep_special: bool = True,
    keep_punct: bool = True,
    batch_size: int = 32,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> np.ndarray:
    """Hidden states [layer, M, D] (float32) of every kept token of a background corpus, one batch in memory at a
    time (attentions are not computed). The same keep flags as the shown tokens, so both sets are alike."""
    chunks = []
    for _, enc in encode_stream(
        lm, list(sentences), batch_size=batch_size, attentions=False, progress=progress, should_stop=should_stop
    ):
        chunks.append(collect_tokens([enc], keep_special=keep_special, keep_punct=keep_punct).vectors)
    if not chunks:
        raise ValueError("The background is empty: pick a background with sentences in it.")
    return np.concatenate(chunks, axis=1)




# ---- the declaration (core.contract) -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PcaSettings:
    """What `pca` (the CLI), `core.lens.layerwise_pca` and the Layerwise PCA page let a person choose. The page's
    link carries the protocol as its own switch (`protocol=true`: visbert), so the declaration gives it no URL name."""

    method: str | None = setting(None, "joint: one PCA over all layers (BERT Lens's choice, layers share axes); "
                                 "per-layer: a new PCA per layer (VisBERT's choice); tsne (default: the protocol's, "
                                 "joint for bertlens)", type="str", choices=METHODS, cli="fit")
    protocol: str = setting("bertlens", "bertlens or visbert: a new PCA per layer fitted on the inputs themselves "
                            "(van Aken et al. 2019); visbert refuses a background and any other fit",
                            choices=PROTOCOLS, url=None)
    hide_special: bool = setting(False, "leave out [CLS], [SEP] ... (of the fit too)", cli="drop-special")
    hide_punct: bool = setting(False, "leave out punctuation pieces (of the fit too)", cli="drop-punct")
    seed: int = setting(0, "t-SNE seed and corpus sample seed", low=0, high=2**31 - 1)


def run_pca(lm, inputs: Sequence, settings: PcaSettings, progress: ProgressCallback = None,
            should_stop: StopCheck = None, *, background: np.ndarray | None = None):
    """The pca analysis under the contract: inputs (sentences or (A, B) pairs) encoded by `lm`, their kept tokens
    projected layer by layer. background: vectors of a background corpus (background_vectors, with the same
    hide settings). Returns (LayerProjection, the encodings: their cuts are the caller's to report)."""
    encodings = encode(lm, list(inputs), attentions=False)
    tokens = collect_tokens(encodings, keep_special=not settings.hide_special, keep_punct=not settings.hide_punct)
    projection = layerwise_projection(tokens, settings.method, protocol=settings.protocol, background=background,
                                      seed=settings.seed, progress=progress, should_stop=should_stop)
    return replace(projection, model=lm.ref), encodings


ANALYSIS = Analysis(
    name="pca", view="pca", command="pca", lens="layerwise_pca", settings=PcaSettings, run=run_pca,
    title="Layerwise PCA", summary="project every layer's token vectors to 2-D (joint PCA, per-layer PCA or t-SNE)",
)
