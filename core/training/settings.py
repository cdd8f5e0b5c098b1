"""`finetune` and `contrastive` declared once (core.contract): the settings a person picks for a training run, as
the CLI, core.lens and `views --json` offer them, and `recipe_of`, which turns them (with the run's inputs: model,
task, run name, data sizes, where it runs) into the one core.training.recipe.Recipe that is saved with the run.

The Recipe stays what it was (recipe.json files, the page's form and `--recipe FILE` read it unchanged); these
settings are its user-facing part. Settings a paper protocol fixes (epochs, lr, batch size, max length, lr decay;
temperature and pooling for SimCSE) default to None: the protocol's value, else BERT Lens's (DEFAULTS), so only
a value the user gave is checked against the protocol.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from core import numbering
from core.analyses.changes import SMALLEST_RATE
from core.contract import Analysis, setting
from core.files import write_text_atomic
from core.model.distributed import launched_world_size
from core.training.engine import finetune
from core.training.jobs import launch_ranks
from core.training.recipe import PAPER_SETTINGS, paper_recipe, parse_frozen
from core.training.runs import RECIPE, WORKER_PID, RunFolder, final_dir

# BERT Lens's values for what the user left out, per objective (a paper protocol's fixed values win).
DEFAULTS = {"classify": {"epochs": 2, "lr": 5e-5, "batch_size": 32, "max_length": 128, "lr_decay": 1.0},
            "contrastive": {"epochs": 1, "lr": 3e-5, "batch_size": 32, "max_length": 128, "temperature": 0.05,
                            "pooling": "cls", "lr_decay": 1.0}}
_FIXED = "; fixed by a paper protocol"


@dataclass(frozen=True)
class TrainingSettings:
    """What finetune and contrastive share."""

    epochs: int = setting(None, "training epochs (left out: 2; 1 for contrastive)" + _FIXED, type="int", low=1,
                          url=None)
    lr: float = setting(None, "learning rate (left out: 5e-5; 3e-5 for contrastive)" + _FIXED, type="float",
                        low=SMALLEST_RATE, url=None)
    batch_size: int = setting(None, "examples per batch (left out: 32)" + _FIXED, type="int", low=1, url=None)
    lr_decay: float = setting(None, "discriminative learning rates: layer l of L trains at lr x F^(L-l), the "
                              "embeddings at lr x F^L, the head at lr (Sun et al. 2019: 0.95); left out: 1 (one rate)"
                              + _FIXED, type="float", low=SMALLEST_RATE, high=1.0, url=None)
    max_length: int = setting(None, "tokens per example (pair) after truncation (left out: 128; 32 under --protocol "
                              "gao)", type="int", low=8, url=None)
    drop_last_layers: int = setting(0, "remove the top K encoder layers", low=0, url=None)
    freeze_layers: str = setting("", "freeze layers: " + numbering.FREEZE_HELP[0].lower() + numbering.FREEZE_HELP[1:]
                                 + " (counted after dropping the last layers)", url=None)
    freeze_embeddings: bool = setting(False, "keep the embeddings fixed", url=None)
    seed: int = setting(0, "seed of the data subsets, the head's initialisation and the batch order", low=0, url=None)
    gradient_accumulation: int = setting(1, "add up the gradients of N batches per optimizer step (effective batch = "
                                         "N x batch size)", low=1, url=None)


@dataclass(frozen=True)
class FinetuneSettings(TrainingSettings):
    head: str = setting("linear", "mlp = hidden -> 50 -> classes", choices=("linear", "mlp"), url=None)
    # The page's link carries the protocol as its "Paper protocol" switch (finetune.paper_protocol).
    protocol: str = setting("bertlens", "slides: the CS4650 slides' AdamW (lr 5e-5, eps 1e-8, no weight decay, no "
                            "schedule, no clipping), 2 epochs, batch 32, scored on the test split; bertlens: weight "
                            "decay 0.01, clipping 1.0, scored on SNLI dev so the test split stays unseen",
                            choices=("bertlens", "slides"), url=None)
    timelapse: int = setting(0, "measure the model at N evenly spaced steps (step 0 and the final step included) "
                             "against the starting model: RSA/CKA and anisotropy per layer, attention change per "
                             "head, dev loss and accuracy, into the run folder's timelapse.json (0: off)", low=0,
                             url=None)
    keep_checkpoints: int = setting(0, "keep the whole model at K of the time-lapse's frames (evenly chosen, the "
                                    "final step among them), loadable as NAME@STEP (0: none)", low=0, url=None)


@dataclass(frozen=True)
class ContrastiveSettings(TrainingSettings):
    mode: str = setting("unsup", "unsup: each sentence twice through dropout is its own positive; sup: entailment "
                        "hypothesis positive, contradiction hard negative", choices=("unsup", "sup"), url=None)
    temperature: float = setting(None, "softmax temperature of the similarities (left out: 0.05)" + _FIXED,
                                 type="float", low=SMALLEST_RATE, url=None)
    pooling: str = setting(None, "sentence embedding: [CLS] state or mean over tokens (left out: cls)" + _FIXED,
                           type="str", choices=("cls", "mean"), url=None)
    protocol: str = setting("bertlens", "gao: unsupervised SimCSE as Gao et al. (dense+tanh MLP over [CLS] in training "
                            "only, lr 3e-5, batch 64, 32 tokens, 1 epoch, temperature 0.05, linear decay); bertlens: "
                            "no MLP, 128 tokens, constant lr", choices=("bertlens", "gao"), url=None)


def recipe_of(settings: TrainingSettings, *, model: str, task: str, run_name: str, train_limit: int | None = None,
              eval_limit: int | None = None, data_source: str = "auto", device: str | None = None,
              cpu_threads: int | None = None, processes: int = 1, timelapse_corpus: str | None = None,
              freeze_lowest: int = 0):
    """The Recipe of these settings and the run's inputs. A value the user gave that the protocol fixes otherwise
    raises ValueError naming both (with the option's spelling); what was left out is the protocol's, else
    DEFAULTS. `freeze_lowest`: the old --freeze-lowest N (the lowest N layers), added to freeze_layers."""
    contrastive = isinstance(settings, ContrastiveSettings)
    defaults = DEFAULTS["contrastive" if contrastive else "classify"]
    fixed = PAPER_SETTINGS.get(settings.protocol, {})
    typed = {k: getattr(settings, k) for k in defaults}
    clashes = [f"--{k.replace('_', '-')} {v}" for k, v in typed.items() if v is not None and k in fixed and v != fixed[k]]
    if clashes:
        raise ValueError(f"{', '.join(clashes)} clash with --protocol {settings.protocol}, which fixes "
                         + ", ".join(f"{k}={fixed[k]}" for k in typed if k in fixed)
                         + "; drop them or use --protocol bertlens.")
    values = {k: (v if v is not None else defaults[k]) for k, v in typed.items()}
    if contrastive:
        values["objective"] = f"simcse-{settings.mode}"
    else:
        values.update(head=settings.head, timelapse=settings.timelapse, timelapse_corpus=timelapse_corpus,
                      keep_checkpoints=settings.keep_checkpoints)
    frozen, embeddings = parse_frozen(settings.freeze_layers)
    return paper_recipe(
        settings.protocol, model=model, task=task, run_name=run_name, train_limit=train_limit, eval_limit=eval_limit,
        seed=settings.seed, drop_last_layers=settings.drop_last_layers, frozen_layers=(*range(freeze_lowest), *frozen),
        freeze_embeddings=settings.freeze_embeddings or embeddings, data_source=data_source, device=device,
        cpu_threads=cpu_threads, gradient_accumulation=settings.gradient_accumulation, processes=processes, **values)


def train(recipe, progress=None, should_stop=None) -> dict:
    """Train the recipe in the foreground and return its metrics (metrics.json). Several processes outside a
    launcher: the launcher starts the ranks (torchrun / accelerate launch) and this process waits and reports."""
    if recipe.processes > 1 and launched_world_size() == 1:
        folder = RunFolder.create(recipe)
        write_text_atomic(folder.path / WORKER_PID, str(os.getpid()))
        return launch_ranks(recipe, str(folder.path / RECIPE), progress, should_stop)
    return finetune(recipe, progress=progress, should_stop=should_stop)


@dataclass(frozen=True)
class TrainedRun:
    """A finished training run: its name, its folder and its metrics; to_json() is what `finetune --json` /
    `contrastive --json` print (metrics.json: the run's name is its "run")."""

    name: str
    folder: str
    metrics: dict

    def to_json(self) -> dict:
        return self.metrics


def run_training(model: str, task: str, settings: TrainingSettings, progress=None, should_stop=None, *,
                 run_name: str, **inputs) -> TrainedRun:
    """run(subject, inputs, settings): the model fine-tuned on the task as `run_name` (recipe_of's other inputs in
    `inputs`), in this process."""
    recipe = recipe_of(settings, model=model, task=task, run_name=run_name, **inputs)
    metrics = train(recipe, progress, should_stop)
    return TrainedRun(recipe.run_name, str(final_dir(recipe.run_name)), metrics)


ANALYSES = (
    Analysis(name="finetune", view="finetune", command="finetune", lens="finetune", settings=FinetuneSettings,
             run=run_training, charts="core.charts.finetune:run_charts", title="Runs", order=0,
             summary="fine-tune a classifier; the run becomes a model named --run"),
    Analysis(name="contrastive", view="finetune", command="contrastive", lens="contrastive",
             settings=ContrastiveSettings, run=run_training, charts="core.charts.finetune:run_charts",
             title="Contrastive runs", order=1, summary="SimCSE contrastive training; saves an encoder"),
)
FINETUNE, CONTRASTIVE = ANALYSES
