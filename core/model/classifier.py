"""A classifier = a standard Hugging Face encoder + a small head, saved so the encoder loads on its own.

Run folder layout (a finished classification run):
    config.json, model.safetensors        the encoder in the standard HF layout (AutoModel / load_model load it)
    tokenizer.json, tokenizer_config.json the tokenizer
    head.safetensors                      the head's weights ("0.weight", ... of `Classifier.head`)
    head.json                             {"head": "linear"|"mlp", "labels": [...], "pooling": "pooler"|"cls", "dropout", ...}
    metrics.json, recipe.json, status.json, train.log

The forward path is the encoder's own forward call, so anything that works on an HF encoder works here: hooks
through core.model.adapter (ModelAdapter.of(classifier) finds the encoder inside), or eager attention loaded with
`load_classifier(ref, attention="eager")`. `predict_logits` is the one batched predict of every classifier loop
(a run, an explainer, a classifier in training).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from core.model.loading import LoadedModel, ModelUnavailable, fresh_weights, load_model
from core.progress import ProgressCallback, StopCheck, check_stop

HEAD_CONFIG, HEAD_WEIGHTS = "head.json", "head.safetensors"


class Classifier(nn.Module):
    """encoder -> pooled vector [batch, hidden] -> dropout -> head -> logits [batch, classes].

    pooling "pooler" uses the encoder's pooler output (BERT's tanh layer over [CLS], as in
    BertForSequenceClassification); "cls" uses the last hidden state of the first token (models without a pooler).
    head "linear": hidden -> classes; "mlp": hidden -> mlp_hidden -> classes with a ReLU (the CS4650 slides' head).
    dropout before the head: None for the encoder's hidden dropout (as BertForSequenceClassification), else that
    probability (the slides' MLP model has none); head.json records it.
    """

    def __init__(self, encoder: nn.Module, num_labels: int, head: str = "linear", mlp_hidden: int = 50,
                 pooling: str | None = None, dropout: float | None = None):
        super().__init__()
        self.encoder = encoder
        config = encoder.config
        hidden = int(getattr(config, "hidden_size", getattr(config, "dim", 0)))
        self.pooling = pooling or ("pooler" if getattr(encoder, "pooler", None) is not None else "cls")
        self.head_kind, self.mlp_hidden = head, mlp_hidden
        if dropout is None:  # BertForSequenceClassification's: the encoder's hidden dropout
            dropout = float(getattr(config, "hidden_dropout_prob", getattr(config, "dropout", 0.1)) or 0.0)
        self.dropout = nn.Dropout(dropout)
        if head not in ("linear", "mlp"):
            raise ValueError(f"head {head!r} is not 'linear' or 'mlp'")
        with fresh_weights():  # a job's new head must not be built while another thread loads a model
            if head == "linear":
                self.head = nn.Sequential(nn.Linear(hidden, num_labels))
            else:
                self.head = nn.Sequential(nn.Linear(hidden, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, num_labels))

    def pooled(self, **inputs) -> torch.Tensor:
        return self.pooled_of(self.encoder(**inputs))

    def pooled_of(self, out) -> torch.Tensor:
        """The pooled vector of an encoder output (pooler_output, or the first token's last hidden state)."""
        if self.pooling == "pooler":
            return out.pooler_output
        return out.last_hidden_state[:, 0]

    def forward(self, **inputs) -> torch.Tensor:
        """inputs: the tokenizer's tensors (input_ids, attention_mask[, token_type_ids]); returns logits."""
        return self.logits_of(self.encoder(**inputs))

    def logits_of(self, out) -> torch.Tensor:
        """Logits of an encoder output this classifier's encoder returned (a pass made elsewhere, such as the
        time-lapse's one forward a frame, which also reads that output's hidden states and attentions)."""
        return self.head(self.dropout(self.pooled_of(out)))

    def head_logits(self, last_hidden: torch.Tensor) -> torch.Tensor:
        """Logits [batch, classes] from the encoder's last hidden state [batch, T, D]: what `forward` computes after
        the encoder's layers (the ablation sweep and activation patching start a pass mid-stack)."""
        pooled = self.encoder.pooler(last_hidden) if self.pooling == "pooler" else last_hidden[:, 0]
        return self.head(self.dropout(pooled))


def save_classifier(classifier: Classifier, tokenizer, folder: Path, labels: tuple[str, ...], extra: dict | None = None) -> None:
    """Written straight into `folder`, the run's temporary .NAME.partial folder: the run appears only when that
    whole folder is renamed (runs.RunFolder.finish), so no file here needs a temporary name of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    config = classifier.encoder.config
    config.id2label = {i: label for i, label in enumerate(labels)}
    config.label2id = {label: i for i, label in enumerate(labels)}
    classifier.encoder.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    state = {k: v.detach().float().contiguous().cpu() for k, v in classifier.head.state_dict().items()}
    save_file(state, str(folder / HEAD_WEIGHTS))
    meta = {"format": 1, "head": classifier.head_kind, "mlp_hidden": classifier.mlp_hidden,
            "pooling": classifier.pooling, "dropout": classifier.dropout.p, "labels": list(labels), **(extra or {})}
    (folder / HEAD_CONFIG).write_text(json.dumps(meta, indent=2))


@dataclass(frozen=True, eq=False)
class LoadedClassifier:
    """A fine-tuned classifier in eval mode. `model(**tokenizer_output)` returns logits [batch, classes]."""

    encoder: LoadedModel  # ref, path, tokenizer, device, num_layers ...
    model: Classifier
    labels: tuple[str, ...]
    head: dict  # head.json

    @property
    def tokenizer(self):
        return self.encoder.tokenizer

    @property
    def device(self) -> str:
        return self.encoder.device

    def tokenize(self, items: list[tuple[str, str | None]], max_length: int | None = None) -> dict:
        """Tensors for a batch of (text, text_b or None) on the model's device."""
        max_length = max_length or self.encoder.max_length
        firsts = [a for a, _ in items]
        seconds = [b for _, b in items]
        if all(b for b in seconds):
            batch = self.tokenizer(firsts, seconds, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        elif not any(seconds):
            batch = self.tokenizer(firsts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        else:
            raise ValueError("a batch must be all pairs or all single texts")
        return {k: v.to(self.device) for k, v in batch.items()}

    def logits(self, feed: dict) -> torch.Tensor:
        """Logits [batch, classes] for the model's inputs (input_ids, attention_mask[, token_type_ids])."""
        return self.model(**feed)

    def predict_proba(self, items: list[tuple[str, str | None]], batch_size: int = 32, max_length: int | None = None) -> np.ndarray:
        """Class probabilities [len(items), len(labels)], float32, rows summing to 1."""
        features = text_features(self.tokenizer, items, max_length or self.encoder.max_length)
        return softmax(predict_logits(self, features, batch_size=batch_size))


def is_classifier_folder(folder: Path) -> bool:
    return (Path(folder) / HEAD_CONFIG).is_file() and (Path(folder) / HEAD_WEIGHTS).is_file()


def load_classifier(ref: str, *, device: str | None = None, attention: str = "eager") -> LoadedClassifier:
    """A classification run (run name or folder) with its head, ready for `predict_proba`."""
    encoder = load_model(ref, device=device, attention=attention)
    folder = Path(encoder.path)
    if not is_classifier_folder(folder):
        raise ModelUnavailable(
            f"'{ref}' has no classifier head ({HEAD_CONFIG} + {HEAD_WEIGHTS}); it is a plain encoder "
            "(a pretrained model or a contrastive run). Pick a fine-tuned classification run."
        )
    meta = json.loads((folder / HEAD_CONFIG).read_text())
    labels = tuple(meta["labels"])
    classifier = Classifier(encoder.model, len(labels), meta["head"], int(meta.get("mlp_hidden", 50)), meta["pooling"],
                            meta.get("dropout"))
    classifier.head.load_state_dict(load_file(str(folder / HEAD_WEIGHTS)))
    classifier.to(encoder.device).eval()
    return LoadedClassifier(encoder=encoder, model=classifier, labels=labels, head=meta)


# ---- one batched predict for every classifier ------------------------------------------------------------------


def text_features(tokenizer, items: list[tuple[str, str | None]], max_length: int) -> list[dict[str, list[int]]]:
    """Token ids per item, truncated to max_length, unpadded. Pairs and single texts may be mixed."""
    features: list[dict | None] = [None] * len(items)
    for want_pairs in (False, True):
        indices = [i for i, (_, b) in enumerate(items) if bool(b) == want_pairs]
        if not indices:
            continue
        firsts = [items[i][0] for i in indices]
        if want_pairs:
            encoded = tokenizer(firsts, [items[i][1] for i in indices], truncation=True, max_length=max_length)
        else:
            encoded = tokenizer(firsts, truncation=True, max_length=max_length)
        keys = [k for k in ("input_ids", "token_type_ids") if k in encoded]
        for row, i in enumerate(indices):
            features[i] = {k: encoded[k][row] for k in keys}
    return features


def collate(features: list[dict[str, list[int]]], pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest item: input_ids, attention_mask[, token_type_ids], each [batch, tokens]."""
    longest = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(features), longest), dtype=torch.long)
    types = torch.zeros((len(features), longest), dtype=torch.long) if "token_type_ids" in features[0] else None
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        ids[row, :n] = torch.as_tensor(np.asarray(f["input_ids"]))
        mask[row, :n] = 1
        if types is not None:
            types[row, :n] = torch.as_tensor(np.asarray(f["token_type_ids"]))
    batch = {"input_ids": ids, "attention_mask": mask}
    if types is not None:
        batch["token_type_ids"] = types
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _feature(item, with_types: bool) -> dict:
    """A feature dict from a feature dict, a core.model.encoding.Tokenized or an (input ids, type ids) pair."""
    if isinstance(item, dict):
        ids, types = item["input_ids"], item.get("token_type_ids")
    elif hasattr(item, "input_ids"):
        ids, types = item.input_ids, item.type_ids
    else:
        ids, types = item
    if with_types:
        return {"input_ids": ids, "token_type_ids": types if types is not None else np.zeros(len(ids), dtype=np.int64)}
    return {"input_ids": ids}


def classifier_batches(model, items: Sequence, batch_size: int, *, pad_id: int | None = None,
                       device: str | None = None) -> Iterator[tuple[list[int], dict]]:
    """(indices into items, padded inputs) per batch, longest items first (least padding). model and items as
    in predict_logits."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        with_types = "token_type_ids" in tokenizer.model_input_names
        device = model.device
    else:  # a bare Classifier in training: its features carry type ids exactly when its tokenizer makes them
        with_types = bool(items) and (not isinstance(items[0], dict) or "token_type_ids" in items[0])
    if pad_id is None or device is None:
        raise ValueError("predict_logits on a bare module needs pad_id and device")
    features = [_feature(item, with_types) for item in items]
    order = sorted(range(len(features)), key=lambda i: -len(features[i]["input_ids"]))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        yield chunk, collate([features[i] for i in chunk], pad_id, device)


@torch.inference_mode()
def predict_logits(model, items: Sequence, *, batch_size: int = 32, progress: ProgressCallback = None,
                   should_stop: StopCheck = None, pad_id: int | None = None, device: str | None = None) -> np.ndarray:
    """Logits [len(items), classes] float32 of a classifier, batched longest first.

    model: anything with `logits(feed)`, `tokenizer` and `device` (a LoadedClassifier, or an
    core.analyses.explain.Explainer with a head), or a bare Classifier module (then pad_id and device are given).
    items: each a feature dict {"input_ids"[, "token_type_ids"]}, a core.model.encoding.Tokenized, or an
    (input ids, type ids) pair; already truncated. should_stop is checked before each batch; progress(done,
    total) counts items after each."""
    forward = getattr(model, "logits", None) or (lambda feed: model(**feed))
    out: np.ndarray | None = None
    done = 0
    for chunk, feed in classifier_batches(model, items, batch_size, pad_id=pad_id, device=device):
        check_stop(should_stop)
        logits = forward(feed).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(items), logits.shape[-1]), dtype=np.float32)
        out[chunk] = logits
        done += len(chunk)
        if progress is not None:
            progress(done, len(items))
    return out if out is not None else np.zeros((0, len(getattr(model, "labels", None) or ())), dtype=np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Rows of class probabilities [n, C] float32 from logits [n, C] (torch's softmax, as the model's own)."""
    return torch.softmax(torch.from_numpy(np.ascontiguousarray(logits, dtype=np.float32)), dim=-1).numpy()
