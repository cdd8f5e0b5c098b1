"""Fit a masked-word (MLM) head for an encoder that has none (a sentence encoder such as MiniLM, a fine-tuned run).

The head is the family's own architecture (transformers' *ForMaskedLM: dense + activation + LayerNorm + a decoder
tied to the word embeddings, + a bias), trained with the MLM objective on the *frozen* encoder's last layer:
15 % of the words of each sentence are masked whole (every word piece of a chosen word), and of those words 80 %
become [MASK], 10 % a random word piece and 10 % stay as they are (BERT's 80/10/10, decided per word).

Because the encoder is frozen, one pass encodes each training sentence once with its masking drawn, and keeps the
last layer's vectors at the masked pieces; the head then trains for `steps` steps on those vectors alone (the
encoder's forward runs once). Training scores only the corpus's own vocabulary (every piece of its training
sentences: a sampled softmax whose sample is that vocabulary, a few thousand pieces of BERT's 30,522), which made a
step 7× faster on MiniLM (bench/RESULTS.md, issue 47); the other pieces keep the bias they start with (their log
frequency among the masked pieces, add-one smoothed: lower than any piece seen), and measuring scores the full
vocabulary. Defaults sized for a lesson (issue 47): 4,000 pairs of a dataset spec without N (~7,800 sentences) and
1,000 steps fit MiniLM in minutes on 2 cores at ≥ 2× the best constant guess (bench/RESULTS.md).

The result is a complete model folder under `models_cache/heads/NAME` (safetensors, the config's `architectures`
naming the *ForMaskedLM class, the tokenizer), which transformers' AutoModelForMaskedLM and `pipeline("fill-mask")`
load, listed by `python -m core models` with the model it was fitted on (config key `bertlens_fitted_on`).

Held-out sentences measure it: every word masked in turn is guessed right when each of its pieces is the head's
top-1; beside it, the best constant guess (the one word that would be right most often on those same held-out
words, an upper bound for any constant). A head under 1.5× that constant is flagged (core.model.artefacts'
weak_head_message): in its saved config, in the `models` listing and wherever it is used.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import torch

from core.data import corpus as corpora
from core.files import atomic_path
from core.model import artefacts
from core.model.adapter import ModelAdapter
from core.model.loading import LoadedModel, fresh_weights, load_model
from core.progress import ProgressCallback, StopCheck, check_stop
from core.training.recipe import RUN_NAME, RUN_NAME_RULE
from core.validation import check_count, whole_match

# transformers imported in functions: only a fit builds a *ForMaskedLM (the CLI imports this module lazily).

MASK_RATE = 0.15
REPLACE_MASK, REPLACE_RANDOM = 0.8, 0.1  # the rest keep their word
HELD_OUT_SHARE, HELD_OUT_MAX, HELD_OUT_MIN = 0.1, 1000, 20
DEFAULT_STEPS = 1000
# A dataset spec without N ("snli:train") samples this many items: the grammar's 500 learned the constant guess.
DEFAULT_PAIRS = 4000
DEFAULT_CORPUS = f"snli:train:{DEFAULT_PAIRS}"  # the Masked words page's default
BATCH_VECTORS = 256
ENCODE_BATCH = 64
LEARNING_RATE = 1e-3


PROBE_SENTENCES, PROBE_STEPS = 32, 4  # what an estimate times: a fit's two loops, a few seconds in all
PROBE_VOCABULARY = 8000  # pieces a timed step scores: about what 4,000 SNLI pairs' sentences hold (issue 47)


class HeadFitError(ValueError):
    """A fit that cannot start: the model already has a head, too few sentences, a bad name."""


@dataclass(frozen=True)
class HeadFit:
    """What a fit made and measured.

    name, path          the saved folder (models_cache/heads/NAME), loadable by name
    model               the encoder it was fitted on
    sentences           training sentences encoded; held_out: sentences kept out to measure it
    vectors             masked pieces trained on (one vector each); steps: optimiser steps
    top1_accuracy       held-out masked whole words guessed right (every piece top-1) / held_out_words
    constant_accuracy   the best constant guess's accuracy on the same words (constant_word: that word)
    loss                mean cross-entropy of the last 100 steps (over the corpus's vocabulary: the training softmax)
    seconds             wall time (encode_seconds of it spent encoding); estimated_seconds: what the estimate
                        measured before the start said
    vocabulary          pieces the training softmax scored (the training sentences' own)
    warning             why the head is weak (under 1.5× the best constant guess), or None
    """

    name: str
    path: str
    model: str
    sentences: int
    held_out: int
    held_out_words: int
    vectors: int
    steps: int
    top1_accuracy: float
    constant_accuracy: float
    constant_word: str
    loss: float
    seconds: float
    encode_seconds: float
    estimated_seconds: float = 0.0
    vocabulary: int = 0
    warning: str | None = None

    @property
    def ratio_to_constant(self) -> float:
        return self.top1_accuracy / self.constant_accuracy if self.constant_accuracy else math.inf

    @property
    def weak(self) -> bool:
        return self.warning is not None

    def to_json(self) -> dict:
        return {**asdict(self), "ratio_to_constant": round(self.ratio_to_constant, 4), "weak": self.weak}


def check_name(name: str) -> str:
    """A saved head is named like a run (one folder name; a fullmatch, so "name\\n" is refused too)."""
    if not whole_match(RUN_NAME, name):
        raise HeadFitError(f"--out {name!r}: {RUN_NAME_RULE} (no '/'), such as minilm-mlm")
    return name


def word_groups(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Positions of each word's pieces, in order ([CLS]/[SEP]/padding have word id None and belong to none)."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            groups.setdefault(word, []).append(position)
    return list(groups.values())


def choose_words(n_words: int, rng: np.random.Generator, rate: float = MASK_RATE) -> list[int]:
    """Which words to mask: round(rate × n) of them, at least one, drawn without replacement."""
    if n_words == 0:
        return []
    k = max(1, int(round(rate * n_words)))
    return sorted(rng.choice(n_words, size=min(k, n_words), replace=False).tolist())


def mask_whole_words(input_ids: Sequence[int], word_ids: Sequence[int | None], *, mask_id: int, vocab_size: int,
                     special_ids: set[int], rng: np.random.Generator, rate: float = MASK_RATE,
                     all_mask: bool = False) -> tuple[list[int], list[int]]:
    """(masked input ids, labels): labels hold the original id at masked pieces and -100 elsewhere. Each chosen
    word is [MASK]ed (80 %), replaced piece by piece with random non-special pieces (10 %) or kept (10 %);
    all_mask=True masks every chosen word with [MASK] (measuring)."""
    masked, labels = list(input_ids), [-100] * len(input_ids)
    groups = word_groups(word_ids)
    for w in choose_words(len(groups), rng, rate):
        draw = 0.0 if all_mask else rng.random()
        for position in groups[w]:
            labels[position] = int(input_ids[position])
            if draw < REPLACE_MASK:
                masked[position] = mask_id
            elif draw < REPLACE_MASK + REPLACE_RANDOM:
                piece = int(rng.integers(vocab_size))
                while piece in special_ids:
                    piece = int(rng.integers(vocab_size))
                masked[position] = piece
    return masked, labels


def masked_lm_class(lm: LoadedModel):
    """A fresh *ForMaskedLM of the encoder's family with the encoder's weights, its head newly initialised and the
    decoder tied to the word embeddings."""
    from transformers import AutoModelForMaskedLM

    config = lm.model.config
    with fresh_weights():  # the new head's initialisation must not meet another thread's load
        mlm = AutoModelForMaskedLM.from_config(config, dtype=torch.float32)
    missing, unexpected = mlm.base_model.load_state_dict(lm.model.state_dict(), strict=False)
    # The *ForMaskedLM encoders are built without a pooler; nothing else may differ.
    unexpected = [k for k in unexpected if not k.startswith("pooler.")]
    missing = [k for k in missing if not k.startswith("pooler.")]
    if missing or unexpected:
        raise HeadFitError(f"the encoder's weights do not fit {type(mlm).__name__}: missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]}")
    mlm.tie_weights()
    return mlm.to(lm.device).eval()


def frozen_encoder_mlm(lm):
    """The family's masked-word model around the loaded encoder, the encoder frozen: only the head trains (the fit
    and its rate measurement build it the same way)."""
    mlm = masked_lm_class(lm)
    for p in mlm.base_model.parameters():
        p.requires_grad_(False)
    return mlm


def head_parameters(mlm) -> list:
    """The head's trainable tensors: everything outside the encoder (the tied decoder weight is the encoder's)."""
    encoder = {id(p) for p in mlm.base_model.parameters()}
    return [p for p in mlm.parameters() if id(p) not in encoder]


def _split(sentences: Sequence[str], seed: int) -> tuple[list[str], list[str]]:
    order = np.random.default_rng(seed).permutation(len(sentences))
    n_held = min(HELD_OUT_MAX, max(HELD_OUT_MIN, int(HELD_OUT_SHARE * len(sentences))))
    if len(sentences) < 2 * n_held:
        raise HeadFitError(f"{len(sentences)} sentences are too few to fit and measure a head: give at least "
                           f"{2 * HELD_OUT_MIN} (a corpus such as snli:train:20000)")
    held = [sentences[i] for i in order[:n_held]]
    train = [sentences[i] for i in order[n_held:]]
    return train, held


def _batches(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


def encode_masked(lm: LoadedModel, sentences: Sequence[str], rng: np.random.Generator, *, all_mask: bool = False,
                  progress: ProgressCallback = None, should_stop: StopCheck = None, done_before: int = 0,
                  total: int | None = None, vocabulary: set[int] | None = None):
    """Each sentence masked once, encoded by the frozen encoder: (vectors [N, D] at masked pieces, labels [N],
    groups: per masked word, the row indices of its pieces in vectors). `vocabulary`, when given, gets the id of
    every non-special piece of the sentences (the training softmax's pieces)."""
    tok = lm.tokenizer
    special = set(tok.all_special_ids)
    vectors, labels, groups = [], [], []
    count = 0
    for start, batch in _batches(list(sentences), ENCODE_BATCH):
        check_stop(should_stop)
        enc = tok(list(batch), truncation=True, max_length=lm.max_length)
        if vocabulary is not None:
            vocabulary.update(piece for row in enc["input_ids"] for piece in row if piece not in special)
        rows_ids, rows_labels = [], []
        for i in range(len(batch)):
            ids, lab = mask_whole_words(enc["input_ids"][i], enc.word_ids(i), mask_id=tok.mask_token_id,
                                        vocab_size=len(tok), special_ids=special, rng=rng, all_mask=all_mask)
            rows_ids.append(ids)
            rows_labels.append(lab)
        width = max(len(r) for r in rows_ids)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, row in enumerate(rows_ids):
            ids[i, :len(row)] = torch.tensor(row)
            attention[i, :len(row)] = 1
        with torch.no_grad():
            hidden = lm.model(input_ids=ids.to(lm.device), attention_mask=attention.to(lm.device)).last_hidden_state
        for i, row in enumerate(rows_labels):
            positions = [p for p, label in enumerate(row) if label != -100]
            if not positions:
                continue
            vectors.append(hidden[i, positions].float().cpu())
            labels.extend(row[p] for p in positions)
            # positions of one word are consecutive pieces of one chosen word: group by the word they came from
            word_of = enc.word_ids(i)
            by_word: dict[int, list[int]] = {}
            for offset, p in enumerate(positions):
                by_word.setdefault(word_of[p], []).append(count + offset)
            groups.extend(by_word.values())
            count += len(positions)
        if progress is not None:
            progress(done_before + start + len(batch), total or len(sentences), "encoding the masked sentences")
    d = lm.hidden_size
    stacked = torch.cat(vectors) if vectors else torch.zeros((0, d))
    return stacked, torch.tensor(labels, dtype=torch.long), groups


def whole_word_accuracy(predicted: np.ndarray, labels: np.ndarray, groups: Sequence[Sequence[int]]) -> float:
    """Share of masked words whose every piece is predicted right."""
    if not groups:
        return 0.0
    right = sum(all(predicted[i] == labels[i] for i in group) for group in groups)
    return right / len(groups)


def best_constant(labels: np.ndarray, groups: Sequence[Sequence[int]]) -> tuple[float, tuple[int, ...]]:
    """(accuracy, word as piece ids) of the constant guess right most often on these words."""
    words: dict[tuple[int, ...], int] = {}
    for group in groups:
        key = tuple(int(labels[i]) for i in group)
        words[key] = words.get(key, 0) + 1
    if not words:
        return 0.0, ()
    word, n = max(words.items(), key=lambda item: (item[1], item[0]))
    return n / len(groups), word


def _init_bias_from_frequencies(mlm, labels, vocab_size: int) -> None:
    """Start the output bias at the log frequency of each piece among the masked ones (add-one smoothed), so step 0
    already predicts the unigram distribution rather than a uniform one."""
    bias = mlm.get_output_embeddings().bias
    if bias is None:
        return
    counts = torch.bincount(labels, minlength=vocab_size).float() + 1.0
    with torch.no_grad():
        bias.copy_(torch.log(counts / counts.sum())[: bias.shape[0]].to(bias.device))


def check_free_name(name: str, overwrite: bool = False) -> None:
    """HeadFitError, before any work, when a head of that name is saved already and `overwrite` is not asked for."""
    folder = artefacts.heads_dir() / check_name(name)
    if folder.exists() and not overwrite:
        raise HeadFitError(f"a head named '{name}' is saved already ({folder}): pick another --out, or replace it "
                           "(fit-mlm-head --overwrite; the old one stays until the new one is saved)")


def narrowable_decoder(mlm) -> bool:
    """Whether the head ends in a decoder module with one row per vocabulary piece, which decoder_over can narrow.
    DeBERTa-v3's lm_predictions head has none: it multiplies by the word embeddings inside its own forward, and its
    get_output_embeddings() is the hidden-size transform before that."""
    decoder = mlm.get_output_embeddings()
    return decoder is not None and decoder.weight.shape[0] == mlm.config.vocab_size


def training_softmax(mlm, vocabulary: set[int], labels: torch.Tensor):
    """(targets, the context a training step runs in, how many pieces its softmax scores): the sampled softmax over
    the corpus's pieces where the decoder can be narrowed (decoder_over), else the whole vocabulary with the labels
    as they are."""
    if narrowable_decoder(mlm):
        pieces, targets = training_pieces(vocabulary, labels)
        return targets, decoder_over(mlm, pieces), len(pieces)
    return labels, nullcontext(), int(mlm.config.vocab_size)


@contextmanager
def decoder_over(mlm, pieces: torch.Tensor):
    """Inside: the head's decoder (the family's output embeddings) scores only `pieces` [P] (logits [..., P], in
    that order), a sampled softmax's training pass; the whole vocabulary again on exit. The fit's own fresh model
    only: the decoder is changed in place. The tied decoder weight is the frozen encoder's, so its rows are taken
    once; the bias trains through the index."""
    decoder = mlm.get_output_embeddings()
    pieces = pieces.to(decoder.weight.device)
    frozen_rows = None if decoder.weight.requires_grad else decoder.weight[pieces].detach()

    def scored(hidden):
        rows = decoder.weight[pieces] if frozen_rows is None else frozen_rows
        return torch.nn.functional.linear(hidden, rows, None if decoder.bias is None else decoder.bias[pieces])

    decoder.forward = scored
    try:
        yield
    finally:
        del decoder.forward  # the class's own forward again


def train_step(head, optimiser, vectors: torch.Tensor, targets: torch.Tensor, schedule=None) -> float:
    """One optimiser step of cross-entropy on (vectors, targets): a fit's step and the estimate's timed one."""
    loss = torch.nn.functional.cross_entropy(head(vectors), targets)
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()
    if schedule is not None:
        schedule.step()
    return float(loss.detach())


def training_pieces(vocabulary: set[int], labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(pieces [P] the training softmax scores: the corpus's vocabulary and every label, sorted; labels mapped to
    their index among them)."""
    pieces = torch.tensor(sorted(vocabulary | set(labels.tolist())), dtype=torch.long)
    index = {int(piece): i for i, piece in enumerate(pieces)}
    return pieces, torch.tensor([index[int(label)] for label in labels], dtype=torch.long)


def fit_mlm_head(model: str, corpus: str, out: str, *, limit: int | None = None, steps: int | None = None,
                 seed: int = 0, progress: ProgressCallback = None, should_stop: StopCheck = None,
                 overwrite: bool = False) -> HeadFit:
    """Fit, measure and save a masked-word head for `model` over the sentences of the corpus spec `corpus`
    (pairs give both sides); `limit` sentences at most. Raises HeadFitError / ModelUnavailable / CorpusError with a
    plain message; a cancelled or failed fit leaves no folder behind. A saved head named `out` is refused before
    any work unless `overwrite`, which replaces it only once the new one is complete."""
    started = time.perf_counter()
    check_free_name(out, overwrite)
    steps = DEFAULT_STEPS if steps is None else check_count(steps, "--steps", minimum=1)
    lm = load_model(model, masked_lm=True)
    if lm.masked_lm is not None:
        raise HeadFitError(f"'{model}' already has a masked-word head: the Masked words page uses it as it is. "
                           "Fitting is for encoders without one (a sentence encoder, a fine-tuned run).")
    sentences = list(corpora.resolve(corpus, seed=seed, limit=limit, default_n=DEFAULT_PAIRS).sentences)
    if limit is not None:
        sentences = sentences[: check_count(limit, "--limit", minimum=1)]
    train, held = _split(sentences, seed)
    destination = artefacts.heads_dir() / out
    # Timed first (a few seconds), so the progress line weighs the two phases by their time and says what is left.
    estimate = estimate_fit(lm, train + held, steps)
    work = FitProgress(progress, estimate)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vocabulary: set[int] = set()
    vectors, labels, _ = encode_masked(lm, train, rng, progress=work.encoded, should_stop=should_stop,
                                       vocabulary=vocabulary)
    held_vectors, held_labels, held_groups = encode_masked(
        lm, held, np.random.default_rng(seed + 1), all_mask=True, progress=work.encoded, should_stop=should_stop,
        done_before=len(train))
    encode_seconds = time.perf_counter() - started
    if len(labels) == 0:
        raise HeadFitError("no word could be masked: the corpus has no words")

    mlm = frozen_encoder_mlm(lm)
    params = head_parameters(mlm)
    _init_bias_from_frequencies(mlm, labels, len(lm.tokenizer))
    head = _head_of(mlm)
    warmup = max(1, min(100, steps // 10))
    optimiser = torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps))
    generator = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    targets, narrowed, scored_pieces = training_softmax(mlm, vocabulary, labels)
    vectors, targets = vectors.to(lm.device), targets.to(lm.device)
    with narrowed:
        for step in range(steps):
            if step % 20 == 0:
                check_stop(should_stop)
            pick = torch.randint(len(targets), (min(BATCH_VECTORS, len(targets)),), generator=generator).to(lm.device)
            losses.append(train_step(head, optimiser, vectors[pick], targets[pick], schedule))
            if step % 50 == 0 or step == steps - 1:
                work.stepped(step + 1, losses[-1])

    with torch.no_grad():
        predicted = torch.cat([head(chunk).argmax(-1) for chunk in torch.split(held_vectors.to(lm.device), 4096)])
    held_np = held_labels.numpy()
    accuracy = whole_word_accuracy(predicted.cpu().numpy(), held_np, held_groups)
    constant_accuracy, constant_ids = best_constant(held_np, held_groups)
    measured = {"top1_accuracy": round(accuracy, 4), "constant_accuracy": round(constant_accuracy, 4),
                "constant_word": lm.tokenizer.decode(list(constant_ids)).strip(), "held_out_words": len(held_groups),
                "sentences": len(train), "steps": steps}
    check_stop(should_stop)
    mlm.config.architectures = [type(mlm).__name__]
    mlm.config.bertlens_fitted_on = model
    # Saved with the head, so the listing and every use can say it is weak (core.model.artefacts.head_warning).
    setattr(mlm.config, artefacts.FIT_KEY, measured)
    artefacts.heads_dir().mkdir(parents=True, exist_ok=True)
    with atomic_path(destination) as tmp:
        mlm.save_pretrained(str(tmp), safe_serialization=True)
        lm.tokenizer.save_pretrained(str(tmp))
    return HeadFit(
        name=out, path=str(destination), model=model, sentences=len(train), held_out=len(held),
        held_out_words=len(held_groups), vectors=int(len(labels)), steps=steps, top1_accuracy=measured["top1_accuracy"],
        constant_accuracy=measured["constant_accuracy"], constant_word=measured["constant_word"],
        loss=round(float(np.mean(losses[-100:])), 4), seconds=round(time.perf_counter() - started, 2),
        encode_seconds=round(encode_seconds, 2), estimated_seconds=round(estimate.seconds, 3),
        vocabulary=scored_pieces, warning=artefacts.weak_head_message(out, measured))


def about(seconds: float) -> str:
    """A duration as a person says it: "about 40 s", "about 12 min", "about 1 h 20 min"."""
    seconds = max(1, round(seconds))
    if seconds < 90:
        return f"about {seconds} s"
    minutes = round(seconds / 60)
    return f"about {minutes} min" if minutes < 60 else f"about {minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True)
class FitEstimate:
    """How long a fit of `steps` steps over `sentences` sentences should take here, from rates measured just now
    on this machine (measure_rates): encoding every sentence once, then the head's steps."""

    sentences: int
    steps: int
    sentences_per_second: float
    steps_per_second: float

    @property
    def encode_seconds(self) -> float:
        return self.sentences / self.sentences_per_second

    @property
    def train_seconds(self) -> float:
        return self.steps / self.steps_per_second

    @property
    def seconds(self) -> float:
        return self.encode_seconds + self.train_seconds

    def text(self) -> str:
        return (f"Estimated time: {about(self.seconds)} on this computer ({self.sentences:,} sentences to encode at "
                f"{self.sentences_per_second:.0f} a second, then {self.steps:,} training steps at "
                f"{self.steps_per_second:.1f} a second; measured just now, so other work on the machine counts).")


def measure_rates(lm: LoadedModel, sample: Sequence[str], probe_steps: int = PROBE_STEPS) -> tuple[float, float]:
    """(sentences encoded a second, head steps a second): a fit's two loops timed on `sample` and on
    `probe_steps` steps of a throw-away head, each after one untimed round (the first call of a kernel is slow)."""
    sample = list(sample)
    if not sample:
        raise HeadFitError("no sentences to time")
    encode_masked(lm, sample[:2], np.random.default_rng(0))
    started = time.perf_counter()
    vocabulary: set[int] = set()
    vectors, labels, _ = encode_masked(lm, sample, np.random.default_rng(0), vocabulary=vocabulary)
    encode_rate = len(sample) / max(time.perf_counter() - started, 1e-6)
    if len(labels) == 0:
        raise HeadFitError("no word could be masked: the corpus has no words")
    mlm = frozen_encoder_mlm(lm)
    head = _head_of(mlm)
    optimiser = torch.optim.AdamW(head_parameters(mlm), lr=LEARNING_RATE)
    # A real step's batch: BATCH_VECTORS vectors (drawn with replacement from the few the sample gave), scored over
    # about as many pieces as a fit's sentences hold (not known before they are read: the sample's few, padded
    # with other ids up to PROBE_VOCABULARY; the cost of a step is the count, not which pieces).
    pick = torch.randint(len(labels), (BATCH_VECTORS,), generator=torch.Generator().manual_seed(0))
    targets, narrowed, _ = training_softmax(mlm, vocabulary | set(range(min(len(lm.tokenizer), PROBE_VOCABULARY))),
                                            labels[pick])
    batch, targets = vectors[pick].to(lm.device), targets.to(lm.device)
    with narrowed:
        for round_ in range(probe_steps + 1):
            if round_ == 1:
                started = time.perf_counter()
            train_step(head, optimiser, batch, targets)
    return encode_rate, probe_steps / max(time.perf_counter() - started, 1e-6)


def estimate_fit(lm: LoadedModel, sentences: Sequence[str], steps: int) -> FitEstimate:
    """The time a fit over `sentences` for `steps` steps should take on this machine, timed on a few of them."""
    return FitEstimate(len(sentences), steps, *measure_rates(lm, list(sentences)[:PROBE_SENTENCES]))


class FitProgress:
    """One progress line for the whole fit: the phase in words with its own count, and the share of the whole
    in percent (progress(percent, 100, line): a job of unit "%"), weighted by the estimate's time per phase,
    with the time left. (It read "step 1/1000 … 9851 / 10850 steps": sentences and steps added up.)"""

    def __init__(self, progress: ProgressCallback, estimate: FitEstimate):
        self.progress, self.estimate, self.started = progress, estimate, time.perf_counter()

    def _report(self, done_seconds: float, line: str) -> None:
        if self.progress is None:
            return
        share = min(1.0, done_seconds / max(self.estimate.seconds, 1e-9))
        elapsed = time.perf_counter() - self.started
        # The time left at the pace seen so far (the estimate's until there is enough to go by).
        left = self.estimate.seconds - done_seconds if share < 0.02 else elapsed / share * (1 - share)
        self.progress(int(100 * share), 100, f"{line}; {about(left)} left" if share < 1 else line)

    def encoded(self, done: int, total: int | None = None, message: str | None = None) -> None:
        """encode_masked's progress callback: `done` sentences of the whole fit encoded."""
        self._report(done / self.estimate.sentences_per_second,
                     f"encoding sentence {done:,} of {self.estimate.sentences:,}")

    def stepped(self, step: int, loss: float) -> None:
        self._report(self.estimate.encode_seconds + step / self.estimate.steps_per_second,
                     f"training the head: step {step:,} of {self.estimate.steps:,}, loss {loss:.3f}")


def _head_of(mlm):
    """hidden [..., D] -> logits [..., V] through the adapter's map of each family's head."""
    return ModelAdapter.of(mlm).mlm_head


def fit_job(model: str, corpus: str, out: str, limit: int | None, steps: int | None, seed: int,
            progress: ProgressCallback = None, should_stop: StopCheck = None) -> HeadFit:
    """core.jobs work (a process job from the Masked words page): JSON-serialisable arguments only."""
    return fit_mlm_head(model, corpus, out, limit=limit, steps=steps, seed=seed, progress=progress,
                        should_stop=should_stop)


def run_fit(model: str, inputs, settings, progress: ProgressCallback = None, should_stop: StopCheck = None, *,
            overwrite: bool = False) -> HeadFit:
    """The contract's run of fit-mlm-head (core.analyses.masked.FitHeadSettings): `inputs` (corpus spec, saved
    name), or (corpus spec, saved name, sentence limit)."""
    corpus, out, *rest = inputs
    return fit_mlm_head(model, corpus, out, limit=rest[0] if rest else None, steps=settings.steps, seed=settings.seed,
                        progress=progress, should_stop=should_stop, overwrite=overwrite)
