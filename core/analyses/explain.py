"""Why this prediction? Word attributions of a fine-tuned classifier and whole-model token flow.

Methods (METHODS), each giving one score per token and, by WORD_RULE, per word:
- "grad-input": gradient x input on the word embeddings (captum InputXGradient), summed over the embedding dim;
- "saliency": L2 norm of the gradient on the word embeddings (captum Saliency, abs=False, then the norm);
- "ig": integrated gradients (captum IntegratedGradients) from a baseline whose non-special tokens are [PAD]
  (or [MASK]) and whose special tokens are kept, as captum's BERT tutorial; steps run in batches; the
  completeness gap |sum(attributions) - (f(x) - f(baseline))| says when to raise the steps;
- "rollout": Abnar & Zuidema (2020): head-averaged attention mixed with the identity (0.5 A + 0.5 I), rows
  renormalised, multiplied through the layers; the [CLS] row of the last layer;
- "value-zeroing": Mohebbi et al. (2023): token j's value vectors are zeroed in a layer and the cosine distance
  of every token's layer output to the intact output is token j's share in it (this accounts for value
  vectors, the residual stream and the feed-forward block); rows normalised, multiplied through the layers;
- "attention": the last layer's head-averaged [CLS] row, the naive baseline;
- perturbation methods, captum's implementations on a word-presence vector [W] (1 = the word as written, 0 = its
  pieces replaced by [PAD] or [MASK], special tokens always kept; the one forward is word_presence_forward):
  "occlusion" (captum Occlusion: windows of `window` consecutive words slide by one word; a word's score is the mean
  probability drop of the windows over it), "shapley" (captum ShapleyValueSampling over `samples` random word
  orders; captum's exact ShapleyValues when W! <= samples), "kernel-shap" (captum KernelShap, `samples`
  coalitions) and "lime" (captum Lime, `samples` coalitions, its exponential kernel on the cosine distance of the
  presence vectors as in LIME's text explainer, and the lime package's ridge surrogate, alpha 1: captum's default
  Lasso (alpha 0.01) sets most words of a probability-sized explanation to exactly 0). The words are the features,
  so no feature mask is needed: the presence vector is LIME's interpretable representation, and the forward maps it
  onto the word pieces.

Gradient methods explain the logit of the target class (the predicted one unless asked), perturbation methods its
probability (what the faithfulness test removes words from; a logit would be unbounded under [PAD] inputs); both
need a classifier head. The attention-based ones only need the encoder, so they work on any model.
"""

from __future__ import annotations

# torch, transformers, captum and core.model.classifier (torch) imported in functions: importing this module (the CLI's
# --help, the studies list, the pages) must not load them.
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from core.model import loading as models
from core.model.encoding import encode_stream, tokenize
from core.model.adapter import ModelAdapter
from core.model.loading import LoadedModel, ModelUnavailable, display_name
from core.contract import Analysis, setting

METHODS = ("grad-input", "saliency", "ig", "occlusion", "shapley", "kernel-shap", "lime", "rollout", "value-zeroing",
           "attention")
GRADIENT_METHODS = frozenset({"grad-input", "saliency", "ig"})
PERTURBATION_METHODS = frozenset({"occlusion", "shapley", "kernel-shap", "lime"})
HEAD_METHODS = GRADIENT_METHODS | PERTURBATION_METHODS
METHOD_TITLES = {"grad-input": "Gradient × input", "saliency": "Saliency (gradient norm)", "ig": "Integrated gradients",
                 "occlusion": "Occlusion (word windows)", "shapley": "Shapley value sampling", "kernel-shap": "KernelSHAP",
                 "lime": "LIME", "rollout": "Attention rollout", "value-zeroing": "Value zeroing",
                 "attention": "Raw attention ([CLS], last layer)"}
# Samples per perturbation method (Shapley: word orders, each W + 1 perturbed inputs; KernelSHAP / LIME: coalitions,
# one input each): about the same ~200 inputs for a 20-word pair, so the three cost alike. captum's Shapley default
# of 25 orders took 45 s for a 21-word pair on MiniLM on the shared CPU (bench/explain_perturbation.py).
DEFAULT_SAMPLES = {"shapley": 10, "kernel-shap": 200, "lime": 200}
# Perturbed inputs per forward: at most this many tokens (inputs x input length) in one batch.
PERTURBATION_TOKENS_PER_BATCH = 4096
WORD_RULE = ("a word's score is the sum of its word pieces' scores (attributions add up, so a word split in "
             "three pieces is not diluted); special tokens keep a token score and belong to no word")
DEFAULT_STEPS = 50
# Integrated-gradients steps are run in batches of at most this many tokens (steps x input length).
IG_TOKENS_PER_BATCH = 16384


class NoClassifierHead(ValueError):
    """The model has no classification head: gradient methods have nothing to explain."""


@dataclass(frozen=True, eq=False)
class Explainer:
    """A model ready to be explained.

    lm: the encoder and its tokenizer (attention methods read it). labels [C] and logits_from_embeds
    ((word embeddings [n, T, D], token type ids [n, T], attention mask [n, T]) -> logits [n, C]) are None for
    a model without a classifier head; head_message then says why. embeddings: the word-embedding table.
    task: the task a BERT Lens run was trained on (its head.json; a built-in name or a file path), else None."""

    lm: LoadedModel
    labels: tuple[str, ...] | None
    logits_from_embeds: Callable | None
    embeddings: object | None
    head_message: str = ""
    task: str | None = None

    @property
    def has_head(self) -> bool:
        return self.logits_from_embeds is not None

    def require_head(self) -> None:
        if not self.has_head:
            raise NoClassifierHead(self.head_message or f"'{display_name(self.lm.ref)}' has no classifier head.")

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def device(self) -> str:
        return self.lm.device

    def logits(self, feed: dict):
        """Logits [batch, classes] for padded inputs (input_ids, attention_mask[, token_type_ids]): what
        core.model.classifier.predict_logits runs."""
        import torch

        self.require_head()
        ids = feed["input_ids"]
        types = feed.get("token_type_ids")
        return self.logits_from_embeds(self.embeddings(ids), torch.zeros_like(ids) if types is None else types,
                                       feed["attention_mask"])


def no_head_message(ref: str) -> str:
    # Plain text, no Markdown: the page shows it through markdown_text (the model's name is someone else's text),
    # which would print a code span's backticks literally (issue 48).
    return (f"'{display_name(ref)}' has no classifier head: it is a plain encoder, so there is no prediction to explain. "
            "Attention rollout, value zeroing and raw attention still show how tokens mix; pick a fine-tuned "
            "classification run (the Fine-tuning comparison page, or the command python -m core finetune) for the "
            "gradient methods.")


def _sequence_classification_folder(folder: Path) -> bool:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return any(str(a).endswith("ForSequenceClassification") for a in config.get("architectures") or ())


def _uses_type_ids(tokenizer) -> bool:
    # DistilBERT's forward takes no token_type_ids; RoBERTa's are all zero anyway.
    return "token_type_ids" in tokenizer.model_input_names


def load_explainer(ref: str, *, device: str | None = None) -> Explainer:
    """A BERT Lens classification run (core.model.classifier's head.json layout), a Hugging Face
    *ForSequenceClassification folder, or any encoder (then without a head). Safetensors only, no remote code.
    Raises ModelUnavailable when nothing loads."""
    import torch

    from core.model.classifier import is_classifier_folder, load_classifier

    ref = ref.strip()
    _, folder = models.resolve(ref)
    if folder is not None and is_classifier_folder(folder):
        clf = load_classifier(ref, device=device, attention="eager")
        model, types = clf.model, _uses_type_ids(clf.tokenizer)

        def logits(embeds, type_ids, mask):
            return model(inputs_embeds=embeds, attention_mask=mask, **({"token_type_ids": type_ids} if types else {}))

        return Explainer(clf.encoder, tuple(clf.labels), logits, clf.encoder.model.get_input_embeddings(),
                         task=clf.head.get("task"))
    if folder is not None and _sequence_classification_folder(folder):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        models._check_architecture(folder, ref)
        try:
            with models.fresh_weights():  # the load swaps nn.init process-wide: no other thread builds meanwhile
                hf = AutoModelForSequenceClassification.from_pretrained(
                    str(folder), dtype=torch.float32, attn_implementation="eager", use_safetensors=True,
                    trust_remote_code=False)
            tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        except (OSError, ValueError) as err:
            raise ModelUnavailable(f"Could not load '{ref}' from {folder}: {err}") from err
        device = device or models.pick_device()
        hf.to(device).eval()
        lm = LoadedModel(ref=ref, path=str(folder), source="local", model=hf.base_model, tokenizer=tokenizer, device=device)
        config = hf.config
        labels = tuple(config.id2label[i] for i in range(config.num_labels))
        types = _uses_type_ids(tokenizer)

        def logits(embeds, type_ids, mask):
            return hf(inputs_embeds=embeds, attention_mask=mask, **({"token_type_ids": type_ids} if types else {})).logits

        return Explainer(lm, labels, logits, hf.get_input_embeddings())
    lm = models.load_model(ref, device=device, attention="eager")
    return Explainer(lm, None, None, lm.model.get_input_embeddings(), no_head_message(ref))


# ---- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Explanation:
    """One method's answer for one input. T = tokens (special ones included), W = words, C = classes, L = layers.

    tokens [T], word_ids [T] int (-1 = special token), words [W]; token_scores [T] float64 and word_scores [W]
    float64 (WORD_RULE); labels [C] and probabilities [C] (None without a head); predicted / target: label names
    (None without a head; target None also for the attention methods, which do not depend on a class);
    ig only: completeness_gap = |sum(token_scores) - (f_x - f_baseline)|, f = the target logit, and steps;
    perturbation methods: samples (occlusion: its window in words); their token scores are the word scores spread
    equally over the pieces (spread_over_pieces);
    rollout / value-zeroing: matrix [L, T, T] (query, key), layer l = the flow from the input into layer l's
    output; the token scores are the [CLS] row of its last layer."""

    method: str
    tokens: tuple[str, ...]
    word_ids: np.ndarray
    words: tuple[str, ...]
    token_scores: np.ndarray
    word_scores: np.ndarray
    labels: tuple[str, ...] | None = None
    probabilities: np.ndarray | None = None
    predicted: str | None = None
    target: str | None = None
    completeness_gap: float | None = None
    f_x: float | None = None
    f_baseline: float | None = None
    steps: int | None = None
    matrix: np.ndarray | None = field(default=None, repr=False)
    samples: int | None = None

    @property
    def relative_gap(self) -> float | None:
        """completeness_gap / |f_x - f_baseline| (ig only)."""
        if self.completeness_gap is None:
            return None
        return self.completeness_gap / max(abs(self.f_x - self.f_baseline), 1e-12)

    def to_json(self) -> dict:
        out = {"tokens": list(self.tokens), "words": list(self.words), "predicted": self.predicted,
               "target": self.target, "token_scores": self.token_scores.tolist(), "word_scores": self.word_scores.tolist()}
        if self.method == "ig":
            out["completeness_gap"] = self.completeness_gap
        if self.method == "rollout":
            out["matrix"] = self.matrix[-1].tolist()
        if self.method in PERTURBATION_METHODS:
            out["window" if self.method == "occlusion" else "samples"] = self.samples
        return out


def word_scores(token_scores: np.ndarray, word_ids: np.ndarray, n_words: int) -> np.ndarray:
    """token_scores [T], word_ids [T] (-1 special) -> [W]: the sum over each word's pieces (WORD_RULE)."""
    word_ids = np.asarray(word_ids)
    keep = word_ids >= 0
    return np.bincount(word_ids[keep], weights=np.asarray(token_scores, dtype=np.float64)[keep], minlength=n_words)


# ---- whole-model token flow: written here, no library ------------------------------------------------------------


def rollout(attentions: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020).

    attentions [L, H, T, T] (head-averaged here) or [L, T, T], (query, key), rows summing to 1.
    Each layer becomes Â_l = residual·I + (1 - residual)·A_l, rows renormalised; returns [L, T, T] float32 with
    R_0 = Â_0 and R_l = Â_l · R_{l-1}: row i of R_l is how much of each input token reaches token i after layer l.
    residual=0 multiplies the matrices as given (used for value zeroing, which already has the residual in it)."""
    import torch

    a = torch.from_numpy(np.array(attentions, dtype=np.float32))  # a copy: cached float16 weights are read-only
    if a.ndim == 4:
        a = a.mean(dim=1)
    if a.ndim != 3 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attentions must be [L, H, T, T] or [L, T, T], not {tuple(a.shape)}")
    if residual:
        a = (1.0 - residual) * a + residual * torch.eye(a.shape[-1])
    a = a / a.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    out = torch.empty_like(a)
    out[0] = a[0]
    for layer in range(1, a.shape[0]):
        torch.matmul(a[layer], out[layer - 1], out=out[layer])
    return out.numpy()


def value_zeroing(lm: LoadedModel, hidden_states: np.ndarray) -> np.ndarray:
    """Value zeroing (Mohebbi et al. 2023) of one input.

    hidden_states [L+1, T, D]: the encoder's hidden states (index l = layer l's input), e.g. Encoding.hidden_states.
    Returns [L, T, T] float32 (query i, key j): for layer l, layer l is rerun T times on its intact input, the j-th
    time with token j's value vectors zeroed in every head; C[i, j] = 1 - cos(out_i, out_i^{-j}), then each row
    is divided by its sum."""
    import torch

    adapter = ModelAdapter.of(lm.model)
    states = torch.as_tensor(np.asarray(hidden_states), dtype=torch.float32, device=lm.device)
    n_tokens = states.shape[1]
    out = np.zeros((adapter.num_layers, n_tokens, n_tokens), dtype=np.float32)
    eye = torch.eye(n_tokens, device=lm.device, dtype=torch.bool)

    def zero_own_value(value, _layer):  # copy j of the batch loses token j's value vectors: [j, T, H, d]
        return value.masked_fill(eye[:, :, None, None], 0.0)

    with torch.inference_mode():
        for index in range(adapter.num_layers):
            x = states[index][None]
            call = adapter.unpadded_call(x)
            intact = adapter.run_layers(x, call, index, index + 1)[0]
            with adapter.intervene("v", zero_own_value, layers=index):
                zeroed = adapter.run_layers(x.expand(n_tokens, -1, -1), call, index, index + 1)  # [j, i, D]
            distance = 1.0 - torch.nn.functional.cosine_similarity(zeroed, intact[None], dim=-1)  # [j, i]
            scores = distance.T.clamp_min(0.0)
            out[index] = (scores / scores.sum(dim=-1, keepdim=True).clamp_min(1e-12)).cpu().numpy()
    return out


# ---- gradient methods through captum -----------------------------------------------------------------------------


def _tensors(explainer: Explainer, tokenized):
    import torch

    device = explainer.lm.device
    ids = torch.as_tensor(tokenized.input_ids, device=device)[None]
    type_ids = torch.as_tensor(tokenized.type_ids, device=device)[None]
    mask = torch.ones_like(ids)
    return ids, type_ids, mask


def baseline_ids(tokenizer, input_ids: np.ndarray, special_mask: np.ndarray, baseline: str = "pad") -> np.ndarray:
    """[T] ids of the integrated-gradients baseline: special tokens kept, every other token [PAD] or [MASK]."""
    replacement = {"pad": tokenizer.pad_token_id, "mask": tokenizer.mask_token_id}[baseline]
    if replacement is None:
        raise ValueError(f"the tokenizer has no {baseline} token")
    return np.where(np.asarray(special_mask, dtype=bool), np.asarray(input_ids), replacement)


def _forward(explainer: Explainer):
    def forward(embeds, type_ids, mask):
        return explainer.logits_from_embeds(embeds, type_ids, mask)

    return forward


def ig_batch_size(steps: int, n_tokens: int) -> int | None:
    """Steps per batch: None (every step in one batch, captum's own fastest path) when steps x tokens fits
    IG_TOKENS_PER_BATCH, else chunks that fit, so memory stays bounded on long inputs. Measured on CPU, captum's
    chunked path (internal_batch_size=steps) is ~5x slower than its one-batch path for the same steps."""
    per_batch = max(1, IG_TOKENS_PER_BATCH // max(n_tokens, 1))
    return None if steps <= per_batch else per_batch


def gradient_scores(explainer: Explainer, tokenized, method: str, target: int, *, steps: int = DEFAULT_STEPS,
                    baseline: str = "pad", internal_batch_size: int | None | str = "auto") -> dict:
    """Token scores [T] of a gradient method for class index `target`, with the ig extras (completeness gap,
    f(x), f(baseline)). internal_batch_size: "auto" (ig_batch_size), None (captum's default: every step in one
    batch) or a number of steps per batch."""
    import torch
    from captum.attr import InputXGradient, IntegratedGradients, Saliency

    explainer.require_head()
    ids, type_ids, mask = _tensors(explainer, tokenized)
    forward = _forward(explainer)
    with torch.no_grad():
        embeds = explainer.embeddings(ids).detach()
    embeds.requires_grad_(True)
    extra = (type_ids, mask)
    if method == "grad-input":
        attr = InputXGradient(forward).attribute(embeds, target=target, additional_forward_args=extra)
        return {"token_scores": attr[0].sum(-1).detach().cpu().double().numpy()}
    if method == "saliency":
        grad = Saliency(forward).attribute(embeds, target=target, abs=False, additional_forward_args=extra)
        return {"token_scores": grad[0].norm(dim=-1).detach().cpu().double().numpy()}
    if method != "ig":
        raise ValueError(f"{method!r} is not a gradient method")
    base_ids = torch.as_tensor(baseline_ids(explainer.lm.tokenizer, tokenized.input_ids, tokenized.special_mask, baseline),
                               device=ids.device)[None]
    with torch.no_grad():
        base = explainer.embeddings(base_ids).detach()
        f_x = float(forward(embeds, type_ids, mask)[0, target])
        f_b = float(forward(base, type_ids, mask)[0, target])
    if internal_batch_size == "auto":
        internal_batch_size = ig_batch_size(steps, ids.shape[1])
    attr = IntegratedGradients(forward).attribute(embeds, baselines=base, target=target, n_steps=steps,
                                                  additional_forward_args=extra, internal_batch_size=internal_batch_size)
    scores = attr[0].sum(-1).detach().cpu().double().numpy()
    return {"token_scores": scores, "f_x": f_x, "f_baseline": f_b,
            "completeness_gap": float(abs(scores.sum() - (f_x - f_b)))}


# ---- perturbation methods through captum -------------------------------------------------------------------------


def word_presence_forward(explainer: Explainer, tokenized, baseline: str = "pad") -> Callable:
    """presence [n, W] (1 keeps a word, 0 puts [PAD] / [MASK] in its pieces; special tokens always kept) ->
    class probabilities [n, C]: the one forward every perturbation method calls. Values between 0 and 1 mix the
    word-piece embeddings linearly (captum only ever sends 0 or 1 here)."""
    import torch

    ids, type_ids, mask = _tensors(explainer, tokenized)
    base_ids = torch.as_tensor(baseline_ids(explainer.lm.tokenizer, tokenized.input_ids, tokenized.special_mask, baseline),
                               device=ids.device)[None]
    word_ids = torch.as_tensor(np.asarray(tokenized.word_ids), device=ids.device)
    special = word_ids < 0
    with torch.no_grad():
        embeds, base = explainer.embeddings(ids), explainer.embeddings(base_ids)

    def forward(presence):
        keep = presence.to(embeds.dtype)[:, word_ids.clamp_min(0)].masked_fill(special, 1.0)  # [n, T]
        n = presence.shape[0]
        logits = explainer.logits_from_embeds(base + keep[..., None] * (embeds - base), type_ids.expand(n, -1),
                                              mask.expand(n, -1))
        return torch.softmax(logits, dim=-1)

    return forward


def perturbation_scores(explainer: Explainer, tokenized, method: str, target: int, *, samples: int | None = None,
                        window: int = 1, baseline: str = "pad", seed: int = 0) -> np.ndarray:
    """Word scores [W] of a perturbation method for class index `target` (the module docstring says what each
    computes). samples: None for DEFAULT_SAMPLES; window: occlusion's words per window. Seeded: captum draws from
    torch's global generator, forked here so the caller's random state is untouched and a result repeats."""
    import torch
    from captum._utils.models.linear_model import SkLearnRidge
    from captum.attr import KernelShap, Lime, Occlusion, ShapleyValues, ShapleyValueSampling

    explainer.require_head()
    n_words = len(tokenized.words)
    if n_words == 0:
        return np.zeros(0)
    forward = torch.no_grad()(word_presence_forward(explainer, tokenized, baseline))
    presence = torch.ones(1, n_words, device=explainer.device)
    per_eval = max(1, PERTURBATION_TOKENS_PER_BATCH // len(tokenized.tokens))
    samples = DEFAULT_SAMPLES.get(method) if samples is None else int(samples)
    common = {"baselines": 0.0, "target": target, "perturbations_per_eval": per_eval}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if method == "occlusion":
            if window < 1:
                raise ValueError("the occlusion window must be at least 1 word")
            attr = Occlusion(forward).attribute(presence, sliding_window_shapes=(min(window, n_words),), strides=1, **common)
        elif method == "shapley" or (method == "kernel-shap" and n_words == 1):
            # KernelSHAP draws coalition sizes 1..W-1, none for one word (captum fails); one word's Shapley value
            # is exactly p(x) - p(baseline), which ShapleyValues gives.
            if n_words <= 8 and math.factorial(n_words) <= samples:
                attr = ShapleyValues(forward).attribute(presence, **common)
            else:
                attr = ShapleyValueSampling(forward).attribute(presence, n_samples=samples, **common)
        elif method == "kernel-shap":
            attr = KernelShap(forward).attribute(presence, n_samples=samples, **common)
        elif method == "lime":
            attr = Lime(forward, interpretable_model=SkLearnRidge(alpha=1.0)).attribute(presence, n_samples=samples, **common)
        else:
            raise ValueError(f"{method!r} is not a perturbation method")
    return attr[0].detach().cpu().double().numpy()


def spread_over_pieces(word_scores: np.ndarray, word_ids: np.ndarray) -> np.ndarray:
    """[W] word scores -> [T] token scores: a word's score split equally among its pieces (special tokens 0), so
    WORD_RULE's sum gives the word score back."""
    word_ids = np.asarray(word_ids)
    words = word_ids >= 0
    pieces = np.bincount(word_ids[words], minlength=len(word_scores))
    out = np.zeros(len(word_ids))
    out[words] = np.asarray(word_scores, dtype=np.float64)[word_ids[words]] / pieces[word_ids[words]]
    return out


# ---- one input, one method ---------------------------------------------------------------------------------------


def check_text(text_a: str, text_b: str | None = None) -> None:
    if not (text_a or "").strip():
        raise ValueError("Type a sentence to explain (sentence A is empty).")


def prepare(explainer: Explainer, text_a: str, text_b: str | None = None):
    """The input tokenized as everywhere in BERT Lens (core.model.encoding.tokenize: same truncation and word ids)."""
    check_text(text_a, text_b)
    item = (text_a, text_b) if text_b else text_a
    return tokenize(explainer.lm, [item])[0]


def probabilities(explainer: Explainer, tokenized) -> np.ndarray:
    """[C] softmax of the classifier's logits for one tokenized input."""
    from core.model.classifier import predict_logits, softmax

    explainer.require_head()
    return softmax(predict_logits(explainer, [tokenized], batch_size=1))[0].astype(np.float64)


def _target_index(labels: tuple[str, ...], target, predicted: int) -> int:
    if target is None or target == "":
        return predicted
    if isinstance(target, str) and target not in labels and target.isdigit():
        target = int(target)  # the command line and a link spell a class index as text
    if isinstance(target, (int, np.integer)):
        if not 0 <= int(target) < len(labels):
            raise ValueError(f"target {target} is not a class index 0..{len(labels) - 1}")
        return int(target)
    if target in labels:
        return labels.index(target)
    raise ValueError(f"target {target!r} is not one of the classes: {', '.join(labels)}")


def attention_flow(explainer: Explainer, tokenized, method: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Token scores [T] and per-layer matrix [L, T, T] (None for "attention") of an attention-based method."""
    _, enc = next(iter(encode_stream(explainer.lm, [tokenized], hidden_states=method == "value-zeroing")))
    if method == "attention":
        return enc.attentions[-1].mean(axis=0)[0].astype(np.float64), None
    matrix = rollout(enc.attentions) if method == "rollout" else rollout(value_zeroing(explainer.lm, enc.hidden_states), residual=0.0)
    return matrix[-1][0].astype(np.float64), matrix


def explain(explainer: Explainer, text_a: str, text_b: str | None = None, method: str = "ig", *, target=None,
            steps: int = DEFAULT_STEPS, baseline: str = "pad", tokenized=None, samples: int | None = None,
            window: int = 1, seed: int = 0) -> Explanation:
    """One method's explanation of one input (sentence A, optional B). target: a label, a class index, or None
    for the predicted class. steps: ig's; samples, window, seed: the perturbation methods' (samples None =
    DEFAULT_SAMPLES). Raises ValueError for empty text, an unknown method/target or a count below 1,
    NoClassifierHead for a gradient or perturbation method on a model without a head."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    if method in HEAD_METHODS:
        explainer.require_head()
        if steps < 1 or (samples is not None and samples < 1) or window < 1:
            raise ValueError("steps, samples and the occlusion window must be at least 1")
    tok = tokenized if tokenized is not None else prepare(explainer, text_a, text_b)
    labels = explainer.labels
    probs = predicted = target_name = None
    if explainer.has_head:
        probs = probabilities(explainer, tok)
        predicted = labels[int(probs.argmax())]
    extras: dict = {}
    matrix = None
    if method in HEAD_METHODS:
        target_index = _target_index(labels, target, int(probs.argmax()))
        target_name = labels[target_index]
    if method in GRADIENT_METHODS:
        extras = gradient_scores(explainer, tok, method, target_index, steps=steps, baseline=baseline)
        scores = extras.pop("token_scores")
    elif method in PERTURBATION_METHODS:
        words = perturbation_scores(explainer, tok, method, target_index, samples=samples, window=window,
                                    baseline=baseline, seed=seed)
        scores = spread_over_pieces(words, tok.word_ids)
    else:
        if target not in (None, "") and explainer.has_head:
            _target_index(labels, target, 0)  # a wrong label is still an error
        scores, matrix = attention_flow(explainer, tok, method)
    used_samples = None
    if method in PERTURBATION_METHODS:
        used_samples = window if method == "occlusion" else (DEFAULT_SAMPLES[method] if samples is None else int(samples))
    return Explanation(method, tok.tokens, tok.word_ids, tok.words, scores, word_scores(scores, tok.word_ids, len(tok.words)),
                       labels, probs, predicted, target_name, extras.get("completeness_gap"), extras.get("f_x"),
                       extras.get("f_baseline"), steps if method == "ig" else None, matrix, used_samples)


def available_methods(explainer: Explainer) -> tuple[str, ...]:
    return METHODS if explainer.has_head else tuple(m for m in METHODS if m not in HEAD_METHODS)


# ---- the declaration (core.contract): the settings every front end offers ---------------------------------------

@dataclass(frozen=True)
class ExplainSettings:
    """What `explain` (the CLI), `core.lens.explain` and the Why this prediction? page let a person choose."""

    method: str = setting("ig", "the attribution method", choices=METHODS)
    steps: int = setting(DEFAULT_STEPS, "integrated-gradients steps", low=1, high=1000)
    target: str | None = setting(None, "the class to explain, its label or index (default: the predicted one)",
                                 type="str")
    samples: int | None = setting(None, "shapley: word orders; kernel-shap, lime: coalitions (default: "
                                  + ", ".join(f"{m} {n}" for m, n in DEFAULT_SAMPLES.items()) + ")",
                                  type="int", low=1, high=5000)
    window: int = setting(1, "occlusion: words per window", low=1, high=10)


def run_explain(explainer: Explainer, inputs, settings: ExplainSettings, progress=None,
                should_stop=None) -> Explanation:
    """`explain` under the contract: inputs (sentence A, sentence B or None), the settings dataclass."""
    text_a, text_b = (inputs, None) if isinstance(inputs, str) else inputs
    return explain(explainer, text_a, text_b, settings.method, target=settings.target, steps=settings.steps,
                   samples=settings.samples, window=settings.window)


ANALYSIS = Analysis(
    name="explain", view="explain", command="explain", lens="explain", settings=ExplainSettings, run=run_explain,
    charts="core.charts.explain:explanation_charts", title="Word attributions", order=0,
    summary="word attributions of a fine-tuned classifier's prediction, or token flow",
)
