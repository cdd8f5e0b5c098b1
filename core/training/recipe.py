"""What a training run does, as one frozen value that is saved with the run and shown on the page."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

OBJECTIVES = ("classify", "simcse-unsup", "simcse-sup")
HEADS = ("linear", "mlp")
POOLINGS = ("cls", "mean")
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass(frozen=True)
class Recipe:
    """A fine-tuning or contrastive run. Defaults follow the CS4650 slides (AdamW lr 5e-5, eps 1e-8, 2 epochs,
    cross-entropy).

    objective: "classify" (cross-entropy over a head on the pooled output), "simcse-unsup" (each sentence
        twice through dropout is its own positive) or "simcse-sup" (entailment hypothesis positive,
        contradiction hypothesis hard negative); both SimCSE modes use in-batch negatives and a
        cross-entropy over cosine similarities / temperature, and save an encoder only.
    head: "linear" (hidden -> classes) or "mlp" (hidden -> 50 -> classes, ReLU: the slides' head).
    drop_last_layers: remove the top K encoder layers before training (the "remove layer 12" experiment).
    freeze_layers: keep the lowest N encoder layers fixed; freeze_embeddings: keep the embeddings fixed.
    train_limit / eval_limit: seeded subsets (None = everything).
    """

    model: str
    task: str
    run_name: str
    objective: str = "classify"
    epochs: int = 2
    lr: float = 5e-5
    eps: float = 1e-8
    weight_decay: float = 0.01  # torch.optim.AdamW's default
    batch_size: int = 32
    max_length: int = 128
    train_limit: int | None = None
    eval_limit: int | None = None
    seed: int = 0
    head: str = "linear"
    mlp_hidden: int = 50
    drop_last_layers: int = 0
    freeze_layers: int = 0
    freeze_embeddings: bool = False
    temperature: float = 0.05
    pooling: str = "cls"  # sentence embedding for SimCSE: [CLS] state or mean over tokens
    max_grad_norm: float = 1.0
    data_source: str = "auto"  # auto | hub | local
    device: str | None = None  # None: CUDA when there is one
    cpu_threads: int | None = None  # torch CPU threads for this run (None: torch's default, all cores)

    def __post_init__(self) -> None:
        problems = []
        if not RUN_NAME.match(self.run_name or ""):
            problems.append(
                f"run name {self.run_name!r} must start with a letter or digit and use only letters, digits, "
                "'_', '-' and '.' (at most 80 characters)"
            )
        if self.objective not in OBJECTIVES:
            problems.append(f"objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        if self.head not in HEADS:
            problems.append(f"head {self.head!r} is not one of {', '.join(HEADS)}")
        if self.pooling not in POOLINGS:
            problems.append(f"pooling {self.pooling!r} is not one of {', '.join(POOLINGS)}")
        for name in ("epochs", "batch_size", "mlp_hidden"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if self.max_length < 8:
            problems.append("max_length must be at least 8 tokens")
        for name in ("drop_last_layers", "freeze_layers"):
            if getattr(self, name) < 0:
                problems.append(f"{name} cannot be negative")
        for name in ("train_limit", "eval_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                problems.append(f"{name} must be at least 1 (or empty for all examples)")
        if not self.lr > 0 or not self.temperature > 0:
            problems.append("lr and temperature must be positive")
        if self.objective == "simcse-sup" and self.task not in ("snli", "mrpc") and not _looks_like_file(self.task):
            problems.append("supervised SimCSE needs pairs: task snli, mrpc or a file with text and text_b columns")
        if problems:
            raise ValueError("Invalid recipe: " + "; ".join(problems) + ".")

    @property
    def is_contrastive(self) -> bool:
        return self.objective != "classify"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Recipe":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    def replace(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)


def _looks_like_file(task: str) -> bool:
    from core.training.tasks import BUILTIN_TASKS

    return task not in BUILTIN_TASKS
