"""Nearest contexts: every word occurrence of a corpus at chosen layers, on disk, searchable by cosine.

After exBERT's corpus search (Hoover et al. 2020): "where else does the model treat this word the way it treats
it here?". The corpus pass streams through core.model.encoding.encode_stream one batch at a time and appends each
word's vector (its pieces averaged, core.model.encoding.pool_vectors) as float16 to one raw file per layer, so the pass
holds one batch in memory whatever the corpus size. The search index is faiss (faiss-cpu) on unit vectors, so
inner product = cosine:

- below EXACT_THRESHOLD occurrences: IndexFlatIP, exact;
- above it: IndexIVFFlat (k-means cells, the `nprobe` nearest cells searched), approximate; the mode is
  returned with every search and shown on the page.

An index is built once per (model, corpus, layer set) into models_cache/explorer_index/KEY/ (written in a
dotted temporary folder, then renamed: a folder without a dot is complete) and reused across sessions.

Layout of a folder: info.json (model, corpus, layers, count, dim, mode, nlist, nprobe), layer_L.f16 ([count, dim]
float16, row r = occurrence r), occurrences.npy ([count, 2] int32: item index, word index), items.jsonl (per
item: text, words, upos, deprels), layer_L.faiss.
"""

from __future__ import annotations

# faiss imported in functions: importing this module (the CLI's --help, the studies list, the pages) must not load
# them.
import hashlib
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from core import settings, validation
from core.files import atomic_path
from core.model.encoding import Words, encode, encode_stream, pool_vectors, tokenize
from core.progress import ProgressCallback, StopCheck, check_stop
from core.contract import Analysis, setting

EXACT_THRESHOLD = 50_000
# IVF: about sqrt(n) cells (faiss's guide gives 4-16·sqrt(n) for millions of vectors; at 10^5 that many cells
# made k-means training the slowest step), each trained with at least this many points (faiss warns below 39).
POINTS_PER_CELL = 39
# A quarter of the cells probed: at 1/8, recall@10 on 10k real MiniLM vectors was 0.93 (bench/RESULTS.md).
NPROBE_SHARE = 1 / 4
MIN_NPROBE = 16
# Rows normalised and added to faiss at a time: bounds the float32 copy whatever the corpus size.
CHUNK = 2048


def index_root() -> Path:
    return settings.cache_dir() / "explorer_index"


def index_key(model: str, corpus_digest: str, layers: Sequence[int]) -> str:
    raw = json.dumps([model, corpus_digest, sorted(set(int(x) for x in layers))])
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def ivf_cells(n: int) -> int:
    return max(1, min(int(math.sqrt(n)), n // POINTS_PER_CELL))


def build_faiss(vectors: np.ndarray, threshold: int = EXACT_THRESHOLD, *, nlist: int | None = None,
                nprobe: int | None = None, seed: int = 0):
    """(faiss index over the unit rows of `vectors` [n, D] (any float dtype, a memmap is read in chunks),
    mode "exact" | "approximate", nlist, nprobe)."""
    import faiss

    n, dim = vectors.shape
    if n <= threshold:
        index = faiss.IndexFlatIP(dim)
        mode, nlist, nprobe = "exact", 0, 0
    else:
        nlist = nlist or ivf_cells(n)
        nprobe = nprobe or min(nlist, max(MIN_NPROBE, int(round(nlist * NPROBE_SHARE))))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = np.sort(np.random.default_rng(seed).choice(n, size=min(n, nlist * 64), replace=False))
        index.train(_unit(vectors[sample]))
        index.nprobe = nprobe
        mode = "approximate"
    for start in range(0, n, CHUNK):
        index.add(_unit(vectors[start:start + CHUNK]))
    return index, mode, nlist, nprobe


@dataclass(frozen=True)
class IndexInfo(validation.CorpusCuts):
    """What an index holds: count occurrences of dim-dimensional vectors at `layers`; mode exact | approximate;
    dropped [items] word pieces cut off each corpus item to fit the model's max_length (None in an index saved
    before they were counted: TokenIndex counts them again from the corpus)."""

    model: str
    corpus: str
    digest: str
    layers: tuple[int, ...]
    count: int
    dim: int
    mode: str
    nlist: int
    nprobe: int
    build_seconds: float
    has_trees: bool
    dropped: tuple[int, ...] | None = None
    max_length: int | None = None

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class TokenIndex:
    """An index folder opened for search (vectors are memory-mapped, not read)."""

    def __init__(self, folder: Path):
        import faiss

        self.folder = Path(folder)
        raw = json.loads((self.folder / "info.json").read_text())
        raw["layers"] = tuple(raw["layers"])
        self.info = IndexInfo(**raw)
        self.occurrences = np.load(self.folder / "occurrences.npy")
        with open(self.folder / "items.jsonl", encoding="utf-8") as f:
            self.items = [json.loads(line) for line in f]
        self._faiss = {layer: faiss.read_index(str(self.folder / f"layer_{layer}.faiss")) for layer in self.info.layers}
        for index in self._faiss.values():
            if hasattr(index, "nprobe"):
                index.nprobe = self.info.nprobe

    def vectors(self, layer: int) -> np.ndarray:
        """[count, dim] float16, memory-mapped."""
        return np.memmap(self.folder / f"layer_{layer}.f16", dtype=np.float16, mode="r",
                         shape=(self.info.count, self.info.dim))

    def search(self, query: np.ndarray, layer: int, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """(rows [k] int, cosine similarities [k]) of the k nearest occurrences at `layer`, best first."""
        if layer not in self._faiss:
            raise ValueError(f"this index holds layers {list(self.info.layers)}; build one with layer {layer}")
        if query.shape[-1] != self.info.dim:
            raise ValueError(f"query has {query.shape[-1]} dimensions, the index {self.info.dim}: same model needed")
        k = max(1, min(int(k), self.info.count))
        sims, rows = self._faiss[layer].search(_unit(query.reshape(1, -1)), k)
        keep = rows[0] >= 0
        return rows[0][keep].astype(np.int64), sims[0][keep].astype(np.float64)


def _item_record(item, tree, words: Sequence[str]) -> dict:
    if tree is not None:
        text = tree.text or " ".join(tree.words)
    else:
        text = item if isinstance(item, str) else f"{item[0]} ||| {item[1]}"
    return {"text": text, "words": list(words), "upos": list(tree.upos) if tree is not None else None,
            "deprels": list(tree.deprels) if tree is not None else None}


def build_token_index(lm, corpus, layers: Sequence[int], *, folder: Path | None = None,
                      threshold: int = EXACT_THRESHOLD, batch_size: int = 32, progress: ProgressCallback = None,
                      should_stop: StopCheck = None) -> TokenIndex:
    """Stream `corpus` (core.data.corpus.Corpus) through the model and index every word occurrence at `layers`.
    A treebank corpus is fed its own words (core.model.encoding.Words), so each occurrence keeps its POS and relation.
    Returns the opened index; an existing complete folder for the same key is reused without a forward pass."""
    layers = tuple(sorted(set(int(x) for x in layers)))
    if not layers:
        raise ValueError("give at least one layer")
    bad = [x for x in layers if not 0 <= x <= lm.num_layers]
    if bad:
        raise ValueError(f"layers must be 0..{lm.num_layers} for {lm.ref}; got {bad}")
    folder = Path(folder) if folder else index_root() / index_key(lm.ref, corpus.digest, layers)
    trees = list(corpus.trees) if corpus.trees else [None] * len(corpus.items)
    inputs = [Words(t.words) if t is not None else item for item, t in zip(corpus.items, trees)]
    if (folder / "info.json").is_file():
        return _with_cuts(TokenIndex(folder), lm, inputs)
    started = time.perf_counter()
    try:
        # The whole folder is written under a temporary name (core.files) and renamed when complete: a build
        # killed halfway leaves only that name, which the next start removes.
        with atomic_path(folder, replace=False) as tmp:
            tmp.mkdir(parents=True)
            files = {layer: open(tmp / f"layer_{layer}.f16", "wb") for layer in layers}
            occurrences: list[np.ndarray] = []
            records: dict[int, dict] = {}
            count = 0
            dropped = np.zeros(len(inputs), dtype=np.int64)
            try:
                for i, enc in encode_stream(lm, inputs, batch_size=batch_size, attentions=False,
                                            progress=progress, should_stop=should_stop):
                    pooled, first = pool_vectors(enc.hidden_states[list(layers)], enc.word_ids)
                    for j, layer in enumerate(layers):
                        files[layer].write(np.ascontiguousarray(pooled[j], dtype=np.float16).tobytes())
                    word_idx = np.asarray(enc.word_ids)[first]
                    occurrences.append(np.stack([np.full(len(first), i), word_idx], axis=1).astype(np.int32))
                    records[i] = _item_record(inputs[i], trees[i], enc.words)
                    dropped[i] = enc.n_truncated
                    count += len(first)
            finally:
                for f in files.values():
                    f.close()
            check_stop(should_stop)
            if count == 0:
                raise ValueError(f"{corpus.name} has no words to index")
            np.save(tmp / "occurrences.npy", np.concatenate(occurrences))
            with open(tmp / "items.jsonl", "w", encoding="utf-8") as f:
                for i in range(len(inputs)):
                    f.write(json.dumps(records.get(i) or _item_record(inputs[i], trees[i], [])) + "\n")
            import faiss

            mode = nlist = nprobe = None
            for layer in layers:
                check_stop(should_stop)
                vectors = np.memmap(tmp / f"layer_{layer}.f16", dtype=np.float16, mode="r", shape=(count, lm.hidden_size))
                index, mode, nlist, nprobe = build_faiss(vectors, threshold)
                faiss.write_index(index, str(tmp / f"layer_{layer}.faiss"))
                del vectors
            info = IndexInfo(lm.ref, corpus.name, corpus.digest, layers, count, lm.hidden_size, mode, nlist, nprobe,
                             round(time.perf_counter() - started, 3), bool(corpus.trees),
                             tuple(dropped.tolist()), lm.max_length)
            (tmp / "info.json").write_text(json.dumps(info.to_json()))
    except OSError:
        if not (folder / "info.json").is_file():
            raise
        # built meanwhile by another session: keep theirs
    return _with_cuts(TokenIndex(folder), lm, inputs)


def _with_cuts(index: TokenIndex, lm, inputs) -> TokenIndex:
    """`index`, its info counting the word pieces cut off each item even when saved before they were stored
    (tokenized again, no forward pass)."""
    if index.info.dropped is None:
        dropped = tuple(t.n_tokens_full - t.n_tokens for t in tokenize(lm, inputs))
        index.info = replace(index.info, dropped=dropped, max_length=lm.max_length)
    return index


# ---- a search ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbour:
    sentence: str
    word: str
    position: int
    similarity: float
    left: str = ""
    right: str = ""
    upos: str | None = None
    deprel: str | None = None


@dataclass(frozen=True)
class NeighboursResult:
    """The k nearest occurrences of one word of one sentence at one layer, best first.

    query: text, word, position (word index in the sentence), layer, model, corpus, k, mode (exact |
    approximate), count (occurrences indexed). neighbours [k]. pos / deprel: (tag, count) histograms of the
    matches, empty when the corpus has no trees (exBERT's summary)."""

    query: dict
    neighbours: tuple[Neighbour, ...]
    pos: tuple[tuple[str, int], ...] = ()
    deprel: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict:
        return {"query": dict(self.query),
                "neighbours": [{"sentence": n.sentence, "word": n.word, "position": n.position,
                                "similarity": n.similarity} for n in self.neighbours]}


def find_word(words: Sequence[str], word: str) -> int:
    """Index of the first word equal to `word` (case-insensitive); ValueError naming the words otherwise."""
    lowered = [w.lower() for w in words]
    if word.lower() not in lowered:
        raise ValueError(f"'{word}' is not a word of the sentence; its words are: {' '.join(words)}")
    return lowered.index(word.lower())


def neighbours(index: TokenIndex, encoding, position: int, layer: int, k: int = 10) -> NeighboursResult:
    """Search the index with word `position` of `encoding` (core.model.encoding.Encoding) at `layer`."""
    vectors = encoding.word_vectors(layer)
    if not 0 <= position < len(vectors):
        raise ValueError(f"position must be 0..{len(vectors) - 1}")
    rows, sims = index.search(vectors[position], layer, k)
    found = []
    for row, sim in zip(rows, sims):
        item, word = (int(v) for v in index.occurrences[row])
        rec = index.items[item]
        words = rec["words"]
        found.append(Neighbour(rec["text"], words[word], word, float(sim), " ".join(words[max(0, word - 8):word]),
                               " ".join(words[word + 1:word + 9]),
                               rec["upos"][word] if rec.get("upos") else None,
                               rec["deprels"][word] if rec.get("deprels") else None))
    pos = tuple(Counter(n.upos for n in found if n.upos).most_common())
    dep = tuple(Counter(n.deprel for n in found if n.deprel).most_common())
    query = {"text": encoding.text_a if encoding.text_b is None else f"{encoding.text_a} ||| {encoding.text_b}",
             "word": encoding.words[position], "position": position, "layer": layer, "model": index.info.model,
             "corpus": index.info.corpus, "k": k, "mode": index.info.mode, "count": index.info.count}
    return NeighboursResult(query, tuple(found), pos, dep)


# ---- the declaration (core.contract) -------------------------------------------------------------------------------

@dataclass(frozen=True)
class NeighboursSettings:
    """What `neighbours` (the CLI), `core.lens.neighbours` and the Dataset explorer's Nearest contexts tab offer."""

    layer: int | None = setting(None, "0 = embeddings ... L = last layer (default: last)", type="int", low=0, high=128,
                                url="neighbours_layer")
    k: int = setting(10, "how many neighbours", low=1, high=1000)
    seed: int = setting(0, "corpus sample seed", low=0, high=2**31 - 1, url=None)


def find_neighbours(lm, text: str, word: str, corpus, settings: NeighboursSettings, progress: ProgressCallback = None,
                    should_stop: StopCheck = None):
    """The neighbours analysis: the k occurrences of `corpus` (a core.data.corpus Corpus, already sampled with the
    seed) nearest to `word` of `text` at the layer (None: the last). The word is looked up before any index is
    built. Returns (NeighboursResult, the sentence's Encoding, the TokenIndex): their cuts are the caller's to say."""
    layer = lm.num_layers if settings.layer is None else settings.layer
    if layer > lm.num_layers:
        raise ValueError(f"layer must be within 0…{lm.num_layers} for {lm.ref}")
    encoding = encode(lm, text, attentions=False)
    position = find_word(encoding.words, word)
    index = build_token_index(lm, corpus, [layer], progress=progress, should_stop=should_stop)
    return neighbours(index, encoding, position, layer, settings.k), encoding, index


ANALYSIS = Analysis(
    name="neighbours", view="explorer", command="neighbours", lens="neighbours", settings=NeighboursSettings,
    run=find_neighbours, title="Nearest contexts", order=1,
    summary="the k token occurrences of a corpus most similar (cosine) to a word of a sentence at a layer",
)
