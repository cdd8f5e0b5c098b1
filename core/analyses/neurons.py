"""Feed-forward neurons: what a layer's neurons respond to over a corpus, on your sentence, and after fine-tuning.

A neuron is one unit of a layer's feed-forward block, read after its nonlinearity (the adapter's point
`ffn_act`, [batch, tokens, intermediate]). Layers are numbered 1..L here, as the app's layer sliders count:
layer l's neurons write into hidden_states[l] (the adapter counts the same block as l - 1).

- `build_neuron_index(lm, corpus, layer)`: one streaming pass over the corpus (every non-special word piece),
  keeping each neuron's k highest activations with where they occurred (core.analyses.top_contexts) and its
  mean, standard deviation and firing rate (share of tokens with activation > 0). Kept on disk like the
  explorer's contexts index: models_cache/neuron_index/KEY/ (KEY from model, corpus digest, layer, k), written
  under a temporary name and renamed when complete, reused across sessions and by the CLI.
- `neuron_sentence(lm, text, layer)`: every neuron's activation at every token of one input.
- `neuron_changes(a, b)`: the neurons whose activation changes most between two models (a pretrained model and
  a run fine-tuned from it) over the same corpus: ranked by |standardised mean difference| (Cohen's d: the change
  in mean activation over the pooled standard deviation), because raw differences rank the neurons with the
  widest range first whether or not their behaviour changed; the firing-rate change is reported beside it.

    index = build_neuron_index(lm, corpus, layer=4)           # NeuronIndex: top [I, k], mean / std / firing [I]
    index.contexts(neuron=17)                                 # the 17th neuron's top contexts, best first
    neuron_sentence(lm, "The cat sat.", layer=4).activations  # [T, I]
    neuron_changes(index_a, index_b).order                    # neurons, most changed first
"""

from __future__ import annotations

# torch imported in functions: importing this module (the CLI's --help, the pages) must not load it.
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from core import settings, validation
from core.contract import Analysis, setting
from core.analyses.top_contexts import TopContexts, TopKAccumulator
from core.files import atomic_path
from core.model.adapter import ModelAdapter
from core.model.encoding import encode_batches
from core.progress import ProgressCallback, StopCheck, check_stop

DEFAULT_K = 20
CONTEXT_WORDS = 8  # words shown either side of a top context's token
CHANGE_MEASURE = ("Cohen's d: (mean activation in B − mean in A) / √((var A + var B) / 2) over every non-special "
                  "token of the corpus; firing = share of tokens with activation > 0")


class NeuronError(ValueError):
    """The neurons cannot be read as asked; the message says why and what to do."""


def index_root() -> Path:
    return settings.cache_dir() / "neuron_index"


def index_key(model: str, corpus_digest: str, layer: int, k: int) -> str:
    raw = json.dumps([model, corpus_digest, int(layer), int(k)])
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def check_layer(lm, layer: int) -> int:
    layer = int(layer)
    if not 1 <= layer <= lm.num_layers:
        raise NeuronError(f"layer must be 1..{lm.num_layers} for {lm.ref} (layer l's neurons write into "
                          f"hidden_states[l]); got {layer}")
    return layer


@dataclass(frozen=True)
class ItemTokens:
    """One corpus item as the model read it: tokens [T] word pieces, word_ids [T] (-1 for special tokens),
    words [W]."""

    tokens: tuple[str, ...]
    word_ids: tuple[int, ...]
    words: tuple[str, ...]


@dataclass(frozen=True)
class NeuronContext:
    """One of a neuron's top contexts: `value` at token `position` of corpus item `example`; `word` is the word
    that token belongs to (`token` the piece itself), `left` / `right` up to CONTEXT_WORDS words around it."""

    value: float
    example: int
    position: int
    token: str
    word: str
    left: str
    right: str


@dataclass(frozen=True, eq=False)
class NeuronIndex(validation.CorpusCuts):
    """A layer's neurons over a corpus (I = the intermediate size, N = the corpus's items).

    top          TopContexts [I, k]: example = item index, position = token index in that item
    mean, std    [I] float64: each neuron's mean activation and standard deviation over every non-special token
    firing_rate  [I] float64: share of those tokens where the activation is > 0
    items        [N] ItemTokens, for the contexts' words
    dropped      [N] word pieces truncation cut off each item; max_length the model's
    """

    model: str
    corpus: str
    digest: str
    layer: int
    top: TopContexts
    mean: np.ndarray
    std: np.ndarray
    firing_rate: np.ndarray
    items: tuple[ItemTokens, ...]
    dropped: tuple[int, ...]
    max_length: int

    @property
    def n_neurons(self) -> int:
        return self.top.n_units

    @property
    def n_tokens(self) -> int:
        return self.top.n_tokens

    @property
    def max_activation(self) -> np.ndarray:
        """[I] each neuron's highest activation over the corpus."""
        return self.top.values[:, 0]

    def by_max(self) -> np.ndarray:
        """[I] neuron indices, highest top activation first (ties: lower index first)."""
        return np.lexsort((np.arange(self.n_neurons), -self.max_activation))

    def contexts(self, neuron: int, k: int | None = None) -> tuple[NeuronContext, ...]:
        """The neuron's top contexts, best first (at most k; the index holds top.k)."""
        if not 0 <= int(neuron) < self.n_neurons:
            raise NeuronError(f"neuron must be 0..{self.n_neurons - 1}; got {neuron}")
        found = []
        for value, example, position in zip(self.top.values[neuron], self.top.example[neuron],
                                            self.top.position[neuron]):
            if example < 0 or (k is not None and len(found) >= k):
                break
            item = self.items[int(example)]
            w = item.word_ids[int(position)]
            found.append(NeuronContext(float(value), int(example), int(position), item.tokens[int(position)],
                                       item.words[w], " ".join(item.words[max(0, w - CONTEXT_WORDS):w]),
                                       " ".join(item.words[w + 1:w + 1 + CONTEXT_WORDS])))
        return tuple(found)

    def neuron_json(self, neuron: int, k: int | None = None) -> dict:
        return {"neuron": int(neuron), "max": float(self.max_activation[neuron]), "mean": float(self.mean[neuron]),
                "std": float(self.std[neuron]), "firing_rate": float(self.firing_rate[neuron]),
                "contexts": [c.__dict__ for c in self.contexts(neuron, k)]}

    def to_json(self, neurons: Sequence[int] | None = None, k: int | None = None) -> dict:
        """The neurons asked for (default: all, by highest activation) with their top contexts."""
        neurons = self.by_max() if neurons is None else neurons
        return {"model": self.model, "corpus": self.corpus, "layer": self.layer, "n_neurons": self.n_neurons,
                "n_tokens": self.n_tokens, "k": self.top.k if k is None else min(k, self.top.k),
                "neurons": [self.neuron_json(int(n), k) for n in neurons]}


def build_neuron_index(lm, corpus, layer: int, *, k: int = DEFAULT_K, batch_size: int = 32,
                       folder: Path | None = None, progress: ProgressCallback = None,
                       should_stop: StopCheck = None) -> NeuronIndex:
    """Stream `corpus` (core.data.corpus.Corpus) through `lm` and index the neurons of `layer` (1..L). An existing
    complete folder for the same (model, corpus, layer, k) is read instead of running the model."""
    layer = check_layer(lm, layer)
    if k < 1:
        raise NeuronError(f"k must be ≥ 1; got {k}")
    folder = Path(folder) if folder else index_root() / index_key(lm.ref, corpus.digest, layer, k)
    if (folder / "info.json").is_file():
        return load_neuron_index(folder)
    inputs = list(corpus.items)
    if not inputs:
        raise NeuronError(f"{corpus.name} has no sentences")
    import torch

    adapter = ModelAdapter.of(lm.model)
    width = int(adapter.parts(layer - 1).ffn_act.in_features)
    top = TopKAccumulator(width, k)
    total = np.zeros(width)
    squares = np.zeros(width)
    firing = np.zeros(width)
    items: dict[int, ItemTokens] = {}
    dropped = np.zeros(len(inputs), dtype=np.int64)
    with adapter.capture(["ffn_act"], layer - 1) as store:
        for batch in encode_batches(lm, inputs, batch_size=batch_size, attentions=False, hidden_states=False,
                                    progress=progress, should_stop=should_stop):
            acts = store["ffn_act", layer - 1]
            keep = np.zeros(tuple(acts.shape[:2]), dtype=bool)
            for row, (i, t) in enumerate(zip(batch.indices, batch.items)):
                keep[row, :len(t.input_ids)] = ~np.asarray(t.special_mask, dtype=bool)
                items[i] = ItemTokens(tuple(t.tokens), tuple(int(w) for w in t.word_ids), tuple(t.words))
                dropped[i] = t.n_tokens_full - t.n_tokens
            rows, positions = np.nonzero(keep)
            picked = torch.from_numpy(rows).to(acts.device), torch.from_numpy(positions).to(acts.device)
            values = acts[picked].float().cpu().numpy()
            top.add(values, np.asarray(batch.indices)[rows], positions)
            wide = values.astype(np.float64)
            total += wide.sum(axis=0)
            squares += (wide ** 2).sum(axis=0)
            firing += (values > 0).sum(axis=0)
    check_stop(should_stop)
    result = top.result()
    n = result.n_tokens
    if n == 0:
        raise NeuronError(f"{corpus.name} has no word pieces to read (only special tokens)")
    mean = total / n
    index = NeuronIndex(lm.ref, corpus.name, corpus.digest, layer, result, mean,
                        np.sqrt(np.maximum(squares / n - mean ** 2, 0.0)), firing / n,
                        tuple(items[i] for i in range(len(inputs))), tuple(dropped.tolist()), lm.max_length)
    try:
        save_neuron_index(index, folder)
    except OSError:
        if not (folder / "info.json").is_file():
            raise
        # written meanwhile by another session: theirs holds the same numbers
    return index


def save_neuron_index(index: NeuronIndex, folder: Path) -> None:
    """info.json, arrays.npz and items.jsonl in `folder`, written under a temporary name and renamed whole."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder, replace=False) as tmp:
        tmp.mkdir()
        np.savez(tmp / "arrays.npz", values=index.top.values, example=index.top.example,
                 position=index.top.position, mean=index.mean, std=index.std, firing_rate=index.firing_rate)
        with open(tmp / "items.jsonl", "w", encoding="utf-8") as f:
            for item in index.items:
                f.write(json.dumps([item.tokens, item.word_ids, item.words]) + "\n")
        (tmp / "info.json").write_text(json.dumps(
            {"model": index.model, "corpus": index.corpus, "digest": index.digest, "layer": index.layer,
             "n_tokens": index.n_tokens, "dropped": list(index.dropped), "max_length": index.max_length}))


def load_neuron_index(folder: Path) -> NeuronIndex:
    folder = Path(folder)
    info = json.loads((folder / "info.json").read_text())
    with np.load(folder / "arrays.npz") as arrays:
        a = {name: arrays[name] for name in arrays.files}
    with open(folder / "items.jsonl", encoding="utf-8") as f:
        items = tuple(ItemTokens(*(tuple(part) for part in json.loads(line))) for line in f)
    top = TopContexts(a["values"], a["example"], a["position"], int(info["n_tokens"]))
    return NeuronIndex(info["model"], info["corpus"], info["digest"], int(info["layer"]), top, a["mean"], a["std"],
                       a["firing_rate"], items, tuple(info["dropped"]), int(info["max_length"]))


# ---- one sentence -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NeuronSentence:
    """Every neuron of `layer` at every token of one input.

    tokens        [T] word pieces, special tokens included
    special_mask  [T] bool
    activations   [T, I] float32
    """

    text: str
    layer: int
    tokens: tuple[str, ...]
    special_mask: np.ndarray
    activations: np.ndarray
    truncated: int = 0

    def of(self, neuron: int) -> np.ndarray:
        """[T] one neuron's activation at each token."""
        if not 0 <= int(neuron) < self.activations.shape[1]:
            raise NeuronError(f"neuron must be 0..{self.activations.shape[1] - 1}; got {neuron}")
        return self.activations[:, int(neuron)]

    def to_json(self, neurons: Sequence[int] = ()) -> dict:
        return {"text": self.text, "layer": self.layer, "tokens": list(self.tokens),
                "activations": {str(int(n)): [float(v) for v in self.of(n)] for n in neurons}}


def neuron_sentence(lm, text_a: str, layer: int, text_b: str | None = None) -> NeuronSentence:
    """The neurons of `layer` (1..L) over one sentence (or pair)."""
    layer = check_layer(lm, layer)
    if not text_a or not text_a.strip():
        raise NeuronError("give a sentence to read the neurons on")
    adapter = ModelAdapter.of(lm.model)
    item = text_a if text_b is None else (text_a, text_b)
    with adapter.capture(["ffn_act"], layer - 1) as store:
        (batch,) = list(encode_batches(lm, [item], attentions=False, hidden_states=False))
        acts = store["ffn_act", layer - 1][0].float().cpu().numpy()
    t = batch.items[0]
    text = text_a if text_b is None else f"{text_a} ||| {text_b}"
    return NeuronSentence(text, layer, tuple(t.tokens), np.asarray(t.special_mask, dtype=bool),
                          np.ascontiguousarray(acts[:len(t.input_ids)]), t.n_tokens_full - t.n_tokens)


# ---- after fine-tuning --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NeuronChanges:
    """How each neuron of one layer differs between model A and model B over the same corpus.

    order                    [I] neuron indices, largest |effect| first (ties: lower index first)
    effect                   [I] Cohen's d of B against A (see CHANGE_MEASURE)
    mean_a, mean_b           [I] mean activation
    firing_a, firing_b       [I] share of tokens with activation > 0
    """

    model_a: str
    model_b: str
    corpus: str
    layer: int
    order: np.ndarray
    effect: np.ndarray
    mean_a: np.ndarray
    mean_b: np.ndarray
    firing_a: np.ndarray
    firing_b: np.ndarray

    def to_json(self, top: int | None = None) -> dict:
        shown = self.order if top is None else self.order[:top]
        return {"a": self.model_a, "b": self.model_b, "corpus": self.corpus, "layer": self.layer,
                "measure": CHANGE_MEASURE,
                "neurons": [{"neuron": int(n), "effect": float(self.effect[n]), "mean_a": float(self.mean_a[n]),
                             "mean_b": float(self.mean_b[n]), "firing_a": float(self.firing_a[n]),
                             "firing_b": float(self.firing_b[n])} for n in shown]}


def neuron_changes(a: NeuronIndex, b: NeuronIndex) -> NeuronChanges:
    """Rank the neurons of one layer by how much B's activations differ from A's (indexes of the same corpus)."""
    if a.digest != b.digest or a.layer != b.layer:
        raise NeuronError(f"compare the same corpus and layer: A read {a.corpus} at layer {a.layer}, "
                          f"B read {b.corpus} at layer {b.layer}")
    if a.n_neurons != b.n_neurons or a.n_tokens != b.n_tokens:
        raise NeuronError(f"{a.model} and {b.model} differ in neurons ({a.n_neurons} vs {b.n_neurons}) or tokens "
                          f"read ({a.n_tokens} vs {b.n_tokens}): compare a model with a run fine-tuned from it")
    pooled = np.sqrt((a.std ** 2 + b.std ** 2) / 2)
    diff = b.mean - a.mean
    effect = np.divide(diff, pooled, out=np.zeros_like(diff), where=pooled > 0)
    order = np.lexsort((np.arange(len(effect)), -np.abs(effect)))
    return NeuronChanges(a.model, b.model, a.corpus, a.layer, order, effect, a.mean, b.mean, a.firing_rate,
                         b.firing_rate)


# ---- the declarations (core.contract): neurons and neurons-diff -------------------------------------------------

LAYER_HELP = "1..L: layer l's feed-forward neurons, which write into hidden_states[l] (default: the last layer)"
MAX_LAYER = 128  # the URL's bound of a layer (core.views.LAYER); the model's depth is checked once it is loaded


def layer_of(lm, layer: int | None) -> int:
    """The setting's layer for this model: None is the last layer; else checked against its depth."""
    return check_layer(lm, lm.num_layers if layer is None else layer)


@dataclass(frozen=True)
class NeuronsSettings:
    """What the neuron index reads: the layer, how many contexts it keeps per neuron, the corpus sample's seed."""

    layer: int = setting(None, LAYER_HELP, type="int", low=1, high=MAX_LAYER, url="neuron_layer")
    k: int = setting(DEFAULT_K, "contexts kept per neuron", low=1, high=1000, url=None, cli="top")
    seed: int = setting(0, "corpus sample seed", low=0, high=validation.MAX_COUNT, url=None)


@dataclass(frozen=True)
class NeuronsDiffSettings:
    """What neurons-diff reads: the layer, how many neurons it lists, the corpus sample's seed."""

    layer: int = setting(None, LAYER_HELP, type="int", low=1, high=MAX_LAYER, url=None)
    top: int = setting(20, "how many neurons to list", low=1, high=validation.MAX_COUNT, url=None)
    seed: int = setting(0, "corpus sample seed", low=0, high=validation.MAX_COUNT, url=None)


@dataclass(frozen=True, eq=False)
class NeuronsShown:
    """What `neurons --json` prints and core.lens.neurons returns as its result: the neurons listed (with their top
    contexts), and their activation over a sentence when one was given."""

    index: NeuronIndex
    neurons: tuple[int, ...]
    sentence: NeuronSentence | None = None

    def to_json(self) -> dict:
        payload = {**self.index.to_json(self.neurons), "corpus_truncated": self.index.truncation()}
        if self.sentence is not None:
            payload["sentence"] = self.sentence.to_json(self.neurons)
            payload["truncated"] = {"tokens_dropped": self.sentence.truncated}
        return payload


@dataclass(frozen=True, eq=False)
class ChangesShown:
    """What `neurons-diff --json` prints and core.lens.neurons_diff returns as its result: the `top` neurons that
    changed most, and how much of the corpus was cut to the model's length (A's index: B read the same corpus)."""

    changes: NeuronChanges
    top: int
    index_a: NeuronIndex

    @property
    def shown(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.changes.order[:self.top])

    def to_json(self) -> dict:
        return {**self.changes.to_json(self.top), "corpus_truncated": self.index_a.truncation()}


def shown_neurons(index: NeuronIndex, neurons: Sequence[int] | None, count: int) -> tuple[int, ...]:
    """The neurons given (each checked against the index), else the `count` with the highest activation."""
    chosen = tuple(int(n) for n in neurons) if neurons else tuple(int(n) for n in index.by_max()[:count])
    for n in chosen:
        index.contexts(n, 0)  # a neuron out of range is named before anything is shown
    return chosen


def run_index(lm, corpus, settings: NeuronsSettings, progress: ProgressCallback = None,
              should_stop: StopCheck = None) -> NeuronIndex:
    """The contract's run of `neurons`: the index of the setting's layer over `corpus`."""
    return build_neuron_index(lm, corpus, layer_of(lm, settings.layer), k=settings.k, progress=progress,
                              should_stop=should_stop)


def run_diff(models, corpus, settings: NeuronsDiffSettings, progress: ProgressCallback = None,
             should_stop: StopCheck = None) -> ChangesShown:
    """The contract's run of `neurons-diff`: `models` (A, B), each indexed over `corpus` at the setting's layer."""
    indexes = [build_neuron_index(lm, corpus, layer_of(lm, settings.layer), progress=progress,
                                  should_stop=should_stop) for lm in models]
    return ChangesShown(neuron_changes(*indexes), settings.top, indexes[0])


NEURONS = Analysis(
    name="neurons", view="layers", command="neurons", lens="neurons", settings=NeuronsSettings, run=run_index,
    charts="core.charts.neurons:index_charts", title="Neurons",
    summary="a layer's feed-forward neurons: each one's top-activating contexts over a corpus", order=10,
)
NEURONS_DIFF = Analysis(
    name="neurons-diff", view="layers", command="neurons-diff", lens="neurons_diff", settings=NeuronsDiffSettings,
    run=run_diff, charts="core.charts.neurons:changes_charts", title="Neurons changed by fine-tuning",
    summary="the feed-forward neurons of a layer that change most between two models on the same corpus", order=11,
)
ANALYSES = (NEURONS, NEURONS_DIFF)
