"""What the model guesses for a masked word: its own MLM head on the last layer (the model's output) and the same
head on every earlier layer's hidden state at the mask (a "logit lens": a probe, since only the last layer was
trained to feed that head).

The sentence may hold `[MASK]` or `<mask>` (any case; rewritten to the model's own mask token), or words picked
by index are replaced by one mask token each (a word split into several pieces becomes a single mask, as in
whole-word masking). The forward pass is core.model.encoding's; the head is applied to its hidden states, so the
attention shown beside a guess comes from the very pass that produced it.
"""

from __future__ import annotations

# torch imported in functions: importing this module (the CLI's --help, the studies list, the pages) must not load
# them.
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.contract import Analysis, setting
from core.model.adapter import ModelAdapter, NoMaskedLMHead
from core.model.encoding import Encoding, encode
from core.model.loading import (Availability, LoadedModel, availability, available_models, has_mlm_head,
                         display_name, mlm_suggestion)
from core.validation import MAX_COUNT, check_count

MASK_SPELLINGS = re.compile(r"\[mask\]|<mask>", re.IGNORECASE)
DEFAULT_TOP_K = 5

# label -> (sentence A, sentence B or None), written for the page (not from a dataset).
EXAMPLES: dict[str, tuple[str, str | None]] = {
    "The [MASK] raised its interest rates.": ("The [MASK] raised its interest rates.", None),
    "Paris is the capital of [MASK].": ("Paris is the capital of [MASK].", None),
    "Two masks": ("She poured [MASK] into her cup and drank the [MASK].", None),
    "A pair": ("I went to the shop to buy some bread.", "The [MASK] was closed, so I went home."),
}


class NoMask(ValueError):
    """The input has no mask token and no word was picked."""


@dataclass(frozen=True)
class MaskedPredictions:
    """Top-k guesses at each mask, layer by layer. M = masks, N = layers shown, K = top-k.

    tokens             [T] the input's word pieces (mask tokens included)
    positions          [M] token index of each mask
    layers             [N] ascending hidden-state indices (0 = embeddings); the last is the model's last layer,
                       so its guesses are the model's own output
    top_ids            [M, N, K] int64 vocabulary ids, most probable first
    top_probabilities  [M, N, K] float32 softmax over the whole vocabulary
    top_tokens         [M][N][K] the vocabulary's spelling of top_ids
    final_ids          [M] int64 the model's own top-1 at each mask
    final_rank         [M, N] int64 rank of final_ids at each layer (1 = top)
    final_probability  [M, N] float32 probability of final_ids at each layer
    """

    model: str
    tokens: tuple[str, ...]
    positions: tuple[int, ...]
    layers: tuple[int, ...]
    top_ids: np.ndarray
    top_probabilities: np.ndarray
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]
    final_ids: np.ndarray
    final_tokens: tuple[str, ...]
    final_rank: np.ndarray
    final_probability: np.ndarray

    def to_json(self) -> dict:
        return {
            "tokens": list(self.tokens),
            "masks": [
                {
                    "position": int(position),
                    "layers": [
                        {"layer": int(layer),
                         "top": [{"token": t, "probability": float(p)}
                                 for t, p in zip(self.top_tokens[m][n], self.top_probabilities[m, n])]}
                        for n, layer in enumerate(self.layers)
                    ],
                }
                for m, position in enumerate(self.positions)
            ],
        }


# ---- text: mask spellings and click-to-mask -------------------------------------------------------------------


def normalise_masks(text: str, mask_token: str) -> str:
    """`[MASK]` and `<mask>` in any case -> the model's own mask token (BERT's is `[MASK]`, RoBERTa's `<mask>`)."""
    return MASK_SPELLINGS.sub(mask_token, text)


def word_spans(tokenizer, text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the words the tokenizer sees in `text` (the same words as
    core.model.encoding.Encoding.words: a punctuation mark is a word of its own), in order."""
    enc = tokenizer(text, add_special_tokens=False).encodings[0]
    spans: dict[int, list[int]] = {}
    for word, (start, end) in zip(enc.word_ids, enc.offsets):
        if word is None:
            continue
        span = spans.setdefault(word, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    return [(a, b) for _, (a, b) in sorted(spans.items())]


def mask_words(text: str, spans: Sequence[tuple[int, int]], picked: Sequence[int], mask_token: str) -> str:
    """`text` with each picked word (index into spans) replaced by one mask token."""
    out = text
    for index in sorted(set(picked), reverse=True):  # right to left, so earlier spans stay valid
        if not 0 <= index < len(spans):
            raise ValueError(f"Word {index} does not exist; the sentence has words 0..{len(spans) - 1}.")
        start, end = spans[index]
        out = out[:start] + mask_token + out[end:]
    return out


# ---- the head ------------------------------------------------------------------------------------------------


def no_head_message(lm: LoadedModel) -> str:
    model_type = getattr(lm.config, "model_type", None)
    suggestion = mlm_suggestion(model_type)
    local = [e.name for e in available_models() if e.name != lm.ref and _has_head(e.path)]
    also = f" Models on this computer that have one: {', '.join(local)}." if local else ""
    return (
        f"'{display_name(lm.ref)}' cannot guess masked words: its saved weights have no masked-word (MLM) head. Sentence encoders "
        f"such as MiniLM and models fine-tuned for a task keep only the encoder or a classifier. Try "
        f"{suggestion}, which has one.{also} Or fit a head for this model (below, or python -m core "
        f"fit-mlm-head --model {display_name(lm.ref)} --corpus snli:train:20000 --out NAME)."
    )


def mlm_alternatives(lm: LoadedModel, hub_up=None) -> tuple[Availability, ...]:
    """Models to offer instead of one without an MLM head, each with whether it loads now: those on this computer
    that have a head, then the family's public model with one (loadable only when on disk or the hub answers)."""
    local = [e.name for e in available_models() if e.name != lm.ref and _has_head(e.path)]
    names = dict.fromkeys([*local, mlm_suggestion(getattr(lm.config, "model_type", None))])
    return tuple(availability(name, hub_up) for name in names)


def _has_head(path: str) -> bool:
    try:
        return has_mlm_head(path)
    except Exception:  # an unreadable folder is simply not offered
        return False


def require_masked_lm(lm: LoadedModel):
    """The model's masked-word model, or NoMaskedLMHead with a plain message and a model to try instead."""
    if lm.masked_lm is None:
        raise NoMaskedLMHead(no_head_message(lm))
    return lm.masked_lm


def head_probabilities(mlm, states: np.ndarray, device: str, earlier: np.ndarray | None = None) -> np.ndarray:
    """states [N, D] hidden states -> [N, V] float32 softmax of the MLM head's logits (the adapter's MLM head).
    earlier [N] bool: rows that are a layer's state before the last, read through the adapter's lens_head (the
    final norm first, ModernBERT)."""
    import torch

    adapter = ModelAdapter.of(mlm)
    with torch.inference_mode():
        hidden = torch.from_numpy(np.ascontiguousarray(states, dtype=np.float32)).to(device)
        logits = adapter.mlm_logits(hidden)
        if earlier is not None and adapter.final_norm is not None and earlier.any():
            rows = torch.from_numpy(np.flatnonzero(earlier)).to(device)
            logits[rows] = adapter.lens_head(hidden[rows])
        return torch.softmax(logits.float(), dim=-1).cpu().numpy()


# ---- the analysis ----------------------------------------------------------------------------------------------


def parse_layers(spec: str | Sequence[int] | None, n_layers: int) -> tuple[int, ...]:
    """"all" / None -> 0..L; "last" -> (L,); "0,6,12" or a list -> those, ascending, with L always added (the last
    entry is the model's own output). L = n_layers (hidden states count the embeddings as layer 0)."""
    if spec is None or spec == "all":
        return tuple(range(n_layers + 1))
    if spec == "last":
        return (n_layers,)
    parts = [v for v in spec.split(",") if v.strip()] if isinstance(spec, str) else list(spec)
    values = [check_count(v, f"layer {v!r}", minimum=-MAX_COUNT) for v in parts]  # a plain error, not int()'s
    bad = [v for v in values if not 0 <= v <= n_layers]
    if bad:
        raise ValueError(f"Layer(s) {bad} do not exist; this model has layers 0..{n_layers} (0 = embeddings).")
    return tuple(sorted(set(values) | {n_layers}))


def mask_positions(encoding: Encoding, mask_token_id: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(np.asarray(encoding.input_ids) == mask_token_id))


def masked_predictions(lm: LoadedModel, encoding: Encoding, *, top_k: int = DEFAULT_TOP_K,
                       layers: str | Sequence[int] | None = None) -> MaskedPredictions:
    """The MLM head on each chosen layer's hidden state at every mask token of `encoding`."""
    mlm = require_masked_lm(lm)
    positions = mask_positions(encoding, lm.tokenizer.mask_token_id)
    if not positions:
        mask = lm.tokenizer.mask_token
        cut = " (the input was cut to the model's length: was the mask after the cut?)" if encoding.truncated else ""
        raise NoMask(f"There is no {mask} in the sentence{cut}: write {mask} where a word should be guessed, "
                     "or pick a word to mask.")
    if encoding.hidden_states is None:
        raise ValueError("This encoding has no hidden states: encode with hidden_states=True.")
    if top_k < 1:
        raise ValueError("top-k must be at least 1.")
    n_layers = encoding.hidden_states.shape[0] - 1
    shown = parse_layers(layers, n_layers)
    all_layers = tuple(range(n_layers + 1))
    m, n_all = len(positions), len(all_layers)
    # Every layer is scored (cheap: M x (L+1) vectors) so the final guess's rank is known at each layer shown.
    states = encoding.hidden_states[:, list(positions)].transpose(1, 0, 2).reshape(m * n_all, -1)
    earlier = np.tile(np.array(all_layers) < n_layers, m)  # rows are [mask, layer] flattened
    probs = head_probabilities(mlm, states, lm.device, earlier).reshape(m, n_all, -1)
    k = min(top_k, probs.shape[-1])
    order = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    top_probs = np.take_along_axis(probs, order, axis=-1)
    final_ids = order[:, -1, 0]
    final_p = probs[np.arange(m), :, final_ids]  # [M, L+1]
    final_rank = 1 + (probs > final_p[..., None]).sum(axis=-1)
    idx = list(shown)
    to_tokens = lm.tokenizer.convert_ids_to_tokens
    top_ids = order[:, idx].astype(np.int64)
    return MaskedPredictions(
        model=lm.ref,
        tokens=tuple(encoding.tokens),
        positions=positions,
        layers=shown,
        top_ids=top_ids,
        top_probabilities=top_probs[:, idx].astype(np.float32),
        top_tokens=tuple(tuple(tuple(to_tokens(row.tolist())) for row in per_mask) for per_mask in top_ids),
        final_ids=final_ids.astype(np.int64),
        final_tokens=tuple(to_tokens(final_ids.tolist())),
        final_rank=final_rank[:, idx].astype(np.int64),
        final_probability=final_p[:, idx].astype(np.float32),
    )


def prepare_text(lm: LoadedModel, text: str, picked: Sequence[int] = ()) -> str:
    """The text as the model should read it: mask spellings normalised, picked words masked."""
    mask = lm.tokenizer.mask_token
    if mask is None:
        raise NoMaskedLMHead(f"'{lm.ref}' has no mask token in its tokenizer.")
    text = normalise_masks(text, mask)
    if picked:
        text = mask_words(text, word_spans(lm.tokenizer, text), picked, mask)
    return text


def fill_mask(lm: LoadedModel, text_a: str, text_b: str | None = None, *, top_k: int = DEFAULT_TOP_K,
              layers: str | Sequence[int] | None = None, picked_a: Sequence[int] = (),
              picked_b: Sequence[int] = ()) -> MaskedPredictions:
    """One sentence (or pair): normalise and apply masks, one forward pass, then masked_predictions."""
    require_masked_lm(lm)
    a = prepare_text(lm, text_a, picked_a)
    b = prepare_text(lm, text_b, picked_b) if text_b else None
    encoding = encode(lm, (a, b) if b else a)
    return masked_predictions(lm, encoding, top_k=top_k, layers=layers)


# ---- the declarations (core.contract): fill-mask, and fit-mlm-head's settings (its run is core.training's) ----------
# Here rather than in core.training.mlm_head: the CLI builds fit-mlm-head's options from the declaration for --help,
# which must not import torch (core.training does).

MAX_TOP_K = 50  # the page offered 1..20 and the CLI had no bound; beyond a few dozen the guesses are noise


@dataclass(frozen=True)
class FillMaskSettings:
    """What fill-mask reads beyond its input: how many guesses and at which layers."""

    top_k: int = setting(DEFAULT_TOP_K, "guesses per mask and layer", low=1, high=MAX_TOP_K)
    layers: str = setting("all", '"all" (0 = embeddings .. L), "last", or a list such as 0,6,12 (L is always added)',
                          url=None)


def run_fill_mask(lm: LoadedModel, inputs, settings: FillMaskSettings, progress=None,
                  should_stop=None) -> MaskedPredictions:
    """The contract's run: `inputs` a sentence or a (sentence, second sentence or None) pair."""
    text_a, text_b = (inputs, None) if isinstance(inputs, str) else inputs
    return fill_mask(lm, text_a, text_b, top_k=settings.top_k, layers=settings.layers)


@dataclass(frozen=True)
class FitHeadSettings:
    """How fit-mlm-head trains (core.training.mlm_head.fit_mlm_head); the corpus and the saved name are inputs."""

    steps: int = setting(None, "optimiser steps (default 1000)", type="int", low=1, high=MAX_COUNT, url=None)
    seed: int = setting(0, "masking, split and initialisation seed", low=0, high=MAX_COUNT, url=None)


FILL_MASK = Analysis(
    name="fill-mask", view="masked", command="fill-mask", lens="fill_mask", settings=FillMaskSettings,
    run=run_fill_mask, charts="core.charts.masked:prediction_charts", title="Masked words",
    summary="top-k guesses for each [MASK] of a sentence, from the model's MLM head on every layer", order=0,
)
FIT_MLM_HEAD = Analysis(
    name="fit-mlm-head", view="masked", command="fit-mlm-head", lens="fit_mlm_head", settings=FitHeadSettings,
    run="core.training.mlm_head:run_fit", title="Fit a masked-word head",
    summary="fit a masked-word head on a frozen encoder (MiniLM, a fine-tuned run) so it can guess [MASK]", order=1,
)
ANALYSES = (FILL_MASK, FIT_MLM_HEAD)
