"""One map of every encoder family BERT Lens reads, and hooks set through it (after TransformerLens's hooked
model, for encoders).

`ModelAdapter.of(model)` names, for BERT (MiniLM), RoBERTa (XLM-R, CamemBERT), DistilBERT, ALBERT, ELECTRA,
MPNet, ModernBERT and DeBERTa-v2/v3 (mDeBERTa-v3), the embeddings, the layers in the order they run, each layer's
projections (`parts(layer)`) and the MLM head of a *ForMaskedLM model. Activations are read and changed at named
points (HOOK_POINTS), per layer:

    resid_pre   [B, T, D]     the layer's input hidden state
    q, k, v     [B, T, H, d]  the query / key / value projections (bias included), split into heads; for
                              ModernBERT the thirds of its fused Wqkv output, q and k BEFORE the rotary embedding
    q_rot, k_rot [B, T, H, d] q and k as the attention scores use them: after ModernBERT's rotary position
                              embedding (the attention call's cos/sin); equal to q and k in every other family
    z           [B, T, H, d]  each head's attention context, the input of the output projection (TransformerLens z)
    attn_out    [B, T, D]     the output projection's output, before dropout, residual and LayerNorm
    ffn_in      [B, T, D]     the feed-forward block's input (the attention sub-layer's output)
    ffn_act     [B, T, I]     the feed-forward neurons: the activation after the nonlinearity (GELU), I = the
                              intermediate size, read at the input of the feed-forward's second Linear
                              (ModernBERT's GeGLU: Wi -> split into input, gate -> act(input) * gate -> Wo, so
                              ffn_act is the gated product)
    ffn_out     [B, T, D]     the feed-forward block's output, before residual and LayerNorm
    resid_post  [B, T, D]     the layer's output hidden state
    call        LayerCall     what the encoder passed the layer besides the hidden state (mask, MPNet's bias)
    position_bias [B, H, T, T] MPNet's relative position bias added to q·k/√d (MPNet only)
    attn_terms  {name: [B, H, T, T]} DeBERTa's disentangled score terms apart, each scaled as its attention scales
                              it: "c2c" (content→content, q·kᵀ), "c2p" (content→position, q · the key projection of
                              the relative position bucket j is at from i), "p2c" (position→content, k_j · the
                              query projection of the bucket i is at from j); their sum is attn_scores before the
                              mask (DeBERTa only)
    attn_scores [B, H, T, T]  the softmax's input: q·kᵀ/√d (the q and k the attention received) plus the additive
                              attention mask (a large negative number at padding) and MPNet's position bias, in
                              the order and with the operations of the family's eager attention. DeBERTa:
                              c2c + c2p + p2c (attn_terms), each divided by √(d·(1 + number of position terms)),
                              the padding filled with the dtype's minimum (its masked_fill, not an addition)
    pattern     [B, H, T, T]  the attention probabilities after the softmax: the weights the attention module
                              returns (eager attention; what `output_attentions` gives), or softmax(attn_scores)
                              where it returns none (SDPA; MPNet when not asked for attentions)

ModernBERT (and mmBERT, Ettin, gte-modernbert: model_type "modernbert"): pre-norm layers (attn_norm, which is
the identity in layer 0, and mlp_norm before each sub-layer; resid_post is the layer's output without norm), a final
LayerNorm after the last layer (`final_norm`: transformers' last hidden state and the MLM head's input are after it),
the MLM head `decoder(head(h))`, no token type ids. Its layers alternate global and local attention
(`config.layer_types`, from `global_attn_every_n_layers`): a local layer's mask lets a query see only keys within
`local_attention // 2` positions, so its attn_scores hold the mask's large negative number outside that band and
its pattern is banded; that is the model, not a reading error. Eager attention only (loading asks for it); padded
batches give the numbers of one input at a time (the mask pads keys; positions count from each row's start).

"call", "position_bias", "attn_terms", "attn_scores", "pattern", "q_rot" and "k_rot" can be captured, not changed: the
probabilities are made and used inside one attention function call (transformers' attention interface; MPNet's own forward) that no module
hook sits between, so changing them would mean replacing that function. To change what a head attends to,
intervene on q, k or z. attn_scores and pattern are read at the attention module: its call gives the mask (and
MPNet's bias), and the query/key projections' outputs are read by hooks set just for that call, after every other
hook, so an intervention on q or k shows in them.

Hooks live only inside `capture` / `intervene` (context managers: removed on exit, also when the pass fails),
which hold the model's own lock (models from the app's cache are shared between sessions, which are threads) and
act only on the passes of the thread that holds it. ALBERT runs one shared layer L times: every hook asks which
layer is running (the call index, counted from the encoder's start, or set by `run_layers`), so each layer still
gets its own value.

DeBERTa-v2/v3 (model_type "deberta-v2"; transformers' modeling_deberta_v2.py):
- Disentangled attention: the score of query i and key j is c2c + c2p + p2c (attn_terms above). The relative
  position of i to j (i - j) is put in a bucket: exact within position_buckets/2, log-spaced beyond up to
  max_relative_positions; each bucket has a relative embedding (the encoder's rel_embeddings, layer-normed when
  norm_rel_ebd says so), projected by the layer's own key/query projections when share_att_key (DeBERTa-v3) or by
  pos_key_proj / pos_query_proj. With share_att_key the query/key projections run a second time inside each
  attention call, on those embeddings: the q and k points and the scores read only their first call, on the tokens.
- No absolute position embeddings in v3 (position_biased_input false): word order enters only through the
  buckets. DeBERTa-v2 xlarge/xxlarge's convolution after the first layer (conv_kernel_size) is not supported: the
  adapter refuses it (resid_post of layer 1 would not be layer 2's input).
- The enhanced mask decoder (EMD: the last layer run again with absolute positions as queries before the MLM
  head) is not part of transformers' forward (z_steps = 0), so the MLM head here reads the last layer's output, as
  transformers' DebertaV2ForMaskedLM does. Its head is `lm_predictions` (scores against the word embeddings) or,
  with config.legacy, BERT's `cls`; DeBERTa-v3's released checkpoints are replaced-token discriminators without a
  trained MLM head for the config they ship: the fitted-head route (fit-mlm-head) serves them.
- Tokens are SentencePiece pieces, "▁" starting a word; token_type_ids exist only when config.type_vocab_size > 0
  (v3: 0; core.model.encoding leaves them out then). Eager attention only: transformers has no SDPA for it.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from core.model.loading import FAMILY_NAMES, ModelUnavailable

# torch imported in functions: the adapter touches only the model's own tensors and modules, and
# `python -m core --help` imports the analyses that import it.

HOOK_POINTS = ("resid_pre", "q", "k", "v", "z", "attn_out", "ffn_in", "ffn_act", "ffn_out", "resid_post", "call", "position_bias",
               "attn_terms", "attn_scores", "pattern",
               "q_rot", "k_rot")
_READ_ONLY = frozenset({"call", "position_bias", "attn_terms", "attn_scores", "pattern", "q_rot", "k_rot"})
# read around the attention module's call (module docstring)
_ATTENTION = frozenset({"attn_terms", "attn_scores", "pattern", "q_rot", "k_rot"})
_FUSED_THIRD = {"q": 0, "k": 1, "v": 2}  # ModernBERT's Wqkv output: [q | k | v] along the last axis
_HEAD_SPLIT = frozenset({"q", "k", "v", "z"})  # [B, T, H*d] in the model, [B, T, H, d] at the hook
FAMILIES = FAMILY_NAMES
DEBERTA_TERMS = ("c2c", "c2p", "p2c")

# One lock per model object (the base encoder, shared by its *ForMaskedLM / classifier wrappers): hooks of one
# pass must not meet another pass on the same model. Different copies never wait for each other.
_LOCKS: "weakref.WeakKeyDictionary[object, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


class AdapterError(ValueError):
    """The model is not one of the families the adapter knows, or a point / layer does not exist."""


class NoMaskedLMHead(ModelUnavailable):
    """The model's checkpoint has no masked-word head (a sentence encoder, a fine-tuned classifier)."""


def model_lock(model) -> threading.RLock:
    """The lock of one model object (re-entrant: a capture may hold it inside an intervention)."""
    with _LOCKS_GUARD:
        if model not in _LOCKS:
            _LOCKS[model] = threading.RLock()
        return _LOCKS[model]


@dataclass(frozen=True, eq=False)
class LayerParts:
    """The modules of one layer. query/key/value/output: the attention's Linear projections (output: the one
    whose input is z); attention: the module called with the attention mask (and MPNet's position bias) that
    returns the attention probabilities (eager); ffn_in: the module whose input is the feed-forward input;
    ffn_act: the feed-forward's second Linear, whose input is the neurons' activation; ffn_out: the module whose
    output is the feed-forward output. `shared`: the same modules run for other layers too (ALBERT). `fused`:
    query, key and value are one Linear whose output is [q | k | v] (ModernBERT's Wqkv)."""

    layer: object
    query: object
    key: object
    value: object
    output: object
    attention: object
    ffn_in: object
    ffn_act: object
    ffn_out: object
    shared: bool = False
    fused: bool = False


@dataclass(frozen=True, eq=False)
class LayerCall:
    """The arguments a layer module was called with, after the hidden state (attention mask, MPNet's position
    bias, ...): `run_layers` passes them again. batch: the batch size of the pass it was read from (None: made by
    hand, as `unpadded_call`)."""

    args: tuple
    kwargs: dict
    batch: int | None = None

    def rows(self, index) -> "LayerCall":
        """The call for a batch whose row r is row index[r] of the pass it was read from ([R] long tensor): each
        tensor with that batch as its first dimension (the extended attention mask the model built, [B, 1, T, T]
        additive or bool; MPNet's position bias [B, H, T, T]) taken at those rows, so every row keeps exactly the
        mask the model gave it (padding included); a tensor of batch 1 broadcasts as it does in the model.
        AdapterError when an argument may carry the batch in a way this cannot follow (a cache object, a tensor
        of another first dimension): the caller then runs whole forwards instead."""
        def take(value):
            if value is None or isinstance(value, (bool, int, float, str)):
                return value
            if hasattr(value, "index_select") and hasattr(value, "dim"):
                if value.dim() < 2 or value.shape[0] == 1:
                    return value  # not batch-major (a [T] position index), or broadcast over the batch
                if self.batch is not None and value.shape[0] == self.batch:
                    return value.index_select(0, index.to(value.device))
            raise AdapterError(f"a layer argument of type {type(value).__name__} "
                               f"{tuple(getattr(value, 'shape', ()))} cannot be split by rows")

        return LayerCall(tuple(take(a) for a in self.args), {k: take(v) for k, v in self.kwargs.items()},
                         int(index.numel()))


def _bert_parts(layer) -> LayerParts:
    att = layer.attention
    return LayerParts(layer, att.self.query, att.self.key, att.self.value, att.output.dense, att.self,
                      layer.intermediate, layer.output.dense, layer.output.dense)


def _deberta_parts(layer) -> LayerParts:
    att = layer.attention
    return LayerParts(layer, att.self.query_proj, att.self.key_proj, att.self.value_proj, att.output.dense, att.self,
                      layer.intermediate, layer.output.dense, layer.output.dense)


def _mpnet_parts(layer) -> LayerParts:
    att = layer.attention.attn
    return LayerParts(layer, att.q, att.k, att.v, att.o, att, layer.intermediate, layer.output.dense,
                      layer.output.dense)


def _distilbert_parts(layer) -> LayerParts:
    att = layer.attention
    return LayerParts(layer, att.q_lin, att.k_lin, att.v_lin, att.out_lin, att, layer.ffn, layer.ffn.lin2, layer.ffn)


def _albert_parts(layer) -> LayerParts:
    att = layer.attention
    return LayerParts(layer, att.query, att.key, att.value, att.dense, att, layer.ffn, layer.ffn_output,
                      layer.ffn_output, shared=True)


def _modernbert_parts(layer) -> LayerParts:
    att = layer.attn
    return LayerParts(layer, att.Wqkv, att.Wqkv, att.Wqkv, att.Wo, att, layer.mlp, layer.mlp.Wo, layer.mlp, fused=True)


def _rotate(x, cos, sin):
    """Rotary position embedding of x [B, H, T, d] with cos, sin [B, T, d] (the attention call's
    position_embeddings): x·cos + rotate_half(x)·sin, in float32 as ModernBERT's attention does."""
    half = x.shape[-1] // 2
    x = x.float()
    turned = x.new_empty(x.shape)
    turned[..., :half], turned[..., half:] = -x[..., half:], x[..., :half]
    return x * cos[:, None].float() + turned * sin[:, None].float()


def _base_of(model):
    """The encoder with embeddings inside a *ForMaskedLM / *ForSequenceClassification / core Classifier."""
    prefix = getattr(model, "base_model_prefix", "")
    inner = getattr(model, prefix, None) if prefix else None
    if inner is not None and hasattr(inner, "embeddings"):
        return inner
    if hasattr(model, "embeddings"):
        return model
    inner = getattr(model, "encoder", None)  # core.training.classifier.Classifier
    if inner is not None and hasattr(inner, "embeddings"):
        return inner
    return model


def _name(model) -> str:
    config = getattr(model, "config", None)
    path = getattr(config, "_name_or_path", "") if config is not None else ""
    return f"'{path}' ({type(model).__name__})" if path else type(model).__name__


def _mlm_head(model) -> Callable | None:
    """hidden [..., D] -> logits [..., V]: the part of a *ForMaskedLM forward after its encoder, or None."""
    if hasattr(model, "cls") and hasattr(model.cls, "predictions"):  # BERT
        return model.cls
    if hasattr(model, "lm_predictions"):  # DeBERTa-v2/v3 (not legacy): scores against the word embeddings
        return lambda h: model.lm_predictions(h, model.deberta.embeddings.word_embeddings)
    if hasattr(model, "lm_head"):  # RoBERTa, XLM-R, CamemBERT, MPNet
        return model.lm_head
    if hasattr(model, "predictions") and hasattr(model.predictions, "decoder"):  # ALBERT
        return model.predictions
    if hasattr(model, "vocab_projector"):  # DistilBERT
        return lambda h: model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(h))))
    if hasattr(model, "generator_lm_head"):  # ELECTRA generator
        return lambda h: model.generator_lm_head(model.generator_predictions(h))
    if hasattr(model, "decoder") and hasattr(model, "head") and hasattr(model, "model"):  # ModernBERT
        return lambda h: model.decoder(model.head(h))
    return None


class ModelAdapter:
    """Names and hooks of one model (see the module docstring). Build with `ModelAdapter.of(model)`; every
    adapter of a model shares the model's lock. Inside a capture/intervene block, `token_mask` is the running
    pass's [B, T] bool mask of real tokens (all True when it was called without an attention mask)."""

    def __init__(self, model):
        self.model = model
        self.base = _base_of(model)
        encoder = getattr(self.base, "encoder", None)
        layers = getattr(encoder, "layer", None)
        stack = getattr(self.base, "layers", None)
        if stack is not None and len(stack) and all(hasattr(getattr(l, "attn", None), "Wqkv") for l in stack):
            encoder = self.base  # ModernBertModel holds its layers itself
            self.family, parts = "modernbert", [_modernbert_parts(l) for l in stack]
        elif layers is not None and all(hasattr(getattr(l, "attention", None), "self")
                                        and hasattr(l.attention.self, "query_proj") for l in layers):
            if getattr(encoder, "conv", None) is not None:
                raise AdapterError(f"{_name(model)}: DeBERTa-v2 with a convolution after its first layer "
                                   "(conv_kernel_size > 0, as deberta-v2-xlarge) is not supported: the layers' outputs "
                                   "are not the next layers' inputs; DeBERTa-v3 models have none")
            self.family, parts = "deberta-v2", [_deberta_parts(l) for l in layers]
        elif layers is not None and all(hasattr(l, "attention") and hasattr(l.attention, "self") for l in layers):
            self.family, parts = "bert", [_bert_parts(l) for l in layers]
        elif layers is not None and all(hasattr(l, "attention") and hasattr(l.attention, "attn") for l in layers):
            self.family, parts = "mpnet", [_mpnet_parts(l) for l in layers]
        elif getattr(getattr(self.base, "transformer", None), "layer", None) is not None:
            encoder = self.base.transformer
            self.family, parts = "distilbert", [_distilbert_parts(l) for l in encoder.layer]
        elif getattr(encoder, "albert_layer_groups", None) is not None:
            groups, config = encoder.albert_layer_groups, self.base.config
            if any(len(g.albert_layers) != 1 for g in groups):
                raise AdapterError(f"{_name(model)}: ALBERT with inner_group_num > 1 is not supported "
                                   "(no released ALBERT uses it)")
            n, n_groups = config.num_hidden_layers, config.num_hidden_groups
            self.family = "albert"  # AlbertTransformer's own rule for which group runs layer i
            parts = [_albert_parts(groups[int(i / (n / n_groups))].albert_layers[0]) for i in range(n)]
        else:
            raise AdapterError(f"{_name(model)} has no encoder layout BERT Lens knows; pick a model of one of "
                               f"these families: {FAMILIES}")
        self.encoder = encoder
        self.embeddings = self.base.embeddings
        self._parts = tuple(parts)
        self.num_heads = int(getattr(self.base.config, "num_attention_heads", getattr(self.base.config, "n_heads", 0)))
        self.lock = model_lock(self.base)
        # Which layer is running: set by the layer's pre-hook (call index for a shared layer), read by every hook.
        self._owner: int | None = None
        self._depth = 0
        self._next_call = 0
        self._running: int | None = None
        self._tracking: list = []
        self.token_mask = None
        # DeBERTa: the tensors the running attention call projects as tokens (its hidden state, its query states);
        # a q/k projection of anything else is of the relative position embeddings (module docstring).
        self._attention_inputs: tuple = ()

    @classmethod
    def of(cls, model) -> "ModelAdapter":
        """The adapter of `model`: a base encoder, a *ForMaskedLM, a *ForSequenceClassification or a BERT Lens
        Classifier. Raises AdapterError for another layout. Cheap (attribute look-ups); adapters of one model
        share its lock, so there is no need to keep one."""
        return cls(model)

    # ---- names ------------------------------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return len(self._parts)

    @property
    def layers(self) -> tuple:
        """The layer modules in the order they run (ALBERT: the same shared module repeated)."""
        return tuple(p.layer for p in self._parts)

    def parts(self, layer: int) -> LayerParts:
        self._check_layer(layer)
        return self._parts[layer]

    @property
    def has_position_bias(self) -> bool:
        return self.family == "mpnet"

    @property
    def final_norm(self):
        """The module between the last layer's output and the encoder's output (ModernBERT's final LayerNorm), or
        None where the last layer's output is the encoder's output. A per-layer lens puts an earlier layer's hidden
        state through it before the MLM head, as the last layer's output is."""
        return self.base.final_norm if self.family == "modernbert" else None

    @property
    def has_score_terms(self) -> bool:
        """Whether the attention scores are DeBERTa's disentangled terms (the "attn_terms" point)."""
        return self.family == "deberta-v2"

    @property
    def mlm_head(self) -> Callable:
        """hidden [..., D] -> logits [..., V] of the model's MLM head; NoMaskedLMHead naming the model when it has
        none (a base encoder, a classifier: load the *ForMaskedLM)."""
        head = _mlm_head(self.model)
        if head is None:
            raise NoMaskedLMHead(f"{_name(self.model)} has no masked-word (MLM) head: load the checkpoint as a "
                                 "*ForMaskedLM model (core.model.loading.load_model(..., masked_lm=True))")
        return head

    @property
    def lens_head(self) -> Callable:
        """hidden [..., D] of a layer before the last -> logits [..., V]: the MLM head after `final_norm`, which the
        last layer's output passes through before the head (ModernBERT); the MLM head itself elsewhere."""
        head, norm = self.mlm_head, self.final_norm
        return head if norm is None else (lambda hidden: head(norm(hidden)))

    def mlm_logits(self, hidden):
        """The MLM head on any layer's hidden states [..., D] -> logits [..., V] (a logit lens)."""
        return self.mlm_head(hidden)

    def _check_layer(self, layer: int) -> None:
        if not 0 <= int(layer) < self.num_layers:
            raise AdapterError(f"layer {layer} does not exist; the model has layers 0..{self.num_layers - 1}")

    def _check_points(self, points: Iterable[str]) -> list[str]:
        points = list(points)
        unknown = [p for p in points if p not in HOOK_POINTS]
        if unknown:
            raise AdapterError(f"unknown hook point(s) {unknown}; use {', '.join(HOOK_POINTS)}")
        if "position_bias" in points and not self.has_position_bias:
            raise AdapterError(f"{_name(self.model)} adds no position bias to its attention scores (only MPNet does)")
        if "attn_terms" in points and not self.has_score_terms:
            raise AdapterError(f"{_name(self.model)} has one term in its attention scores, q·kᵀ; only DeBERTa's "
                               "disentangled attention has c2c, c2p and p2c terms")
        return points

    # ---- which layer is running -------------------------------------------------------------------------------

    def _mine(self) -> bool:
        return threading.get_ident() == self._owner

    @contextlib.contextmanager
    def _session(self) -> Iterator[None]:
        """Holds the lock and the layer-tracking hooks; nests (a capture inside an intervention)."""
        with self.lock:
            if self._depth == 0:
                self._owner = threading.get_ident()
                try:
                    self._track()
                except BaseException:
                    self._untrack()
                    raise
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._untrack()

    def _track(self) -> None:
        def start(_module, args, kwargs):
            if self._mine():
                self._next_call = 0
                ids = kwargs.get("input_ids", args[0] if args else None)
                embeds = kwargs.get("inputs_embeds")
                mask = kwargs.get("attention_mask")
                shape = tuple((ids if ids is not None else embeds).shape[:2]) if (ids is not None or embeds is not None) else None
                if mask is not None and mask.dim() == 2:
                    self.token_mask = mask.bool()
                elif shape is not None:
                    import torch

                    self.token_mask = torch.ones(shape, dtype=torch.bool, device=(ids if ids is not None else embeds).device)

        def enter_layer(index: int | None):
            def hook(_module, _args):
                if self._mine():
                    self._running = self._next_call if index is None else index
                    self._next_call = self._running + 1
            return hook

        def enter_attention(_module, args, kwargs):
            if self._mine():
                hidden = args[0] if args else kwargs.get("hidden_states")
                self._attention_inputs = (hidden, kwargs.get("query_states"))

        self._tracking.append(self.base.register_forward_pre_hook(start, with_kwargs=True))
        if self.has_score_terms:
            for parts in self._parts:
                self._tracking.append(parts.attention.register_forward_pre_hook(enter_attention, with_kwargs=True))
        shared = {id(p.layer) for p in self._parts if p.shared}
        for index, module in {id(p.layer): (i, p.layer) for i, p in reversed(list(enumerate(self._parts)))}.values():
            self._tracking.append(module.register_forward_pre_hook(enter_layer(None if id(module) in shared else index)))

    def _untrack(self) -> None:
        for handle in self._tracking:
            handle.remove()
        self._tracking.clear()
        self._owner, self._running, self._next_call, self.token_mask = None, None, 0, None
        self._attention_inputs = ()

    def _of_tokens(self, point: str, inputs) -> bool:
        """False for DeBERTa's second run of its q/k projections, on the relative position embeddings."""
        if point not in ("q", "k") or not self.has_score_terms or not inputs:
            return True
        return any(inputs[0] is seen for seen in self._attention_inputs if seen is not None)

    # ---- hooks ----------------------------------------------------------------------------------------------

    def _module_and_side(self, parts: LayerParts, point: str) -> tuple[object, str]:
        """(module, "in" | "out" | "in+kwargs") where the point is read: a module's first input or its output."""
        return {
            "resid_pre": (parts.layer, "in+kwargs"), "call": (parts.layer, "in+kwargs"), "resid_post": (parts.layer, "out"),
            "q": (parts.query, "out"), "k": (parts.key, "out"), "v": (parts.value, "out"), "z": (parts.output, "in"),
            "attn_out": (parts.output, "out"), "ffn_in": (parts.ffn_in, "in"), "ffn_act": (parts.ffn_act, "in"), "ffn_out": (parts.ffn_out, "out"),
            "position_bias": (parts.attention, "in+kwargs"),
        }[point]

    def _split(self, point: str, value):
        if point in _HEAD_SPLIT:
            return value.view(*value.shape[:-1], self.num_heads, value.shape[-1] // self.num_heads)
        return value

    def _hooks(self, point: str, layers: Sequence[int], act: Callable) -> list:
        """Register `act(layer, value) -> new value or None` at `point` of `layers`; returns the handles."""
        if point in _ATTENTION:
            return self._attention_hooks(point, layers, act)
        import torch

        wanted = set(layers)
        handles = []
        seen = set()
        for layer in layers:
            module, side = self._module_and_side(self._parts[layer], point)
            if id(module) in seen:
                continue  # a shared (ALBERT) module: one hook serves every layer that runs it
            seen.add(id(module))

            if side == "out" and self._parts[layer].fused and point in _FUSED_THIRD:
                def hook(_module, _inputs, output, point=point):
                    if not self._mine() or self._running not in wanted:
                        return None
                    width = output.shape[-1] // 3
                    start = _FUSED_THIRD[point] * width
                    new = act(self._running, self._split(point, output[..., start:start + width]))
                    if new is None:
                        return None
                    new = new.reshape(*output.shape[:-1], width)
                    return torch.cat([output[..., :start], new, output[..., start + width:]], dim=-1)

                handles.append(module.register_forward_hook(hook))
            elif side == "out":
                def hook(_module, _inputs, output, point=point):
                    if not self._mine() or self._running not in wanted or not self._of_tokens(point, _inputs):
                        return None
                    tensor = output[0] if isinstance(output, tuple) else output
                    new = act(self._running, self._split(point, tensor))
                    if new is None:
                        return None
                    new = new.reshape(tensor.shape)
                    return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new

                handles.append(module.register_forward_hook(hook))
            else:
                def pre(_module, args, kwargs=None, point=point):
                    if not self._mine() or self._running not in wanted:
                        return None
                    if point == "call":
                        hidden = args[0] if args else (kwargs or {}).get("hidden_states")
                        act(self._running, LayerCall(tuple(args[1:]), dict(kwargs or {}),
                                                     int(hidden.shape[0]) if hasattr(hidden, "shape") else None))
                        return None
                    if point == "position_bias":
                        bias = kwargs.get("position_bias", args[2] if len(args) > 2 else None)
                        act(self._running, bias)
                        return None
                    from_kwargs = not args and kwargs is not None and "hidden_states" in kwargs
                    tensor = kwargs["hidden_states"] if from_kwargs else args[0]
                    new = act(self._running, self._split(point, tensor))
                    if new is None:
                        return None
                    new = new.reshape(tensor.shape)
                    if from_kwargs:
                        return args, {**kwargs, "hidden_states": new}
                    return ((new,) + tuple(args[1:]), kwargs) if kwargs is not None else (new,) + tuple(args[1:])

                handles.append(module.register_forward_pre_hook(pre, with_kwargs=side == "in+kwargs"))
        return handles

    def _attention_hooks(self, point: str, layers: Sequence[int], act: Callable) -> list:
        """Hooks reading "attn_scores" or "pattern" (module docstring): at the attention module's call, readers of
        its query/key projections are added (so they run after every hook already there, interventions included);
        when the call returns, the scores are built from what they read and the readers removed."""
        wanted = set(layers)
        handles: list = []
        seen = set()
        for layer in layers:
            parts = self._parts[layer]
            if id(parts.attention) in seen:
                continue  # a shared (ALBERT) module: one hook serves every layer that runs it
            seen.add(id(parts.attention))
            call = _AttentionCall(parts)

            def before(_module, args, kwargs, call=call):
                if self._mine():  # another thread's pass on a shared model leaves this call alone
                    call.drop()
                    if self._running in wanted:
                        call.listen(args, kwargs, self._mine)

            def after(module, _args, _kwargs, output, call=call):
                if not self._mine():
                    return None
                if call.args is None or self._running not in wanted:
                    call.drop()
                    return None
                try:
                    weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
                    if point == "pattern" and weights is not None and hasattr(weights, "shape"):
                        act(self._running, weights)
                    elif point in ("q_rot", "k_rot"):  # [B, H, T, d] -> the points' [B, T, H, d]
                        act(self._running, self._query_key(call)[point == "k_rot"].transpose(1, 2))
                    elif point == "attn_terms":
                        act(self._running, self._deberta_terms(module, call))
                    else:
                        scores = self._scores(module, call)
                        act(self._running, scores if point == "attn_scores" else scores.softmax(dim=-1))
                finally:
                    call.drop()
                return None

            handles.append(parts.attention.register_forward_pre_hook(before, with_kwargs=True))
            handles.append(parts.attention.register_forward_hook(after, with_kwargs=True))
            handles.append(call)  # its remove() drops readers left by a pass that failed inside the attention
        return handles

    def _query_key(self, call: "_AttentionCall"):
        """q, k [B, H, T, d] as the attention call's scores use them: the projections' outputs split into heads
        (ModernBERT: the first two thirds of Wqkv's output, then rotated with the call's cos/sin)."""
        q, k = call.q, call.k
        if call.parts.fused:
            width = q.shape[-1] // 3
            q, k = q[..., :width], k[..., width:2 * width]
        size = q.shape[-1] // self.num_heads
        q = q.reshape(*q.shape[:-1], -1, size).transpose(1, 2)
        k = k.reshape(*k.shape[:-1], -1, size).transpose(1, 2)
        if self.family == "modernbert":
            cos, sin = call.kwargs["position_embeddings"]
            q, k = _rotate(q, cos, sin).to(q.dtype), _rotate(k, cos, sin).to(k.dtype)
        return q, k
    def _deberta_terms(self, module, call: "_AttentionCall") -> dict:
        """DeBERTa's c2c, c2p and p2c scores [B, H, T, T], each divided by the attention's scale, computed as
        DisentangledSelfAttention computes them (transformers' modeling_deberta_v2.py) from the q and k the call's
        projections returned and its relative positions and embeddings; c2p / p2c are zeros where the config
        leaves them out (pos_att_type)."""
        import torch
        from torch.nn.functional import linear

        q, k = (self._split("q", call.q).transpose(1, 2), self._split("k", call.k).transpose(1, 2))  # [B, H, T, d]
        kinds = list(module.pos_att_type or [])
        # scaled_size_sqrt: √(d · (1 + number of position terms)), in float32 then the scores' dtype
        scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * (1 + ("c2p" in kinds) + ("p2c" in kinds)))
        scale = scale.to(device=q.device, dtype=q.dtype)
        terms = {"c2c": torch.matmul(q, k.transpose(-1, -2) / scale)}
        zeros = torch.zeros_like(terms["c2c"])
        terms["c2p"], terms["p2c"] = zeros, zeros
        if not module.relative_attention:
            return terms
        from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

        relative = call.kwargs.get("relative_pos")
        if relative is None:
            relative = build_relative_position(q[0, 0], k[0, 0], bucket_size=module.position_buckets,
                                               max_position=module.max_relative_positions)
        relative = relative.to(device=q.device, dtype=torch.long)
        while relative.dim() > 2 and relative.size(0) == 1:  # [1, T, T] -> [T, T] (a batch of positions stays)
            relative = relative[0]
        span = module.pos_ebd_size
        embeddings = call.kwargs.get("rel_embeddings")[: span * 2]  # [2 span, D], one row per bucket
        # F.linear, not the modules: a projection module's call would look like another run of the q / k points
        heads = lambda x: x.view(x.size(0), self.num_heads, -1).transpose(0, 1)  # noqa: E731 [2S, H*d] -> [H, 2S, d]
        if module.share_att_key:
            pos_query, pos_key = (linear(embeddings, module.query_proj.weight, module.query_proj.bias),
                                  linear(embeddings, module.key_proj.weight, module.key_proj.bias))
        else:
            pos_key = (linear(embeddings, module.pos_key_proj.weight, module.pos_key_proj.bias)
                       if "c2p" in kinds else None)
            pos_query = (linear(embeddings, module.pos_query_proj.weight, module.pos_query_proj.bias)
                         if "p2c" in kinds else None)
        shape = terms["c2c"].shape
        if "c2p" in kinds:  # query i's content against the key projection of the bucket of (i - j)
            where = torch.clamp(relative + span, 0, span * 2 - 1).expand(shape)
            terms["c2p"] = torch.gather(torch.matmul(q, heads(pos_key).transpose(-1, -2)), -1, where) / scale
        if "p2c" in kinds:  # key j's content against the query projection of the bucket of (j - i)
            where = torch.clamp(-relative + span, 0, span * 2 - 1).expand(shape)
            p2c = torch.gather(torch.matmul(k, heads(pos_query).transpose(-1, -2)), -1, where).transpose(-1, -2)
            terms["p2c"] = p2c / scale
        return terms

    def _scores(self, module, call: "_AttentionCall"):
        """q·kᵀ scaled, plus MPNet's position bias and the mask, as the family's eager attention computes them."""
        import torch

        if self.has_score_terms:  # DeBERTa: c2c + (c2p + p2c) in its order; padding filled, not added to
            terms = self._deberta_terms(module, call)
            scores = terms["c2c"] + (terms["c2p"] + terms["p2c"])
            mask = call.kwargs.get("attention_mask", call.args[1] if len(call.args) > 1 else None)
            if mask is not None:
                scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
            return scores

        q, k = self._query_key(call)
        size = q.shape[-1]
        scaling = getattr(module, "scaling", None)
        if self.family == "modernbert":  # its attention passes scaling=head_dim**-0.5 to the attention function
            scores = torch.matmul(q, k.transpose(2, 3)) * size ** -0.5
        elif scaling is not None:  # transformers' eager_attention_forward
            scores = torch.matmul(q, k.transpose(2, 3)) * scaling
        else:  # MPNet's own forward
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(size)
        if self.has_position_bias:
            bias = call.kwargs.get("position_bias", call.args[2] if len(call.args) > 2 else None)
            if bias is not None:
                scores = scores + bias
        mask = call.kwargs.get("attention_mask", call.args[1] if len(call.args) > 1 else None)
        if mask is not None:
            if mask.dtype == torch.bool:  # SDPA's mask (True = attend): the eager mask's additive form
                mask = torch.zeros(mask.shape, dtype=scores.dtype, device=mask.device).masked_fill(
                    ~mask, torch.finfo(scores.dtype).min)
            scores = scores + mask
        return scores

    def _layers(self, layers: Iterable[int] | int | None) -> list[int]:
        if layers is None:
            return list(range(self.num_layers))
        layers = [layers] if isinstance(layers, int) else list(layers)
        for layer in layers:
            self._check_layer(layer)
        return layers

    @contextlib.contextmanager
    def capture(self, points: Iterable[str], layers: Iterable[int] | int | None = None) -> Iterator["ActivationStore"]:
        """Read `points` of `layers` (all by default) on every forward pass inside the block into the store
        yielded (values detached; a second pass overwrites the first)."""
        points = self._check_points(points)
        layers = self._layers(layers)
        store = ActivationStore()
        with self._session():
            handles = []
            try:
                for point in points:
                    def keep(layer, value, point=point):
                        store._values[(point, layer)] = value.detach() if hasattr(value, "detach") else value
                    handles += self._hooks(point, layers, keep)
                yield store
            finally:
                for handle in handles:
                    handle.remove()

    @contextlib.contextmanager
    def intervene(self, point: str, fn: Callable, layers: Iterable[int] | int | None = None) -> Iterator["ModelAdapter"]:
        """Replace `point` of `layers` (all by default) on every forward pass inside the block with
        `fn(value, layer)`: value in the point's shape (module docstring); fn returns the new value of that shape,
        or None to leave it as it is. ("call", "position_bias", "attn_scores" and "pattern" are read-only: module
        docstring.)"""
        (point,) = self._check_points([point])
        if point in _READ_ONLY:
            raise AdapterError(f"{point!r} can be captured, not changed; to change what a head attends to, "
                               "intervene on q, k or z")
        layers = self._layers(layers)
        with self._session():
            handles = []
            try:
                handles = self._hooks(point, layers, lambda layer, value: fn(value, layer))
                yield self
            finally:
                for handle in handles:
                    handle.remove()

    @contextlib.contextmanager
    def feed_forward_at(self, layer: int, positions) -> Iterator["ModelAdapter"]:
        """Inside the block, layer `layer`'s feed-forward block runs at one position per row only (positions: [B]
        long, row b's position), on the passes of this thread: its input module gets [B, 1, D] and the residual
        sum after it broadcasts, so the layer's output is right at each row's position and not elsewhere (every
        family adds the feed-forward output to its input, then LayerNorm, both per position). For the last layer
        when only those positions are read (the [MASK], the [CLS] a classifier pools): the feed-forward block is
        most of a layer's work. ffn_act / ffn_out of that layer then have one position per row."""
        self._check_layer(layer)
        module = self._parts[layer].ffn_in

        def pre(_module, args):
            if not self._mine() or self._running != layer:
                return None
            hidden = args[0]
            index = positions.to(hidden.device).view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
            return (hidden.gather(1, index),) + tuple(args[1:])

        with self._session():
            handle = module.register_forward_pre_hook(pre)
            try:
                yield self
            finally:
                handle.remove()

    def unpadded_call(self, hidden) -> LayerCall:
        """The LayerCall of inputs without padding [B, T, D]: no attention mask; MPNet's relative position bias
        computed from the hidden state as its encoder does; DeBERTa's all-ones mask, relative positions and
        embeddings, as its encoder makes them."""
        if self.has_position_bias:
            return LayerCall((None, self.encoder.compute_position_bias(hidden)), {})
        if self.has_score_terms:  # DeBERTa's layers need their mask and relative positions and embeddings
            import torch

            mask = self.encoder.get_attention_mask(torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device))
            return LayerCall((mask,), {"relative_pos": self.encoder.get_rel_pos(hidden),
                                       "rel_embeddings": self.encoder.get_rel_embedding()})
        return LayerCall((), {})

    def _modernbert_calls(self, hidden, call: LayerCall) -> dict:
        """{layer type: the keyword arguments ModernBertModel passes a layer of that type}: a global and a local
        layer get different masks and rotary tables, so one captured call cannot serve both. The padding is read
        back from the call's mask (its diagonal: a key is padding exactly where token i cannot see itself)."""
        import torch
        from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

        mask = call.kwargs.get("attention_mask")
        tokens = None
        if mask is not None:
            diagonal = mask.diagonal(dim1=-2, dim2=-1)[:, 0]  # [B, T]
            tokens = diagonal if diagonal.dtype == torch.bool else diagonal > torch.finfo(diagonal.dtype).min / 2
            tokens = tokens.expand(hidden.shape[0], -1).long()
        found = {"config": self.base.config, "inputs_embeds": hidden, "attention_mask": tokens}
        masks = {"full_attention": create_bidirectional_mask(**found),
                 "sliding_attention": create_bidirectional_sliding_window_mask(**found)}
        positions = torch.arange(hidden.shape[1], device=hidden.device)[None]
        return {kind: {"attention_mask": masks[kind],
                       "position_embeddings": self.base.rotary_emb(hidden, positions, kind)}
                for kind in set(self.base.config.layer_types)}

    def run_layers(self, hidden, call: LayerCall, start: int, stop: int | None = None):
        """Layers start..stop-1 (all to the end by default) from `hidden` [B, T, D] (layer start's input), called
        with `call` (captured from an earlier pass, point "call"); returns the last one's output [B, T, D]. Hooks
        of an open capture/intervene see the right layer index, also for ALBERT's shared layer. Run to the end
        (stop None), the result is the encoder's output: through `final_norm` where the model has one."""
        to_end = stop is None
        stop = self.num_layers if stop is None else stop
        self._check_layer(start)
        if stop > start:
            self._check_layer(stop - 1)
        by_type = self._modernbert_calls(hidden, call) if self.family == "modernbert" else None
        for index in range(start, stop):
            if self._mine():
                self._next_call = index
            layer = self._parts[index].layer
            if by_type is not None:
                hidden = layer(hidden, **by_type[layer.attention_type])
            else:
                hidden = layer(hidden, *call.args, **call.kwargs)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        if to_end and self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden


class _AttentionCall:
    """One attention module call being read: its arguments and the q / k its projections returned (hooks set for
    the call only)."""

    def __init__(self, parts: LayerParts):
        self.parts = parts
        self.args = self.kwargs = self.q = self.k = None
        self._readers: list = []

    def listen(self, args, kwargs, mine: Callable[[], bool]) -> None:
        self.args, self.kwargs = tuple(args), dict(kwargs or {})

        def read(name):
            def hook(_module, _inputs, output):
                # the first call only: DeBERTa (share_att_key) runs the projection again on position embeddings
                if mine() and getattr(self, name) is None:
                    setattr(self, name, output[0] if isinstance(output, tuple) else output)
            return hook

        self._readers = [self.parts.query.register_forward_hook(read("q")),
                         self.parts.key.register_forward_hook(read("k"))]

    def drop(self) -> None:
        for handle in self._readers:
            handle.remove()
        self._readers.clear()
        self.args = self.kwargs = self.q = self.k = None

    remove = drop  # a capture removes it with its hook handles


class ActivationStore:
    """What a `capture` read: store["z", 3] -> [B, T, H, d] (shapes in the module docstring)."""

    def __init__(self):
        self._values: dict[tuple[str, int], object] = {}

    def __getitem__(self, key: tuple[str, int]):
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"{key} was not captured (no forward pass ran inside the block, or that point/layer "
                           f"was not asked for); captured: {sorted(self._values)}") from None

    def __contains__(self, key) -> bool:
        return key in self._values

    def layers(self, point: str) -> list:
        """The values of one point, layer by layer (the layers captured, ascending)."""
        return [value for (p, _), value in sorted(self._values.items(), key=lambda kv: kv[0][1]) if p == point]
