"""Top contexts: for many units at once (feed-forward neurons, sparse-autoencoder features), the k tokens of a
corpus where each unit's score is highest, found in one streaming pass.

A corpus pass hands each batch's per-token scores to a `TopKAccumulator`; it keeps, per unit, the k best
(value, example, position) seen so far, so memory is O(units × k) whatever the corpus size. Order: value
descending; equal values by example ascending, then position ascending, so a result does not depend on how the
corpus was cut into batches (ReLU features tie at 0 all the time).

    acc = TopKAccumulator(n_units=1536, k=20)
    for batch in batches:
        acc.add(scores, example_ids, positions)   # scores [n_tokens, n_units]; ids, positions [n_tokens]
    top = acc.result()                            # TopContexts: values / example / position [n_units, k]

Accumulators of disjoint shares of a corpus (ranks, resumed passes) combine with `merge`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A slot not filled yet (fewer than k tokens seen): value -inf, example and position -1.
EMPTY = -1


@dataclass(frozen=True, eq=False)
class TopContexts:
    """Each unit's k highest-scoring tokens over a corpus.

    values    [units, k] float32, descending per row; -inf where fewer than k tokens were seen
    example   [units, k] int64: the example (item of the corpus) each value comes from; -1 in an empty slot
    position  [units, k] int64: the token position inside that example; -1 in an empty slot
    n_tokens  how many tokens were scored (for every unit)
    """

    values: np.ndarray
    example: np.ndarray
    position: np.ndarray
    n_tokens: int

    @property
    def n_units(self) -> int:
        return self.values.shape[0]

    @property
    def k(self) -> int:
        return self.values.shape[1]

    def filled(self, unit: int) -> int:
        """How many of `unit`'s k slots hold a token."""
        return int(np.count_nonzero(self.example[unit] != EMPTY))

    def to_json(self) -> dict:
        return {"n_tokens": self.n_tokens, "k": self.k,
                "values": [[None if not np.isfinite(v) else float(v) for v in row] for row in self.values],
                "example": self.example.tolist(), "position": self.position.tolist()}


class TopKAccumulator:
    """Streaming top-k per unit (see the module docstring). Not thread-safe: one pass feeds one accumulator."""

    def __init__(self, n_units: int, k: int):
        if n_units < 1 or k < 1:
            raise ValueError(f"need at least one unit and k ≥ 1, got n_units={n_units}, k={k}")
        self.n_units, self.k = int(n_units), int(k)
        self._values = np.full((self.n_units, self.k), -np.inf, dtype=np.float32)
        self._example = np.full((self.n_units, self.k), EMPTY, dtype=np.int64)
        self._position = np.full((self.n_units, self.k), EMPTY, dtype=np.int64)
        self.n_tokens = 0

    def add(self, scores, example_ids, positions) -> None:
        """Fold in one batch: `scores` [n_tokens, n_units] (numpy or torch), `example_ids`, `positions` [n_tokens]."""
        scores = _numpy(scores).astype(np.float32, copy=False)
        example_ids = _numpy(example_ids).astype(np.int64, copy=False).reshape(-1)
        positions = _numpy(positions).astype(np.int64, copy=False).reshape(-1)
        if scores.ndim != 2 or scores.shape[1] != self.n_units:
            raise ValueError(f"scores must be [n_tokens, {self.n_units}], got shape {tuple(scores.shape)}")
        n = scores.shape[0]
        if example_ids.shape[0] != n or positions.shape[0] != n:
            raise ValueError(f"scores have {n} tokens but example_ids has {example_ids.shape[0]} and positions "
                             f"{positions.shape[0]}")
        if n == 0:
            return
        if not np.isfinite(scores).all():
            raise ValueError("scores contain NaN or infinity: a unit's ranking would be undefined")
        if (example_ids < 0).any() or (positions < 0).any():
            raise ValueError("example ids and positions must be ≥ 0")
        self.n_tokens += n
        self._fold(scores.T, np.broadcast_to(example_ids, (self.n_units, n)),
                   np.broadcast_to(positions, (self.n_units, n)))

    def merge(self, other: "TopKAccumulator") -> None:
        """Fold in another accumulator of the same units and k (a disjoint share of the corpus)."""
        if (other.n_units, other.k) != (self.n_units, self.k):
            raise ValueError(f"cannot merge a ({other.n_units} units, k={other.k}) accumulator into "
                             f"({self.n_units} units, k={self.k})")
        self.n_tokens += other.n_tokens
        self._fold(other._values, other._example, other._position)

    def result(self) -> TopContexts:
        return TopContexts(values=self._values.copy(), example=self._example.copy(),
                           position=self._position.copy(), n_tokens=self.n_tokens)

    def _fold(self, values: np.ndarray, example: np.ndarray, position: np.ndarray) -> None:
        """Keep each row's k best of the current slots and the new [units, m] candidates."""
        merged_v = np.concatenate([self._values, values], axis=1)
        merged_e = np.concatenate([self._example, example], axis=1)
        merged_p = np.concatenate([self._position, position], axis=1)
        width = merged_v.shape[1]
        rows = np.arange(self.n_units)[:, None]
        # Only entries at least as large as the row's k-th largest value can be kept: a linear-time partition
        # finds it, and a stable sort of the mask (radix, linear for booleans) gathers those candidates in front,
        # so the full three-key sort runs on about k columns, not on the whole batch (all of them when ties are
        # many, e.g. a feature that is 0 everywhere).
        kth = np.partition(merged_v, width - self.k, axis=1)[:, width - self.k][:, None]
        candidate = merged_v >= kth
        n_candidates = int(candidate.sum(axis=1).max())
        cols = np.argsort(~candidate, axis=1, kind="stable")[:, :n_candidates]
        cand_v, cand_e, cand_p = merged_v[rows, cols], merged_e[rows, cols], merged_p[rows, cols]
        cand_v = np.where(candidate[rows, cols], cand_v, -np.inf)
        # Empty slots (example -1) sort after every real token of equal value (-inf ties).
        tie_e = np.where(cand_e == EMPTY, np.iinfo(np.int64).max, cand_e)
        order = np.lexsort((cand_p, tie_e, -cand_v), axis=1)[:, :self.k]
        self._values = cand_v[rows, order]
        self._example = np.ascontiguousarray(cand_e[rows, order])
        self._position = np.ascontiguousarray(cand_p[rows, order])
        # A non-candidate padding column could only surface here if a row had fewer than k real entries, in
        # which case its value is -inf: keep such slots empty.
        empty = ~np.isfinite(self._values)
        self._example[empty] = EMPTY
        self._position[empty] = EMPTY


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)
