"""What causes the output: activation patching (causal tracing) and its gradient approximation.

Two inputs of the same length, a *clean* one (the model gives the answer) and a *corrupted* one (a word swapped),
and a scalar *metric* of the output. Each cell of a granularity copies one activation of the clean run into the
corrupted run and measures the metric again (Meng et al. 2022; Wang et al. 2022; TransformerLens's
`patching` module, whose `generic_activation_patch` runs one forward per cell: the baseline bench/patching.py
times). Granularities (`over`), each a [layer, cell] grid, row i = transformer layer i + 1 (the embeddings not
counted; charts and the CLI show i + 1, core.numbering):

    heads      one head's z (its slice of the attention context before the output projection) at every position
    positions  the residual stream after the layer (resid_post) at one token position
    attn       the attention block's output (attn_out: the output projection's, before residual and LayerNorm)
               at one position
    mlp        the feed-forward block's output (ffn_out) at one position

The metric is the log-probability of a target word piece at the [MASK] (a model with an MLM head) or a class
logit, or the difference of two class logits (a classification run). Recovery = (patched - corrupt) /
(clean - corrupt): 1 when the cell restores the clean answer, 0 when it changes nothing. A recovery is only a
finding when that gap is large and the clean run really gives the answer: `Patching.warnings` says when either fails
(`small_gap`: |clean - corrupt| < SMALL_GAP; `clean_not_top`: the target is not the clean input's top-1 word at the
[MASK], or the class is not the clean prediction), and every front end shows them above the grid.

Batched: each forward runs the corrupted input as many times as a chunk of cells, row r patching cell r (hooks
through core.model.adapter), so a [layer, head] grid of bert-base (144 cells) costs a few forwards, not 144; and a
row patching a cell of layer l starts at layer l from the corrupted run's cached input there (the layers below never
change), so its row runs L - l layers, not L (issue 47; "reusing the layers" below).

`attribution_patch` is Nanda (2023)'s attribution patching: the first-order estimate
metric(corrupt) + sum((clean - corrupt) * d metric / d activation at the corrupted run) of every cell at once,
from one clean forward, one corrupted forward and one backward. It is exact where the metric is linear in the
activation; `correlation` compares it with exact patching.

`path` (Wang et al. 2022's path patching): the sender head's effect through one later receiver head only. The
corrupted run gets the sender's clean z with every other head frozen at its corrupted z (feed-forward blocks
recompute); the receiver's queries, keys and values of that run are then put into a fresh corrupted run.
"""

from __future__ import annotations

# torch imported in functions: importing this module (the CLI's --help, the pages) must not load it.
import contextlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from core.analyses.masked import prepare_text, require_masked_lm
from core.contract import Analysis, setting
from core.model.adapter import AdapterError, ModelAdapter, NoMaskedLMHead
from core.model.encoding import Tokenized, tokenize
from core.progress import ProgressCallback, StopCheck, check_stop

OVER = ("heads", "positions", "attn", "mlp")
POINT = {"heads": "z", "positions": "resid_post", "attn": "attn_out", "mlp": "ffn_out"}
METHODS = ("exact", "attribution")
DEFAULT_MEMORY_MB = 512  # activations of one batched forward; a chunk holds as many cells as fit
CPU_CHUNK_TOKENS = 4096  # on CPU, rows x tokens of one batched forward at most (_rows_per_forward says why)
# Recovery divides by clean - corrupt: a gap under half a logit (nat) turns float noise and small side effects into
# recoveries of +-1 and more (issue 48: a 0.024-logit gap drew a full grid), so it is flagged, not hidden.
SMALL_GAP = 0.5


class PatchingError(ValueError):
    """The inputs, the target or the granularity cannot be patched; the message says what to change."""


Text = str | tuple[str, str | None]


@dataclass(frozen=True)
class PatchingWarning:
    """Why a grid may be noise rather than a finding. code: "small_gap" | "clean_not_top"; message: one sentence
    for a person."""

    code: str
    message: str

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Patching:
    """Activation patching of one clean / corrupted pair. L = layers, C = cells per layer (heads for over="heads",
    token positions otherwise), T = tokens.

    over             "heads" | "positions" | "attn" | "mlp"; method "exact" | "attribution"
    metric           what was measured, e.g. "log P(he) at [MASK] (token 3)" or "logit[yes] - logit[no]"
    tokens           [T] the clean input's word pieces; corrupt_tokens [T] the corrupted input's
    clean_metric     float: the metric on the clean input; corrupt_metric on the corrupted one
    patched          float64 [L, C]: the metric with that one cell copied from the clean run
    recovered        float64 [L, C]: (patched - corrupt) / (clean - corrupt); NaN when clean == corrupt
    path             ((sender layer, head), (receiver layer, head)) or None; path_metric the metric with the
                     sender patched through the receiver only (None without a path)
    target           the measured word piece (MLM) or class label (classifier; the first of a logit difference)
    clean_top        what the clean input actually gives: the top-1 word piece at the [MASK], or the predicted
                     class ("" when unknown)
    gap              clean_metric - corrupt_metric, the divisor of every recovery; warnings: PatchingWarning, ...
    """

    model: str
    over: str
    method: str
    metric: str
    tokens: tuple[str, ...]
    corrupt_tokens: tuple[str, ...]
    clean_metric: float
    corrupt_metric: float
    patched: np.ndarray
    path: tuple[tuple[int, int], tuple[int, int]] | None = None
    path_metric: float | None = None
    target: str = ""
    clean_top: str = ""
    masked: bool = False  # the metric is a log-probability at a [MASK] (MLM), not a class logit

    @property
    def gap(self) -> float:
        return float(self.clean_metric - self.corrupt_metric)

    @property
    def warnings(self) -> tuple[PatchingWarning, ...]:
        out = []
        if not abs(self.gap) >= SMALL_GAP:  # NaN counts as small
            out.append(PatchingWarning("small_gap", (
                f"The clean and corrupted inputs differ by only {self.gap:+.2g} in {self.metric} (under {SMALL_GAP}). "
                "Recovery is divided by this gap, so the grid below is mostly noise: pick a pair the model tells "
                "apart more clearly.")))
        if self.clean_top and self.target and self.clean_top != self.target:
            if self.masked:
                message = (f"The target {self.target!r} is not the model's top guess at the clean input's [MASK] "
                           f"(its top guess is {self.clean_top!r}; log P({self.target}) = {self.clean_metric:.2f}, "
                           f"{100 * np.exp(self.clean_metric):.2g} %), so the clean sentence does not show the answer "
                           "being restored.")
            else:
                message = (f"The model predicts {self.clean_top!r} for the clean input, not the measured class "
                           f"{self.target!r}, so the clean sentence does not show the answer being restored.")
            out.append(PatchingWarning("clean_not_top", message))
        return tuple(out)

    @property
    def recovered(self) -> np.ndarray:
        return recovery(self.patched, self.clean_metric, self.corrupt_metric)

    @property
    def path_recovered(self) -> float | None:
        if self.path_metric is None:
            return None
        return float(recovery(np.array(self.path_metric), self.clean_metric, self.corrupt_metric))

    def to_json(self) -> dict:
        """The CLI's `patch --json` object (keys as issue 34 gives them, plus issue 48's "gap" and "warnings", and
        issue 45's "method", now that --method chooses it)."""
        def rows(a):
            return [[None if not np.isfinite(v) else float(v) for v in row] for row in a]

        return {"clean_metric": self.clean_metric, "corrupt_metric": self.corrupt_metric, "metric": self.metric,
                "over": self.over, "method": self.method, "tokens": list(self.tokens), "patched": rows(self.patched),
                "recovered": rows(self.recovered), "gap": self.gap if np.isfinite(self.gap) else None,
                "warnings": [w.to_json() for w in self.warnings]}


def recovery(patched: np.ndarray, clean: float, corrupt: float) -> np.ndarray:
    """(patched - corrupt) / (clean - corrupt), NaN where the two inputs give the same metric."""
    span = clean - corrupt
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.asarray(patched, dtype=np.float64) - corrupt) / span if span != 0 else np.full(np.shape(patched), np.nan)


def correlation(exact: Patching, attribution: Patching) -> float:
    """Pearson r between exact and attribution patching over the cells (NaN when either is constant)."""
    if exact.patched.shape != attribution.patched.shape:
        raise PatchingError(f"grids differ: {exact.patched.shape} vs {attribution.patched.shape}")
    a, b = exact.patched.ravel(), attribution.patched.ravel()
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


# ---- the pair and the metric ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Pair:
    """Everything a forward needs: the model's call, the metric on its output, the two tokenized inputs."""

    adapter: ModelAdapter
    call: Callable  # feed -> output (logits [B, C] or [B, T, V])
    score: Callable  # output -> metric [B]
    metric: str
    clean: Tokenized
    corrupt: Tokenized
    with_types: bool
    device: object
    width: int  # logits per row, for the memory estimate
    top: Callable  # output -> the first row's top-1: a word piece at the [MASK] or a class label
    target: str  # what the metric measures, in top's terms
    masked: bool
    # last hidden state [B, T, D] -> metric [B]: what `call` + `score` compute after the encoder's layers, so a pass
    # may start mid-stack (None: the model's output cannot be had from it; patching then runs whole forwards)
    from_hidden: Callable | None = None
    pad_id: int = 0
    read_position: int | None = None  # the one position from_hidden reads (None: it may read several)

    def clean_top(self) -> str:
        """The clean input's own answer (one extra one-row forward, no hooks)."""
        import torch

        with torch.inference_mode():
            return self.top(self.call(self.feed(self.clean, 1)))

    def feed(self, which: Tokenized, rows: int) -> dict:
        import torch

        ids = torch.as_tensor(np.asarray(which.input_ids), dtype=torch.long, device=self.device)[None].expand(rows, -1)
        feed = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if self.with_types:
            feed["token_type_ids"] = torch.as_tensor(np.asarray(which.type_ids), dtype=torch.long,
                                                     device=self.device)[None].expand(rows, -1)
        return feed

    def run(self, which: Tokenized, rows: int = 1):
        """metric [rows] of `which` repeated rows times (hooks open around the call act on it)."""
        return self.score(self.call(self.feed(which, rows)))


def _as_items(text: Text) -> tuple[str, str | None]:
    if isinstance(text, str):
        return text, None
    a, b = text
    return a, (b or None)


def _input(text: Text):
    """What core.model.encoding.tokenize takes: a text, or a (text, text_b) pair."""
    a, b = _as_items(text)
    return a if b is None else (a, b)


def _is_classifier(model) -> bool:
    return hasattr(model, "labels") and hasattr(model, "logits")


def _class_index(labels: Sequence[str], k) -> int:
    if isinstance(k, (int, np.integer)) or (isinstance(k, str) and k.lstrip("-").isdigit() and k not in labels):
        k = int(k)
        if not 0 <= k < len(labels):
            raise PatchingError(f"class {k} does not exist; the run's classes are 0..{len(labels) - 1}: {', '.join(labels)}")
        return k
    if k not in labels:
        raise PatchingError(f"class {k!r} is not one of the run's classes: {', '.join(labels)}")
    return list(labels).index(k)


def _target_piece(tokenizer, target) -> list[str]:
    """[the one word piece of `target`]: as a word after a space (RoBERTa's BPE writes " he" as "Ġhe"), else a piece
    of the vocabulary as written ("##s"); PatchingError otherwise."""
    word = str(target if target is not None else "").strip()
    pieces = tokenizer.tokenize(" " + word) if word else []
    if len(pieces) == 1:
        return pieces
    if word and word in tokenizer.get_vocab():
        return [word]
    raise PatchingError(f"the target word must be one word piece of the model's vocabulary; {word!r} is "
                        f"{pieces or 'empty'}. Pick a word the tokenizer keeps whole.")


def _same_length(clean: Tokenized, corrupt: Tokenized) -> None:
    if len(clean.tokens) != len(corrupt.tokens):
        raise PatchingError(
            f"the clean and corrupted inputs must have the same number of word pieces to be patched position by "
            f"position, but the clean one has {len(clean.tokens)}: {' '.join(clean.tokens)} and the corrupted one "
            f"{len(corrupt.tokens)}: {' '.join(corrupt.tokens)}. Swap a word for one the tokenizer keeps whole "
            f"just as often (e.g. he <-> she, man <-> woman).")


def prepare(model, clean: Text, corrupt: Text, target) -> _Pair:
    """The pair and its metric. model: a LoadedClassifier (target: a class, by index or label, or a pair of
    classes for their logit difference) or a LoadedModel with an MLM head (target: one word piece, scored at the
    clean input's single [MASK])."""
    import torch

    if _is_classifier(model):
        lm, labels = model.encoder, tuple(model.labels)
        max_length = int(min(model.head.get("max_length") or lm.max_length, lm.max_length))
        pair = tuple(target) if isinstance(target, (tuple, list)) else (target,)
        if not 1 <= len(pair) <= 2:
            raise PatchingError("a classifier's target is one class, or two classes for their logit difference")
        ks = [_class_index(labels, k) for k in pair]
        if len(ks) == 2 and ks[0] == ks[1]:
            raise PatchingError("a logit difference needs two different classes")
        name = " - ".join(f"logit[{labels[k]}]" for k in ks)

        def score(logits, ks=tuple(ks)):
            return logits[:, ks[0]] - (logits[:, ks[1]] if len(ks) == 2 else 0)

        def top(logits, labels=labels):
            return labels[int(logits[0].argmax())]

        call, width, target_model, goal = model.logits, len(labels), model.model, labels[ks[0]]
        head_logits = getattr(model.model, "head_logits", None)  # core.model.classifier.Classifier's
        from_hidden = None if head_logits is None else (lambda hidden, score=score: score(head_logits(hidden)))
        # the pooler and "cls" pooling read the first token only (core.model.classifier.Classifier.head_logits)
        read_position = 0 if getattr(model.model, "pooling", None) in ("cls", "pooler") else None
    else:
        lm = model
        require_masked_lm(lm)
        max_length = lm.max_length
        clean = tuple(prepare_text(lm, t) if t else t for t in _as_items(clean))
        corrupt = tuple(prepare_text(lm, t) if t else t for t in _as_items(corrupt))
        pieces = _target_piece(lm.tokenizer, target)
        target_id = int(lm.tokenizer.convert_tokens_to_ids(pieces[0]))
        target_model, width = lm.masked_lm, int(lm.masked_lm.config.vocab_size)
        call = lambda feed: target_model(**feed).logits  # noqa: E731 - the one MLM forward of this module
        name, goal = None, pieces[0]
    clean_t, corrupt_t = tokenize(lm, [_input(clean), _input(corrupt)], max_length)
    _same_length(clean_t, corrupt_t)
    if name is None:
        masks = [i for i, t in enumerate(clean_t.tokens) if t == lm.tokenizer.mask_token]
        if len(masks) != 1:
            raise PatchingError(f"the clean input needs exactly one {lm.tokenizer.mask_token} to score the target "
                                f"at; it has {len(masks)}: {' '.join(clean_t.tokens)}")
        position = masks[0]
        name = f"log P({pieces[0]}) at {clean_t.tokens[position]} (token {position})"

        def score(logits, position=position, target_id=target_id):
            return torch.log_softmax(logits[:, position].float(), dim=-1)[:, target_id]

        def top(logits, position=position, tokenizer=lm.tokenizer):
            return tokenizer.convert_ids_to_tokens(int(logits[0, position].argmax()))

        read_position = position
        try:
            mlm_head = ModelAdapter.of(target_model).mlm_head
        except NoMaskedLMHead:
            from_hidden = None
        else:
            def from_hidden(hidden, position=position, target_id=target_id, head=mlm_head):
                # the MLM head acts on each token alone, so only the [MASK]'s vector needs it
                return torch.log_softmax(head(hidden[:, position:position + 1])[:, 0].float(), dim=-1)[:, target_id]

    with_types = "token_type_ids" in lm.tokenizer.model_input_names
    device = next(target_model.parameters()).device
    pad_id = lm.tokenizer.pad_token_id
    return _Pair(ModelAdapter.of(target_model), call, score, name, clean_t, corrupt_t, with_types, device, width, top,
                 goal, not _is_classifier(model), from_hidden, int(pad_id) if pad_id is not None else 0, read_position)


# ---- exact patching ---------------------------------------------------------------------------------------------


def _rows_per_forward(pair: _Pair, memory_mb: float) -> int:
    """How many rows one forward may hold: the activations of one layer (hidden, feed-forward, attention scores)
    plus the output logits, per row, in float32."""
    config = pair.adapter.base.config
    d = int(getattr(config, "hidden_size", getattr(config, "dim", 768)))
    ffn = int(getattr(config, "intermediate_size", getattr(config, "hidden_dim", 4 * d)))
    t = len(pair.clean.tokens)
    per_row = 4 * t * (6 * d + ffn + 2 * pair.adapter.num_heads * t + pair.width)
    rows = int(memory_mb * 2**20 // per_row)
    if getattr(pair.device, "type", str(pair.device)) == "cpu":
        # On CPU a bigger batch is slower per row once a layer's activations outgrow the caches (MiniLM, 1 thread,
        # 2026-11-28: 0.37 s a pair at 512 MB chunks, ~27,000 tokens, against 0.28 s at 32-128 MB): cap the tokens.
        rows = min(rows, CPU_CHUNK_TOKENS // t)
    return max(1, rows)


def _capture(pair: _Pair, which: Tokenized, point: str):
    """(metric, {layer: the point's value [1, T, ...]}) of one plain forward."""
    import torch

    with torch.inference_mode(), pair.adapter.capture([point]) as store:
        metric = float(pair.run(which)[0])
    return metric, {layer: store[point, layer] for layer in range(pair.adapter.num_layers)}


def _run_rows(pair: _Pair, point: str, rows: Sequence[Sequence[tuple[int, int]]], clean: dict) -> np.ndarray:
    """metric [len(rows)] of one batched forward of the corrupted input: row r with every (layer, index) of
    rows[r] copied from `clean` (index: a head for z, a position otherwise)."""
    import torch

    by_layer: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r, cells in enumerate(rows):
        for layer, index in cells:
            by_layer[layer].append((r, index))

    def edit(value, layer):
        cells = by_layer.get(layer)
        if not cells:
            return None
        value = value.clone()
        source = clean[layer][0]
        for r, index in cells:
            if point == "z":
                value[r, :, index] = source[:, index]
            else:
                value[r, index] = source[index]
        return value

    with torch.inference_mode(), pair.adapter.intervene(point, edit, sorted(by_layer)):
        return pair.run(pair.corrupt, len(rows)).double().cpu().numpy()


def _grid_shape(pair: _Pair, over: str) -> tuple[int, int]:
    if over not in OVER:
        raise PatchingError(f"over must be one of {', '.join(OVER)}, not {over!r}")
    return pair.adapter.num_layers, pair.adapter.num_heads if over == "heads" else len(pair.clean.tokens)


def patch(model, clean: Text, corrupt: Text, target, over: str = "heads", *, path=None,
          memory_mb: float = DEFAULT_MEMORY_MB, progress: ProgressCallback = None,
          should_stop: StopCheck = None, reuse_layers: bool = True) -> Patching:
    """Exact activation patching of every cell of `over` (module docstring) from `clean` into `corrupt`.

    clean, corrupt: a text or a (text, text_b) pair, tokenizing to the same length (else PatchingError showing
    both token lists). target: a word (MLM: scored at the [MASK]) or a class / (class, other class) (classifier).
    path: ((sender layer, head), (receiver layer, head)), sender below receiver, adds `path_metric`.
    memory_mb bounds one batched forward's activations; progress(done, total) counts cells.
    reuse_layers=False runs every patched row through the whole model (the path before issue 47; the same numbers,
    kept as the fallback and the tests' reference)."""
    pair = prepare(model, clean, corrupt, target)
    _grid_shape(pair, over)
    if reuse_layers:
        ((clean_metric, corrupt_metric, patched, clean_top),) = _patch_prepared(
            [pair], over, memory_mb, progress, should_stop)
    else:
        clean_metric, corrupt_metric, patched, clean_top = _patch_whole(pair, over, memory_mb, progress, should_stop)
    path_metric = None
    if path is not None:
        path = _check_path(pair, path)
        path_metric = _path_patch(pair, *path)
    return _result(model, pair, over, clean_metric, corrupt_metric, patched, clean_top, path, path_metric)


def patch_many(model, items: Sequence[tuple[Text, Text, object]], over: str = "heads", *,
               memory_mb: float = DEFAULT_MEMORY_MB, progress: ProgressCallback = None,
               should_stop: StopCheck = None) -> list:
    """`patch` of many (clean, corrupt, target) items at once: pairs of different lengths share padded batches
    (each keeps the attention mask the model builds for it), so the layers' work is shared across pairs too.
    Returns one Patching per item, in order, or the item's PatchingError where it cannot be patched (a swap that
    changed the number of word pieces), so one bad pair does not lose the others. progress counts cells."""
    prepared: list = []
    for clean, corrupt, target in items:
        try:
            pair = prepare(model, clean, corrupt, target)
            _grid_shape(pair, over)
            prepared.append(pair)
        except PatchingError as error:
            prepared.append(error)
    good = [p for p in prepared if isinstance(p, _Pair)]
    grids = iter(_patch_prepared(good, over, memory_mb, progress, should_stop) if good else ())
    return [p if isinstance(p, PatchingError) else _result(model, p, over, *next(grids)) for p in prepared]


def _result(model, pair: _Pair, over: str, clean_metric, corrupt_metric, patched, clean_top, path=None,
            path_metric=None) -> Patching:
    return Patching(_ref(model), over, "exact", pair.metric, pair.clean.tokens, pair.corrupt.tokens, clean_metric,
                    corrupt_metric, patched, path, path_metric, pair.target, clean_top, pair.masked)


def _patch_whole(pair: _Pair, over: str, memory_mb: float, progress: ProgressCallback, should_stop: StopCheck):
    """(clean metric, corrupt metric, patched [L, C], clean top) with every patched row run through the whole
    model: the fallback where a pass cannot start mid-stack."""
    layers, width = _grid_shape(pair, over)
    point = POINT[over]
    clean_metric, clean_values = _capture(pair, pair.clean, point)
    corrupt_metric, _ = _capture(pair, pair.corrupt, point)
    cells = [(layer, index) for layer in range(layers) for index in range(width)]
    chunk = _rows_per_forward(pair, memory_mb)
    patched = np.empty(len(cells), dtype=np.float64)
    for start in range(0, len(cells), chunk):
        check_stop(should_stop)
        rows = [[cell] for cell in cells[start:start + chunk]]
        patched[start:start + len(rows)] = _run_rows(pair, point, rows, clean_values)
        if progress is not None:
            progress(start + len(rows), len(cells))
    return clean_metric, corrupt_metric, patched.reshape(layers, width), pair.clean_top()


# ---- reusing the layers below the patched one (issue 47) ----------------------------------------------------------
#
# A cell at layer l changes nothing below l, so the corrupted run's input of layer l (resid_pre) is read once and
# every row patching a cell of layer l starts there: a [layer, cell] grid runs sum over l of (L - l) layer passes per
# cell row instead of L. The rows of one chunk (cells sorted by layer) grow as the pass climbs: at layer l the rows
# of l's cells join those already running, each from its own pair's cached state, and the layer's hook patches only
# them. Each layer is called with the arguments the model itself gave it on the corrupted pass (the extended
# attention mask, MPNet's position bias), taken at each row's pair (core.model.adapter.LayerCall.rows).


def _group_feed(pairs: Sequence[_Pair], which: str) -> dict:
    """The clean or corrupted inputs of `pairs` as one right-padded batch (attention mask 0 at the padding)."""
    import torch

    inputs = [getattr(p, which) for p in pairs]
    width = max(len(t.tokens) for t in inputs)
    ids = np.full((len(inputs), width), pairs[0].pad_id, dtype=np.int64)
    types = np.zeros((len(inputs), width), dtype=np.int64)
    mask = np.zeros((len(inputs), width), dtype=np.int64)
    for row, tokenized in enumerate(inputs):
        n = len(tokenized.tokens)
        ids[row, :n], types[row, :n], mask[row, :n] = tokenized.input_ids, tokenized.type_ids, 1
    device = pairs[0].device
    feed = {"input_ids": torch.as_tensor(ids, device=device), "attention_mask": torch.as_tensor(mask, device=device)}
    if pairs[0].with_types:
        feed["token_type_ids"] = torch.as_tensor(types, device=device)
    return feed


def _groups(pairs: Sequence[_Pair], over: str, memory_mb: float) -> list[list[int]]:
    """Indices of pairs patched together: longest first (little padding), as many as one chunk of rows holds."""
    order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i].clean.tokens))
    groups: list[list[int]] = []
    rows, budget = 0, 0
    for i in order:
        cells = int(np.prod(_grid_shape(pairs[i], over)))
        if not groups or rows + cells > budget:
            groups.append([])
            rows, budget = 0, _rows_per_forward(pairs[i], memory_mb)  # the group's longest pair sets the budget
        groups[-1].append(i)
        rows += cells
    return groups


def _patch_prepared(pairs: Sequence[_Pair], over: str, memory_mb: float, progress: ProgressCallback,
                    should_stop: StopCheck) -> list[tuple]:
    """(clean metric, corrupt metric, patched [L, C], clean top) of every pair, by the layer-reusing path, or by
    whole forwards per pair where it cannot be taken (a model whose output cannot be had from its last hidden
    state, or whose layers get an argument that cannot be split by rows: LayerCall.rows raises AdapterError)."""
    total = sum(int(np.prod(_grid_shape(p, over))) for p in pairs)
    out: list = [None] * len(pairs)
    done = 0
    for group in _groups(pairs, over, memory_mb):
        members = [pairs[i] for i in group]
        results = None
        if all(p.from_hidden is not None for p in members):
            try:
                results = _patch_group(members, over, memory_mb, should_stop)
            except AdapterError:
                results = None  # the model's layer call cannot be split by rows: whole forwards below
        if results is None:
            results = [_patch_whole(p, over, memory_mb, None, should_stop) for p in members]
        for i, result in zip(group, results):
            out[i] = result
            done += result[2].size
        if progress is not None:
            progress(done, total)
    return out


def _patch_group(pairs: Sequence[_Pair], over: str, memory_mb: float, should_stop: StopCheck) -> list[tuple]:
    import torch

    adapter, point = pairs[0].adapter, POINT[over]
    layers = adapter.num_layers
    with torch.inference_mode():
        with adapter.capture([point]) as store:
            clean_out = pairs[0].call(_group_feed(pairs, "clean"))
        clean_values = {layer: store[point, layer] for layer in range(layers)}
        with adapter.capture(["resid_pre", "call"]) as store:
            corrupt_out = pairs[0].call(_group_feed(pairs, "corrupt"))
        inputs = {layer: store["resid_pre", layer] for layer in range(layers)}
        calls = {layer: store["call", layer] for layer in range(layers)}
    # every cell (layer, pair, index), sorted by layer: a chunk's rows then join the pass in order
    cells = [(layer, p, index) for layer in range(layers) for p, pair in enumerate(pairs)
             for index in range(_grid_shape(pair, over)[1])]
    patched = [np.empty(_grid_shape(pair, over), dtype=np.float64) for pair in pairs]
    chunk = _rows_per_forward(pairs[0], memory_mb)  # pairs[0] is the longest (_groups)
    for start in range(0, len(cells), chunk):
        check_stop(should_stop)
        part = cells[start:start + chunk]
        for (layer, p, index), value in zip(part, _run_climbing(pairs, point, part, clean_values, inputs, calls)):
            patched[p][layer, index] = value
    results = []
    for p, pair in enumerate(pairs):
        clean_row, corrupt_row = clean_out[p:p + 1], corrupt_out[p:p + 1]
        results.append((float(pair.score(clean_row)[0]), float(pair.score(corrupt_row)[0]), patched[p],
                        pair.top(clean_row)))
    return results


def _run_climbing(pairs: Sequence[_Pair], point: str, cells: Sequence[tuple[int, int, int]], clean: dict,
                  inputs: dict, calls: dict) -> np.ndarray:
    """metric [len(cells)] of the cells (layer, pair, index), sorted by layer: each row starts at its cell's layer
    from its pair's corrupted input there, with that one cell copied from the clean run."""
    import torch

    adapter = pairs[0].adapter
    device = inputs[cells[0][0]].device
    layer_of = np.array([c[0] for c in cells])
    pair_of = torch.as_tensor([c[1] for c in cells], dtype=torch.long, device=device)
    index_of = torch.as_tensor([c[2] for c in cells], dtype=torch.long, device=device)
    first = int(layer_of[0])
    spans = {int(layer): (int(np.searchsorted(layer_of, layer)), int(np.searchsorted(layer_of, layer, "right")))
             for layer in np.unique(layer_of)}

    def edit(value, layer):
        if layer not in spans:
            return None
        lo, hi = spans[layer]
        rows = torch.arange(lo, hi, device=value.device)
        value = value.clone()
        if point == "z":  # [rows, T, H, d]: one head at every position
            value[rows, :, index_of[lo:hi]] = clean[layer][pair_of[lo:hi], :, index_of[lo:hi]]
        else:  # [rows, T, D]: one position
            value[rows, index_of[lo:hi]] = clean[layer][pair_of[lo:hi], index_of[lo:hi]]
        return value

    hidden = None
    last = adapter.num_layers - 1
    # The metric reads one position of the last layer's output, so that layer's feed-forward block (most of its
    # work) runs there only; not when the feed-forward output itself is patched (mlp), nor for a metric reading more.
    read = [pair.read_position for pair in pairs]
    narrow = point != "ffn_out" and all(r is not None for r in read)
    at = torch.as_tensor(read, dtype=torch.long, device=device)[pair_of] if narrow else None
    with torch.inference_mode(), adapter.intervene(point, edit, range(first, adapter.num_layers)), \
            (adapter.feed_forward_at(last, at) if narrow else contextlib.nullcontext()):
        for layer in range(first, adapter.num_layers):
            if layer in spans:
                lo, hi = spans[layer]
                joining = inputs[layer].index_select(0, pair_of[lo:hi])
                hidden = joining if hidden is None else torch.cat([hidden, joining])
            call = calls[layer].rows(pair_of[:hidden.shape[0]])
            hidden = adapter.run_layers(hidden, call, layer, layer + 1)
        metric = torch.empty(len(cells), dtype=torch.float64)
        for p in torch.unique(pair_of).tolist():
            rows = (pair_of == p).nonzero()[:, 0]
            metric[rows.cpu()] = pairs[p].from_hidden(hidden.index_select(0, rows)).double().cpu()
    return metric.numpy()


def patch_together(model, clean: Text, corrupt: Text, target, over: str, cells: Sequence[tuple[int, int]]) -> float:
    """The metric with all `cells` ((layer, head or position), ...) of `over` patched at once, in one forward."""
    pair = prepare(model, clean, corrupt, target)
    layers, width = _grid_shape(pair, over)
    bad = [c for c in cells if not (0 <= c[0] < layers and 0 <= c[1] < width)]
    if bad:
        raise PatchingError(f"cells {bad} do not exist; the grid is {layers} layers x {width}")
    _, clean_values = _capture(pair, pair.clean, POINT[over])
    return float(_run_rows(pair, POINT[over], [list(cells)], clean_values)[0])


def _ref(model) -> str:
    lm = getattr(model, "encoder", model)
    return str(getattr(lm, "ref", ""))


# ---- path patching -----------------------------------------------------------------------------------------------


def _check_path(pair: _Pair, path) -> tuple[tuple[int, int], tuple[int, int]]:
    try:
        (l1, h1), (l2, h2) = ((int(a), int(b)) for a, b in path)
    except (TypeError, ValueError):
        raise PatchingError(f"path must be ((sender layer, head), (receiver layer, head)), not {path!r}") from None
    layers, heads = pair.adapter.num_layers, pair.adapter.num_heads
    for layer, head in ((l1, h1), (l2, h2)):
        if not (0 <= layer < layers and 0 <= head < heads):
            raise PatchingError(f"head ({layer}, {head}) does not exist; the model has layers 0..{layers - 1}, "
                                f"heads 0..{heads - 1}")
    if l1 >= l2:
        raise PatchingError(f"the sender (layer {l1}) must sit below the receiver (layer {l2}): a head reaches "
                            "only later layers")
    return (l1, h1), (l2, h2)


def _path_patch(pair: _Pair, sender: tuple[int, int], receiver: tuple[int, int]) -> float:
    import torch

    (l1, h1), (l2, h2) = sender, receiver
    _, clean_z = _capture(pair, pair.clean, "z")
    _, corrupt_z = _capture(pair, pair.corrupt, "z")

    def frozen(value, layer):
        value = corrupt_z[layer].clone()
        if layer == l1:
            value[:, :, h1] = clean_z[l1][:, :, h1]
        return value

    with torch.inference_mode(), pair.adapter.intervene("z", frozen, range(l2)), \
            pair.adapter.capture(["q", "k", "v"], l2) as store:
        pair.run(pair.corrupt)
    received = {point: store[point, l2] for point in ("q", "k", "v")}

    def receive(point):
        def edit(value, layer):
            value = value.clone()
            value[:, :, h2] = received[point][:, :, h2]
            return value
        return edit

    with torch.inference_mode(), pair.adapter.intervene("q", receive("q"), l2), \
            pair.adapter.intervene("k", receive("k"), l2), pair.adapter.intervene("v", receive("v"), l2):
        return float(pair.run(pair.corrupt)[0])


# ---- attribution patching ----------------------------------------------------------------------------------------


def attribution_patch(model, clean: Text, corrupt: Text, target, over: str = "heads") -> Patching:
    """Attribution patching (Nanda 2023): every cell of `over` estimated as corrupt_metric + the sum of
    (clean - corrupt activation) * gradient of the metric at the corrupted run, over the cell's positions and
    dimensions. Two forwards and one backward; the same Patching (method "attribution")."""
    import torch

    pair = prepare(model, clean, corrupt, target)
    layers, width = _grid_shape(pair, over)
    point = POINT[over]
    clean_metric, clean_values = _capture(pair, pair.clean, point)
    seen: dict[int, object] = {}

    def keep(value, layer):
        value = value.clone()  # in the graph (not detached): the gradient also flows through later layers
        seen[layer] = value
        return value

    with torch.enable_grad(), pair.adapter.intervene(point, keep):
        metric = pair.run(pair.corrupt)[0]
        grads = torch.autograd.grad(metric, [seen[layer] for layer in range(layers)])
    effect = np.empty((layers, width), dtype=np.float64)
    for layer, grad in enumerate(grads):
        delta = (clean_values[layer] - seen[layer].detach()) * grad
        summed = delta[0].sum(dim=(0, 2)) if point == "z" else delta[0].sum(dim=-1)
        effect[layer] = summed.double().cpu().numpy()
    corrupt_metric = float(metric.detach())
    return Patching(_ref(model), over, "attribution", pair.metric, pair.clean.tokens, pair.corrupt.tokens,
                    clean_metric, corrupt_metric, corrupt_metric + effect, target=pair.target,
                    clean_top=pair.clean_top(), masked=pair.masked)


# ---- the declaration (core.contract) -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PatchSettings:
    """The `patch` analysis's settings, declared once: CLI options, lens.patch keywords, the page's widgets."""

    over: str = setting("heads", "what is patched, one cell at a time: heads (each head's z), positions (the "
                        "residual stream after each layer), attn / mlp (the block's output at each token)",
                        choices=OVER, url=None)  # the page draws heads and positions both
    # the page's link offers "compare" (both methods) besides these: its Param is its own (core.views.attention)
    method: str = setting("exact", "exact: one patched run per cell; attribution: Nanda's gradient estimate of "
                          "every cell from two forwards and one backward", choices=METHODS, url=None)


def run_patch(model, inputs: tuple, settings: PatchSettings = PatchSettings(), progress: ProgressCallback = None,
              should_stop: StopCheck = None) -> Patching:
    """The `patch` analysis's run: inputs (clean, corrupt, target), patched by the settings' method."""
    clean, corrupt, target = inputs
    if settings.method == "attribution":
        return attribution_patch(model, clean, corrupt, target, settings.over)
    return patch(model, clean, corrupt, target, settings.over, progress=progress, should_stop=should_stop)


ANALYSIS = Analysis(
    name="patch", view="attention", command="patch", lens="patch", settings=PatchSettings, run=run_patch,
    charts="core.charts.patching:patching_charts", title="What causes it?",
    summary="activation patching: which heads / positions carry the answer from a clean to a corrupted input",
    order=40,
)
