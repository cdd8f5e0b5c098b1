"""Every layer in words: the masked-word (MLM) head applied to each layer's hidden state at every token.

The logit lens (nostalgebraist, 2020) reads hidden_states[l] (l = 0 embeddings … L) through the head the model's
last layer feeds. A tuned lens (Belrose et al. 2023, AlignmentResearch/tuned-lens) first passes each layer's state
through an affine translator fitted so the head's guesses match the final layer's (KL(final ‖ lens)). A saved lens
is a folder under core.model.artefacts.artefact_dir("tuned-lens") holding `lens.safetensors` with exactly
`layers.{l}.weight` [D, D] and `layers.{l}.bias` [D] for l = 0 … L−1, applied as `h @ weight.T + bias` before the
head, and `config.json` naming the model. The last layer has no translator (its guesses are the model's own), so
identity translators give exactly the logit lens. Where ours differs from tuned-lens: the saved weight is the whole
affine map (tuned-lens stores the residual part W − I), the head is BERT's MLM head (transform + LayerNorm +
decoder) rather than a decoder's final norm + unembedding, the loss is averaged over non-special tokens, and the
fit uses Adam on hidden states gathered once from the frozen model rather than SGD with Nesterov momentum over
streamed batches.
"""

from __future__ import annotations

# torch imported in functions: importing this module (the CLI's --help, the pages) must not load it.
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from safetensors.numpy import load_file, save_file

from core import files
from core.contract import Analysis, setting
from core.model import artefacts
from core.model.adapter import ModelAdapter, NoMaskedLMHead
from core.model.encoding import encode, encode_batches
from core.model.loading import LoadedModel, available_models, display_name, safetensors_problem
from core.progress import ProgressCallback, StopCheck, check_stop
from core.validation import MAX_COUNT, check_count

KINDS = ("logit", "tuned")
DEFAULT_TOP_K = 5
LENS_FILE = "lens.safetensors"
DEFAULT_STEPS = 200
DEFAULT_BATCH_TOKENS = 128
DEFAULT_LEARNING_RATE = 1e-3
HELD_OUT_SHARE = 0.1  # of the corpus's sentences, scored after the fit (the last ones, never trained on)
MAX_FIT_TOKENS = 50_000  # token vectors kept for the fit: [L+1, N, D] float32 (MiniLM: ~540 MB at 50k)

# label -> sentence, for the page's example buttons (written for the page, not from a dataset)
EXAMPLES: dict[str, str] = {
    "Capital": "Paris is the capital and largest city of France.",
    "Bank": "She sat on the bank of the river and watched the boats go by.",
    "Long": "The committee, which had met every Tuesday for eleven years, finally agreed that the old bridge over "
            "the river should be rebuilt before the winter floods arrived.",
}


class LensMismatch(ValueError):
    """A saved tuned lens that does not fit the model (another model, another size)."""


# ---- the translators ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Translators:
    """One affine map per hidden state below the last. L = the model's layers, D = its hidden size.

    weights  [L, D, D] float32: layer l's state h is read as h @ weights[l].T + biases[l]
    biases   [L, D] float32
    name     the saved lens's name ("" for one not saved)
    model    the model it was fitted on
    """

    weights: np.ndarray
    biases: np.ndarray
    name: str = ""
    model: str = ""

    @classmethod
    def identity(cls, n_layers: int, dim: int) -> "Translators":
        return cls(np.repeat(np.eye(dim, dtype=np.float32)[None], n_layers, axis=0),
                   np.zeros((n_layers, dim), np.float32))

    def tensors(self) -> dict[str, np.ndarray]:
        """The saved file's contents: exactly layers.{l}.weight and layers.{l}.bias for l = 0 … L−1."""
        out = {}
        for layer in range(len(self.weights)):
            out[f"layers.{layer}.weight"] = np.ascontiguousarray(self.weights[layer], dtype=np.float32)
            out[f"layers.{layer}.bias"] = np.ascontiguousarray(self.biases[layer], dtype=np.float32)
        return out


def expected_keys(n_layers: int) -> set[str]:
    return {f"layers.{l}.{part}" for l in range(n_layers) for part in ("weight", "bias")}


def read_translators(folder: str | Path) -> Translators:
    """A saved lens folder's translators; ValueError naming the file when its keys or shapes are not the format's."""

    folder = Path(folder)
    config = files.read_json(folder / "config.json") or {}
    problem = safetensors_problem(folder / LENS_FILE)  # safetensors' own errors are tracebacks
    if problem:
        raise ValueError(f"{folder / LENS_FILE} {problem}")
    tensors = load_file(str(folder / LENS_FILE))
    n_layers = len(tensors) // 2
    if set(tensors) != expected_keys(n_layers):
        raise ValueError(f"{folder / LENS_FILE} is not a tuned lens: its tensors must be exactly layers.{{l}}.weight "
                         f"and layers.{{l}}.bias for l = 0 … L−1 (found {sorted(tensors)[:6]} …)")
    weights = np.stack([tensors[f"layers.{l}.weight"] for l in range(n_layers)]).astype(np.float32)
    biases = np.stack([tensors[f"layers.{l}.bias"] for l in range(n_layers)]).astype(np.float32)
    if weights.ndim != 3 or weights.shape[1] != weights.shape[2] or biases.shape != weights.shape[:2]:
        raise ValueError(f"{folder / LENS_FILE}: weights {weights.shape} and biases {biases.shape} are not "
                         "[L, D, D] and [L, D]")
    return Translators(weights, biases, name=folder.name, model=str(config.get("model", "")))


def load_lens(name: str, lm: LoadedModel) -> Translators:
    """The saved tuned lens `name` (or a folder path) for `lm`; LensMismatch when it was fitted for another model
    or does not fit this one's layers and size."""
    found = artefacts.find_artefact("tuned-lens", name)
    translators = read_translators(found.path)
    if translators.model and translators.model != lm.ref:
        raise LensMismatch(f"Tuned lens '{found.name}' was fitted for '{display_name(translators.model)}', not "
                           f"'{display_name(lm.ref)}': a lens reads one model's layers only. Pick that model, or "
                           f"fit a lens for this one (python -m core fit-tuned-lens --model {lm.ref} …).")
    n_layers, dim = lm.num_layers, lm.hidden_size
    if translators.weights.shape != (n_layers, dim, dim):
        raise LensMismatch(f"Tuned lens '{found.name}' has {translators.weights.shape[0]} translators of size "
                           f"{translators.weights.shape[1]}; '{display_name(lm.ref)}' has {n_layers} layers of size {dim}.")
    return translators


def lenses_for(model: str) -> list[str]:
    """Names of the saved tuned lenses fitted for `model`."""
    return [a.name for a in artefacts.list_artefacts("tuned-lens") if a.model == model]


# ---- the head -------------------------------------------------------------------------------------------------


def no_head_message(lm: LoadedModel) -> str:
    """Why a lens cannot read this model, naming the fitted heads on this computer for it and fit-mlm-head."""
    names = {lm.ref, Path(lm.ref).name, display_name(lm.ref)}  # a head records the model as it was named
    fitted = [e.name for e in available_models() if e.source == "fitted-head" and e.fitted_on in names]
    have = (f" Fitted heads for it on this computer: {', '.join(fitted)} (pick one as the model)." if fitted
            else " There is no fitted head for it on this computer yet.")
    return (f"'{display_name(lm.ref)}' has no masked-word (MLM) head, so its layers cannot be read in words.{have} "
            f"Fit one with: python -m core fit-mlm-head --model {lm.ref} --corpus snli --out NAME")


def require_head(lm: LoadedModel):
    """The model's masked-word model (its MLM head), or NoMaskedLMHead saying how to get one."""
    if lm.masked_lm is None:
        raise NoMaskedLMHead(no_head_message(lm))
    return lm.masked_lm


# ---- the lens -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerLens:
    """The head's top guesses at every layer and token. N = L+1 hidden states (0 = embeddings … L = the model's
    output), T = tokens, K = top-k.

    tokens             [T] the input's word pieces, special tokens included
    layers             [N] 0 … L
    special_mask       [T] bool: [CLS], [SEP] … (left out of kl_to_final)
    top_ids            [N, T, K] int64 vocabulary ids, most probable first
    top_probabilities  [N, T, K] float32 softmax over the whole vocabulary
    top_tokens         [N][T][K] the vocabulary's spelling of top_ids
    kl_to_final        [N] float32 KL(final layer's distribution ‖ the lens's) in nats, averaged over the
                       non-special tokens; 0 at the last layer
    kind               "logit" or "tuned"; lens: the tuned lens's name ("" for the logit lens)
    """

    model: str
    kind: str
    lens: str
    tokens: tuple[str, ...]
    layers: tuple[int, ...]
    special_mask: np.ndarray
    top_ids: np.ndarray
    top_probabilities: np.ndarray
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]
    kl_to_final: np.ndarray

    def to_json(self) -> dict:
        """The CLI contract of issue 39: exactly tokens, layers, top [layer][position][k] {token, p}, kl_to_final."""
        return {
            "tokens": list(self.tokens),
            "layers": [int(l) for l in self.layers],
            "top": [[[{"token": t, "p": float(p)} for t, p in zip(self.top_tokens[n][i], self.top_probabilities[n, i])]
                     for i in range(len(self.tokens))] for n in range(len(self.layers))],
            "kl_to_final": [float(v) for v in self.kl_to_final],
        }


def _lens_logits(head, states, translators: Translators | None, layer: int, n_layers: int):
    """The head's logits [..., V] for hidden states [..., D] of `layer`, through its translator when tuned."""
    import torch

    if translators is not None and layer < n_layers:
        weight = torch.from_numpy(translators.weights[layer]).to(states.device)
        bias = torch.from_numpy(translators.biases[layer]).to(states.device)
        states = states @ weight.T + bias
    return head(states)


def read_layers(lm: LoadedModel, hidden_states: np.ndarray, special_mask: np.ndarray, tokens: Sequence[str], *,
                translators: Translators | None = None, top_k: int = DEFAULT_TOP_K) -> LayerLens:
    """The lens on one input's hidden states [L+1, T, D] (core.model.encoding.Encoding.hidden_states)."""
    import torch


    adapter = ModelAdapter.of(require_head(lm))
    head, earlier = adapter.mlm_head, adapter.lens_head
    top_k = check_count(top_k, "top-k", minimum=1)
    n_states, n_tokens, _ = hidden_states.shape
    n_layers = n_states - 1
    scored = ~np.asarray(special_mask, dtype=bool)
    if not scored.any():
        raise ValueError("The input has no tokens besides the special ones: write a sentence.")
    ids, probs, kl = [], [], np.zeros(n_states, np.float32)
    with torch.inference_mode():
        states = torch.tensor(hidden_states, dtype=torch.float32, device=lm.device)  # a copy: the page's arrays are read-only
        final = torch.log_softmax(head(states[n_layers]).float(), dim=-1)
        for layer in range(n_states):  # one layer at a time: [T, V] each, never [L+1, T, V]
            logp = final if layer == n_layers else torch.log_softmax(
                _lens_logits(earlier, states[layer], translators, layer, n_layers).float(), dim=-1)
            if layer < n_layers:
                per_token = (final.exp() * (final - logp)).sum(-1).cpu().numpy()
                kl[layer] = per_token[scored].mean()
            top = torch.topk(logp, min(top_k, logp.shape[-1]), dim=-1)
            ids.append(top.indices.cpu().numpy())
            probs.append(top.values.exp().cpu().numpy())
    top_ids = np.stack(ids).astype(np.int64)
    to_tokens = lm.tokenizer.convert_ids_to_tokens
    return LayerLens(
        model=lm.ref, kind="tuned" if translators is not None else "logit",
        lens=translators.name if translators is not None else "", tokens=tuple(tokens),
        layers=tuple(range(n_states)), special_mask=np.asarray(special_mask, dtype=bool), top_ids=top_ids,
        top_probabilities=np.stack(probs).astype(np.float32),
        top_tokens=tuple(tuple(tuple(to_tokens(row.tolist())) for row in per_layer) for per_layer in top_ids),
        kl_to_final=kl,
    )


def logit_lens(lm: LoadedModel, text: str, text_b: str | None = None, *, kind: str = "logit",
               lens: str | Translators | None = None, top_k: int = DEFAULT_TOP_K) -> LayerLens:
    """One sentence (or pair) read at every layer and token: kind "logit" (the head on each hidden state) or
    "tuned" (through the saved lens `lens`, a name or Translators)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} (got {kind!r})")
    require_head(lm)
    if not (text or "").strip():
        raise ValueError("No text given: write a sentence to read.")
    translators = None
    if kind == "tuned":
        if lens is None or lens == "":
            have = lenses_for(lm.ref)
            raise ValueError(f"A tuned lens needs --lens NAME: saved lenses for '{display_name(lm.ref)}': "
                             f"{', '.join(have) or 'none yet (python -m core fit-tuned-lens …)'}.")
        translators = lens if isinstance(lens, Translators) else load_lens(lens, lm)
    encoding = encode(lm, (text, text_b) if text_b else text, attentions=False)
    return read_layers(lm, encoding.hidden_states, encoding.special_mask, encoding.tokens,
                       translators=translators, top_k=top_k)


# ---- fitting a tuned lens -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FittedLens:
    """A tuned lens fitted and saved. N = L+1 hidden states.

    name, path           the saved folder
    kl_logit_held_out    [N] float32 KL(final ‖ logit lens) on the held-out sentences, averaged over their tokens
    kl_tuned_held_out    [N] float32 the same through the fitted translators (both 0 at the last layer)
    """

    name: str
    path: str
    model: str
    corpus: str
    steps: int
    train_tokens: int
    held_out_tokens: int
    kl_logit_held_out: np.ndarray
    kl_tuned_held_out: np.ndarray
    seconds: float
    config: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "path": self.path, "model": self.model, "corpus": self.corpus,
                "steps": self.steps, "train_tokens": self.train_tokens, "held_out_tokens": self.held_out_tokens,
                "kl_logit_held_out": [float(v) for v in self.kl_logit_held_out],
                "kl_tuned_held_out": [float(v) for v in self.kl_tuned_held_out],
                "seconds": round(self.seconds, 2)}

    @classmethod
    def from_json(cls, data: dict) -> "FittedLens":
        return cls(name=data["name"], path=data["path"], model=data["model"], corpus=data["corpus"],
                   steps=int(data["steps"]), train_tokens=int(data["train_tokens"]),
                   held_out_tokens=int(data["held_out_tokens"]),
                   kl_logit_held_out=np.asarray(data["kl_logit_held_out"], np.float32),
                   kl_tuned_held_out=np.asarray(data["kl_tuned_held_out"], np.float32), seconds=float(data["seconds"]))


def check_name(name: str) -> str:
    """A lens name is one folder name: letters, digits, '-', '_', '.'; not starting with a dot."""
    name = (name or "").strip()
    if not name or name.startswith(".") or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"Lens name {name!r} must be one folder name (letters, digits, '-', '_', '.'; no leading dot).")
    return name


def token_states(lm: LoadedModel, sentences: Sequence, *, max_tokens: int = MAX_FIT_TOKENS,
                 progress: ProgressCallback = None, should_stop: StopCheck = None) -> np.ndarray:
    """[L+1, N, D] float32: every hidden state of the non-special tokens of `sentences` (at most max_tokens)."""
    chunks, kept = [], 0
    for batch in encode_batches(lm, sentences, attentions=False, hidden_states=True, progress=progress,
                                should_stop=should_stop):
        states = np.stack([h.float().cpu().numpy() for h in batch.hidden_states], axis=1)  # [B, L+1, T, D]
        for row, item in enumerate(batch.items):
            n = int(batch.lengths[row])
            keep = ~np.asarray(item.special_mask[:n], dtype=bool)
            chunks.append(states[row, :, :n][:, keep])
            kept += int(keep.sum())
        if kept >= max_tokens:
            break
    if not chunks:
        raise ValueError("The corpus gave no tokens to fit on.")
    return np.concatenate(chunks, axis=1)[:, :max_tokens]


def held_out_kl(lm: LoadedModel, states: np.ndarray, translators: Translators | None,
                batch_tokens: int = 256) -> np.ndarray:
    """[L+1] KL(final ‖ lens) averaged over the tokens of states [L+1, N, D] (non-special tokens only)."""
    import torch


    adapter = ModelAdapter.of(require_head(lm))
    head, earlier = adapter.mlm_head, adapter.lens_head
    n_states, n_tokens, _ = states.shape
    total = np.zeros(n_states, np.float64)
    with torch.inference_mode():
        for start in range(0, n_tokens, batch_tokens):
            chunk = torch.from_numpy(np.ascontiguousarray(states[:, start:start + batch_tokens])).to(lm.device)
            final = torch.log_softmax(head(chunk[-1]).float(), dim=-1)
            for layer in range(n_states - 1):
                logp = torch.log_softmax(_lens_logits(earlier, chunk[layer], translators, layer, n_states - 1).float(), -1)
                total[layer] += float((final.exp() * (final - logp)).sum())
    return (total / max(n_tokens, 1)).astype(np.float32)


def fit_translators(lm: LoadedModel, states: np.ndarray, *, steps: int = DEFAULT_STEPS,
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, learning_rate: float = DEFAULT_LEARNING_RATE,
                    seed: int = 0, progress: ProgressCallback = None, should_stop: StopCheck = None) -> Translators:
    """Translators minimising the mean over layers of KL(final ‖ tuned lens) on token states [L+1, N, D], the
    model and its head frozen. Parametrised as identity + a residual part started at zero (as tuned-lens does), so
    step 0 is the logit lens."""
    import torch


    masked_lm = require_head(lm)
    adapter = ModelAdapter.of(masked_lm)
    head, earlier = adapter.mlm_head, adapter.lens_head
    n_states, n_tokens, dim = states.shape
    n_layers = n_states - 1
    generator = torch.Generator().manual_seed(seed)
    delta = torch.zeros(n_layers, dim, dim, device=lm.device, requires_grad=True)
    bias = torch.zeros(n_layers, dim, device=lm.device, requires_grad=True)
    optimizer = torch.optim.Adam([delta, bias], lr=learning_rate)
    all_states = torch.from_numpy(np.ascontiguousarray(states, dtype=np.float32))
    frozen = [(p, p.requires_grad) for p in masked_lm.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)  # the head's weights never change; gradients reach only the translators
    try:
        for step in range(steps):
            check_stop(should_stop)
            picked = torch.randint(0, n_tokens, (min(batch_tokens, n_tokens),), generator=generator)
            batch = all_states[:, picked].to(lm.device)  # [L+1, B, D]
            with torch.no_grad():
                target = torch.log_softmax(head(batch[-1]).float(), dim=-1)
                p_final = target.exp()
            translated = batch[:-1] + torch.einsum("lbd,led->lbe", batch[:-1], delta) + bias[:, None]
            logp = torch.log_softmax(earlier(translated).float(), dim=-1)  # [L, B, V]
            loss = (p_final * (target - logp)).sum(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if progress is not None:
                progress(step + 1, steps, f"step {step + 1}/{steps}: mean KL {loss.item():.3f}")
    finally:
        for p, was in frozen:
            p.requires_grad_(was)
    eye = torch.eye(dim)
    return Translators((eye + delta.detach().cpu()).numpy().astype(np.float32),
                       bias.detach().cpu().numpy().astype(np.float32), model=lm.ref)


def save_lens(translators: Translators, name: str, config: dict) -> Path:
    """Write the lens folder atomically (complete or absent); an existing lens of that name is replaced whole."""

    folder = artefacts.artefact_dir("tuned-lens") / check_name(name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with files.atomic_path(folder) as tmp:
        tmp.mkdir()
        save_file(translators.tensors(), str(tmp / LENS_FILE), metadata={"format": "bertlens-tuned-lens"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
    return folder  # an old lens of the name was renamed aside, the new one in, then the old one deleted (core.files)


def check_free_name(name: str, overwrite: bool = False) -> None:
    """ValueError, before any work, when a lens of that name is saved already and `overwrite` is not asked for."""
    folder = artefacts.artefact_dir("tuned-lens") / check_name(name)
    if folder.exists() and not overwrite:
        raise ValueError(f"a tuned lens named '{name}' is saved already ({folder}): pick another name, or replace "
                         "it (fit-tuned-lens --overwrite; the old one stays until the new one is saved)")


def fit_tuned_lens(lm: LoadedModel, sentences: Sequence, name: str, *, corpus: str = "",
                   steps: int = DEFAULT_STEPS, batch_tokens: int = DEFAULT_BATCH_TOKENS,
                   learning_rate: float = DEFAULT_LEARNING_RATE, seed: int = 0, max_tokens: int = MAX_FIT_TOKENS,
                   progress: ProgressCallback = None, should_stop: StopCheck = None,
                   overwrite: bool = False) -> FittedLens:
    """Fit translators on all but the last tenth of `sentences`, score both lenses on that tenth, save the lens
    under artefact_dir("tuned-lens")/name. Cancelling (should_stop) saves nothing. A saved lens of that name is
    refused before any work unless `overwrite`, which replaces it only once the new one is complete."""
    name = check_name(name)
    check_free_name(name, overwrite)
    require_head(lm)
    steps = check_count(steps, "steps", minimum=1)
    sentences = list(sentences)
    if len(sentences) < 2:
        raise ValueError(f"Fitting a tuned lens needs at least 2 sentences (got {len(sentences)}): one to fit on, one held out.")
    start = time.perf_counter()
    n_held = max(1, int(round(len(sentences) * HELD_OUT_SHARE)))
    train, held = sentences[:-n_held], sentences[-n_held:]
    total = len(sentences) + steps + 1

    def report(done: int, message: str | None = None) -> None:
        if progress is not None:
            progress(done, total, message)

    train_states = token_states(lm, train, max_tokens=max_tokens, should_stop=should_stop,
                                progress=lambda done, _n, *_: report(done, "reading the training sentences"))
    held_states = token_states(lm, held, max_tokens=max_tokens, should_stop=should_stop,
                               progress=lambda done, _n, *_: report(len(train) + done, "reading the held-out sentences"))
    translators = fit_translators(lm, train_states, steps=steps, batch_tokens=batch_tokens,
                                  learning_rate=learning_rate, seed=seed, should_stop=should_stop,
                                  progress=lambda done, _n, message=None: report(len(sentences) + done, message))
    check_stop(should_stop)
    kl_logit = held_out_kl(lm, held_states, None)
    kl_tuned = held_out_kl(lm, held_states, translators)
    config = {"model": lm.ref, "kind": "tuned-lens", "layers": lm.num_layers, "d": lm.hidden_size,
              "corpus": corpus, "sentences": len(train), "train_tokens": int(train_states.shape[1]), "steps": steps,
              "batch_tokens": batch_tokens, "learning_rate": learning_rate, "seed": seed,
              "held_out_sentences": len(held), "held_out_tokens": int(held_states.shape[1]),
              "kl_logit_held_out": [float(v) for v in kl_logit], "kl_tuned_held_out": [float(v) for v in kl_tuned]}
    check_stop(should_stop)
    folder = save_lens(Translators(translators.weights, translators.biases, name=name, model=lm.ref), name, config)
    report(total, "saved")
    return FittedLens(name=name, path=str(folder), model=lm.ref, corpus=corpus, steps=steps,
                      train_tokens=int(train_states.shape[1]), held_out_tokens=int(held_states.shape[1]),
                      kl_logit_held_out=kl_logit, kl_tuned_held_out=kl_tuned, seconds=time.perf_counter() - start,
                      config=config)


# ---- the declarations (core.contract): lens and fit-tuned-lens -------------------------------------------------

MAX_TOP_K = 50  # the page offered 1..20 and the CLI had no bound; beyond a few dozen the guesses are noise


@dataclass(frozen=True)
class LensSettings:
    """What the lens reads beyond its input (the sentence, and a tuned lens's name: a saved artefact, as a model)."""

    kind: str = setting("logit", "logit: the head on each layer's vector; tuned: through a fitted lens (--lens)",
                        choices=KINDS, url="lens_kind")
    top_k: int = setting(DEFAULT_TOP_K, "guesses per layer and token", low=1, high=MAX_TOP_K, url="lens_top_k")


def run_lens(lm: LoadedModel, inputs, settings: LensSettings, progress=None, should_stop=None) -> LayerLens:
    """The contract's run: `inputs` (sentence, second sentence or None, tuned lens name or None)."""
    text, text_b, lens = inputs
    return logit_lens(lm, text, text_b, kind=settings.kind, lens=lens, top_k=settings.top_k)


@dataclass(frozen=True)
class FitLensSettings:
    """How fit-tuned-lens fits (fit_tuned_lens); the corpus and the saved name are inputs."""

    steps: int = setting(DEFAULT_STEPS, "optimiser steps", low=1, high=MAX_COUNT, url=None)
    batch_tokens: int = setting(DEFAULT_BATCH_TOKENS, "tokens per step", low=1, high=MAX_COUNT, url=None)
    seed: int = setting(0, "corpus sample and batch seed", low=0, high=MAX_COUNT, url=None)


def run_fit(lm: LoadedModel, inputs, settings: FitLensSettings, progress: ProgressCallback = None,
            should_stop: StopCheck = None) -> FittedLens:
    """The contract's run of fit-tuned-lens: `inputs` (a core.data.corpus Corpus, the lens's name)."""
    corpus, name = inputs
    return fit_tuned_lens(lm, corpus.sentences, name, corpus=corpus.name, steps=settings.steps,
                          batch_tokens=settings.batch_tokens, seed=settings.seed, progress=progress,
                          should_stop=should_stop)


LENS = Analysis(
    name="lens", view="layers", command="lens", lens="logit_lens", settings=LensSettings, run=run_lens,
    charts="core.charts.layer_lens:lens_charts", title="Lens",
    summary="the MLM head's top guesses at every layer and token (logit lens, or a fitted tuned lens)", order=0,
)
FIT_TUNED_LENS = Analysis(
    name="fit-tuned-lens", view="layers", command="fit-tuned-lens", lens="fit_tuned_lens", settings=FitLensSettings,
    run=run_fit, charts="core.charts.layer_lens:fitted_charts", title="Fit a tuned lens",
    summary="fit a tuned lens (one affine translator per layer) so each layer's guesses match the final layer's",
    order=1,
)
ANALYSES = (LENS, FIT_TUNED_LENS)
