"""Sparse features: a TopK sparse autoencoder (Gao et al. 2024) on one layer's token vectors, trained, saved,
read back and browsed.

x is `hidden_states[layer]` of transformers' output (0 = the embeddings) at the non-special tokens. With
W_enc [d, F], b_enc [F], W_dec [F, d], b_dec [d] and a scalar input_scale,

    z = ReLU(TopK_k(W_encᵀ((x / input_scale) − b_dec) + b_enc))     (the k largest pre-activations kept, the rest 0)
    x̂ = input_scale · (W_decᵀ z + b_dec)

Training follows the authors' code (openai/sparse_autoencoder, as SAELens 6 does for TopK): input_scale makes the
mean squared norm of x / input_scale equal d; b_dec starts at the geometric median of a sample of the scaled
vectors; W_dec's rows are random unit vectors and W_enc starts as their transpose; after every Adam step each
decoder row is renormalised to unit length, its gradient's component along the row removed first; features that
have not fired for `dead_after` tokens are "dead" and the AuxK loss (coefficient 1/32) asks the top k_aux = d/2 of
them to reconstruct what the live ones miss. The job saves its state (weights, Adam moments, step, the vectors
it trains on) in a dotted folder beside the SAE, so a cancelled or killed job resumes where it stopped; the SAE
folder itself (`sae.safetensors` + `config.json`) appears only when complete (core.files.atomic_path).
"""

from __future__ import annotations

# torch (and safetensors.torch) imported in functions: the CLI's --help and the pages' imports stay light.
import fcntl
import json
import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from safetensors.numpy import load_file, save_file

from core.contract import Analysis, setting
from core.files import atomic_path, remove, write_json_atomic
from core.analyses.neurons import ItemTokens, NeuronContext, NeuronIndex
from core.analyses.top_contexts import TopContexts, TopKAccumulator
from core.model import distributed
from core.model.adapter import ModelAdapter, NoMaskedLMHead
from core.model.artefacts import artefact_dir, find_artefact
from core.model.encoding import encode_share_batches
from core.model.loading import LoadedModel, ModelUnavailable, display_name, resolve, safetensors_problem
from core.progress import Cancelled, ProgressCallback, StopCheck, check_stop
from core.validation import MAX_COUNT

WEIGHTS = "sae.safetensors"
# The one saved format (issue 39): these tensors, these shapes, nothing else.
TENSORS = ("W_enc", "b_enc", "W_dec", "b_dec")
CONFIG_KEYS = ("k", "layer", "model", "d", "F", "input_scale")
AUX_COEFFICIENT = 1 / 32  # Gao et al. 2024, section A.2
# Defaults sized for a lesson (issue 47): a dataset spec without N ("snli:train") samples DEFAULT_PAIRS items, and
# DEFAULT_STEPS Adam steps of 1,024 tokens; on MiniLM layer 4 (F = 3,072, k = 32) they reach a held-out FVE over
# 0.85 with almost no dead features in minutes (bench/RESULTS.md), where the grammar's 500 pairs reached 0.763.
DEFAULT_PAIRS = 2000
DEFAULT_STEPS = 400
LOW_FVE = 0.8  # a held-out fraction of variance explained under this is said as a warning beside the figure
HISTOGRAM_BINS = 30


class SaeError(ValueError):
    """Bad input for an autoencoder (a layer the model lacks, an SAE of another model): the message says what to do."""


@dataclass(frozen=True)
class SparseAutoencoder:
    """A TopK sparse autoencoder. Arrays float32: W_enc [d, F], b_enc [F], W_dec [F, d], b_dec [d]. `model` is
    the reference of the model whose `hidden_states[layer]` it reads; `name` its saved folder's name ("" unsaved)."""

    W_enc: np.ndarray
    b_enc: np.ndarray
    W_dec: np.ndarray
    b_dec: np.ndarray
    k: int
    layer: int
    model: str
    input_scale: float
    name: str = ""

    @property
    def d(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def F(self) -> int:  # noqa: N802 - the paper's and the saved config's name
        return int(self.W_enc.shape[1])

    def config(self) -> dict:
        return {"k": int(self.k), "layer": int(self.layer), "model": self.model, "d": self.d, "F": self.F,
                "input_scale": float(self.input_scale)}

    def encode(self, x: np.ndarray) -> np.ndarray:
        """x [N, d] -> z [N, F] float32, at most k non-zero per row."""
        import torch

        with torch.no_grad():
            return _encode(self._tensors(), torch.as_tensor(np.asarray(x, dtype=np.float32)), self.k,
                           self.input_scale).numpy()

    def decode(self, z: np.ndarray) -> np.ndarray:
        """z [N, F] -> x̂ [N, d] float32."""
        return (self.input_scale * (np.asarray(z, dtype=np.float32) @ self.W_dec + self.b_dec)).astype(np.float32)

    def _tensors(self) -> dict:
        import torch

        return {name: torch.from_numpy(np.ascontiguousarray(getattr(self, name))) for name in TENSORS}


def _encode(weights: dict, x, k: int, input_scale: float):
    """The encoding formula in torch (the one place it is written): x [N, d] -> z [N, F]."""
    import torch

    pre = (x / input_scale - weights["b_dec"]) @ weights["W_enc"] + weights["b_enc"]
    top = torch.topk(pre, k, dim=-1)
    return torch.zeros_like(pre).scatter_(-1, top.indices, torch.relu(top.values))


# --- saved folders ----------------------------------------------------------------------------------------------
def save_sae(sae: SparseAutoencoder, name: str) -> Path:
    """Write artefact_dir("sae")/NAME (sae.safetensors + config.json) in one step; returns the folder."""
    check_name(name)
    folder = artefact_dir("sae") / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        save_file({t: np.ascontiguousarray(getattr(sae, t), dtype=np.float32) for t in TENSORS}, str(tmp / WEIGHTS))
        (tmp / "config.json").write_text(json.dumps(sae.config(), indent=2))
    return folder


def check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip():
        raise SaeError(f"{name!r} is not a usable name for a saved autoencoder: letters, digits, '-', '_' "
                       "(no '/', not starting with '.')")


def check_free_name(name: str, overwrite: bool = False) -> None:
    """SaeError, before any work, when an SAE of that name is saved already and `overwrite` is not asked for."""
    folder = artefact_dir("sae") / name
    if folder.exists() and not overwrite:
        raise SaeError(f"an autoencoder named '{name}' is saved already ({folder}): pick another name, or "
                       "replace it (sae-train --overwrite; the old one stays until the new one is saved)")


@contextmanager
def training_lock(name: str) -> Iterator[None]:
    """Held while this process trains `name` (an flock on saes/.NAME.lock, dropped by the kernel if it dies), so
    a second training of the same name, in this process or another, is refused at once with SaeError rather
    than both writing one state folder. The empty lock file stays: removing it would let a third process lock a
    new file while the second still holds the old one."""
    folder = artefact_dir("sae")
    folder.mkdir(parents=True, exist_ok=True)
    handle = os.open(folder / f".{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SaeError(f"another training of '{name}' is running: wait for it to finish, or pick another "
                           "name") from None
        yield
    finally:
        os.close(handle)  # closing drops the lock


def load_sae(name: str) -> SparseAutoencoder:
    """A saved SAE by name (or folder path); SaeError when its file does not hold exactly the saved format."""
    artefact = find_artefact("sae", name)
    folder = Path(artefact.path)
    config = json.loads((folder / "config.json").read_text())
    missing = [key for key in CONFIG_KEYS if key not in config]
    problem = safetensors_problem(folder / WEIGHTS)  # safetensors' own errors are tracebacks
    if problem:
        raise SaeError(f"{folder / WEIGHTS} {problem}")
    weights = load_file(str(folder / WEIGHTS))
    if missing or sorted(weights) != sorted(TENSORS):
        raise SaeError(f"{folder} is not a BERT Lens SAE: config.json lacks {missing}, sae.safetensors holds "
                       f"{sorted(weights)} (expected {list(TENSORS)})")
    d, F = int(config["d"]), int(config["F"])
    expected = {"W_enc": (d, F), "b_enc": (F,), "W_dec": (F, d), "b_dec": (d,)}
    wrong = {t: weights[t].shape for t in TENSORS if weights[t].shape != expected[t]}
    if wrong:
        raise SaeError(f"{folder}: shapes {wrong} do not match d={d}, F={F} of its config.json")
    return SparseAutoencoder(**{t: weights[t].astype(np.float32) for t in TENSORS}, k=int(config["k"]),
                             layer=int(config["layer"]), model=str(config["model"]),
                             input_scale=float(config["input_scale"]), name=artefact.name)


def check_model(sae: SparseAutoencoder, lm: LoadedModel, *, same_model: bool = True) -> None:
    """SaeError unless `lm` gives vectors this SAE reads: the same width and the layer; with same_model, the very
    model it was trained on (a fine-tuned run of it is compared with same_model=False)."""
    label = sae.name or "this SAE"
    if same_model and not same_folder(lm, sae.model):
        raise SaeError(f"{label} was trained on {display_name(sae.model)} (layer {sae.layer}), not on "
                       f"{display_name(lm.ref)}: pick that model, or train an SAE on this one.")
    if lm.hidden_size != sae.d or sae.layer > lm.num_layers:
        raise SaeError(f"{label} reads {sae.d}-dimensional vectors of layer {sae.layer}; {display_name(lm.ref)} has "
                       f"{lm.hidden_size} dimensions and layers 0 to {lm.num_layers}.")


def same_folder(lm: LoadedModel, ref: str) -> bool:
    """True when `ref` names the model `lm` is (the same reference, or one that resolves to its folder)."""
    if lm.ref == ref:
        return True
    try:
        folder = resolve(ref)[1]
    except ModelUnavailable:
        return False
    return folder is not None and Path(folder).resolve() == Path(lm.path).resolve()


# --- token vectors ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenVectors:
    """One layer's vectors at the non-special tokens of a corpus. vectors [N, d] float32; example_ids [N] int
    (index into `texts`); positions [N] int (the token's index in its input, special tokens counted); tokens [N]
    the word pieces; texts [S] the inputs as written; items [S] each input as the model read it (its words, for
    contexts); dropped [S] word pieces truncation cut off each input."""

    vectors: np.ndarray
    example_ids: np.ndarray
    positions: np.ndarray
    tokens: tuple[str, ...]
    texts: tuple[str, ...]
    items: tuple[ItemTokens, ...]
    dropped: tuple[int, ...]


def layer_vectors(lm: LoadedModel, inputs: Sequence, layer: int, *, batch_size: int = 32,
                  progress: ProgressCallback = None, should_stop: StopCheck = None) -> TokenVectors:
    """hidden_states[layer] at every non-special token of `inputs` (text or (a, b) pairs). Under torchrun /
    accelerate each rank encodes its share and every rank gets the whole set back, in input order."""
    if not 0 <= layer <= lm.num_layers:
        raise SaeError(f"{display_name(lm.ref)} has layers 0 (embeddings) to {lm.num_layers}; layer {layer} does not "
                       "exist.")
    inputs = list(inputs)
    mine: dict[int, tuple[np.ndarray, np.ndarray, ItemTokens, int]] = {}
    for batch in encode_share_batches(lm, inputs, batch_size=batch_size, attentions=False, progress=progress,
                                      should_stop=should_stop):
        hidden = batch.hidden_states[layer].float().cpu().numpy()
        for row, (index, item) in enumerate(zip(batch.indices, batch.items)):
            keep = np.flatnonzero(~np.asarray(item.special_mask, dtype=bool))
            mine[index] = (hidden[row, keep], keep, ItemTokens(tuple(item.tokens), tuple(int(w) for w in item.word_ids),
                                                               tuple(item.words)), item.n_tokens_full - item.n_tokens)
    # Several ranks: each encoded its share; every rank gets all inputs back, in order (core.model.distributed).
    gathered = distributed.current().gather_indexed(len(inputs), mine)
    dim = lm.hidden_size
    vectors = np.concatenate([v for v, _, _, _ in gathered] or [np.zeros((0, dim))]).astype(np.float32)
    example_ids = np.concatenate([np.full(len(p), i) for i, (_, p, _, _) in enumerate(gathered)] or [[]]).astype(np.int64)
    positions = np.concatenate([p for _, p, _, _ in gathered] or [[]]).astype(np.int64)
    tokens = tuple(item.tokens[p] for _, kept, item, _ in gathered for p in kept)
    return TokenVectors(vectors, example_ids, positions, tokens, tuple(_text_of(item) for item in inputs),
                        tuple(item for _, _, item, _ in gathered), tuple(int(cut) for _, _, _, cut in gathered))


def _text_of(item) -> str:
    return " ‖ ".join(item) if isinstance(item, tuple) else str(item)


# --- training ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainSettings:
    """How an SAE is trained. batch: tokens per step; steps: Adam steps (0: `epochs` passes over the training
    tokens); dead_after: tokens without firing before a feature counts as dead for AuxK; held_out: the share of
    inputs (the last ones, after a seeded shuffle) kept out of training for the quality figures; checkpoint_every:
    seconds between saved states (resume). features and k have no default: every front end asks for them (the
    declaration's None; check() names them when left out). The fields without `setting` are kept as they are."""

    features: int = setting(None, "F, e.g. 8 × the model's width", type="int", low=1, high=MAX_COUNT, url=None)
    k: int = setting(None, "features kept per token (e.g. 32)", type="int", low=1, high=MAX_COUNT, url=None)
    batch: int = setting(1024, "tokens per step", low=1, high=MAX_COUNT, url=None)
    steps: int = setting(DEFAULT_STEPS, "Adam steps (0: --epochs passes over the training tokens)", low=0,
                         high=MAX_COUNT, url=None)
    epochs: float = setting(8.0, "passes over the training tokens when steps is 0", low=1e-6, high=1e6, url=None)
    lr: float = setting(1e-3, "Adam's learning rate", low=1e-9, high=10.0, url=None)
    dead_after: int = 100_000
    held_out: float = 0.1
    seed: int = setting(0, "training and corpus sample seed", low=0, high=MAX_COUNT, url=None)
    checkpoint_every: float = 30.0

    def check(self, d: int | None = None) -> None:
        if self.features is None or self.k is None:
            raise SaeError("give the number of features and k (sae-train --features F --k K)")
        if self.features < 1 or self.k < 1:
            raise SaeError(f"features ({self.features}) and k ({self.k}) must be at least 1")
        if self.k > self.features:
            raise SaeError(f"k ({self.k}) cannot exceed the number of features ({self.features})")
        if not 0 < self.held_out < 1:
            raise SaeError(f"held_out must be between 0 and 1 (got {self.held_out})")


@dataclass(frozen=True)
class Quality:
    """How well an SAE reconstructs a set of vectors: fve (fraction of variance explained, 1 − Σ‖x − x̂‖² /
    Σ‖x − mean(x)‖²), dead_fraction (features that fire on none of the tokens), mean_active (features > 0 per
    token, at most k), n_tokens."""

    fve: float
    dead_fraction: float
    mean_active: float
    n_tokens: int

    def to_json(self) -> dict:
        return {"fve": self.fve, "dead_fraction": self.dead_fraction, "mean_active": self.mean_active,
                "n_tokens": self.n_tokens, "warning": self.warning}

    @property
    def warning(self) -> str | None:
        """Said beside the figures when the reconstruction is poor: an FVE under LOW_FVE (or none measured)."""
        if self.fve >= LOW_FVE:
            return None
        return (f"the autoencoder explains only {self.fve:.1%} of the variance of {self.n_tokens:,} held-out word "
                f"pieces (under {LOW_FVE:.0%}): its features leave much of what the layer holds out. Train on more "
                f"sentences or for more steps (the defaults: {DEFAULT_PAIRS:,} pairs, {DEFAULT_STEPS} steps).")


@dataclass(frozen=True)
class TrainedSae:
    """A finished training: the saved folder (`name`, `path`), what it reads (`model`, `layer`, d, F, k), the
    held-out `quality`, steps and tokens it trained on, `seconds` of this run, `resumed_from` (the step a saved
    state gave; 0 for a fresh start), and `losses` [S] (normalised MSE every `loss_every` steps)."""

    name: str
    path: str
    model: str
    layer: int
    d: int
    F: int
    k: int
    steps: int
    train_tokens: int
    quality: Quality
    seconds: float
    resumed_from: int
    losses: tuple[float, ...]
    loss_every: int
    corpus: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "path": self.path, "model": self.model, "layer": self.layer, "d": self.d,
                "F": self.F, "k": self.k, "steps": self.steps, "train_tokens": self.train_tokens,
                **self.quality.to_json(), "seconds": self.seconds, "resumed_from": self.resumed_from,
                "losses": list(self.losses), "loss_every": self.loss_every, "corpus": self.corpus}


def state_dir(name: str) -> Path:
    """Where a training job keeps what it needs to resume (dotted: never listed as an SAE)."""
    return artefact_dir("sae") / f".{name}.training"


def measure(sae: SparseAutoencoder, vectors: np.ndarray, chunk: int = 4096) -> Quality:
    """Quality of `sae` on vectors [N, d]."""
    x = np.asarray(vectors, dtype=np.float32)
    if not len(x):
        return Quality(float("nan"), float("nan"), 0.0, 0)
    mean = x.mean(axis=0, dtype=np.float64)
    error = total = active = 0.0
    fired = np.zeros(sae.F, dtype=bool)
    for start in range(0, len(x), chunk):
        part = x[start:start + chunk]
        z = sae.encode(part)
        error += float(((part - sae.decode(z)).astype(np.float64) ** 2).sum())
        total += float(((part - mean) ** 2).sum())
        on = z > 0
        fired |= on.any(axis=0)
        active += float(on.sum())
    return Quality(1.0 - error / total, float(1.0 - fired.mean()), active / len(x), len(x))


def train_sae(lm: LoadedModel, inputs: Sequence, layer: int, settings: TrainSettings, name: str, *,
              corpus: str = "", batch_size: int = 32, progress: ProgressCallback = None,
              should_stop: StopCheck = None, overwrite: bool = False) -> TrainedSae:
    """Encode `inputs` (each rank its share), then train a TopK SAE on rank 0 and save it as `name`. Resumes from
    the state a cancelled or killed run of the same name and settings left (state_dir), and removes that state
    once the SAE is saved. progress counts encoded inputs, then steps. A saved SAE of that name is refused before
    any work (SaeError) unless `overwrite`, which replaces it only once the new one is complete; so is a second
    training of the same name while one runs."""
    check_name(name)
    settings.check()
    check_free_name(name, overwrite)
    if not distributed.current().is_main:
        return _train_sae(lm, inputs, layer, settings, name, corpus, batch_size, progress, should_stop)
    with training_lock(name):
        check_free_name(name, overwrite)  # again: the training that held the lock may just have saved it
        return _train_sae(lm, inputs, layer, settings, name, corpus, batch_size, progress, should_stop)


def _train_sae(lm: LoadedModel, inputs: Sequence, layer: int, settings: TrainSettings, name: str, corpus: str,
               batch_size: int, progress: ProgressCallback, should_stop: StopCheck) -> TrainedSae:
    started = time.monotonic()
    fingerprint = run_fingerprint(lm.ref, layer, corpus, len(inputs), settings)
    state = _read_state(name, fingerprint)
    if state is None:
        vectors = layer_vectors(lm, inputs, layer, batch_size=batch_size, should_stop=should_stop,
                                progress=None if progress is None else
                                (lambda done, total: progress(done, total, "encoding the corpus")))
        if not distributed.current().is_main:
            return None  # type: ignore[return-value]  # the other ranks only encode
        train, held = split_vectors(vectors, settings)
        if len(train) < settings.k or not len(held):
            raise SaeError(f"{len(vectors.vectors)} token vectors are too few to train and measure an SAE: "
                           "give a larger corpus.")
        write_vectors(name, fingerprint, train, held)
        state = _read_state(name, fingerprint)
    elif not distributed.current().is_main:
        return None  # type: ignore[return-value]
    sae, steps, losses, loss_every = _train(state, lm.ref, layer, settings, name, progress, should_stop)
    quality = measure(sae, state["held"])
    folder = save_sae(sae, name)
    remove(state_dir(name))
    return TrainedSae(name=name, path=str(folder), model=lm.ref, layer=int(layer), d=sae.d, F=sae.F, k=sae.k,
                      steps=steps, train_tokens=int(len(state["train"])), quality=quality,
                      seconds=time.monotonic() - started, resumed_from=int(state.get("step", 0)),
                      losses=tuple(losses), loss_every=loss_every, corpus=corpus)


def run_fingerprint(model: str, layer: int, corpus: str, n_inputs: int, settings: TrainSettings) -> dict:
    """What a saved training state must match to be resumed."""
    return {"model": model, "layer": int(layer), "corpus": corpus, "n_inputs": int(n_inputs),
            "settings": {k: v for k, v in settings.__dict__.items() if k != "checkpoint_every"}}


def split_vectors(vectors: TokenVectors, settings: TrainSettings) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out token vectors, split by input (a sentence's tokens stay together)."""
    n = len(vectors.texts)
    order = np.random.default_rng(settings.seed).permutation(n)
    n_held = max(1, int(round(n * settings.held_out))) if n > 1 else 0
    held_inputs = np.zeros(n, dtype=bool)
    held_inputs[order[n - n_held:]] = True
    held = held_inputs[vectors.example_ids]
    return vectors.vectors[~held], vectors.vectors[held]


def write_vectors(name: str, fingerprint: dict, train: np.ndarray, held: np.ndarray) -> None:
    folder = state_dir(name)
    if folder.exists():
        remove(folder)  # a state of other settings: this run starts afresh
    folder.mkdir(parents=True)
    with atomic_path(folder / "vectors.safetensors") as tmp:
        save_file({"train": np.ascontiguousarray(train), "held": np.ascontiguousarray(held)}, str(tmp))
    write_json_atomic(folder / "state.json", {"fingerprint": fingerprint, "step": 0})


def _read_state(name: str, fingerprint: dict) -> dict | None:
    """The saved vectors (and weights, Adam moments, step when a run got that far) of a run with the same
    fingerprint; None when there is none."""
    folder = state_dir(name)
    try:
        meta = json.loads((folder / "state.json").read_text())
        vectors = load_file(str(folder / "vectors.safetensors"))
    except (OSError, ValueError):
        return None
    if meta.get("fingerprint") != json.loads(json.dumps(fingerprint)):
        return None
    state = {"train": vectors["train"], "held": vectors["held"], "step": int(meta.get("step", 0)),
             "losses": list(meta.get("losses", [])), "input_scale": meta.get("input_scale")}
    if state["step"] > 0 and (folder / "weights.safetensors").is_file():
        state["weights"] = load_file(str(folder / "weights.safetensors"))
    return state


def _save_progress(name: str, meta: dict, tensors: dict) -> None:
    """Weights and optimiser state first, then state.json naming the step: a kill between the two leaves the older
    step's json with newer weights, which resume treats as that step (a few steps repeated, nothing lost)."""
    from safetensors.torch import save_file as save_tensors

    folder = state_dir(name)
    with atomic_path(folder / "weights.safetensors") as tmp:
        save_tensors({key: value.detach().contiguous().cpu() for key, value in tensors.items()}, str(tmp))
    old = json.loads((folder / "state.json").read_text())
    write_json_atomic(folder / "state.json", {**old, **meta})


def geometric_median(points, iterations: int = 30):
    """Weiszfeld's iteration (the authors' b_dec initialisation)."""
    import torch

    guess = points.mean(dim=0)
    for _ in range(iterations):
        weights = 1.0 / torch.clamp(torch.linalg.vector_norm(points - guess, dim=1), min=1e-8)
        guess = (weights[:, None] * points).sum(dim=0) / weights.sum()
    return guess


def _train(state: dict, model: str, layer: int, settings: TrainSettings, name: str, progress: ProgressCallback,
           should_stop: StopCheck) -> tuple[SparseAutoencoder, int, list[float], int]:
    import torch

    generator = torch.Generator().manual_seed(settings.seed)
    train = torch.from_numpy(state["train"])
    n, d = train.shape
    F, k = settings.features, settings.k
    input_scale = float(state["input_scale"] or math.sqrt(float((train.double() ** 2).sum(dim=1).mean()) / d))
    steps = settings.steps or max(1, int(math.ceil(settings.epochs * n / settings.batch)))
    aux_k = min(max(d // 2, 1), F)
    params = _initial_weights(train / input_scale, F, generator)
    optimiser = torch.optim.Adam(params.values(), lr=settings.lr, betas=(0.9, 0.999), eps=6.25e-10)
    since_fired = torch.zeros(F, dtype=torch.int64)
    start, losses = state["step"], list(state["losses"])
    if "weights" in state:
        saved = {key: torch.from_numpy(value) for key, value in state["weights"].items()}
        with torch.no_grad():
            for key, value in params.items():
                value.copy_(saved[key])
        since_fired = saved["since_fired"].to(torch.int64)
        for key, value in params.items():  # Adam's own state layout, so the next step continues the moments
            optimiser.state[value] = {"step": torch.tensor(float(start)),
                                      "exp_avg": saved[f"adam.{key}.exp_avg"].clone(),
                                      "exp_avg_sq": saved[f"adam.{key}.exp_avg_sq"].clone()}
    loss_every = max(1, steps // 200)
    last_save = time.monotonic()

    def snapshot(step: int) -> None:
        tensors = {**params, "since_fired": since_fired}
        for key, value in params.items():
            slot = optimiser.state.get(value, {})
            tensors[f"adam.{key}.exp_avg"] = slot.get("exp_avg", torch.zeros_like(value))
            tensors[f"adam.{key}.exp_avg_sq"] = slot.get("exp_avg_sq", torch.zeros_like(value))
        _save_progress(name, {"step": step, "losses": losses, "input_scale": input_scale}, tensors)

    step = start
    try:
        for step in range(start, steps):
            check_stop(should_stop)
            # Each step's batch depends on (seed, step) only, so a resumed run draws what an unbroken one would.
            generator.manual_seed(settings.seed * 1_000_003 + step)
            batch = train[torch.randint(0, n, (min(settings.batch, n),), generator=generator)] / input_scale
            loss, recon_loss, fired = _loss(params, batch, k, aux_k, since_fired >= settings.dead_after)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            _drop_parallel_gradient(params["W_dec"])
            torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
            optimiser.step()
            with torch.no_grad():
                params["W_dec"] /= torch.linalg.vector_norm(params["W_dec"], dim=1, keepdim=True).clamp(min=1e-8)
            since_fired += len(batch)
            since_fired[fired] = 0
            if step % loss_every == 0:
                losses.append(float(recon_loss))
            if progress is not None:
                progress(step + 1, steps, "training the autoencoder")
            if time.monotonic() - last_save > settings.checkpoint_every:
                snapshot(step + 1)
                last_save = time.monotonic()
    except Cancelled:
        snapshot(step)  # this step's update was not made: resume redoes it
        raise
    weights = {key: value.detach().numpy().copy() for key, value in params.items()}
    return (SparseAutoencoder(**weights, k=k, layer=int(layer), model=model, input_scale=input_scale, name=name),
            steps, losses, loss_every)


def _initial_weights(scaled, F: int, generator) -> dict:
    import torch

    d = scaled.shape[1]
    W_dec = torch.randn(F, d, generator=generator)
    W_dec /= torch.linalg.vector_norm(W_dec, dim=1, keepdim=True)
    sample = scaled[torch.randperm(len(scaled), generator=generator)[:32768]].double()
    return {"W_enc": W_dec.T.clone().requires_grad_(), "b_enc": torch.zeros(F, requires_grad=True),
            "W_dec": W_dec.requires_grad_(), "b_dec": geometric_median(sample).float().requires_grad_()}


def _loss(params: dict, x, k: int, aux_k: int, dead):
    """Normalised MSE of the reconstruction, plus AUX_COEFFICIENT × the AuxK loss when features are dead;
    returns (loss, reconstruction loss, [F] bool features that fired in this batch)."""
    import torch

    pre = (x - params["b_dec"]) @ params["W_enc"] + params["b_enc"]
    top = torch.topk(pre, k, dim=-1)
    values = torch.relu(top.values)
    z = torch.zeros_like(pre).scatter(-1, top.indices, values)
    recon = z @ params["W_dec"] + params["b_dec"]
    variance = ((x - x.mean(dim=0)) ** 2).sum(dim=1).mean()
    recon_loss = ((recon - x) ** 2).sum(dim=1).mean() / variance
    fired = torch.zeros(pre.shape[1], dtype=torch.bool)
    fired[top.indices[values > 0]] = True
    loss = recon_loss
    n_dead = int(dead.sum())
    if n_dead:
        residual = (x - recon).detach()
        dead_pre = pre.masked_fill(~dead, float("-inf"))
        aux = torch.topk(dead_pre, min(aux_k, n_dead), dim=-1)
        aux_z = torch.zeros_like(pre).scatter(-1, aux.indices, torch.relu(aux.values))
        aux_recon = aux_z @ params["W_dec"]
        aux_loss = ((aux_recon - residual) ** 2).sum(dim=1).mean() / ((residual - residual.mean(dim=0)) ** 2).sum(
            dim=1).mean().clamp(min=1e-12)
        loss = loss + AUX_COEFFICIENT * torch.nan_to_num(aux_loss, nan=0.0)
    return loss, recon_loss.detach(), fired


def _drop_parallel_gradient(W_dec) -> None:
    """Remove each decoder row's gradient component along the row (its length is fixed at 1 after the step)."""
    if W_dec.grad is not None:
        W_dec.grad -= (W_dec.grad * W_dec.data).sum(dim=1, keepdim=True) * W_dec.data


# --- reading a sentence -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SentenceFeatures:
    """The features of one input: tokens [T] its non-special word pieces (positions [T] their index among all
    tokens); activations [T, F'] of the features that fire anywhere in it, `features` [F'] (ranked by their
    largest activation, highest first); reconstruction_fve on these T vectors."""

    sae: str
    model: str
    layer: int
    text: str
    tokens: tuple[str, ...]
    positions: np.ndarray
    features: np.ndarray
    activations: np.ndarray
    reconstruction_fve: float

    def to_json(self) -> dict:
        """{"sae", "model", "layer", "text", "tokens", "positions", "features": [{"feature", "max", "token"
        (the position among `tokens` of its max), "tokens_active"}], "active": [per token [{"feature",
        "value"}], highest first], "reconstruction_fve"}."""
        ranked = [{"feature": int(f), "max": float(column.max()), "token": int(column.argmax()),
                   "tokens_active": int((column > 0).sum())}
                  for f, column in zip(self.features, self.activations.T)]
        active = []
        for row in self.activations:
            on = np.flatnonzero(row > 0)
            on = on[np.argsort(-row[on], kind="stable")]
            active.append([{"feature": int(self.features[j]), "value": float(row[j])} for j in on])
        return {"sae": self.sae, "model": self.model, "layer": self.layer, "text": self.text,
                "tokens": list(self.tokens), "positions": self.positions.tolist(), "features": ranked,
                "active": active, "reconstruction_fve": self.reconstruction_fve}


def sentence_features(sae: SparseAutoencoder, lm: LoadedModel, text: str, text_b: str | None = None) -> SentenceFeatures:
    """Which features fire on one input (a pair with text_b), from its hidden_states[sae.layer]."""
    check_model(sae, lm)
    item = (text, text_b) if text_b else text
    vectors = layer_vectors(lm, [item], sae.layer)
    z = sae.encode(vectors.vectors)
    firing = np.flatnonzero(z.max(axis=0, initial=0.0) > 0)
    firing = firing[np.argsort(-z[:, firing].max(axis=0), kind="stable")]
    x = vectors.vectors
    spread = float(((x - x.mean(axis=0)) ** 2).sum())
    fve = 1.0 - float(((x - sae.decode(z)) ** 2).sum()) / spread if spread > 0 else float("nan")
    return SentenceFeatures(sae=sae.name, model=sae.model, layer=sae.layer, text=_text_of(item), tokens=vectors.tokens,
                            positions=vectors.positions, features=firing, activations=z[:, firing], reconstruction_fve=fve)


# --- a feature over a corpus ------------------------------------------------------------------------------------
TOP_CONTEXTS = 10


@dataclass(frozen=True, eq=False)
class FeatureAtlas:
    """Every feature of an SAE over a corpus (F features, N tokens, M non-zero activations):

    top            TopContexts [F, TOP_CONTEXTS] (core.analyses.top_contexts): example = input, position = token
    firing_rate    [F] share of the corpus's non-special tokens where the feature is > 0
    mean, std      [F] its mean and standard deviation over those tokens (zeros included)
    feature_index  [M] int and values [M] float32: every non-zero activation (for the histograms)
    items          [S] the inputs as the model read them (contexts); dropped [S] pieces truncation cut off
    """

    sae: str
    model: str
    layer: int
    corpus: str
    digest: str
    top: TopContexts
    firing_rate: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    feature_index: np.ndarray
    values: np.ndarray
    items: tuple[ItemTokens, ...]
    dropped: tuple[int, ...]
    max_length: int

    @property
    def n_tokens(self) -> int:
        return self.top.n_tokens

    @property
    def max_activation(self) -> np.ndarray:
        """[F] each feature's highest activation (0 for a feature that never fires)."""
        return np.maximum(self.top.values[:, 0], 0.0)

    def by_firing(self) -> np.ndarray:
        """Features, most often firing first (ties: lower index first)."""
        return np.lexsort((np.arange(len(self.firing_rate)), -self.firing_rate))

    def contexts(self, feature: int, k: int | None = None) -> tuple[NeuronContext, ...]:
        """The feature's top contexts where it fires (value > 0), best first; the neurons tab's contexts, read
        through its NeuronIndex (same words either side)."""
        index = NeuronIndex(self.model, self.corpus, self.digest, self.layer, self.top, self.mean, self.std,
                            self.firing_rate, self.items, self.dropped, self.max_length)
        return tuple(c for c in index.contexts(feature, k) if c.value > 0)

    def histogram(self, feature: int, bins: int = HISTOGRAM_BINS) -> "Histogram":
        """The feature's non-zero activations binned (numpy's equal-width bins over their range)."""
        values = self.values[self.feature_index == feature]
        if not len(values):
            return Histogram(int(feature), np.zeros(0, np.int64), np.zeros(0), self.n_tokens)
        counts, edges = np.histogram(values, bins=bins)
        return Histogram(int(feature), counts.astype(np.int64), edges.astype(np.float64), self.n_tokens - len(values))

    def feature_json(self, feature: int, k: int | None = None) -> dict:
        return {"feature": int(feature), "firing_rate": float(self.firing_rate[feature]),
                "max": float(self.max_activation[feature]), "mean": float(self.mean[feature]),
                "contexts": [c.__dict__ for c in self.contexts(feature, k)]}

    def to_json(self) -> dict:
        return {"sae": self.sae, "model": self.model, "layer": self.layer, "corpus": self.corpus,
                "n_tokens": self.n_tokens, "firing_rate": self.firing_rate.tolist(),
                "max_activation": self.max_activation.tolist()}


@dataclass(frozen=True)
class Histogram:
    """counts [B] of one feature's non-zero activations in bins with edges [B+1]; zeros: tokens where it is 0."""

    feature: int
    counts: np.ndarray
    edges: np.ndarray
    zeros: int


def feature_atlas(sae: SparseAutoencoder, lm: LoadedModel, inputs: Sequence, *, corpus: str = "", digest: str = "",
                  same_model: bool = True, batch_size: int = 32, progress: ProgressCallback = None,
                  should_stop: StopCheck = None) -> FeatureAtlas:
    """Encode `inputs` with `lm` and the SAE; same_model=False reads a fine-tuned run of the SAE's model."""
    check_model(sae, lm, same_model=same_model)
    vectors = layer_vectors(lm, inputs, sae.layer, batch_size=batch_size, progress=progress, should_stop=should_stop)
    if not len(vectors.vectors):
        raise SaeError(f"{corpus or 'the corpus'} has no word pieces to read (only special tokens)")
    top = TopKAccumulator(sae.F, TOP_CONTEXTS)
    total, squares = np.zeros(sae.F), np.zeros(sae.F)
    feature_index, values = [], []
    for start in range(0, len(vectors.vectors), 2048):
        check_stop(should_stop)
        z = sae.encode(vectors.vectors[start:start + 2048])
        top.add(z, vectors.example_ids[start:start + 2048], vectors.positions[start:start + 2048])
        wide = z.astype(np.float64)
        total += wide.sum(axis=0)
        squares += (wide ** 2).sum(axis=0)
        rows, cols = np.nonzero(z)
        feature_index.append(cols)
        values.append(z[rows, cols])
    n = len(vectors.vectors)
    feature_index = np.concatenate(feature_index).astype(np.int64)
    mean = total / n
    return FeatureAtlas(sae=sae.name, model=lm.ref, layer=sae.layer, corpus=corpus, digest=digest, top=top.result(),
                        firing_rate=np.bincount(feature_index, minlength=sae.F) / n, mean=mean,
                        std=np.sqrt(np.maximum(squares / n - mean ** 2, 0.0)), feature_index=feature_index,
                        values=np.concatenate(values).astype(np.float32), items=vectors.items,
                        dropped=vectors.dropped, max_length=lm.max_length)


@dataclass(frozen=True)
class LensTokens:
    """The masked-word head read on one feature: the words whose logit rises most when the feature is switched on
    at `activation` (head(x̂ with only that feature) − head(x̂ of no feature), x̂ decoded by the SAE). tokens [n],
    logit_change [n], highest first."""

    feature: int
    activation: float
    head_model: str
    tokens: tuple[str, ...]
    logit_change: np.ndarray

    def to_json(self) -> dict:
        return {"feature": self.feature, "activation": self.activation, "head_model": self.head_model,
                "tokens": [{"token": t, "logit_change": float(v)} for t, v in zip(self.tokens, self.logit_change)]}


def lens_tokens(sae: SparseAutoencoder, head_lm: LoadedModel, feature: int, *, activation: float | None = None,
                top: int = 10) -> LensTokens:
    """The MLM-lens words of a feature's decoder direction. head_lm: a model loaded with masked_lm=True whose
    head reads sae.d-dimensional vectors (the SAE's model, or a head fitted on it); a model without a head raises
    core.model.adapter.NoMaskedLMHead, whose message the caller extends with `fit-mlm-head`. activation: the
    feature's value (default sqrt(d): the size of a typical scaled token vector)."""
    import torch

    if not 0 <= feature < sae.F:
        raise SaeError(f"feature {feature} does not exist: this SAE has features 0 to {sae.F - 1}")
    if head_lm.masked_lm is None:
        raise NoMaskedLMHead(f"{display_name(head_lm.ref)} has no masked-word head to read features with: fit one "
                             f"with python -m core fit-mlm-head --model {head_lm.ref} --corpus snli --out NAME, then "
                             "pick it as the head.")
    if head_lm.hidden_size != sae.d:
        raise SaeError(f"the head of {display_name(head_lm.ref)} reads {head_lm.hidden_size} dimensions; this SAE "
                       f"decodes {sae.d}")
    value = float(activation if activation is not None else math.sqrt(sae.d))
    z = np.zeros((2, sae.F), dtype=np.float32)
    z[1, feature] = value
    decoded = torch.from_numpy(sae.decode(z)).to(head_lm.device)
    with torch.no_grad():
        logits = ModelAdapter.of(head_lm.masked_lm).mlm_logits(decoded).float().cpu().numpy()
    change = logits[1] - logits[0]
    order = np.argsort(-change, kind="stable")[:top]
    words = tuple(head_lm.tokenizer.convert_ids_to_tokens([int(i) for i in order]))
    return LensTokens(int(feature), value, head_lm.ref, words, change[order].astype(np.float32))


# --- pretrained vs fine-tuned -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FiringChange:
    """Each feature's firing rate on the same corpus under two models read by one SAE: rate_a [F], rate_b [F]
    (share of tokens where the feature is > 0); `order` [F] features by |rate_b − rate_a|, largest first."""

    sae: str
    model_a: str
    model_b: str
    layer: int
    corpus: str
    rate_a: np.ndarray
    rate_b: np.ndarray
    n_tokens: int

    @property
    def change(self) -> np.ndarray:
        return self.rate_b - self.rate_a

    @property
    def order(self) -> np.ndarray:
        return np.argsort(-np.abs(self.change), kind="stable")

    def top(self, n: int = 20) -> list[dict]:
        return [{"feature": int(f), "rate_a": float(self.rate_a[f]), "rate_b": float(self.rate_b[f]),
                 "change": float(self.change[f])} for f in self.order[:n]]

    def to_json(self) -> dict:
        return {"sae": self.sae, "model_a": self.model_a, "model_b": self.model_b, "layer": self.layer,
                "corpus": self.corpus, "n_tokens": self.n_tokens, "top": self.top()}


def firing_change(atlas_a: FeatureAtlas, atlas_b: FeatureAtlas) -> FiringChange:
    """Compare two atlases of one SAE over the same corpus (the pretrained model's and a fine-tuned run's)."""
    if atlas_a.sae != atlas_b.sae or len(atlas_a.items) != len(atlas_b.items):
        raise SaeError("compare two models with the same SAE over the same corpus")
    return FiringChange(sae=atlas_a.sae, model_a=atlas_a.model, model_b=atlas_b.model, layer=atlas_a.layer,
                        corpus=atlas_a.corpus, rate_a=atlas_a.firing_rate, rate_b=atlas_b.firing_rate,
                        n_tokens=atlas_a.n_tokens)


# --- the declarations (core.contract): sae-train and sae-features ----------------------------------------------


@dataclass(frozen=True)
class FeaturesSettings:
    """sae-features reads nothing but its inputs (the saved SAE, the sentence, the model): no settings."""


def run_train(lm: LoadedModel, inputs, settings: TrainSettings, progress: ProgressCallback = None,
              should_stop: StopCheck = None) -> TrainedSae:
    """The contract's run of sae-train: `inputs` (sentences or pairs, layer 0..L, the SAE's name)."""
    sentences, layer, name = inputs
    return train_sae(lm, sentences, layer, settings, name, progress=progress, should_stop=should_stop)


def run_features(lm: LoadedModel, inputs, settings: FeaturesSettings, progress: ProgressCallback = None,
                 should_stop: StopCheck = None) -> SentenceFeatures:
    """The contract's run of sae-features: `inputs` (a SparseAutoencoder, the sentence, a second one or None)."""
    sae, text, text_b = inputs
    return sentence_features(sae, lm, text, text_b)


SAE_TRAIN = Analysis(
    name="sae-train", view="layers", command="sae-train", lens="sae_train", settings=TrainSettings, run=run_train,
    charts="core.charts.sparse_features:trained_charts", title="Train a sparse autoencoder",
    summary="train a TopK sparse autoencoder on one layer's token vectors (Gao et al. 2024)", order=21,
)
SAE_FEATURES = Analysis(
    name="sae-features", view="layers", command="sae-features", lens="features", settings=FeaturesSettings,
    run=run_features, charts="core.charts.sparse_features:features_charts", title="Sparse features",
    summary="the sparse features of a saved SAE that fire on a sentence", order=20,
)
ANALYSES = (SAE_FEATURES, SAE_TRAIN)
