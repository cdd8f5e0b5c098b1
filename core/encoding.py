"""One forward pass that gives every page what it needs: tokens, word alignment, segments, attentions, states.

Inputs are a sentence (str) or a sentence pair (tuple of two str). Batches are grouped by length so little
time goes to padding; results come back per input with the padding removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence, Union

import numpy as np

from core.models import LoadedModel
from core.progress import ProgressCallback, StopCheck, check_stop

TextInput = Union[str, tuple[str, str]]


class EmptyInput(ValueError):
    """A sentence was empty or only white space."""


@dataclass(frozen=True, eq=False)
class Encoding:
    """One input after one forward pass, padding removed. Shapes (T = tokens kept, L = layers, H = heads, D = dim):

    tokens          [T] word pieces as the tokenizer writes them, special tokens included
    input_ids       [T] int
    segment_ids     [T] int: 0 = sentence A, 1 = sentence B; a special token takes the segment of the text
                    before it ([CLS] and the first [SEP] are A, the last [SEP] of a pair is B)
    special_mask    [T] bool: True for [CLS], [SEP], <s>, </s> ...
    word_ids        [T] int: index into `words`, -1 for special tokens; B's words continue A's numbering
    words           [W] the words as written in the input (the tokenizer's pre-tokenisation: punctuation
                    marks are words of their own)
    attentions      [L, H, T, T] float32, [layer, head, query, key]; None when not asked for
    hidden_states   [L+1, T, D] float32, index 0 = input embeddings; None when not asked for
    n_tokens_full   tokens the input would have had without truncation
    """

    text_a: str
    text_b: str | None
    tokens: tuple[str, ...]
    input_ids: np.ndarray
    segment_ids: np.ndarray
    special_mask: np.ndarray
    word_ids: np.ndarray
    words: tuple[str, ...]
    attentions: np.ndarray | None
    hidden_states: np.ndarray | None
    n_tokens_full: int
    max_length: int

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.n_tokens_full > self.n_tokens

    @property
    def n_truncated(self) -> int:
        """How many tokens were cut to fit the model's max length."""
        return self.n_tokens_full - self.n_tokens

    @property
    def is_pair(self) -> bool:
        return self.text_b is not None

    @property
    def token_labels(self) -> list[str]:
        """Unique, ordered labels (`3·the`): charts merge equal labels and sort them otherwise."""
        return [f"{i}·{t}" for i, t in enumerate(self.tokens)]


def _split(item: TextInput) -> tuple[str, str | None]:
    if isinstance(item, str):
        text_a, text_b = item, None
    else:
        text_a, text_b = item
    if not text_a or not text_a.strip():
        raise EmptyInput("Sentence A is empty: type a sentence first.")
    if text_b is not None and not text_b.strip():
        raise EmptyInput("Sentence B is empty: type it, or leave out the pair.")
    return text_a, text_b


def tokenize_one(tokenizer, text_a: str, text_b: str | None, max_length: int):
    """A tokenizers.Encoding for one input, truncated to max_length, plus its untruncated length."""
    full = tokenizer(text_a, text_b, add_special_tokens=True, truncation=False, verbose=False)
    n_full = len(full["input_ids"])
    if n_full <= max_length:
        return full.encodings[0], n_full
    cut = tokenizer(text_a, text_b, add_special_tokens=True, truncation=True, max_length=max_length)
    return cut.encodings[0], n_full


def token_alignment(enc, text_a: str, text_b: str | None):
    """segment_ids, special_mask, global word_ids and word strings from a tokenizers.Encoding."""
    sequence_ids = enc.sequence_ids
    local_words = enc.word_ids
    n = len(sequence_ids)
    special = np.array([s is None for s in sequence_ids], dtype=bool)
    segment = np.zeros(n, dtype=np.int64)
    current = 0
    for i, s in enumerate(sequence_ids):
        if s is not None:
            current = s
        segment[i] = current
    n_words_a = 1 + max((w for s, w in zip(sequence_ids, local_words) if s == 0), default=-1)
    word_ids = np.full(n, -1, dtype=np.int64)
    spans: dict[int, list[int]] = {}
    for i, (s, w) in enumerate(zip(sequence_ids, local_words)):
        if s is None or w is None:
            continue
        g = w if s == 0 else n_words_a + w
        word_ids[i] = g
        start, end = enc.offsets[i]
        span = spans.setdefault(g, [start, end, s])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    texts = (text_a, text_b)
    words = tuple(texts[s][a:b] for _, (a, b, s) in sorted(spans.items()))
    # Truncation can drop whole words; renumber so word ids stay dense.
    if spans and len(spans) != max(spans) + 1:
        remap = {g: k for k, g in enumerate(sorted(spans))}
        word_ids = np.array([remap.get(int(g), -1) for g in word_ids], dtype=np.int64)
    return segment, special, word_ids, words


def encode_stream(
    lm: LoadedModel,
    inputs: Sequence[TextInput],
    *,
    batch_size: int = 32,
    attentions: bool = True,
    hidden_states: bool = True,
    max_length: int | None = None,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> Iterator[tuple[int, Encoding]]:
    """Yield (input index, Encoding) batch by batch, shortest inputs first.

    Only one batch is held at a time, so a corpus of any size streams in flat memory when the caller
    keeps only what it needs from each Encoding.
    """
    import torch

    tokenizer = lm.tokenizer
    max_length = min(max_length or lm.max_length, lm.max_length)
    split = [_split(item) for item in inputs]
    tokenized = [tokenize_one(tokenizer, a, b, max_length) for a, b in split]
    order = sorted(range(len(split)), key=lambda i: len(tokenized[i][0].ids))
    uses_type_ids = "token_type_ids" in tokenizer.model_input_names
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    done = 0
    for start in range(0, len(order), batch_size):
        check_stop(should_stop)
        batch_idx = order[start : start + batch_size]
        encs = [tokenized[i][0] for i in batch_idx]
        lengths = [len(e.ids) for e in encs]
        width = max(lengths)
        ids = np.full((len(encs), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for row, e in enumerate(encs):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.ids)] = e.type_ids
        feed = {"input_ids": torch.from_numpy(ids).to(lm.device), "attention_mask": torch.from_numpy(mask).to(lm.device)}
        if uses_type_ids:
            feed["token_type_ids"] = torch.from_numpy(types).to(lm.device)
        with torch.inference_mode():
            out = lm.model(**feed, output_attentions=attentions, output_hidden_states=hidden_states)
        # Per-layer numpy views (no copy on CPU); each input below copies only its own unpadded slice.
        att = [a.float().cpu().numpy() for a in out.attentions] if attentions else None
        hid = [h.float().cpu().numpy() for h in out.hidden_states] if hidden_states else None
        for row, i in enumerate(batch_idx):
            n = lengths[row]
            e = encs[row]
            text_a, text_b = split[i]
            segment, special, word_ids, words = token_alignment(e, text_a, text_b)
            yield i, Encoding(
                text_a=text_a,
                text_b=text_b,
                tokens=tuple(e.tokens),
                input_ids=np.asarray(e.ids, dtype=np.int64),
                segment_ids=segment,
                special_mask=special,
                word_ids=word_ids,
                words=words,
                attentions=np.stack([a[row, :, :n, :n] for a in att]) if att is not None else None,
                hidden_states=np.stack([h[row, :n] for h in hid]) if hid is not None else None,
                n_tokens_full=tokenized[i][1],
                max_length=max_length,
            )
        done += len(batch_idx)
        if progress is not None:
            progress(done, len(order))


def encode(lm: LoadedModel, inputs: TextInput | Iterable[TextInput], **kwargs) -> list[Encoding] | Encoding:
    """Encode one input (returns one Encoding) or a list of inputs (returns a list in input order).

    Keyword arguments are those of encode_stream.
    """
    single = isinstance(inputs, str) or (isinstance(inputs, tuple) and len(inputs) == 2 and all(isinstance(x, str) for x in inputs))
    items = [inputs] if single else list(inputs)
    results: list[Encoding | None] = [None] * len(items)
    for i, enc in encode_stream(lm, items, **kwargs):
        results[i] = enc
    return results[0] if single else results
