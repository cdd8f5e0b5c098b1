"""The training loops: fine-tuning a classifier and SimCSE contrastive training.

Fast path: the data is tokenized once; batches are length-grouped (shuffled mega-batches of 50 batches
sorted by length, as HF's group_by_length) and padded only to their own longest example; the encoder runs
with SDPA attention and returns no attentions or hidden states; on CUDA the forward runs under bf16 autocast.
"""

from __future__ import annotations

# transformers imported in functions: pages that list or queue runs import core.training without it.
import contextlib
import random
import time
import traceback
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.files import disk_full
from core.model import distributed
from core.model.adapter import ModelAdapter
from core.model.classifier import Classifier, collate, predict_logits, save_classifier, text_features
from core.model.evaluation import evaluate_predictions
from core.model.loading import fresh_weights, load_model, pick_device
from core.progress import Cancelled, ProgressCallback, StopCheck, check_stop
from core.training import tasks
from core.training.queue import queue_turn
from core.training.recipe import Recipe
from core.training.runs import MAX_LOSS_POINTS, RunFolder, partial_dir
from core.training.watch import Watch

STATUS_EVERY_SECONDS = 1.0
MEGA_BATCHES = 50


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """torch's CPU threads set to `threads` for a block (None or 0: unchanged). On a shared or small CPU, fewer threads
    than cores avoids OpenMP spin-waiting (5-10x slower here under load: bench/RESULTS.md)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def finetune(recipe: Recipe, progress: ProgressCallback = None, should_stop: StopCheck = None) -> dict:
    """Train as the recipe says and save the run as runs_dir()/NAME; returns its metrics (metrics.json).

    Waits for its turn in the job queue first (core.training.queue). progress(done, total) counts training
    examples seen; should_stop() is polled between steps (as is the run folder's cancel file) and ends the
    run with Cancelled. A cancelled or failed run is moved to runs_dir()/.NAME.cancelled|failed, never to NAME.
    """
    ctx = distributed.current()
    # Only the main rank writes the run folder; the others train and evaluate their share beside it.
    folder = RunFolder.adopt_or_create(recipe) if ctx.is_main else _OtherRankFolder(recipe.run_name)
    if not ctx.is_main:
        progress = None

    def stop() -> bool:
        return folder.cancel_requested() or (should_stop is not None and bool(should_stop()))

    try:
        folder.log(f"recipe: {recipe.to_dict()}")
        if ctx.world_size != recipe.processes:
            folder.log(f"asked for {recipe.processes} processes, running on {ctx.world_size}")
        with queue_turn(recipe.run_name, stop) if ctx.is_main else contextlib.nullcontext():
            folder.write_status(state="running", phase="loading", started_at=time.time())
            folder.log("started")
            train = _train_contrastive if recipe.is_contrastive else _train_classifier
            with torch_threads(recipe.cpu_threads):
                metrics = train(recipe, folder, progress, stop)
            folder.finish(metrics)
        return metrics
    except Cancelled:
        folder.log("cancelled by the user")
        folder.end("cancelled", "cancelled by the user")
        raise
    except BaseException as err:
        details = traceback.format_exc()
        # A full disk, said so with the run folder's name, whether the OS, safetensors (Rust) or torch (C++) reported it.
        full = disk_full(err, folder.path)
        message = str(full) if full is not None else f"{type(err).__name__}: {err}"
        try:
            folder.log(details)  # the page's log view shows it; listings show the error's one line
        except OSError:
            pass  # a full disk: end() deletes the weights first, which makes room for the status
        folder.end("failed", message, details)
        if full is not None and full is not err:
            raise full from err
        raise


class _OtherRankFolder:
    """The run folder as a rank other than the main one sees it: it reads the cancel file, writes nothing."""

    def __init__(self, name: str):
        self.path = partial_dir(name)

    def cancel_requested(self) -> bool:
        return (self.path / "cancel").exists()

    def log(self, message: str) -> None:
        pass

    def write_status(self, **fields) -> dict:
        return fields

    def finish(self, metrics: dict):
        return self.path

    def end(self, state: str, error: str, traceback_text: str | None = None):
        return self.path


# ---- shared pieces ------------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def encoder_layers(encoder: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """(parent module, attribute, the ModuleList of transformer layers) for BERT-like, DistilBERT and ModernBERT
    (which holds its `layers` itself) models."""
    for parent_path, attribute in (("encoder", "layer"), ("transformer", "layer"), ("encoder", "layers"), ("", "layers")):
        parent = getattr(encoder, parent_path, None) if parent_path else encoder
        layers = getattr(parent, attribute, None)
        if isinstance(layers, nn.ModuleList):
            return parent, attribute, layers
    raise ValueError(
        f"{type(encoder).__name__} keeps its layers in an unusual place (e.g. ALBERT shares one layer); "
        "dropping or freezing layers needs a BERT-like model."
    )


def drop_last_layers(encoder: nn.Module, k: int) -> int:
    """Remove the top k transformer layers in place (the config follows); returns the layers left."""
    if k == 0:
        return len(encoder_layers(encoder)[2])
    parent, attribute, layers = encoder_layers(encoder)
    if k >= len(layers):
        raise ValueError(f"cannot drop {k} of the model's {len(layers)} layers; at least one must remain")
    setattr(parent, attribute, nn.ModuleList(list(layers)[: len(layers) - k]))
    for name in ("num_hidden_layers", "n_layers"):
        if hasattr(encoder.config, name):
            setattr(encoder.config, name, len(layers) - k)
    if isinstance(getattr(encoder.config, "layer_types", None), list):  # ModernBERT: one type per layer, kept in step
        encoder.config.layer_types = encoder.config.layer_types[: len(layers) - k]
    return len(layers) - k


def freeze(encoder: nn.Module, chosen: tuple[int, ...], embeddings: bool) -> None:
    """Stop gradients to the 0-based transformer layers in `chosen` (indices after dropping) and to the
    embeddings. Frozen parameters are left out of the optimizer, so they stay bit-identical."""
    stack = encoder_layers(encoder)[2]
    beyond = [i for i in chosen if not 0 <= i < len(stack)]
    if beyond:
        raise ValueError(f"cannot freeze layer(s) {[i + 1 for i in beyond]}: the model has layers 1-{len(stack)} "
                         "(after dropping layers)")  # numbered as every chart numbers them (core.numbering)
    frozen = [stack[i] for i in sorted(set(chosen))] + ([encoder.embeddings] if embeddings else [])
    for module in frozen:
        for parameter in module.parameters():
            parameter.requires_grad_(False)


def length_grouped_batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of indices whose members have similar lengths (little padding, still random)."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    span = batch_size * MEGA_BATCHES
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lambda i: -lengths[i])
        batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def autocast(device: str):
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def loss_curve(losses: list[float], points: int = MAX_LOSS_POINTS) -> list[list[float]]:
    """[[step, mean loss], ...] with at most `points` entries (bucket means; step = the bucket's last, 1-based)."""
    if len(losses) <= points:
        return [[i + 1, float(v)] for i, v in enumerate(losses)]
    edges = np.linspace(0, len(losses), points + 1).astype(int)
    return [[int(b), float(np.mean(losses[a:b]))] for a, b in zip(edges[:-1], edges[1:]) if b > a]


@dataclass
class _Clock:
    """Step timing for status.json: examples/s and ETA over the training steps only."""

    total_steps: int
    total_examples: int
    start: float = 0.0
    last_write: float = 0.0

    def status(self, step: int, examples: int, epoch: int, losses: list[float]) -> dict:
        elapsed = time.perf_counter() - self.start
        rate = examples / elapsed if elapsed > 0 else 0.0
        eta = elapsed / step * (self.total_steps - step) if step else None
        return {
            "phase": "training",
            "step": step,
            "total_steps": self.total_steps,
            "epoch": epoch,
            "examples_seen": examples,
            "loss": float(np.mean(losses[-20:])) if losses else None,
            "examples_per_second": rate,
            "eta_seconds": eta,
            "elapsed_seconds": elapsed,
            "losses": loss_curve(losses),
        }


def layerwise_lr_scales(num_layers: int, decay: float) -> tuple[float, ...]:
    """Discriminative fine-tuning (Howard & Ruder 2018; Sun et al. 2019's layer-wise decay): the factor on the base
    learning rate of the embeddings (index 0) and of encoder layer l = 1..L (index l), decay ** (L - l). The top
    layer, and what sits above it (pooler, head), train at the base rate; each layer down is `decay` times slower."""
    return tuple(decay ** (num_layers - depth) for depth in range(num_layers + 1))


def optimizer_groups(model: nn.Module, parameters: list, recipe: Recipe) -> list[dict]:
    """AdamW parameter groups for the trainable `parameters` of `model` (a Classifier, a SimCSE embedder, or either
    wrapped in DDP): one group at recipe.lr when recipe.lr_decay is 1, else one per depth, named "embeddings",
    "layer 1".."layer L" (numbered as on every chart, core.numbering) and "head" (the pooler and what sits on the encoder), at recipe.lr x layerwise_lr_scales.
    A parameter shared by several layers (ALBERT) takes the highest layer's rate; what the encoder holds outside
    its layers (ALBERT's embedding projection, MPNet's relative position bias) counts as embeddings; frozen
    layers get no group."""
    if recipe.lr_decay == 1:
        return [{"params": list(parameters), "lr": recipe.lr, "name": "all"}]
    adapter = ModelAdapter.of(getattr(model, "module", model))
    scales = layerwise_lr_scales(adapter.num_layers, recipe.lr_decay)
    depth_of: dict[int, int | None] = {}
    pooler = getattr(adapter.base, "pooler", None)
    top_down = [*([(None, pooler)] if pooler is not None else []),
                *reversed(list(enumerate(adapter.layers, start=1))), (0, adapter.base)]
    for depth, module in top_down:
        for parameter in module.parameters():
            depth_of.setdefault(id(parameter), depth)
    names = ["embeddings", *(f"layer {depth}" for depth in range(1, adapter.num_layers + 1))]  # names[depth]
    groups: dict[str, dict] = {}
    for parameter in parameters:
        depth = depth_of.get(id(parameter))
        name, scale = ("head", 1.0) if depth is None else (names[depth], scales[depth])
        groups.setdefault(name, {"params": [], "lr": recipe.lr * scale, "name": name})["params"].append(parameter)
    return list(groups.values())


def make_optimizer(recipe: Recipe, parameters: list, total_steps: int):
    """(AdamW, scheduler or None) as the recipe says: lr, eps, weight decay on every parameter (`parameters` is a
    list of tensors or of optimizer_groups' groups, each with its own lr); schedule "linear" multiplies every lr
    by (1 - step / total_steps) after each step (Hugging Face's linear schedule, no warm-up)."""
    # fused: one kernel for all parameters instead of a Python loop over ~100 tensors (CPU and CUDA).
    optimizer = torch.optim.AdamW(parameters, lr=recipe.lr, eps=recipe.eps, weight_decay=recipe.weight_decay, fused=True)
    if recipe.schedule == "none":
        return optimizer, None
    total = max(int(total_steps), 1)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, (total - step) / total))


def rank_slice(indices: list[int], rank: int, world_size: int) -> tuple[list[int], float]:
    """This rank's part of one global batch and the weight of its mean loss, n_rank * world / n_batch, so that
    DDP's average of the ranks' gradients is the gradient of the mean over the whole batch. A rank left without
    an example (a batch smaller than the world) runs the batch's first one with weight 0, so every rank still
    takes part in the gradient all-reduce."""
    mine = indices[rank::world_size]
    if not mine:
        return indices[:1], 0.0
    return mine, len(mine) * world_size / len(indices)


def accumulation_groups(n_batches: int, accumulation: int) -> list[int]:
    """For each batch of an epoch, the size of the group of batches whose gradients make one optimizer step
    (the last group of an epoch may be shorter)."""
    sizes = []
    for start in range(0, n_batches, accumulation):
        g = min(accumulation, n_batches - start)
        sizes += [g] * g
    return sizes


def _run_steps(recipe, folder, progress, stop, model, n_examples, lengths, step_fn, device,
               watch: Watch | None = None) -> tuple[list[float], float, int]:
    """The epoch/step loop shared by both objectives; step_fn(indices) -> mean loss tensor over those items,
    computed through `model` (under several processes, the DDP-wrapped module: see _wrap). Every rank builds the
    same length-grouped batches from the seed and trains on its slice of each (rank_slice); one optimizer step
    per recipe.gradient_accumulation batches. Returns losses (whole-batch means), seconds, examples.
    watch: a time-lapse (core.training.watch), given the step count, then called before the first step and after
    each; its measuring seconds are left out of the training time (examples/s, ETA), and with it progress gets a
    third argument, a message saying the frames done and what measuring cost."""
    ctx = distributed.current()
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("every parameter is frozen; freeze fewer layers")
    rng = random.Random(recipe.seed)
    epochs = [length_grouped_batches(lengths, recipe.batch_size, rng) for _ in range(recipe.epochs)]
    accumulation = max(1, recipe.gradient_accumulation)
    groups = [accumulation_groups(len(e), accumulation) for e in epochs]
    clock = _Clock(total_steps=sum(len(e) for e in epochs), total_examples=n_examples * recipe.epochs)
    optimizer, scheduler = make_optimizer(recipe, optimizer_groups(model, trainable, recipe), sum(-(-len(e) // accumulation) for e in epochs))
    if watch is not None:
        watch.begin(clock.total_steps)
    folder.write_status(phase="training", step=0, total_steps=clock.total_steps, epochs=recipe.epochs, epoch=1)
    folder.log(f"training: {n_examples} examples, {clock.total_steps} steps on {device}"
               + (f", {ctx.world_size} processes" if ctx.distributed else "")
               + (f", {accumulation} batches per optimizer step" if accumulation > 1 else ""))
    losses: list[float] = []
    model.train()
    if ctx.distributed:
        torch.manual_seed(recipe.seed * 1000 + ctx.rank)  # each rank its own dropout masks
    clock.start = time.perf_counter()
    step = examples = 0

    def measure(step: int) -> None:
        if watch is not None:
            clock.start += watch.at(step, time.perf_counter() - clock.start)  # measuring is not training time

    measure(0)
    for epoch, batches in enumerate(epochs, start=1):
        for position, indices in enumerate(batches):
            # A stop asked for on any rank stops every rank at the same step (none waits in an all-reduce).
            if ctx.any(stop()):
                check_stop(lambda: True)
            group = groups[epoch - 1][position]
            last_of_group = (position + 1) % accumulation == 0 or position + 1 == len(batches)
            mine, weight = rank_slice(indices, ctx.rank, ctx.world_size)
            with _no_sync(ctx, model, not last_of_group):
                with autocast(device):
                    loss = step_fn(mine)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"loss became {loss.item()} at step {step + 1}; lower the learning rate")
                (loss * (weight / group)).backward()
            if last_of_group:
                if recipe.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(trainable, recipe.max_grad_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            batch_loss = float(loss.detach()) * weight
            if ctx.distributed:
                batch_loss = float(ctx.all_reduce_sum(np.array([batch_loss]))[0]) / ctx.world_size
            losses.append(batch_loss)
            step += 1
            examples += len(indices)
            measure(step)
            if progress is not None and watch is not None:
                progress(examples, clock.total_examples, watch.message(time.perf_counter() - clock.start))
            elif progress is not None:
                progress(examples, clock.total_examples)
            now = time.perf_counter()
            if now - clock.last_write >= STATUS_EVERY_SECONDS or step == clock.total_steps:
                clock.last_write = now
                folder.write_status(**clock.status(step, examples, epoch, losses), **(watch.status() if watch else {}))
        folder.log(f"epoch {epoch} done, mean loss {np.mean(losses[-len(batches):]):.4f}")
    seconds = time.perf_counter() - clock.start
    model.eval()
    return losses, seconds, examples


def _no_sync(ctx, model, skip: bool):
    """DDP's no_sync for the batches before the last of an accumulation group (their gradients add up locally)."""
    if skip and ctx.distributed:
        return ctx.accelerator.no_sync(model)
    return contextlib.nullcontext()


def _wrap(model: nn.Module, unused_parameters: bool = False) -> nn.Module:
    """The module to run the training forward through: DDP (accelerate's prepare, bf16 autocast on CUDA) under
    several processes, the model itself otherwise. unused_parameters: some trainable parameter gets no gradient
    (SimCSE over [CLS] never uses the pooler), which DDP must be told or it waits for it forever."""
    ctx = distributed.current()
    if not ctx.distributed:
        return model
    if ctx.accelerator.ddp_handler is not None:
        ctx.accelerator.ddp_handler.find_unused_parameters = unused_parameters
    return ctx.accelerator.prepare_model(model)


def _device(recipe: Recipe) -> str:
    ctx = distributed.current()
    return ctx.device if ctx.distributed else (recipe.device or pick_device())


def _base_metrics(recipe: Recipe, lm, device: str, losses: list[float], seconds: float, examples: int, layers: int) -> dict:
    import transformers

    return {
        "run": recipe.run_name,
        "task": recipe.task,
        "objective": recipe.objective,
        "model": recipe.model,
        "num_layers": layers,
        "device": device,
        "world_size": distributed.current().world_size,
        "processes_requested": recipe.processes,
        "gradient_accumulation": recipe.gradient_accumulation,
        "train_seconds": seconds,
        "examples_per_second": examples / seconds if seconds > 0 else 0.0,
        "steps": len(losses),
        "final_loss": float(np.mean(losses[-20:])) if losses else None,
        "loss_curve": loss_curve(losses),
        "protocol": recipe.protocol,
        "recipe": recipe.to_dict(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _prepare_encoder(recipe: Recipe, device: str):
    lm = load_model(recipe.model, device=device, attention="sdpa")
    encoder = lm.model
    layers = drop_last_layers(encoder, recipe.drop_last_layers)
    freeze(encoder, recipe.frozen_layers, recipe.freeze_embeddings)
    return lm, encoder, layers


# ---- classification -----------------------------------------------------------------------------------


@torch.inference_mode()
def predict_classes(model: Classifier, features: list[dict], pad_id: int, device: str, batch_size: int) -> np.ndarray:
    """argmax class [n] for tokenized items, batched longest-first."""
    model.eval()
    with autocast(device):
        logits = predict_logits(model, features, batch_size=batch_size, pad_id=pad_id, device=device)
    return logits.argmax(axis=-1).astype(np.int64)


def _train_classifier(recipe: Recipe, folder: RunFolder, progress, stop) -> dict:
    seed_everything(recipe.seed)
    device = _device(recipe)
    folder.write_status(phase="loading data")
    data = tasks.classification_data(recipe)
    folder.log(f"data: {len(data.train)} train, {len(data.eval)} eval ({data.eval_split}, {data.source}); labels {data.labels}")
    folder.write_status(phase="loading model")
    lm, encoder, layers = _prepare_encoder(recipe, device)
    seed_everything(recipe.seed)  # the head's initialisation does not depend on how the model was loaded
    # The slides' 11-layer model prints no dropout module before its MLP head (the 12-layer one has BERT's).
    dropout = 0.0 if recipe.protocol == "slides" and recipe.head == "mlp" else None
    model = Classifier(encoder, len(data.labels), recipe.head, recipe.mlp_hidden, dropout=dropout).to(device)
    tokenizer = lm.tokenizer
    pad_id = tokenizer.pad_token_id or 0
    folder.write_status(phase="tokenizing")
    max_length = min(recipe.max_length, lm.max_length)
    train_features = text_features(tokenizer, [(e.text, e.text_b) for e in data.train], max_length)
    targets = torch.tensor([data.label_index(e.label) for e in data.train], dtype=torch.long)

    forward = _wrap(model)

    def step(indices: list[int]) -> torch.Tensor:
        logits = forward(**collate([train_features[i] for i in indices], pad_id, device))
        return F.cross_entropy(logits.float(), targets[indices].to(device))

    lengths = [len(f["input_ids"]) for f in train_features]
    watch = None
    if recipe.timelapse and distributed.current().is_main:
        folder.write_status(phase="measuring the starting model")
        watch = Watch(recipe, folder, model, tokenizer, data.labels, data.eval, data.label_index, max_length, device, stop)
    losses, seconds, examples = _run_steps(recipe, folder, progress, stop, forward, len(train_features), lengths, step,
                                           device, watch)

    folder.write_status(phase="evaluating")
    check_stop(stop)
    eval_start = time.perf_counter()
    eval_features = text_features(tokenizer, [(e.text, e.text_b) for e in data.eval], max_length)
    ctx = distributed.current()
    mine = ctx.share(len(eval_features))  # each rank scores its share; the full split is gathered back
    local = predict_classes(model, [eval_features[i] for i in mine], pad_id, device, recipe.batch_size * 2)
    predicted = ctx.gather_rows(len(eval_features), mine, local)
    true = np.array([data.label_index(e.label) for e in data.eval])
    scores = evaluate_predictions(true, predicted, data.labels)
    eval_seconds = time.perf_counter() - eval_start
    folder.log(f"eval: accuracy {scores.accuracy:.4f} (majority {scores.majority_accuracy:.4f}) on {scores.n} examples")

    folder.write_status(phase="saving")
    check_stop(stop)
    if ctx.is_main:
        save_classifier(model, tokenizer, folder.path, data.labels, extra={"task": recipe.task, "max_length": max_length})
    return {
        **_base_metrics(recipe, lm, device, losses, seconds, examples, layers),
        **scores.to_json(),
        **(watch.summary() if watch is not None else {}),
        "train_examples": len(data.train),
        "eval_split": data.eval_split,
        "eval_seconds": eval_seconds,
        "data_source": data.source,
        "head": recipe.head,
    }


# ---- contrastive (SimCSE) -----------------------------------------------------------------------------


def sentence_embeddings(encoder: nn.Module, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """[batch, hidden]: the [CLS] state, or the mean over real (unpadded) tokens."""
    hidden = encoder(**batch).last_hidden_state
    if pooling == "cls":
        return hidden[:, 0]
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


class SimCSEProjection(nn.Module):
    """Gao et al.'s MLPLayer: dense (hidden -> hidden) + tanh over the [CLS] state, newly initialised as BERT
    initialises a linear layer (normal, std initializer_range; bias 0). Used in training only (--mlp_only_train):
    evaluation and the saved encoder use the [CLS] state without it ("cls_before_pooler")."""

    def __init__(self, hidden: int, initializer_range: float = 0.02):
        super().__init__()
        with fresh_weights():  # not while another thread's load has swapped nn.init for no-ops
            self.dense = nn.Linear(hidden, hidden)
            nn.init.normal_(self.dense.weight, mean=0.0, std=initializer_range)
            nn.init.zeros_(self.dense.bias)
        self.activation = nn.Tanh()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(features))


def training_embeddings(encoder: nn.Module, projection: nn.Module | None, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """[batch, hidden]: the sentence embedding the SimCSE loss sees (through the projection when there is one)."""
    z = sentence_embeddings(encoder, batch, pooling)
    return z if projection is None else projection(z)


class _Embedder(nn.Module):
    """The SimCSE training forward as one module (what DDP wraps): batch -> training embeddings [batch, hidden]."""

    def __init__(self, encoder: nn.Module, projection: nn.Module | None, pooling: str):
        super().__init__()
        self.encoder, self.projection, self.pooling = encoder, projection, pooling

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return training_embeddings(self.encoder, self.projection, batch, self.pooling)


def simcse_loss(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy over cosine similarities / temperature; candidate i is anchor i's positive, every other
    candidate (other positives, hard negatives appended after them) a negative.
    anchors [b, d], candidates [b + extra, d]."""
    sims = F.cosine_similarity(anchors.float().unsqueeze(1), candidates.float().unsqueeze(0), dim=-1) / temperature
    return F.cross_entropy(sims, torch.arange(anchors.shape[0], device=anchors.device))


@torch.inference_mode()
def embed_texts(encoder, tokenizer, texts: list[str], max_length: int, pooling: str, device: str, batch_size: int = 64) -> np.ndarray:
    """Unit-length sentence embeddings [n, hidden] in eval mode (float32)."""
    encoder.eval()
    ctx = distributed.current()
    mine = ctx.share(len(texts))  # each rank embeds its share; the rows are gathered back
    features = text_features(tokenizer, [(texts[i], None) for i in mine], max_length)
    out = np.zeros((len(mine), encoder.config.hidden_size), dtype=np.float32)
    pad_id = tokenizer.pad_token_id or 0
    for start in range(0, len(mine), batch_size):
        chunk = list(range(start, min(start + batch_size, len(mine))))
        z = sentence_embeddings(encoder, collate([features[i] for i in chunk], pad_id, device), pooling)
        out[chunk] = F.normalize(z.float(), dim=-1).cpu().numpy()
    return ctx.gather_rows(len(texts), mine, out)


def similarity_report(anchors: np.ndarray, partners: np.ndarray | None, sentences: np.ndarray) -> dict:
    """From unit vectors: positive_cosine = mean cos(anchor i, partner i); negative_cosine = mean
    cos(anchor i, partner j), j != i; margin = their difference; random_cosine = mean cosine between
    different eval sentences (anisotropy). anchors, partners [n, d]; sentences [m, d]."""
    report = {}
    if partners is not None and len(anchors) > 1:
        sims = anchors @ partners.T
        n = len(anchors)
        positive = float(np.trace(sims) / n)
        negative = float((sims.sum() - np.trace(sims)) / (n * n - n))
        report.update(positive_cosine=positive, negative_cosine=negative, margin=positive - negative)
    m = len(sentences)
    if m > 1:
        gram = sentences @ sentences.T
        report["random_cosine"] = float((gram.sum() - np.trace(gram)) / (m * m - m))
    return report


def _evaluate_contrastive(encoder, tokenizer, data: tasks.ContrastiveData, recipe: Recipe, max_length: int, device: str) -> dict:
    if data.eval_pairs:
        anchors = embed_texts(encoder, tokenizer, [a for a, _ in data.eval_pairs], max_length, recipe.pooling, device)
        partners = embed_texts(encoder, tokenizer, [b for _, b in data.eval_pairs], max_length, recipe.pooling, device)
        return similarity_report(anchors, partners, np.concatenate([anchors, partners]))
    sentences = embed_texts(encoder, tokenizer, list(data.eval_sentences), max_length, recipe.pooling, device)
    return similarity_report(sentences, None, sentences)


def _train_contrastive(recipe: Recipe, folder: RunFolder, progress, stop) -> dict:
    seed_everything(recipe.seed)
    device = _device(recipe)
    folder.write_status(phase="loading data")
    data = tasks.contrastive_data(recipe)
    folder.log(f"data: {len(data.train)} training items ({data.mode}), {len(data.eval_pairs)} eval pairs, {data.source}")
    folder.write_status(phase="loading model")
    lm, encoder, layers = _prepare_encoder(recipe, device)
    tokenizer = lm.tokenizer
    pad_id = tokenizer.pad_token_id or 0
    max_length = min(recipe.max_length, lm.max_length)
    folder.write_status(phase="evaluating before training")
    before = _evaluate_contrastive(encoder, tokenizer, data, recipe, max_length, device)
    folder.log(f"before: {before}")

    folder.write_status(phase="tokenizing")
    anchors = text_features(tokenizer, [(t.anchor, None) for t in data.train], max_length)
    positives = text_features(tokenizer, [(t.positive or t.anchor, None) for t in data.train], max_length)
    negatives = text_features(tokenizer, [(t.negative or t.anchor, None) for t in data.train], max_length)
    has_negative = [t.negative is not None for t in data.train]
    projection = None
    if recipe.mlp_in_training:
        seed_everything(recipe.seed)  # the projection's initialisation does not depend on how the model was loaded
        projection = SimCSEProjection(encoder.config.hidden_size, getattr(encoder.config, "initializer_range", 0.02)).to(device)

    # The optimizer and train()/eval() see the projection too (inside _Embedder); it is never saved.
    forward = _wrap(_Embedder(encoder, projection, recipe.pooling), unused_parameters=True)

    def step(indices: list[int]) -> torch.Tensor:
        # Under several processes the in-batch negatives are those of this rank's slice of the batch.
        b = len(indices)
        # Unsupervised: the positive is the anchor itself; dropout makes the two passes differ.
        hard = [i for i in indices if has_negative[i]]
        features = [anchors[i] for i in indices] + [positives[i] for i in indices] + [negatives[i] for i in hard]
        z = forward(collate(features, pad_id, device))
        return simcse_loss(z[:b], z[b:], recipe.temperature)

    lengths = [len(a["input_ids"]) + len(p["input_ids"]) for a, p in zip(anchors, positives)]
    losses, seconds, examples = _run_steps(recipe, folder, progress, stop, forward, len(anchors), lengths, step, device)

    folder.write_status(phase="evaluating")
    check_stop(stop)
    after = _evaluate_contrastive(encoder, tokenizer, data, recipe, max_length, device)
    folder.log(f"after: {after}")
    folder.write_status(phase="saving")
    check_stop(stop)
    if distributed.current().is_main:
        encoder.save_pretrained(folder.path, safe_serialization=True)
        tokenizer.save_pretrained(folder.path)
    return {
        **_base_metrics(recipe, lm, device, losses, seconds, examples, layers),
        "train_examples": len(data.train),
        "eval_examples": len(data.eval_pairs) or len(data.eval_sentences),
        "data_source": data.source,
        "similarity_before": before,
        "similarity_after": after,
        # What the similarity report embeds with: [CLS] or mean, never the training-only projection.
        "eval_pooling": "cls_before_pooler" if recipe.pooling == "cls" else recipe.pooling,
        "accuracy": None,
    }
