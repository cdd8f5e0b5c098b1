"""The change of every head's attention between two models on the same inputs (Kovaleva et al. 2019, section
4.3: fine-tuning changes the last layers most)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.analyses.heads.roles import check_attention
from core.contract import setting
from core.model import distributed
from core.model.encoding import TextInput, encode_share
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck


def attention_cosine(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Cosine similarity of each head's flattened map: two [layer, head, T, T] arrays -> float64 [layer, head]."""
    a, b = check_attention(first), check_attention(second)
    if a.shape != b.shape:
        raise ValueError(f"attention shapes differ: {a.shape} vs {b.shape}")
    a = a.reshape(a.shape[0], a.shape[1], -1)
    b = b.reshape(b.shape[0], b.shape[1], -1)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide((a * b).sum(axis=-1), norms, out=np.zeros(norms.shape), where=norms > 0)


@dataclass(frozen=True)
class AttentionChange:
    """cosine float64 [layer, head]: cosine between model A's and model B's flattened maps of each head, averaged
    over the inputs (Kovaleva et al., Fig. 5). Only the first `layers` layers are compared when the models differ
    in depth (a run trained with its top layers dropped)."""

    model_a: str
    model_b: str
    cosine: np.ndarray
    n_examples: int
    layers: int
    world_size: int = 1  # processes that shared the pass (core.model.distributed)

    def to_json(self) -> dict:
        return {"a": self.model_a, "b": self.model_b, "cosine": self.cosine.round(6).tolist(),
                "n_examples": self.n_examples, "layers": self.layers, "world_size": self.world_size}


@dataclass(frozen=True)
class ChangeSettings:
    """The `attention-change` analysis's settings, declared once (core.contract)."""

    batch_size: int = setting(16, "inputs encoded at once", low=1, high=4096, url=None)


def run_attention_change(models: tuple[LoadedModel, LoadedModel], inputs: Sequence[TextInput],
                         settings: ChangeSettings = ChangeSettings(), progress: ProgressCallback = None,
                         should_stop: StopCheck = None) -> AttentionChange:
    """`attention_change` of the two models (A, B) with its declared settings (the analysis's run)."""
    lm_a, lm_b = models
    return attention_change(lm_a, lm_b, inputs, batch_size=settings.batch_size, progress=progress,
                            should_stop=should_stop)


def attention_change(
    lm_a: LoadedModel,
    lm_b: LoadedModel,
    inputs: Sequence[TextInput],
    *,
    batch_size: int = 16,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> AttentionChange:
    """Mean per-head cosine between two models' attention on the same inputs (same tokenizer needed)."""
    if not inputs:
        raise ValueError("no inputs: give at least one sentence or sentence pair")
    if lm_a.num_heads != lm_b.num_heads:
        raise ValueError(f"{lm_a.ref} has {lm_a.num_heads} heads per layer and {lm_b.ref} {lm_b.num_heads}; "
                         "compare a fine-tuned run with the model it was trained from")
    items = list(inputs)

    def half_progress(offset: int):
        return None if progress is None else (lambda done, _n: progress(offset + done, 2 * len(items)))

    first = AttentionMaps.of(lm_a, items, layers=min(lm_a.num_layers, lm_b.num_layers),
                             max_length=min(lm_a.max_length, lm_b.max_length), batch_size=batch_size,
                             progress=half_progress(0), should_stop=should_stop)
    return first.change(lm_b, batch_size=batch_size, progress=half_progress(len(items)), should_stop=should_stop)


@dataclass(frozen=True, eq=False)
class AttentionMaps:
    """Model A's side of attention_change, kept to compare A with many models later (a time-lapse of a training
    run) without encoding A again. maps: {input index: (input ids, float32 [layers, head, T, T])}, this rank's
    share of `items`."""

    model: str
    items: tuple
    layers: int
    max_length: int
    maps: dict

    @classmethod
    def of(cls, lm: LoadedModel, items: Sequence[TextInput], *, layers: int | None = None, max_length: int | None = None,
           batch_size: int = 16, progress: ProgressCallback = None, should_stop: StopCheck = None) -> "AttentionMaps":
        layers = lm.num_layers if layers is None else layers
        max_length = lm.max_length if max_length is None else max_length
        # Several ranks: each compares its share of the inputs; the sum is all-reduced (core.model.distributed).
        encodings = encode_share(lm, list(items), batch_size=batch_size, hidden_states=False, max_length=max_length,
                                 progress=progress, should_stop=should_stop)
        return cls.of_encodings(lm.ref, items, layers, max_length, encodings)

    @classmethod
    def of_encodings(cls, model: str, items: Sequence[TextInput], layers: int, max_length: int, encodings
                     ) -> "AttentionMaps":
        """The maps of (input index, Encoding) pairs a caller encoded in a pass of its own (the time-lapse's)."""
        maps = {index: (enc.input_ids, enc.attentions[:layers].astype(np.float32)) for index, enc in encodings}
        return cls(model, tuple(items), layers, max_length, maps)

    def unchanged(self) -> AttentionChange:
        """The kept maps against themselves: what change(A) gives without encoding A again (1 for every head)."""
        total = sum((attention_cosine(att, att) for _, att in self.maps.values()), np.zeros(self.shape))
        total = distributed.current().all_reduce_sum(total)
        return AttentionChange(self.model, self.model, total / len(self.items), len(self.items), self.layers,
                               distributed.current().world_size)

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads) of the kept maps."""
        first = next(iter(self.maps.values()), None)
        return (self.layers, first[1].shape[1] if first is not None else 0)

    def change(self, lm_b: LoadedModel, *, batch_size: int = 16, progress: ProgressCallback = None,
               should_stop: StopCheck = None) -> AttentionChange:
        """attention_change(A, lm_b, the same items): lm_b's maps against the kept ones."""
        encodings = encode_share(lm_b, list(self.items), batch_size=batch_size, hidden_states=False,
                                 max_length=self.max_length, progress=progress, should_stop=should_stop)
        return self.change_of(lm_b.ref, self.cosines(lm_b.ref, encodings, lm_b.num_heads))

    def cosines(self, other: str, encodings, heads: int) -> np.ndarray:
        """The sum over (input index, Encoding) pairs of `other` of each head's cosine with the kept map, float64
        [layers, heads]: what change() adds up, for a caller that encodes the inputs in a pass of its own."""
        total = np.zeros((self.layers, heads))
        for index, enc in encodings:
            ids, att = self.maps[index]
            if not np.array_equal(ids, enc.input_ids):
                raise ValueError(f"{self.model} and {other} tokenize input {index} differently; attention maps can "
                                 "only be compared between models that share a tokenizer (a run and its base model)")
            total += attention_cosine(att, enc.attentions[: self.layers])
        return total

    def change_of(self, other: str, total: np.ndarray) -> AttentionChange:
        """The AttentionChange of the summed cosines (`cosines`) of every rank."""
        total = distributed.current().all_reduce_sum(total)
        return AttentionChange(self.model, other, total / len(self.items), len(self.items), self.layers,
                               distributed.current().world_size)


def layer_change(cosine: np.ndarray) -> np.ndarray:
    """float64 [layer]: 1 - mean cosine over each layer's heads; cosine [layer, head] as AttentionChange.cosine."""
    return 1.0 - np.asarray(cosine, dtype=np.float64).mean(axis=1)


def change_ranks(cosine: np.ndarray) -> np.ndarray:
    """int [layer]: 1 for the layer whose maps changed most (lowest mean cosine), 2 for the next, ..."""
    order = np.argsort(-layer_change(cosine), kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def last_layers_change_most(cosine: np.ndarray, k: int = 2) -> bool:
    """Kovaleva et al.'s claim (section 4.3, Fig. 5): the k layers that changed most after fine-tuning are the
    last k. True when the k lowest per-layer mean cosines are exactly those of the last k layers."""
    ranks = change_ranks(cosine)
    if not 0 < k <= len(ranks):
        raise ValueError(f"k must be between 1 and the {len(ranks)} layers, got {k}")
    return bool(set(np.flatnonzero(ranks <= k)) == set(range(len(ranks) - k, len(ranks))))
