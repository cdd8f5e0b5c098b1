"""What a training run does, as one frozen value that is saved with the run and shown on the page."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from core import numbering
from core.training.tasks import BUILTIN_TASKS
from core.training.timelapse import default_probe
from core.validation import check_fields, type_problem, whole_match

OBJECTIVES = ("classify", "simcse-unsup", "simcse-sup")
HEADS = ("linear", "mlp")
POOLINGS = ("cls", "mean")
SCHEDULES = ("none", "linear")  # constant learning rate, or linear decay to 0 over all steps (no warm-up)
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")  # matched whole (validation.whole_match)
RUN_NAME_RULE = ("it must start with a letter or digit and use only letters, digits, '_', '-' and '.' "
                 "(at most 80 characters)")

# Which protocols (core.protocols) a recipe of each objective may follow.
PROTOCOLS = {"classify": ("bertlens", "slides"), "simcse-unsup": ("bertlens", "gao"), "simcse-sup": ("bertlens",)}

# What a paper protocol fixes. A recipe labelled with the protocol must use exactly these values (its size,
# model, task and seed stay free), so a run that says "slides" was trained the slides' way.
PAPER_SETTINGS: dict[str, dict[str, object]] = {
    "slides": {"epochs": 2, "lr": 5e-5, "eps": 1e-8, "weight_decay": 0.0, "batch_size": 32, "schedule": "none",
               "max_grad_norm": 0.0, "eval_split": "test", "lr_decay": 1.0},
    "gao": {"epochs": 1, "lr": 3e-5, "eps": 1e-8, "weight_decay": 0.0, "batch_size": 64, "max_length": 32,
            "temperature": 0.05, "pooling": "cls", "mlp_in_training": True, "schedule": "linear", "max_grad_norm": 1.0,
            "lr_decay": 1.0},
}

# Where each fixed value comes from, or why it was chosen where the source is silent (shown on the page/CLI).
PAPER_SETTING_SOURCES: dict[str, dict[str, str]] = {
    "slides": {
        "epochs": "slides: 'epochs = 2'",
        "lr": "slides: 'AdamW(model.parameters(), lr=5e-5, eps=1e-8)'",
        "eps": "slides: same AdamW call",
        "weight_decay": "not stated in slides; 0 = transformers.AdamW's default, the optimizer that call "
                        "(copied from the Hugging Face BERT tutorial) builds (torch.optim.AdamW would use 0.01)",
        "batch_size": "549,367 SNLI train pairs / 17,168 train batches (slides) = 32",
        "schedule": "not stated in slides; none used",
        "max_grad_norm": "not stated in slides; none used (no clipping)",
        "eval_split": "slides: 'Accuracy on test dataset' = 8,886 / 9,824, the full SNLI test split",
        "max_length": "not stated in slides; the recipe's own value (default 128) is used",
        "lr_decay": "slides: one AdamW over model.parameters(), so one learning rate for every layer",
        "head": "slides: linear classifier on the 12-layer model, 768->50->3 MLP without dropout on the 11-layer one",
    },
    "gao": {
        "epochs": "princeton-nlp/SimCSE run_unsup_example.sh: --num_train_epochs 1",
        "lr": "run_unsup_example.sh: --learning_rate 3e-5",
        "eps": "Hugging Face Trainer default (adam_epsilon 1e-8)",
        "weight_decay": "Hugging Face Trainer default (weight_decay 0.0)",
        "batch_size": "run_unsup_example.sh: --per_device_train_batch_size 64",
        "max_length": "run_unsup_example.sh: --max_seq_length 32",
        "temperature": "run_unsup_example.sh: --temp 0.05",
        "pooling": "run_unsup_example.sh: --pooler_type cls ([CLS] last hidden state)",
        "mlp_in_training": "run_unsup_example.sh: --mlp_only_train; simcse/models.py MLPLayer (dense + tanh, "
                           "newly initialised) over [CLS] in cl_forward only; evaluation uses cls_before_pooler",
        "schedule": "Hugging Face Trainer default: linear decay to 0, no warm-up",
        "max_grad_norm": "Hugging Face Trainer default (max_grad_norm 1.0)",
        "lr_decay": "Hugging Face Trainer: one learning rate for every parameter",
    },
}

# The fine-tuning page's quick example, as Recipe values: sized so MiniLM-L6 on 2 CPU cores finishes in about
# 2 minutes and beats the majority baseline by 10 points or more (bench/quick_presets.py; figures in
# bench/RESULTS.md). Fewer, larger steps learned nothing: 1,000 pairs in batches of 32 at lr 5e-5 predicted
# "entailment" for 90 % of SNLI dev.
QUICK_FINETUNE = {"task": "snli", "train_limit": 1000, "eval_limit": 500, "epochs": 1, "max_length": 64, "lr": 1e-4,
                  "batch_size": 16, "cpu_threads": 1}

# BERT Lens's own recipe where it differs from the slides, and why it is kept as the default.
BERTLENS_DIFFERENCES = (
    "evaluates on SNLI dev, not test, so the test split stays unseen while you tune",
    "weight decay 0.01 (torch.optim.AdamW's default) and gradient clipping at 1.0, a little steadier on small data",
)

# The field recipe files written before frozen_layers was the one freeze field used for "the lowest N layers".
OLD_FREEZE_LOWEST = "freeze_layers"


@dataclass(frozen=True)
class Recipe:
    """A fine-tuning or contrastive run. BERT Lens's defaults ("bertlens") are the slides' AdamW lr 5e-5, eps 1e-8,
    2 epochs, cross-entropy, plus weight decay 0.01, clipping at 1.0 and evaluation on SNLI dev (BERTLENS_DIFFERENCES);
    `paper_recipe("slides" | "gao", ...)` builds the papers' own (PAPER_SETTINGS, sources in PAPER_SETTING_SOURCES).

    objective: "classify" (cross-entropy over a head on the pooled output), "simcse-unsup" (each sentence
        twice through dropout is its own positive) or "simcse-sup" (entailment hypothesis positive,
        contradiction hypothesis hard negative); both SimCSE modes use in-batch negatives and a
        cross-entropy over cosine similarities / temperature, and save an encoder only.
    head: "linear" (hidden -> classes) or "mlp" (hidden -> 50 -> classes, ReLU: the slides' head).
    drop_last_layers: remove the top K encoder layers before training (the "remove layer 12" experiment).
    frozen_layers: the encoder layers kept fixed, 0-based indices after dropping (parse_layer_set("0-5,11"); the
        lowest N are range(N)); a recipe file's old "freeze_layers": N (the lowest N) is read into it (from_dict).
        freeze_embeddings: keep the embeddings fixed.
    lr_decay: discriminative learning rates (Howard & Ruder 2018; Sun et al. 2019 use 0.95): encoder layer l of L
        (1-based) trains at lr x lr_decay ** (L - l), the embeddings at lr x lr_decay ** L, the head at lr;
        1 = one rate for all (engine.optimizer_groups).
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
    frozen_layers: tuple[int, ...] = ()  # 0-based layer indices kept fixed (after dropping), e.g. (11,)
    freeze_embeddings: bool = False
    lr_decay: float = 1.0  # per-layer learning-rate factor going down from the top layer; 1 = none
    temperature: float = 0.05
    pooling: str = "cls"  # sentence embedding for SimCSE: [CLS] state or mean over tokens
    mlp_in_training: bool = False  # SimCSE: dense + tanh over the sentence embedding in training only (Gao et al.)
    max_grad_norm: float = 1.0  # 0: no clipping
    schedule: str = "none"  # learning rate: "none" (constant) or "linear" (decay to 0, no warm-up)
    eval_split: str | None = None  # None: the task's own (SNLI dev); "test": the test split (built-in tasks)
    protocol: str = "bertlens"  # core.protocols name; a paper protocol fixes the values in PAPER_SETTINGS
    data_source: str = "auto"  # auto | hub | local
    device: str | None = None  # None: CUDA when there is one
    cpu_threads: int | None = None  # torch CPU threads for this run (None: torch's default, all cores)
    gradient_accumulation: int = 1  # batches whose gradients add up to one optimizer step (effective batch x N)
    processes: int = 1  # ranks to train on (GPUs, or CPU processes); >1 runs under torchrun / accelerate launch
    timelapse: int = 0  # frames of a time-lapse measured during training (core.training.timelapse); 0 = none
    timelapse_corpus: str | None = None  # its probe set (corpus spec); None: 100 seeded pairs of the task's dev split
    keep_checkpoints: int = 0  # of the time-lapse's frames, how many keep their whole model (loadable as NAME@STEP)

    def __post_init__(self) -> None:
        check_fields(Recipe, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "recipe")
        problems = []
        # A recipe read back from recipe.json carries a list; keep the value hashable and in one order.
        try:
            object.__setattr__(self, "frozen_layers", tuple(sorted({int(i) for i in self.frozen_layers or ()})))
        except (TypeError, ValueError):
            problems.append(f"frozen_layers {self.frozen_layers!r} must be layer indices (0-based integers)")
        if any(i < 0 for i in self.frozen_layers):
            problems.append("frozen_layers are 0-based layer indices and cannot be negative")
        if not whole_match(RUN_NAME, self.run_name):
            problems.append(f"run name {self.run_name!r}: {RUN_NAME_RULE}")
        if self.objective not in OBJECTIVES:
            problems.append(f"objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        if self.head not in HEADS:
            problems.append(f"head {self.head!r} is not one of {', '.join(HEADS)}")
        if self.pooling not in POOLINGS:
            problems.append(f"pooling {self.pooling!r} is not one of {', '.join(POOLINGS)}")
        for name in ("epochs", "batch_size", "mlp_hidden", "gradient_accumulation", "processes"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if self.max_length < 8:
            problems.append("max_length must be at least 8 tokens")
        if self.drop_last_layers < 0:
            problems.append("drop_last_layers cannot be negative")
        for name in ("train_limit", "eval_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                problems.append(f"{name} must be at least 1 (or empty for all examples)")
        if not self.lr > 0 or not self.temperature > 0:
            problems.append("lr and temperature must be positive")
        if not 0 < self.lr_decay <= 1:
            problems.append(f"lr_decay {self.lr_decay!r} must be in (0, 1]: each layer down trains that many times "
                            "slower (1 = one rate for all)")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.eval_split not in (None, "test"):
            problems.append(f"eval_split {self.eval_split!r} must be empty (the task's own) or 'test'")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            problems.append("weight_decay and max_grad_norm cannot be negative")
        if self.mlp_in_training and self.objective == "classify":
            problems.append("mlp_in_training is a SimCSE setting; a classifier has its own head")
        problems += _protocol_problems(self)
        problems += _timelapse_problems(self)
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
    def from_dict(cls, values: dict, where: str = "recipe") -> "Recipe":
        """A Recipe from parsed recipe.json; ValueError naming `where` and the first field of the wrong type. A file
        written before frozen_layers was the one field has "freeze_layers": N (the lowest N layers): read into it."""
        check_fields(cls, values, where)
        known = {f.name for f in dataclasses.fields(cls)}
        recipe = {k: v for k, v in values.items() if k in known}
        lowest = values.get(OLD_FREEZE_LOWEST) or 0
        if lowest:
            problem = type_problem(lowest, int)
            if problem or lowest < 0:
                raise ValueError(f'{where}: field "{OLD_FREEZE_LOWEST}" {problem or "cannot be negative"}')
            recipe["frozen_layers"] = [*range(lowest), *(recipe.get("frozen_layers") or ())]
        return cls(**recipe)

    def replace(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)


def parse_layer_set(spec: str | int | None) -> tuple[int, ...]:
    """0-based layer indices from "11", "0-5,11" or "0-5, 7-8" (ranges inclusive); "" or None -> ()."""
    if spec is None:
        return ()
    text = str(spec).strip()
    if not text:
        return ()
    layers: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not match:
            raise ValueError(f"layer set {text!r}: {part!r} is not a layer number or range like 1-6")
        first, last = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if last < first:
            raise ValueError(f"layer set {text!r}: range {part!r} runs backwards")
        layers.update(range(first, last + 1))
    return tuple(sorted(layers))


def parse_frozen(spec: str | int | None) -> tuple[tuple[int, ...], bool]:
    """The freeze option as a person types it (core.numbering: 0 = the embeddings, 1..L = the transformer layers,
    e.g. "0-6,12") -> (Recipe.frozen_layers: array indices after dropping, whether the embeddings are frozen)."""
    shown = parse_layer_set(spec)
    return tuple(numbering.index_of(n) for n in shown if n != numbering.EMBEDDINGS), numbering.EMBEDDINGS in shown


def format_layer_set(layers) -> str:
    """The inverse of parse_layer_set: (0, 1, 2, 5) -> "0-2,5"."""
    ordered = sorted(set(int(i) for i in layers))
    parts: list[str] = []
    start = prev = None
    for i in ordered + [None]:
        if start is not None and (i is None or i != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(parts)


def _protocol_problems(recipe: Recipe) -> list[str]:
    allowed = PROTOCOLS.get(recipe.objective, ("bertlens",))
    if recipe.protocol not in allowed:
        return [f"protocol {recipe.protocol!r} does not apply to objective {recipe.objective!r} (choose "
                f"{' or '.join(allowed)})"]
    fixed = PAPER_SETTINGS.get(recipe.protocol, {})
    wrong = [f"{name}={value!r} (got {getattr(recipe, name)!r})" for name, value in fixed.items() if getattr(recipe, name) != value]
    if wrong:
        return [f"protocol {recipe.protocol!r} fixes {', '.join(wrong)}; use protocol 'bertlens' to change them"]
    return []


def paper_recipe(protocol: str, **values) -> Recipe:
    """A Recipe following `protocol`: the paper's fixed values (PAPER_SETTINGS) over `values`; protocol "bertlens"
    returns Recipe(**values) as given. For "gao" the objective defaults to unsupervised SimCSE."""
    if protocol == "bertlens":
        return Recipe(**values, protocol="bertlens")
    if protocol not in PAPER_SETTINGS:
        raise ValueError(f"Unknown training protocol '{protocol}'; choose one of: bertlens, {', '.join(PAPER_SETTINGS)}.")
    if protocol == "gao":
        values.setdefault("objective", "simcse-unsup")
    return Recipe(**{**values, **PAPER_SETTINGS[protocol], "protocol": protocol})


def protocol_table(protocol: str) -> list[dict[str, str]]:
    """Rows (setting, value, source) of what a paper protocol fixes, for the page and the CLI."""
    sources = PAPER_SETTING_SOURCES.get(protocol, {})
    fixed = PAPER_SETTINGS.get(protocol, {})
    return [{"setting": name, "value": str(fixed.get(name, "free")), "source": sources[name]} for name in sources]


def _timelapse_problems(recipe: Recipe) -> list[str]:
    problems = []
    if recipe.timelapse < 0 or recipe.timelapse == 1:
        problems.append(f"timelapse {recipe.timelapse}: give 0 (off) or at least 2 frames (step 0 and the final step)")
    if not 0 <= recipe.keep_checkpoints <= max(recipe.timelapse, 0):
        problems.append(f"keep_checkpoints {recipe.keep_checkpoints}: keep 0 to {max(recipe.timelapse, 0)} of the "
                        f"time-lapse's {max(recipe.timelapse, 0)} frames' checkpoints"
                        + ("" if recipe.timelapse else " (checkpoints are kept at time-lapse frames: add timelapse N)"))
    if recipe.timelapse and recipe.is_contrastive:
        problems.append("a time-lapse measures a classifier being fine-tuned (objective classify), not SimCSE")
    if recipe.timelapse and recipe.processes > 1:
        problems.append("a time-lapse is measured in one process; train with processes 1")
    if recipe.timelapse and not recipe.timelapse_corpus and default_probe(recipe.task) is None:
        problems.append(f"task {recipe.task!r} has no built-in dev split to take the time-lapse's probe sentences "
                        "from: give timelapse_corpus (a corpus spec such as builtin, ud:dev:100 or a .txt file)")
    return problems


def _looks_like_file(task: str) -> bool:
    return task not in BUILTIN_TASKS
