"""Structural (distance) probe of Hewitt & Manning (2019): is a layer's geometry a dependency tree in disguise?

Per layer, a linear map B [k, D] is trained so that the squared distance ||B(h_i - h_j)||^2 between two words'
projected vectors matches the number of edges between them in the gold dependency tree. Loss (H&M eq. 3): for
each sentence, sum over word pairs of |d_gold - d_B| divided by the squared sentence length, averaged over
sentences. Word vectors are the model's hidden states with the word pieces of each treebank word averaged.

Reported on held-out sentences, as H&M report them (john-hewitt/structural-probes, reporter.py):
- UUAS: the minimum spanning tree of the predicted distances vs the gold tree, undirected edges, punctuation
  left out of both trees; correct edges / gold edges over all sentences.
- DSpr: for every word, the Spearman correlation between its row of predicted and gold distances (punctuation
  included); averaged over the sentences of each length, then over lengths 5 to 50.

Two protocols (`core.protocols`):
- "bertlens": punctuation is UPOS PUNCT; rank 128 by default (H&M's rank sweep levels off well below full rank).
- "hewitt-manning": punctuation is H&M's list of PTB tags (`HM_PUNCT_XPOS`, read from the XPOS column; a
  treebank without XPOS falls back to UPOS PUNCT), the probe is full rank (the model's hidden size, as
  example/config/naacl19/bert-base/*.yaml: maximum_rank 768), at most 40 epochs with H&M's early stop (no gain
  of 1e-4 in the held-back loss for 5 epochs). Their loss and metrics are the ones above, in both protocols.
What stays different: H&M stop on the PTB dev split, BERT Lens on a held-back tenth of the training sentences;
their extraction (scripts/convert_raw_to_bert.py) runs WordPiece without basic tokenisation and with every
token_type_id = 1, BERT Lens feeds the treebank's words through the model's own tokenizer.

Layers: H&M's "BERT-base layer k" is index k of the 12 encoder outputs their extraction stores (no embedding
layer: LAYER_COUNT = 12, and their README says BERT-base has layers 0 through 11), i.e. BERT Lens layer k + 1.
`HM_LAYER_OFFSET` is that shift; the published numbers live in `core.references` already shifted.

A random-initialised copy of the model (same shape, same tokenizer) is the control: what a probe finds in
vectors that carry no learned syntax. Results are cached on disk per (model, layer, treebank, settings).

    data = probe_data(read_conllu(ud_ewt_path("dev")), read_conllu(ud_ewt_path("test")), name="UD EWT")
    result = probe_layers(load_model("all-MiniLM-L6-v2"), data, layers=[3, 6])
    result.uuas, result.dspr          # [layers]
"""

from __future__ import annotations

# torch, transformers and scipy imported in functions: importing this module (the CLI's --help, the studies list,
# the pages) must not load them.
import hashlib
import json
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from core.model import distributed
from core import settings, validation
from core.model.encoding import Words, encode_share
from core.files import atomic_path, write_text_atomic
from core.model.loading import LoadedModel, fresh_weights
from core.progress import ProgressCallback, StopCheck, check_stop
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.protocols import check as check_protocol
from core.data.treebank import Sentence, tree_distances
from core.analyses.changes import PROBE_PROTOCOLS as PROTOCOLS  # declared with the probe's settings
from core.analyses.changes import ProbeRunSettings, probe_layer_numbers
from core.data import corpus as corpora

PUNCT = "PUNCT"
# reporter.py, prims_matrix_to_edges: words with these PTB tags never enter the spanning trees.
HM_PUNCT_XPOS = frozenset({"''", ",", ".", ":", "``", "-LRB-", "-RRB-"})
HM_LAYER_OFFSET = 1
HM_MAX_EPOCHS = 40
HM_PATIENCE = 5
HM_MIN_GAIN = 1e-4
VECTOR_BUDGET_BYTES = 1 << 30
DSPR_LENGTHS = (5, 50)


class ProbeError(ValueError):
    """The probe cannot run on this input; the message says why and what to do."""


@dataclass(frozen=True)
class ProbeSettings:
    """How a probe is trained and scored. As H&M (regimen.py): Adam at 1e-3, batch 20, learning rate divided by 10
    when the held-back loss stops falling, best epoch kept. patience: stop after this many epochs without a gain
    (None: run every epoch). protocol: "bertlens" or "hewitt-manning" (which words count as punctuation in UUAS);
    `for_protocol` gives the whole paper setting."""

    rank: int = 128
    epochs: int = 10
    batch_size: int = 20
    learning_rate: float = 1e-3
    seed: int = 0
    protocol: str = DEFAULT_PROTOCOL
    patience: int | None = None

    def __post_init__(self):
        if self.rank < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ProbeError("rank, epochs and batch size must all be at least 1.")
        if self.patience is not None and self.patience < 1:
            raise ProbeError("patience must be at least 1 epoch (or None for no early stop).")
        try:
            check_protocol(self.protocol, PROTOCOLS)
        except ValueError as err:
            raise ProbeError(str(err)) from None

    @staticmethod
    def for_protocol(protocol: str, hidden_size: int, **overrides) -> "ProbeSettings":
        """The settings of a protocol for a model of this hidden size; keyword overrides win (e.g. a smaller
        epoch budget). hewitt-manning: full rank, 40 epochs at most, early stop after 5 without a gain."""
        if protocol == "hewitt-manning":
            base = ProbeSettings(rank=hidden_size, epochs=HM_MAX_EPOCHS, protocol=protocol, patience=HM_PATIENCE)
        else:
            base = ProbeSettings(protocol=check_protocol(protocol, PROTOCOLS))
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True, eq=False)
class ProbeData:
    """Training and evaluation sentences (each with at least 2 words and a well-formed tree).

    train, eval: [S] treebank sentences; digest: content hash, so equal data share cached probes.
    """

    name: str
    train: tuple[Sentence, ...]
    eval: tuple[Sentence, ...]
    digest: str


@dataclass(frozen=True, eq=False)
class LayerProbe:
    """One trained probe and how it did.

    projection  [k, D] float32, the map B
    train_loss  [epochs] mean training loss per epoch; stop_loss [epochs] loss on held-back training sentences
    eval_loss   loss on the evaluation sentences; uuas, dspr in [0, 1]
    dropped     [S] word pieces cut off each sentence (training, then evaluation) to fit the model's max_length;
                stored with the probe, so a cached probe reports the cut its features had
    """

    layer: int
    uuas: float
    dspr: float
    eval_loss: float
    projection: np.ndarray
    train_loss: np.ndarray
    stop_loss: np.ndarray
    n_train: int
    n_eval: int
    dropped: np.ndarray
    cached: bool = False


@dataclass(frozen=True, eq=False)
class ProbeResult(validation.CorpusCuts):
    """Probes of several layers of one model on one treebank.

    layers [n] int, uuas [n], dspr [n] (evaluation sentences), probes [n] the LayerProbe of each layer;
    dropped [S] word pieces cut off each sentence to fit max_length, the model's (every layer read the same cut)
    """

    model: str
    treebank: str
    settings: ProbeSettings
    probes: tuple[LayerProbe, ...]
    max_length: int

    @property
    def dropped(self) -> np.ndarray | None:
        return self.probes[0].dropped if self.probes else None

    @property
    def layers(self) -> np.ndarray:
        return np.array([p.layer for p in self.probes], dtype=np.int64)

    @property
    def uuas(self) -> np.ndarray:
        return np.array([p.uuas for p in self.probes])

    @property
    def dspr(self) -> np.ndarray:
        return np.array([p.dspr for p in self.probes])

    def probe(self, layer: int) -> LayerProbe:
        return next(p for p in self.probes if p.layer == layer)

    @property
    def protocol(self) -> str:
        return self.settings.protocol

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "treebank": self.treebank,
            # The processes this command ran on (core.model.distributed); the result itself is the same for any number.
            "world_size": distributed.current().world_size,
            "protocol": self.protocol,
            "settings": asdict(self.settings),
            "layers": self.layers.tolist(),
            "uuas": self.uuas.tolist(),
            "dspr": self.dspr.tolist(),
            "eval_loss": [p.eval_loss for p in self.probes],
            "n_train": self.probes[0].n_train if self.probes else 0,
            "n_eval": self.probes[0].n_eval if self.probes else 0,
            "truncated": self.truncation(),
        }


@dataclass(frozen=True, eq=False)
class SentenceParse:
    """A probe's tree for one sentence next to the gold tree.

    predicted [n, n], gold [n, n] distances; predicted_edges, gold_edges: (i, j) word index pairs, i < j,
    punctuation (as the protocol defines it) left out; punct [n] bool: the words left out
    """

    words: tuple[str, ...]
    upos: tuple[str, ...]
    predicted: np.ndarray
    gold: np.ndarray
    predicted_edges: frozenset[tuple[int, int]]
    gold_edges: frozenset[tuple[int, int]]
    punct: tuple[bool, ...] = ()

    @property
    def uuas(self) -> float:
        return len(self.predicted_edges & self.gold_edges) / max(len(self.gold_edges), 1)


# --- metrics (numpy) ------------------------------------------------------------------------------------------
def punctuation(sentence: Sentence, protocol: str = DEFAULT_PROTOCOL) -> tuple[bool, ...]:
    """Which words of a sentence UUAS leaves out. bertlens: UPOS PUNCT. hewitt-manning: XPOS in H&M's PTB list
    (so UD's HYPH and NFP marks stay in the tree, as they would in theirs); UPOS PUNCT when the treebank has
    no XPOS column filled in."""
    check_protocol(protocol, PROTOCOLS)
    has_xpos = len(sentence.xpos) == len(sentence) and any(tag not in ("", "_") for tag in sentence.xpos)
    if protocol == "hewitt-manning" and has_xpos:
        return tuple(tag in HM_PUNCT_XPOS for tag in sentence.xpos)
    return tuple(tag == PUNCT for tag in sentence.upos)


def spanning_tree_edges(distances: np.ndarray, upos: Sequence[str] | None = None, *,
                        punct: Sequence[bool] | None = None) -> frozenset[tuple[int, int]]:
    """Minimum spanning tree (Kruskal, ties broken by position) over the non-punctuation words -> edges (i, j), i < j.
    Punctuation: `punct` when given (one bool per word), else UPOS PUNCT in `upos`, else none.
    Sorting pairs by (distance, i, j) visits them in the order of H&M's prims_matrix_to_edges (a stable sort of
    the row-major pairs), so ties, frequent in gold trees, resolve the same way."""
    n = len(distances)
    if punct is not None:
        keep = [i for i in range(n) if not punct[i]]
    else:
        keep = [i for i in range(n) if upos is None or upos[i] != PUNCT]
    pairs = sorted((float(distances[i, j]), i, j) for a, i in enumerate(keep) for j in keep[a + 1 :])
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = set()
    for _, i, j in pairs:
        root_i, root_j = find(i), find(j)
        if root_i != root_j:
            parent[root_i] = root_j
            edges.add((i, j))
            if len(edges) == len(keep) - 1:
                break
    return frozenset(edges)


def uuas(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray], upos: Sequence[Sequence[str]] | None = None, *,
         punct: Sequence[Sequence[bool]] | None = None) -> float:
    """Undirected unlabelled attachment score over sentences: correct edges / gold edges (punctuation out:
    `punct` masks per sentence when given, else UPOS PUNCT)."""
    if punct is None and upos is None:
        raise ValueError("uuas needs the UPOS tags or the punctuation masks of the sentences.")
    correct = total = 0
    masks = punct if punct is not None else [None] * len(gold)
    tags_per_sentence = upos if upos is not None else [None] * len(gold)
    for p, g, tags, mask in zip(predicted, gold, tags_per_sentence, masks):
        gold_edges = spanning_tree_edges(g, tags, punct=mask)
        correct += len(spanning_tree_edges(p, tags, punct=mask) & gold_edges)
        total += len(gold_edges)
    return correct / total if total else float("nan")


def _row_ranks(matrix: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(matrix, axis=1)


def dspr(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray], lengths: tuple[int, int] = DSPR_LENGTHS) -> float:
    """Distance Spearman: per word, Spearman of its predicted vs gold distance row (all words, punctuation
    included, as H&M); mean per sentence length, then mean over the lengths in [lo, hi] that occur."""
    by_length: dict[int, list[float]] = {}
    for p, g in zip(predicted, gold):
        n = len(g)
        if not lengths[0] <= n <= lengths[1]:
            continue
        rp, rg = _row_ranks(np.asarray(p, dtype=np.float64)), _row_ranks(np.asarray(g, dtype=np.float64))
        rp -= rp.mean(axis=1, keepdims=True)
        rg -= rg.mean(axis=1, keepdims=True)
        denom = np.sqrt((rp**2).sum(axis=1) * (rg**2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = (rp * rg).sum(axis=1) / denom
        by_length.setdefault(n, []).extend(rho[np.isfinite(rho)].tolist())
    means = [np.mean(v) for v in by_length.values() if v]
    return float(np.mean(means)) if means else float("nan")


# --- data -------------------------------------------------------------------------------------------------------
def _usable(sentence: Sentence) -> bool:
    return len(sentence) >= 2 and (tree_distances(sentence.heads) >= 0).all()


def _digest(sentences: Sequence[Sentence]) -> str:
    h = hashlib.sha256()
    for s in sentences:
        # XPOS decides H&M's punctuation, so two treebanks differing only there must not share cached probes.
        h.update(json.dumps([s.words, s.heads, s.upos, s.xpos]).encode("utf-8"))
    return h.hexdigest()[:16]


def probe_data(
    sentences: Sequence[Sentence],
    eval_sentences: Sequence[Sentence] | None = None,
    *,
    name: str = "treebank",
    eval_fraction: float = 0.2,
    seed: int = 0,
    max_train: int | None = None,
    max_eval: int | None = None,
) -> ProbeData:
    """Training and evaluation sentences: `eval_sentences` when given, else a seeded `eval_fraction` of
    `sentences` held out. One-word sentences and malformed trees are left out; the caps take seeded subsets."""
    usable = [s for s in sentences if _usable(s)]
    if eval_sentences is None:
        order = list(range(len(usable)))
        random.Random(seed).shuffle(order)
        n_eval = max(1, int(round(eval_fraction * len(usable))))
        held = set(order[:n_eval])
        train = [s for i, s in enumerate(usable) if i not in held]
        evaluation = [s for i, s in enumerate(usable) if i in held]
    else:
        train, evaluation = usable, [s for s in eval_sentences if _usable(s)]
    train, evaluation = _subset(train, max_train, seed), _subset(evaluation, max_eval, seed + 1)
    if len(train) < 2 or not evaluation:
        raise ProbeError(
            f"{name} gives {len(train)} training and {len(evaluation)} evaluation sentences with a usable tree; "
            "a probe needs at least 2 and 1. Give a CoNLL-U file with more sentences."
        )
    digest = hashlib.sha256(f"{_digest(train)}:{_digest(evaluation)}".encode()).hexdigest()[:16]
    return ProbeData(name, tuple(train), tuple(evaluation), digest)


def _subset(items: list, limit: int | None, seed: int) -> list:
    if limit is None or limit >= len(items):
        return items
    keep = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in keep]


# --- models -----------------------------------------------------------------------------------------------------
def random_control(lm: LoadedModel, seed: int = 0) -> LoadedModel:
    """A copy of the model's architecture with freshly initialised weights (seeded), same tokenizer."""
    import torch
    from transformers import AutoModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with fresh_weights():  # a random control's weights must not meet another thread's load
            model = AutoModel.from_config(lm.config, attn_implementation="eager")
    model = model.to(lm.device).eval()
    return LoadedModel(f"{lm.ref} (random init)", f"random-init:{seed}:{lm.path}", "random-init", model, lm.tokenizer, lm.device)


def model_fingerprint(lm: LoadedModel) -> str:
    """What identifies the weights: the folder and its weight files' sizes and times (a run re-created under
    the same name gets new probes), or the config and seed of a random-initialised control."""
    if lm.source == "random-init":
        return hashlib.sha256(f"{lm.path}:{lm.config.to_json_string()}".encode()).hexdigest()[:16]
    folder = Path(lm.path)
    parts = [str(folder.resolve())]
    for weights in sorted(folder.glob("*.safetensors")):
        stat = weights.stat()
        parts.append(f"{weights.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def sentence_vectors(
    lm: LoadedModel,
    sentences: Sequence[Sentence],
    layers: Sequence[int],
    *,
    batch_size: int = 16,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> list[np.ndarray | None]:
    """Per sentence, [len(layers), n_words, D] float32: the treebank's words fed as pre-split words (`Words`),
    each word's pieces averaged (`Encoding.word_vectors`). None for a sentence longer than the model reads or
    with a word that gives no piece."""
    return _sentence_features(lm, sentences, layers, batch_size=batch_size, progress=progress, should_stop=should_stop)[0]


def _sentence_features(lm: LoadedModel, sentences: Sequence[Sentence], layers: Sequence[int], *, batch_size: int = 16,
                       **options) -> tuple[list[np.ndarray | None], np.ndarray]:
    """sentence_vectors, and [S] the word pieces cut off each sentence to fit the model, gathered over every rank
    with the vectors (each rank encodes only its share)."""
    bad = [layer for layer in layers if not 0 <= layer <= lm.num_layers]
    if bad:
        raise ProbeError(f"{lm.ref} has layers 0 to {lm.num_layers}; layer {bad[0]} does not exist.")
    mine: dict[int, tuple[np.ndarray | None, int]] = {}
    for i, enc in encode_share(lm, [Words(s.words) for s in sentences], batch_size=batch_size,
                           attentions=False, **options):
        # Truncation leaves the cut-off words without a piece, so one test covers both reasons to skip.
        mine[i] = (enc.word_vectors(list(layers)) if (enc.pieces_per_word > 0).all() else None, enc.n_truncated)
    # Several ranks: each encoded its share; every rank gets all sentences back, in order (core.model.distributed).
    gathered = distributed.current().gather_indexed(len(sentences), mine)
    return [vectors for vectors, _ in gathered], np.array([cut for _, cut in gathered], dtype=np.int64)


# --- training ---------------------------------------------------------------------------------------------------
def _batches(vectors: list[np.ndarray], distances: list[np.ndarray], indices: Sequence[int], device):
    """Padded tensors for a batch: h [b, n, D], gold [b, n, n], mask [b, n, n], lengths [b]."""
    import torch

    n = max(len(distances[i]) for i in indices)
    dim = vectors[indices[0]].shape[1]
    h = np.zeros((len(indices), n, dim), dtype=np.float32)
    gold = np.zeros((len(indices), n, n), dtype=np.float32)
    mask = np.zeros((len(indices), n, n), dtype=np.float32)
    lengths = np.zeros(len(indices), dtype=np.float32)
    for row, i in enumerate(indices):
        m = len(distances[i])
        h[row, :m] = vectors[i]
        gold[row, :m, :m] = distances[i]
        mask[row, :m, :m] = 1.0
        lengths[row] = m
    return tuple(torch.from_numpy(a).to(device) for a in (h, gold, mask, lengths))


def _predicted(projection, h):
    """Squared L2 distances between projected words: h [b, n, D] @ B^T -> [b, n, n]."""
    import torch

    p = h @ projection.T
    squared = (p * p).sum(-1)
    return torch.clamp(squared[:, :, None] + squared[:, None, :] - 2 * p @ p.transpose(1, 2), min=0.0)


def _loss(projection, batch):
    h, gold, mask, lengths = batch
    per_sentence = ((_predicted(projection, h) - gold).abs() * mask).sum(dim=(1, 2)) / lengths**2
    return per_sentence.mean()


def train_probe(
    vectors: list[np.ndarray],
    distances: list[np.ndarray],
    probe_settings: ProbeSettings,
    *,
    device: str = "cpu",
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit B [k, D] on sentences (vectors [n, D], distances [n, n]). A seeded tenth of them (when there are at
    least 20) is held back to pick the best epoch and to cut the learning rate when it stops improving; with
    `patience`, training ends after that many epochs without a gain (H&M: a gain is a drop of more than 1e-4,
    regimen.py). Returns (B, train_loss [epochs run], stop_loss [epochs run])."""
    import torch

    generator = torch.Generator().manual_seed(probe_settings.seed)
    order = torch.randperm(len(vectors), generator=generator).tolist()
    n_stop = len(order) // 10 if len(order) >= 20 else 0
    stop, train = order[:n_stop], order[n_stop:]
    dim = vectors[0].shape[1]
    projection = torch.empty(probe_settings.rank, dim)
    with torch.no_grad():
        projection.uniform_(-0.05, 0.05, generator=generator)
    projection = projection.to(device).requires_grad_(True)
    optimiser = torch.optim.Adam([projection], lr=probe_settings.learning_rate)
    best, best_loss, best_epoch = projection.detach().clone(), float("inf"), -1
    min_gain = HM_MIN_GAIN if probe_settings.protocol == "hewitt-manning" else 0.0
    train_losses, stop_losses = [], []
    size = probe_settings.batch_size
    for epoch in range(probe_settings.epochs):
        check_stop(should_stop)
        shuffled = [train[i] for i in torch.randperm(len(train), generator=generator).tolist()]
        total = 0.0
        for start in range(0, len(shuffled), size):
            indices = shuffled[start : start + size]
            optimiser.zero_grad()
            loss = _loss(projection, _batches(vectors, distances, indices, device))
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(indices)
        train_losses.append(total / len(shuffled))
        if stop:
            with torch.no_grad():
                held = sum(float(_loss(projection, _batches(vectors, distances, stop[s : s + size], device))) * len(stop[s : s + size])
                           for s in range(0, len(stop), size)) / len(stop)
            stop_losses.append(held)
            if held < best_loss - min_gain:
                best, best_loss, best_epoch = projection.detach().clone(), held, epoch
            else:
                for group in optimiser.param_groups:
                    group["lr"] *= 0.1
        else:
            best = projection.detach().clone()
            stop_losses.append(float("nan"))
        patience = probe_settings.patience
        if patience is not None and stop and epoch - best_epoch >= patience:
            if progress is not None:
                progress(probe_settings.epochs, probe_settings.epochs)
            break
        if progress is not None:
            progress(epoch + 1, probe_settings.epochs)
    return best.cpu().numpy().astype(np.float32), np.array(train_losses), np.array(stop_losses)


def predict_distances(projection: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """B [k, D], word vectors [n, D] -> squared distances [n, n] (float64)."""
    p = np.asarray(vectors, dtype=np.float64) @ np.asarray(projection, dtype=np.float64).T
    diff = p[:, None, :] - p[None, :, :]
    return (diff * diff).sum(-1)


def evaluate_probe(projection: np.ndarray, vectors: Sequence[np.ndarray], sentences: Sequence[Sentence],
                   protocol: str = DEFAULT_PROTOCOL) -> tuple[float, float, float]:
    """(uuas, dspr, loss) of a probe on sentences whose word vectors [n, D] are given; the protocol decides
    which words UUAS leaves out as punctuation."""
    predicted = [predict_distances(projection, v) for v in vectors]
    gold = [tree_distances(s.heads) for s in sentences]
    loss = float(np.mean([np.abs(p - g).sum() / len(g) ** 2 for p, g in zip(predicted, gold)]))
    masks = [punctuation(s, protocol) for s in sentences]
    return uuas(predicted, gold, punct=masks), dspr(predicted, gold), loss


# --- cache and the whole job ------------------------------------------------------------------------------------
def _cache_key(lm: LoadedModel, layer: int, data: ProbeData, probe_settings: ProbeSettings) -> str:
    raw = json.dumps([model_fingerprint(lm), layer, data.digest, asdict(probe_settings)], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def probe_cache_dir() -> Path:
    return settings.cache_dir() / "probes"


def _load_cached(key: str) -> LayerProbe | None:
    meta_file, arrays_file = probe_cache_dir() / f"{key}.json", probe_cache_dir() / f"{key}.npz"
    if not (meta_file.is_file() and arrays_file.is_file()):
        return None
    try:
        meta = json.loads(meta_file.read_text())
        with np.load(arrays_file, allow_pickle=False) as arrays:
            return LayerProbe(
                meta["layer"], meta["uuas"], meta["dspr"], meta["eval_loss"], arrays["projection"],
                arrays["train_loss"], arrays["stop_loss"], meta["n_train"], meta["n_eval"],
                # An entry stored before the cut was counted has no "dropped": retrained, never reported as 0.
                arrays["dropped"], cached=True,
            )
    except (OSError, ValueError, KeyError):
        return None  # a damaged entry is recomputed, not fatal


def _store(key: str, probe: LayerProbe, description: dict) -> None:
    folder = probe_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    # The arrays first, the JSON that _load_cached looks for last: each appears whole or not at all.
    with atomic_path(folder / f"{key}.npz") as tmp, open(tmp, "wb") as handle:
        np.savez(handle, projection=probe.projection, train_loss=probe.train_loss, stop_loss=probe.stop_loss,
                 dropped=probe.dropped)
    meta = {k: getattr(probe, k) for k in ("layer", "uuas", "dspr", "eval_loss", "n_train", "n_eval")}
    write_text_atomic(folder / f"{key}.json", json.dumps({**meta, **description}, indent=1))


def probe_layers(
    lm: LoadedModel,
    data: ProbeData,
    layers: Sequence[int] | None = None,
    probe_settings: ProbeSettings = ProbeSettings(),
    *,
    use_cache: bool = True,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> ProbeResult:
    """Train and evaluate a distance probe on each layer (default: all, 0 = embeddings). Layers already in
    the cache are read back; the rest share one forward pass over the treebank. progress(done, total) counts
    sentences encoded plus epochs trained. Memory: word vectors of up to ~1 GiB of layers at a time."""
    layers = list(range(lm.num_layers + 1)) if layers is None else [int(x) for x in layers]
    found = {layer: _load_cached(_cache_key(lm, layer, data, probe_settings)) if use_cache else None for layer in layers}
    todo = [layer for layer in layers if found[layer] is None]
    if not todo:
        return ProbeResult(lm.ref, data.name, probe_settings, tuple(found[layer] for layer in layers), lm.max_length)
    sentences = [*data.train, *data.eval]
    n_words = sum(len(s) for s in sentences)
    # Word vectors of several layers are held at once; past the budget, the treebank is encoded again per group.
    per_pass = max(1, int(VECTOR_BUDGET_BYTES // max(1, n_words * lm.hidden_size * 4)))
    groups = [todo[i : i + per_pass] for i in range(0, len(todo), per_pass)]
    total = len(sentences) * len(groups) + probe_settings.epochs * len(todo)
    done = 0
    train_distances = [tree_distances(s.heads).astype(np.float32) for s in data.train]
    for group in groups:
        base = done
        report = (lambda d, _t, b=base: progress(b + d, total)) if progress else None
        vectors, dropped = _sentence_features(lm, sentences, group, progress=report, should_stop=should_stop)
        done += len(sentences)
        train_keep = [i for i in range(len(data.train)) if vectors[i] is not None]
        eval_keep = [i for i in range(len(data.eval)) if vectors[len(data.train) + i] is not None]
        if len(train_keep) < 2 or not eval_keep:
            raise ProbeError(f"{lm.ref} cannot read enough of {data.name}: its sentences are longer than the model takes.")
        eval_sentences = [data.eval[i] for i in eval_keep]
        for k, layer in enumerate(group):
            check_stop(should_stop)
            epoch_report = (lambda e, _t, b=done: progress(b + e, total)) if progress else None
            projection, train_loss, stop_loss = train_probe(
                [vectors[i][k] for i in train_keep], [train_distances[i] for i in train_keep], probe_settings,
                device=lm.device, progress=epoch_report, should_stop=should_stop,
            )
            done += probe_settings.epochs
            eval_vectors = [vectors[len(data.train) + i][k] for i in eval_keep]
            score_uuas, score_dspr, eval_loss = evaluate_probe(projection, eval_vectors, eval_sentences, probe_settings.protocol)
            probe = LayerProbe(layer, score_uuas, score_dspr, eval_loss, projection, train_loss, stop_loss,
                               len(train_keep), len(eval_keep), dropped)
            _store(_cache_key(lm, layer, data, probe_settings), probe,
                   {"model": lm.ref, "treebank": data.name, "settings": asdict(probe_settings)})
            found[layer] = probe
    return ProbeResult(lm.ref, data.name, probe_settings, tuple(found[layer] for layer in layers), lm.max_length)


def parse_sentence(lm: LoadedModel, probe: LayerProbe, sentence: Sentence, protocol: str = DEFAULT_PROTOCOL) -> SentenceParse:
    """The probe's minimum spanning tree for one sentence next to its gold tree (punctuation as the protocol says)."""
    vectors = sentence_vectors(lm, [sentence], [probe.layer])[0]
    if vectors is None:
        raise ProbeError(f"{lm.ref} cannot read this sentence whole ({len(sentence)} words); pick a shorter one.")
    predicted = predict_distances(probe.projection, vectors[0])
    gold = tree_distances(sentence.heads).astype(np.float64)
    punct = punctuation(sentence, protocol)
    return SentenceParse(
        sentence.words, sentence.upos, predicted, gold,
        spanning_tree_edges(predicted, punct=punct), spanning_tree_edges(gold, punct=punct), punct,
    )


# ---- the declared probe (core.analyses.changes): its settings, its inputs and its run ------------------------------

def probe_settings(chosen: ProbeRunSettings, hidden_size: int) -> ProbeSettings:
    """The trainer's ProbeSettings of the declared settings: the protocol's, with what the user gave over it."""
    return ProbeSettings.for_protocol(chosen.protocol, hidden_size, rank=chosen.rank, epochs=chosen.epochs,
                                      learning_rate=chosen.lr, seed=chosen.seed)


def probe_inputs(corpus: str, eval_corpus: str | None, seed: int, train_limit: int | None = None,
                 eval_limit: int | None = None) -> ProbeData:
    """The probe's ProbeData from treebank specs (the CLI's --corpus / --eval-corpus): scored on `eval_corpus`, or a
    seeded held-out fifth of `corpus`. A bad spec or a corpus without trees raises ValueError."""
    train = corpora.require_trees(corpora.resolve(corpus, seed))
    evaluation = corpora.require_trees(corpora.resolve(eval_corpus, seed)) if eval_corpus else None
    return probe_data(train, evaluation, name=corpus + (f" / {eval_corpus}" if evaluation else ""), seed=seed,
                      max_train=train_limit, max_eval=eval_limit)


def run_probe(lm: LoadedModel, data: ProbeData, chosen: ProbeRunSettings, progress: ProgressCallback = None,
              should_stop: StopCheck = None, *, use_cache: bool = True) -> ProbeResult:
    """The declared probe's run: every chosen layer of `lm` (its random-initialised copy with random_init)."""
    layers = probe_layer_numbers(chosen.layers, lm.num_layers)
    model = random_control(lm, chosen.seed) if chosen.random_init else lm
    return probe_layers(model, data, layers, probe_settings(chosen, lm.hidden_size), use_cache=use_cache,
                        progress=progress, should_stop=should_stop)
