"""Memory with a budget: an LRU cache bounded by entry count AND bytes, shared by every session of a server.

Streamlit's own caches bound only the number of entries, and st.cache_data pickles the value on every hit (a
512-token bert-base Encoding is ~170 MB: a copy per rerun). This cache hands back the stored object itself, so
values must be treated as read-only (`freeze_arrays` marks their arrays so). Identical keys requested at once
(a class opening one shared link) are computed once: the others wait for the first computation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import sys
import threading
from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np


def nbytes_of(value, _seen: set | None = None) -> int:
    """Bytes held by numpy arrays / torch tensors in `value` (dataclasses, lists, tuples, dicts walked); a torch
    module counts its parameters and buffers. Python objects' own overhead is ignored: small next to the arrays."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    # duck-typed: a transformers model is a torch Module defined outside the torch package
    if type(value).__module__.split(".")[0] in ("torch", "transformers") or hasattr(value, "named_parameters"):
        if hasattr(value, "parameters") and hasattr(value, "buffers"):
            tensors = [*value.parameters(), *value.buffers()]
            # tied weights (BERT's word embeddings and MLM decoder) counted once
            unique = {t.data_ptr(): t.numel() * t.element_size() for t in tensors}
            return int(sum(unique.values()))
        if hasattr(value, "element_size"):
            return int(value.numel() * value.element_size())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes_of(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return sum(nbytes_of(v, seen) for v in value)
    if isinstance(value, dict):
        return sum(nbytes_of(v, seen) for v in value.values())
    return 0


def text_bytes(value, _seen: set | None = None) -> int:
    """Bytes held by a value made of Python text and containers (a parsed corpus or table: dataclasses, tuples,
    lists, dicts and str, each counted by sys.getsizeof) plus numpy arrays' data, where nbytes_of counts only
    arrays and would call a 100 MB table of strings free."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sys.getsizeof(value) + sum(text_bytes(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return sys.getsizeof(value) + sum(text_bytes(v, seen) for v in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(text_bytes(k, seen) + text_bytes(v, seen) for k, v in value.items())
    return sys.getsizeof(value)


def freeze_arrays(value) -> None:
    """Mark the numpy arrays of a (dataclass) value read-only: a shared cached value must not be edited in place."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if isinstance(item, np.ndarray):
                item.setflags(write=False)


class BudgetCache:
    """Least-recently-used cache bounded by `max_entries` and `max_bytes` (sizes from `sizeof`).

    A value larger than the whole byte budget is returned but not kept. Thread-safe; `get_or_compute` computes
    each missing key once even when several threads ask for it together."""

    def __init__(self, max_bytes: int, max_entries: int | None = None, sizeof: Callable[[object], int] = nbytes_of):
        self.max_bytes, self.max_entries, self.sizeof = int(max_bytes), max_entries, sizeof
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[Hashable, threading.Lock] = {}
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self._items.values())

    def keys(self) -> list:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def _lookup(self, key):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return True, self._items[key][0]
        return False, None

    def put(self, key, value, size: int | None = None) -> bool:
        """Store `value`, evicting least-recently-used entries to fit; False when it alone exceeds the budget."""
        size = self.sizeof(value) if size is None else int(size)
        with self._lock:
            self._items.pop(key, None)
            if size > self.max_bytes:
                return False
            self._items[key] = (value, size)
            total = sum(s for _, s in self._items.values())
            while len(self._items) > 1 and (total > self.max_bytes or (self.max_entries and len(self._items) > self.max_entries)):
                _, (_, evicted) = self._items.popitem(last=False)
                total -= evicted
                self.evictions += 1
            return True

    def get_or_compute(self, key, compute: Callable[[], object]):
        found, value = self._lookup(key)
        if found:
            return value
        with self._lock:
            gate = self._pending.setdefault(key, threading.Lock())
        with gate:  # a second caller of the same key waits here, then finds the first one's value
            found, value = self._lookup(key)
            if found:
                return value
            try:
                self.misses += 1
                value = compute()
                self.put(key, value)
            finally:
                with self._lock:
                    self._pending.pop(key, None)
        return value


def display_encoding(encoding):
    """The Encoding kept in the app's cache: attentions stored as float16 (half the bytes; every weight within
    2.5e-4 of the float32 one, as weights lie in [0, 1]), hidden states kept float32 (PCA and the masked-word
    lens compare vectors, where float16 would cost more than it saves). Arrays read-only: it is shared.

    Drawn from float16: the head view, heatmap, model view, the masked page's attention, and rollout (computed in
    float32 from the stored weights). Computed in float32 by their own forward pass: norm-weighted attention,
    the neuron view, and every corpus analysis (anisotropy, head statistics, similarity)."""
    if encoding.attentions is not None and encoding.attentions.dtype != np.float16:
        encoding = dataclasses.replace(encoding, attentions=encoding.attentions.astype(np.float16))
    freeze_arrays(encoding)
    return encoding


def release_freed_memory() -> bool:
    """glibc only: hand the heap's free pages back to the OS (malloc_trim), after a forward pass has freed its
    temporaries. Without it a server's RSS climbed ~50 MB per new long input once the cache was full
    (bench/memory_budget.py): glibc raises its mmap threshold after large frees (up to 32 MB), so a forward's
    tensors then come from the heap, whose holes are kept. A trim costs a few ms once per forward; a fixed 1 MB
    mmap threshold (mallopt) did the same job but faulted every tensor of every forward in afresh (4x the page
    faults, ~0.17 s of a 0.8 s bert-base forward at 512 tokens). False where malloc_trim is unavailable."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # glibc: both exist
        return libc
    except (OSError, AttributeError):
        return None

