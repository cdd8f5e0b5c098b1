"""One forward pass that gives every page what it needs: tokens, word alignment, segments, attentions, states,
and the word-level views of them (word vectors, word-to-word attention, punctuation) defined once here.

An input is one of:
    "a sentence"                          str, split into words by the tokenizer
    ("sentence A", "sentence B")          a pair of str
    Words(["The", "cat", "sat", "."])     a sentence already split into words (a treebank's): each word piece
                                          maps to exactly one of the given words
    (Words([...]), Words([...]))          a pair of such
Pre-split words must be wrapped in `Words`: a bare tuple of two str is always a sentence pair, and a bare list of
str given to `encode` is a list of sentences. Batches are grouped by length so little time goes to padding;
results come back per input with the padding removed.

Analyses that must look at every sentence's words before any forward pass (anisotropy picks its random word
pairs first) call `tokenize` once and hand its `Tokenized` items to `encode_stream`, which then does not
tokenize them again.
"""

from __future__ import annotations

# torch and transformers imported in functions: `python -m core --help` and the studies list must start without them.
import copy
import sys
import unicodedata
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Sequence, Union

import numpy as np
from tokenizers import pre_tokenizers

from core import validation
from core.model import distributed
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck, check_stop


@dataclass(frozen=True, init=False)
class Words:
    """A sentence given as its words, fed to the tokenizer with is_split_into_words=True. words [W] str."""

    words: tuple[str, ...]

    def __init__(self, words: Iterable[str]):
        if isinstance(words, str):
            raise TypeError("Words takes a sequence of words, not one string; split it first.")
        object.__setattr__(self, "words", tuple(words))

    def __len__(self) -> int:
        return len(self.words)

    def __iter__(self):
        return iter(self.words)


TextInput = Union[str, tuple[str, str], Words, tuple[Words, Words]]


class EmptyInput(ValueError):
    """A sentence was empty or only white space."""


def is_punctuation(token: str) -> bool:
    """A word piece made only of punctuation characters (Unicode category P*), '##' continuation marks and
    the 'Ġ'/'▁' space marks of byte-level / sentencepiece vocabularies removed."""
    piece = token.removeprefix("##").lstrip("Ġ▁")
    return bool(piece) and all(unicodedata.category(ch).startswith("P") for ch in piece)


# ---- word pieces -> words: the one place where pieces are pooled ----------------------------------------------


def word_units(word_ids: np.ndarray, include_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """word_ids [T] (-1 = special token) -> (unit_of_token [T] int, -1 for tokens left out; first_token [U] int).

    A unit is one word (its pieces, which are always consecutive tokens) or, with include_special, one special
    token on its own (never merged with its neighbours). Units are numbered in token order."""
    word_ids = np.asarray(word_ids, dtype=np.int64)
    kept = np.flatnonzero((word_ids >= 0) | include_special)
    # Specials get a label of their own position, so two adjacent specials stay two units.
    labels = np.where(word_ids[kept] >= 0, word_ids[kept], -1 - kept)
    starts = np.ones(len(kept), dtype=bool)
    starts[1:] = labels[1:] != labels[:-1]
    unit_of_token = np.full(len(word_ids), -1, dtype=np.int64)
    unit_of_token[kept] = np.cumsum(starts) - 1
    return unit_of_token, kept[starts]


def pool_vectors(vectors: np.ndarray, word_ids: np.ndarray, include_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """vectors [..., T, D], word_ids [T] -> (pooled [..., U, D] float32: each unit's pieces averaged,
    first_token [U]); units as `word_units`."""
    unit_of_token, first_token = word_units(word_ids, include_special)
    kept = np.flatnonzero(unit_of_token >= 0)
    if len(first_token) == len(kept):  # no word split into pieces: nothing to average
        return np.asarray(vectors[..., kept, :], dtype=np.float32), first_token
    starts = np.searchsorted(kept, first_token)
    sizes = np.diff(np.r_[starts, len(kept)])
    # reduceat over runs of consecutive pieces: far cheaper than a [U, T] weight matrix on long corpora.
    sums = np.add.reduceat(vectors[..., kept, :], starts, axis=-2)
    return (sums / sizes[:, None]).astype(np.float32, copy=False), first_token


def pool_attention(weights: np.ndarray, word_ids: np.ndarray, include_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Token-level attention [..., T, T] (query, key) -> unit-level [..., U, U] float64, and first_token [U].

    Clark et al. (2019)'s rule: attention *to* a unit is the sum over its pieces (mass kept), attention *from*
    a unit the mean over its pieces. With include_special each special token is a unit and rows still sum to 1;
    without, special tokens are dropped as keys and queries, so rows sum to less than 1 (an argmax over other
    words is unchanged)."""
    unit_of_token, first_token = word_units(word_ids, include_special)
    kept = np.flatnonzero(unit_of_token >= 0)
    onehot = np.zeros((len(unit_of_token), len(first_token)), dtype=np.float64)
    onehot[kept, unit_of_token[kept]] = 1.0
    to_units = np.asarray(weights, dtype=np.float64) @ onehot  # sum over key pieces
    merged = (onehot.T @ to_units) / onehot.sum(axis=0)[:, None]  # mean over query pieces
    return merged, first_token


class _Aligned:
    """What Tokenized and Encoding share: word-level views of their [T] alignment arrays."""

    tokens: tuple[str, ...]
    special_mask: np.ndarray
    word_ids: np.ndarray
    words: tuple[str, ...]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def pieces_per_word(self) -> np.ndarray:
        """[W] int: how many tokens each word got. 0 only for pre-split words that the tokenizer dropped (a
        control character) or that truncation cut off."""
        ids = np.asarray(self.word_ids)
        return np.bincount(ids[ids >= 0], minlength=len(self.words))

    @property
    def punctuation_mask(self) -> np.ndarray:
        """[T] bool: non-special tokens made only of punctuation (see is_punctuation)."""
        return np.array([not s and is_punctuation(t) for t, s in zip(self.tokens, self.special_mask)], dtype=bool)

    def unit_first_tokens(self, include_special: bool = False) -> np.ndarray:
        """[U] int: the first token of each word (and, with include_special, of each special token)."""
        return word_units(self.word_ids, include_special)[1]

    def unit_texts(self, include_special: bool = False) -> tuple[str, ...]:
        """[U] each unit's text: the word as written, or the special token's own text."""
        return tuple(self.words[self.word_ids[t]] if self.word_ids[t] >= 0 else self.tokens[t]
                     for t in self.unit_first_tokens(include_special))

    def _require_all_words(self) -> None:
        missing = np.flatnonzero(self.pieces_per_word == 0)
        if len(missing):
            raise ValueError(f"words {missing.tolist()} have no token (dropped by the tokenizer, or truncated)")


@dataclass(frozen=True, eq=False)
class Tokenized(_Aligned):
    """One input after tokenization and before the model (what `tokenize` returns and `encode_stream` takes).
    Shapes as in Encoding; type_ids [T] int are the token type ids the model is fed."""

    text_a: str
    text_b: str | None
    tokens: tuple[str, ...]
    input_ids: np.ndarray
    type_ids: np.ndarray
    segment_ids: np.ndarray
    special_mask: np.ndarray
    word_ids: np.ndarray
    words: tuple[str, ...]
    n_tokens_full: int
    max_length: int
    split_into_words: bool = False


@dataclass(frozen=True, eq=False)
class Encoding(_Aligned):
    """One input after one forward pass, padding removed. Shapes (T = tokens kept, L = layers, H = heads, D = dim,
    W = words, U = units: words, plus special tokens when asked for):

    tokens          [T] word pieces as the tokenizer writes them, special tokens included
    input_ids       [T] int
    segment_ids     [T] int: 0 = sentence A, 1 = sentence B; a special token takes the segment of the text
                    before it ([CLS] and the first [SEP] are A, the last [SEP] of a pair is B)
    special_mask    [T] bool: True for [CLS], [SEP], <s>, </s> ...
    word_ids        [T] int: index into `words`, -1 for special tokens; B's words continue A's numbering
    words           [W] the words as written in the input (the tokenizer's pre-tokenisation: punctuation
                    marks are words of their own); for `Words` input exactly the given words, all of them
                    (a word truncation cut off keeps its index and has no token)
    attentions      [L, H, T, T] float32 (float16 with attention_dtype="float16"), [layer, head, query, key];
                    None when not asked for
    hidden_states   [L+1, T, D] float32, index 0 = input embeddings; None when not asked for
    n_tokens_full   tokens the input would have had without truncation
    split_into_words  True for `Words` input; text_a / text_b are then the words joined by spaces
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
    split_into_words: bool = False

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

    def word_vectors(self, layer: int | Sequence[int] | None = None, include_special: bool = False) -> np.ndarray:
        """Each word's vector, its pieces averaged, float32: [L+1, U, D] for every layer (layer None), [n, U, D]
        for a list of n layers, [U, D] for one layer. U = W when include_special is False (every word must
        then have a token), else words and special tokens in token order (see unit_first_tokens)."""
        if self.hidden_states is None:
            raise ValueError("This encoding has no hidden states: encode with hidden_states=True.")
        if not include_special:
            self._require_all_words()
        states = self.hidden_states if layer is None else self.hidden_states[layer]
        return pool_vectors(states, self.word_ids, include_special)[0]

    def word_attention(self, include_special: bool = False) -> np.ndarray:
        """Word-to-word attention float64 [L, H, U, U] [layer, head, query, key] by Clark et al.'s rule (see
        pool_attention): to a word = sum over its pieces, from a word = mean over its pieces. Without
        include_special, U = W and every word must have a token."""
        if self.attentions is None:
            raise ValueError("This encoding has no attentions: encode with attentions=True.")
        if not include_special:
            self._require_all_words()
        return pool_attention(self.attentions, self.word_ids, include_special)[0]


# ---- tokenization ---------------------------------------------------------------------------------------------


def _is_pair(item) -> bool:
    """Two str or two Words. A list is accepted too (pairs read back from JSON), which is why pre-split words
    must come wrapped in Words: a bare two-word list would read as a sentence pair."""
    return (isinstance(item, (tuple, list)) and len(item) == 2 and type(item[0]) is type(item[1])
            and isinstance(item[0], (str, Words)))


def _split(item) -> tuple[str | Words, str | Words | None]:
    if isinstance(item, (str, Words)):
        a, b = item, None
    elif _is_pair(item):
        a, b = item
    else:
        raise TypeError(
            f"An input is a str, a pair of str, Words([...]) or a pair of Words, not {type(item).__name__}: "
            f"wrap a sentence's pre-split words in core.model.encoding.Words."
        )
    if isinstance(a, Words):
        if not any(w.strip() for w in a):
            raise EmptyInput("Sentence A has no words.")
        if b is not None and not any(w.strip() for w in b):
            raise EmptyInput("Sentence B has no words.")
        return a, b
    if not a or not a.strip():
        raise EmptyInput("Sentence A is empty: type a sentence first.")
    if b is not None and not b.strip():
        raise EmptyInput("Sentence B is empty: type it, or leave out the pair.")
    return a, b


_WORD_TOKENIZERS: dict[str, object] = {}


def _loses_spaces(tokenizer) -> bool:
    """Whether pre-split words lose the space before them: a byte-level pre-tokenizer without add_prefix_space
    (ModernBERT's) takes ["a", "b"] as "ab"-style pieces where the sentence "a b" has "a", "Ġb"."""
    if not isinstance(getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None),
                      pre_tokenizers.ByteLevel):
        return False  # only a byte-level pre-tokenizer is replaced (_with_prefix_space)
    pieces = lambda enc: [t for t, s in zip(enc.tokens(), enc.word_ids()) if s is not None]  # noqa: E731
    return pieces(tokenizer(["a", "b"], is_split_into_words=True)) != pieces(tokenizer("a b"))


def _with_prefix_space(tokenizer):
    """A copy of a byte-level tokenizer whose pre-tokenizer adds the space before each word."""
    copied = copy.deepcopy(tokenizer)
    copied.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    return copied


def word_tokenizer(tokenizer):
    """The tokenizer, able to take pre-split words: byte-level BPE tokenizers (RoBERTa family, ModernBERT) need
    add_prefix_space=True for that, so each word is tokenized as if a space preceded it."""
    try:
        if not _loses_spaces(tokenizer):
            return tokenizer
        name = tokenizer.name_or_path
        if name not in _WORD_TOKENIZERS:
            _WORD_TOKENIZERS[name] = _with_prefix_space(tokenizer)
        return _WORD_TOKENIZERS[name]
    except (ValueError, TypeError, AssertionError):
        from transformers import AutoTokenizer

        name = tokenizer.name_or_path
        if name not in _WORD_TOKENIZERS:
            _WORD_TOKENIZERS[name] = AutoTokenizer.from_pretrained(name, add_prefix_space=True, trust_remote_code=False)
        return _WORD_TOKENIZERS[name]


def tokenize_one(tokenizer, text_a, text_b, max_length: int):
    """A tokenizers.Encoding for one input, truncated to max_length, plus its untruncated length. text_a and
    text_b are str, or Words (then tokenized with is_split_into_words=True; pass word_tokenizer(tokenizer))."""
    split = isinstance(text_a, Words)
    if split:
        text_a, text_b = list(text_a), (list(text_b) if text_b is not None else None)
    full = tokenizer(text_a, text_b, add_special_tokens=True, truncation=False, verbose=False, is_split_into_words=split)
    n_full = len(full["input_ids"])
    if n_full <= max_length:
        return full.encodings[0], n_full
    cut = tokenizer(text_a, text_b, add_special_tokens=True, truncation=True, max_length=max_length, is_split_into_words=split)
    return cut.encodings[0], n_full


def token_alignment(enc, text_a, text_b):
    """segment_ids, special_mask, global word_ids and word strings from a tokenizers.Encoding. For Words input
    the words are the given ones and word ids index them (A's then B's), never renumbered."""
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
    word_ids = np.full(n, -1, dtype=np.int64)
    if isinstance(text_a, Words):
        n_words_a = len(text_a)
        for i, (s, w) in enumerate(zip(sequence_ids, local_words)):
            if s is not None and w is not None:
                word_ids[i] = w if s == 0 else n_words_a + w
        return segment, special, word_ids, text_a.words + (text_b.words if text_b is not None else ())
    n_words_a = 1 + max((w for s, w in zip(sequence_ids, local_words) if s == 0), default=-1)
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
    # strip(): a byte-level BPE's word piece carries the space before it ("Ġcat" spans " cat") when the tokenizer
    # does not trim its offsets (ModernBERT's TemplateProcessing; RoBERTa's processor trims them), and a
    # SentencePiece piece's offsets include the space its "▁" stands for (DeBERTa-v3's " cat").
    words = tuple(texts[s][a:b].strip() or texts[s][a:b] for _, (a, b, s) in sorted(spans.items()))
    # Truncation can drop whole words; renumber so word ids stay dense.
    if spans and len(spans) != max(spans) + 1:
        remap = {g: k for k, g in enumerate(sorted(spans))}
        word_ids = np.array([remap.get(int(g), -1) for g in word_ids], dtype=np.int64)
    return segment, special, word_ids, words


def _tokenized(tokenizer, words_tokenizer, item, max_length: int) -> Tokenized:
    a, b = _split(item)
    split = isinstance(a, Words)
    enc, n_full = tokenize_one(words_tokenizer() if split else tokenizer, a, b, max_length)
    segment, special, word_ids, words = token_alignment(enc, a, b)
    as_text = (lambda t: " ".join(t) if t is not None else None) if split else (lambda t: t)
    # strip(): an added token that takes the space before it (ModernBERT's "[MASK]", lstrip) comes back as
    # " [MASK]"; no vocabulary piece holds plain white space (byte-level BPE writes it Ġ, SentencePiece ▁).
    return Tokenized(
        text_a=as_text(a), text_b=as_text(b), tokens=tuple(t.strip() or t for t in enc.tokens), input_ids=np.asarray(enc.ids, dtype=np.int64),
        type_ids=np.asarray(enc.type_ids, dtype=np.int64), segment_ids=segment, special_mask=special,
        word_ids=word_ids, words=words, n_tokens_full=n_full, max_length=max_length, split_into_words=split,
    )


def tokenize(lm: LoadedModel, inputs: Sequence[TextInput], max_length: int | None = None) -> list[Tokenized]:
    """Tokenize inputs as encode_stream does (same truncation, same word alignment), without the model."""
    tokenizer = lm.tokenizer
    max_length = min(max_length or lm.max_length, lm.max_length)
    found: list = []

    def words_tokenizer():
        if not found:
            found.append(word_tokenizer(tokenizer))
        return found[0]

    return [item if isinstance(item, Tokenized) else _tokenized(tokenizer, words_tokenizer, item, max_length) for item in inputs]


# ---- the forward pass -----------------------------------------------------------------------------------------


def padded_batch(lm: LoadedModel, items: Sequence[Tokenized]) -> dict:
    """The model's inputs for `items` padded to the longest: input_ids, attention_mask and, when the tokenizer uses
    them, token_type_ids, each a [batch, longest] int64 tensor on the model's device."""
    import torch

    tokenizer = lm.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    width = max(len(t.input_ids) for t in items)
    ids = np.full((len(items), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(items), width), dtype=np.int64)
    types = np.zeros((len(items), width), dtype=np.int64)
    for row, t in enumerate(items):
        ids[row, : len(t.input_ids)] = t.input_ids
        mask[row, : len(t.input_ids)] = 1
        types[row, : len(t.input_ids)] = t.type_ids
    feed = {"input_ids": torch.from_numpy(ids).to(lm.device), "attention_mask": torch.from_numpy(mask).to(lm.device)}
    if "token_type_ids" in tokenizer.model_input_names:
        feed["token_type_ids"] = torch.from_numpy(types).to(lm.device)
    return feed


def _one_row(layers, row: int, n: int, dtype) -> np.ndarray:
    """One input's unpadded slice of every layer, [L, ..., n] or [L, heads, n, n] for attentions, as one numpy array.

    torch copies each layer into a preallocated buffer, casting on the way: one pass over the bytes, where numpy's
    stack of float16 views took ~0.25 s of a ~0.9 s bert-base forward at 512 tokens (bench/app_latency.py)."""
    import torch

    square = layers[0].dim() == 4  # attentions [B, H, T, T]; hidden states [B, T, D]
    index = (row, slice(None), slice(0, n), slice(0, n)) if square else (row, slice(0, n))
    first = layers[0][index]
    out = torch.empty((len(layers), *first.shape), dtype=dtype)
    for layer, values in enumerate(layers):
        out[layer].copy_(values[index])
    return out.numpy()


@dataclass(frozen=True, eq=False)
class EncodedBatch:
    """One padded batch as the model returned it, for corpus passes that accumulate a whole batch at a time
    (see `encode_batches`). B = rows, T = the longest row's tokens (shorter rows are padded at the end).

    indices        [B] the input index of each row
    items          [B] each row's Tokenized
    lengths        [B] int: tokens of each row (positions from lengths[b] on are padding)
    hidden_states  L+1 torch tensors [B, T, D] on the model's device, or None when not asked for
    attentions     L torch tensors [B, H, T, T] on the model's device, or None when not asked for
    """

    indices: list[int]
    items: list[Tokenized]
    lengths: np.ndarray
    hidden_states: tuple | None
    attentions: tuple | None
    output: object = None  # the model's whole output (pooler_output included) when asked for (model_output=True)

    def encodings(self, attention_dtype: str = "float32") -> Iterator[tuple[int, Encoding]]:
        """(input index, Encoding) per row, padding removed: what encode_stream yields."""
        import torch

        dtype = getattr(torch, attention_dtype)
        for row, (i, t) in enumerate(zip(self.indices, self.items)):
            n = int(self.lengths[row])
            yield i, Encoding(
                text_a=t.text_a,
                text_b=t.text_b,
                tokens=t.tokens,
                input_ids=t.input_ids,
                segment_ids=t.segment_ids,
                special_mask=t.special_mask,
                word_ids=t.word_ids,
                words=t.words,
                attentions=_one_row(self.attentions, row, n, dtype) if self.attentions is not None else None,
                hidden_states=_one_row(self.hidden_states, row, n, torch.float32) if self.hidden_states is not None else None,
                n_tokens_full=t.n_tokens_full,
                max_length=t.max_length,
                split_into_words=t.split_into_words,
            )


class CutCount(validation.CorpusCuts):
    """The word pieces cut off each input the model read inside `counting_cuts`: a corpus pass's CorpusCuts,
    counted once here where every pass feeds the model. Each distinct input counts once, however many passes
    read it (a pass that reads its corpus twice, or two models on one corpus)."""

    def __init__(self):
        self._dropped_by_input: dict[tuple[str, str | None], int] = {}
        self.max_length = 0

    @property
    def dropped(self) -> list[int]:
        return list(self._dropped_by_input.values())

    def add(self, items: Sequence[Tokenized]) -> None:
        for item in items:
            self._dropped_by_input.setdefault((item.text_a, item.text_b), item.n_tokens_full - item.n_tokens)
            self.max_length = max(self.max_length, item.max_length)

    def over_ranks(self) -> "CutCount":
        """This count merged with every rank's (core.model.distributed: under torchrun a rank encodes only its share);
        itself on one process. Every rank must call it (a collective)."""
        context = distributed.current()
        if not context.distributed:
            return self
        merged = CutCount()
        for dropped_by_input, max_length in context.gather_objects((self._dropped_by_input, self.max_length)):
            for key, dropped in dropped_by_input.items():
                merged._dropped_by_input.setdefault(key, dropped)
            merged.max_length = max(merged.max_length, max_length)
        return merged


_cut_count: ContextVar[CutCount | None] = ContextVar("cut_count", default=None)


@contextmanager
def counting_cuts() -> Iterator[CutCount]:
    """Count what truncation cut off every input encode_batches (so encode_stream, encode) feeds the model in
    this block, for a corpus pass's notice and its JSON's "truncated" field without threading counts through
    each analysis. Counts in the calling thread (and context) only."""
    cuts = CutCount()
    token = _cut_count.set(cuts)
    try:
        yield cuts
    finally:
        _cut_count.reset(token)


@dataclass(frozen=True)
class Counted(validation.CorpusCuts):
    """A corpus pass's result (`value`) with what truncation cut off each input it read: a job's result carries
    its own notice, so a page shows it without counting again."""

    value: object
    dropped: tuple[int, ...]
    max_length: int


def run_counting_cuts(run: Callable[[], object]) -> Counted:
    """run() inside counting_cuts, its result kept with the count (call it in the thread that feeds the model)."""
    with counting_cuts() as cuts:
        value = run()
    return Counted(value, tuple(cuts.dropped), cuts.max_length)


def encode_batches(
    lm: LoadedModel,
    inputs: Sequence[TextInput | Tokenized],
    *,
    batch_size: int = 32,
    attentions: bool = True,
    hidden_states: bool = True,
    max_length: int | None = None,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
    model_output: bool = False,
) -> Iterator[EncodedBatch]:
    """The forward passes of encode_stream, one EncodedBatch at a time (shortest inputs first), before anything
    is split per input: a corpus pass that pools, sums or counts over the whole batch at once skips the
    per-input Encoding (its numpy copies and small calls cost ~20 % of a short-sentence forward on one CPU
    thread). progress(done, total) is called after the consumer is done with each batch. model_output: each
    batch also carries the model's whole output (a classifier's head reads its pooler output: the time-lapse)."""
    import torch

    tokenized = tokenize(lm, inputs, max_length)
    cuts = _cut_count.get()
    if cuts is not None:
        cuts.add(tokenized)
    order = sorted(range(len(tokenized)), key=lambda i: len(tokenized[i].input_ids))
    done = 0
    for start in range(0, len(order), batch_size):
        check_stop(should_stop)
        batch_idx = order[start : start + batch_size]
        items = [tokenized[i] for i in batch_idx]
        feed = padded_batch(lm, items)
        with torch.inference_mode():
            out = lm.model(**feed, output_attentions=attentions, output_hidden_states=hidden_states)
        yield EncodedBatch(
            indices=batch_idx, items=items, lengths=np.array([len(t.input_ids) for t in items], dtype=np.int64),
            hidden_states=tuple(out.hidden_states) if hidden_states else None,
            attentions=tuple(out.attentions) if attentions else None,
            output=out if model_output else None,
        )
        done += len(batch_idx)
        if progress is not None:
            progress(done, len(order))


def encode_stream(
    lm: LoadedModel,
    inputs: Sequence[TextInput | Tokenized],
    *,
    batch_size: int = 32,
    attentions: bool = True,
    hidden_states: bool = True,
    max_length: int | None = None,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
    attention_dtype: str = "float32",
) -> Iterator[tuple[int, Encoding]]:
    """Yield (input index, Encoding) batch by batch, shortest inputs first.

    attention_dtype "float16": attentions converted by torch before they leave it (the app's display copy; at
    512 tokens numpy's float32 stack and cast cost ~0.45 s of a ~0.8 s bert-base forward).

    Inputs that are already `Tokenized` (from `tokenize`) are fed as they are. Only one batch is held at a
    time, so a corpus of any size streams in flat memory when the caller keeps only what it needs from each
    Encoding.
    """
    for batch in encode_batches(lm, inputs, batch_size=batch_size, attentions=attentions, hidden_states=hidden_states,
                                max_length=max_length, progress=progress, should_stop=should_stop):
        yield from batch.encodings(attention_dtype)


def encode_share(lm: LoadedModel, inputs: Sequence, *, attention_dtype: str = "float32",
                 **options) -> Iterator[tuple[int, Encoding]]:
    """encode_stream over this rank's share of `inputs` (core.model.distributed), yielding (index into `inputs`,
    Encoding)."""
    for batch in encode_share_batches(lm, inputs, **options):
        yield from batch.encodings(attention_dtype)


def encode_share_batches(lm: LoadedModel, inputs: Sequence, **options) -> Iterator[EncodedBatch]:
    """encode_batches over this rank's share of `inputs` (core.model.distributed); each EncodedBatch's indices
    index `inputs`."""
    ctx = distributed.current()
    if not ctx.distributed:
        yield from encode_batches(lm, inputs, **options)
        return
    mine = ctx.share(len(inputs))
    print(f"rank {ctx.rank}/{ctx.world_size}: encoding {len(mine)} of {len(inputs)} inputs", file=sys.stderr, flush=True)
    for batch in encode_batches(lm, [inputs[i] for i in mine], **options):
        yield replace(batch, indices=[mine[local] for local in batch.indices])


def read_input(lm: LoadedModel, text_a: str, text_b: str | None = None):
    """One input (text_a, or the pair) tokenized as encode does it, truncation included: a Tokenized to count what
    was cut for a result that does not keep its Encoding, without a forward pass."""
    return tokenize(lm, [(text_a, text_b) if text_b else text_a])[0]


def pool_batch_words(batch: EncodedBatch, include_special: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A batch's unit vectors, pieces averaged exactly as Encoding.word_vectors does (same sums, same rounding):
    (vectors [U, L+1, D] float32, the units of row 0 then row 1 ..., in token order; units [B] int per row).
    Without include_special every word of every row must have a token."""
    import torch

    if batch.hidden_states is None:
        raise ValueError("This batch has no hidden states: encode with hidden_states=True.")
    n_rows, width, dim = batch.hidden_states[0].shape
    if not include_special:
        for item in batch.items:
            item._require_all_words()
    # word_units for every row at once: ids [B, T] (-2 = padding), a unit starts where the row or label changes.
    ids = np.full((n_rows, width), -2, dtype=np.int64)
    for row, item in enumerate(batch.items):
        ids[row, : len(item.word_ids)] = item.word_ids
    flat = ids.ravel()
    tokens = np.flatnonzero((flat >= 0) | ((flat == -1) & include_special))
    # Specials get a label of their own position, so two adjacent specials stay two units.
    labels = np.where(flat[tokens] >= 0, flat[tokens], -1 - tokens)
    rows = tokens // width
    starts = np.flatnonzero(np.r_[True, (labels[1:] != labels[:-1]) | (rows[1:] != rows[:-1])])
    units = np.bincount(rows[starts], minlength=n_rows).astype(np.int64)
    sizes = np.diff(np.r_[starts, len(tokens)])
    # Only the kept tokens leave the model's device, already laid out [K, L+1, D].
    hidden = torch.stack([h.float() for h in batch.hidden_states], dim=2).reshape(n_rows * width, -1, dim)
    picked = hidden[torch.from_numpy(tokens).to(hidden.device)].cpu().numpy()
    if len(starts) == len(tokens):  # no word split into pieces: nothing to average
        return picked, units
    # Only split words need summing: np.add.reduceat over [start, end) of each (the odd segments, between two
    # split words, are thrown away), the same sums pool_vectors makes, divided in float64 and rounded to float32
    # as it does. A single piece stays as it is (x / 1 is x).
    pooled = picked[starts]
    split = np.flatnonzero(sizes > 1)
    bounds = np.stack([starts[split], starts[split] + sizes[split]], axis=1).ravel()
    if bounds[-1] == len(picked):
        bounds = bounds[:-1]  # the last segment of reduceat runs to the end anyway
    sums = np.add.reduceat(picked, bounds, axis=0)[::2]
    pooled[split] = (sums / sizes[split, None, None]).astype(np.float32)
    return pooled, units


def _is_single(inputs) -> bool:
    return isinstance(inputs, (str, Words, Tokenized)) or (isinstance(inputs, tuple) and _is_pair(inputs))


def encode(lm: LoadedModel, inputs: TextInput | Iterable[TextInput], **kwargs) -> list[Encoding] | Encoding:
    """Encode one input (returns one Encoding) or a list of inputs (returns a list in input order).

    Keyword arguments are those of encode_stream.
    """
    single = _is_single(inputs)
    items = [inputs] if single else list(inputs)
    results: list[Encoding | None] = [None] * len(items)
    for i, enc in encode_stream(lm, items, **kwargs):
        results[i] = enc
    return results[0] if single else results
