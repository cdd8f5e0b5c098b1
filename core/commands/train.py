"""`finetune`, `contrastive`, `runs` and `cancel`: the fine-tuning page's command-line twin."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from core import numbering, validation
from core.commands import add_json_arguments, warn_degenerate
from core.data import corpus as corpora
from core.files import write_text_atomic
from core.model.distributed import launched_world_size
from core.training import Recipe, cancel, finetune, list_runs, report, submit
from core.training.evaluation import run_degeneracy
from core.training.jobs import SignalStop, launch_ranks
from core.training.recipe import PAPER_SETTINGS, RUN_NAME, RUN_NAME_RULE, paper_recipe, parse_frozen
from core.training.runs import RECIPE, WORKER_PID, RunFolder
from core.training.tasks import BUILTIN_TASKS, DRUG_RATING_DIFFERENCES, RATING_BUCKETS, TASK_TITLES


def _common(p) -> None:
    p.add_argument("--model", help="hub id, local folder, run name or data-folder model (e.g. all-MiniLM-L6-v2)")
    # --run-name: torchrun reads a bare --run after the script as an ambiguous abbreviation of its --run-path.
    p.add_argument("--run", "--run-name", dest="run", type=validation.name_type(RUN_NAME, RUN_NAME_RULE),
                   help="run name: the folder under models_cache/runs and the model name afterwards")
    p.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of the training examples")
    p.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of the evaluation examples")
    # No argparse defaults here: a paper protocol fixes these, so only values the user typed are checked against it.
    p.add_argument("--epochs", type=validation.positive, default=None, help="default 2 (1 for contrastive); fixed by a paper protocol")
    p.add_argument("--lr", type=validation.positive_number, default=None, help="default 5e-5 (3e-5 for contrastive); fixed by a paper protocol")
    p.add_argument("--batch-size", type=validation.positive, default=None, help="default 32; fixed by a paper protocol")
    p.add_argument("--lr-decay", type=validation.unit_fraction, default=None, metavar="F",
                   help="discriminative learning rates: layer l of L trains at lr x F^(L-l), the embeddings at "
                   "lr x F^L, the head at lr (Sun et al. 2019: 0.95); default 1 (one rate); fixed by a paper protocol")
    p.add_argument("--max-length", type=validation.positive, default=None,
                   help="tokens per example (pair) after truncation; default 128 (32 under --protocol gao)")
    p.add_argument("--drop-last-layers", type=validation.count, default=0, metavar="K", help="remove the top K encoder layers")
    p.add_argument("--freeze-layers", default="", metavar="SET",
                   help="freeze layers: " + numbering.FREEZE_HELP[0].lower() + numbering.FREEZE_HELP[1:]
                   + " (counted after --drop-last-layers)")
    # The old spelling of --freeze-layers 1-N, kept for one release.
    p.add_argument("--freeze-lowest", type=validation.count, default=0, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--seed", type=validation.count, default=0)
    p.add_argument("--source", default="auto", choices=["auto", "hub", "local"], help="where snli/mrpc come from")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA when there is one)")
    p.add_argument("--threads", type=validation.positive, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--gradient-accumulation", type=validation.positive, default=1, metavar="N",
                   help="add up the gradients of N batches per optimizer step (effective batch = N x batch size)")
    p.add_argument("--processes", type=validation.positive, default=None, metavar="N",
                   help="train on N processes (GPUs, or CPU processes): started through torchrun / accelerate "
                   "launch for you; under a launcher it defaults to the launcher's world size")
    p.add_argument("--recipe", default=None, help="a recipe.json (as saved in a run folder); replaces the options above")
    p.add_argument("--background", action="store_true", help="queue the run as a background job and return")
    add_json_arguments(p, "the run's metrics (metrics.json) as one JSON object")


def register(subparsers) -> None:
    p = subparsers.add_parser("finetune", help="fine-tune a classifier; the run becomes a model named --run")
    _common(p)
    p.add_argument("--task", help="a built-in task (" + "; ".join(f"{t}: {TASK_TITLES[t]}" for t in BUILTIN_TASKS)
                   + ") or a CSV/JSONL file with text[, text_b], label columns (for drugs-rating* what differs from "
                   "the slides' WebMD satisfaction is printed when it runs)")
    p.add_argument("--head", default="linear", choices=["linear", "mlp"], help="mlp = hidden -> 50 -> classes")
    p.add_argument("--protocol", default="bertlens", choices=["bertlens", "slides"],
                   help="slides: the CS4650 slides' AdamW (lr 5e-5, eps 1e-8, no weight decay, no schedule, no "
                   "clipping), 2 epochs, batch 32, scored on the test split; bertlens (default): weight decay 0.01, "
                   "clipping 1.0, scored on SNLI dev so the test split stays unseen")
    p.add_argument("--timelapse", type=validation.count, default=0, metavar="N",
                   help="measure the model at N evenly spaced steps (step 0 and the final step included) against the "
                   "starting model: RSA/CKA and anisotropy per layer, attention change per head, dev loss and "
                   "accuracy; frames go to the run folder's timelapse.json (default 0: off)")
    p.add_argument("--timelapse-corpus", default=None, metavar="SPEC",
                   help="the time-lapse's probe set (" + corpora.CLI_HELP + "; default: 100 seeded pairs of the "
                   "task's dev split, snli:dev:100 or mrpc:dev:100); a treebank (ud, .conllu) adds UUAS per layer")
    p.add_argument("--keep-checkpoints", type=validation.count, default=0, metavar="K",
                   help="keep the whole model at K of the time-lapse's frames (evenly chosen, the final step among "
                   "them), loadable as NAME@STEP (default 0: none)")
    p.set_defaults(func=run_finetune, objective="classify")

    p = subparsers.add_parser("contrastive", help="SimCSE contrastive training; saves an encoder")
    _common(p)
    p.add_argument("--mode", default="unsup", choices=["unsup", "sup"])
    p.add_argument("--task", default="snli", help=f"a built-in task ({', '.join(BUILTIN_TASKS)}; --mode sup: snli or "
                   "mrpc) or a file (text[, text_b, text_neg])")
    p.add_argument("--temperature", type=validation.positive_number, default=None, help="default 0.05")
    p.add_argument("--pooling", default=None, choices=["cls", "mean"], help="default cls")
    p.add_argument("--protocol", default="bertlens", choices=["bertlens", "gao"],
                   help="gao: unsupervised SimCSE as Gao et al. (dense+tanh MLP over [CLS] in training only, lr 3e-5, "
                   "batch 64, 32 tokens, 1 epoch, temperature 0.05, linear decay); bertlens (default): no MLP, "
                   "128 tokens, constant lr")
    p.set_defaults(func=run_finetune, objective=None)

    p = subparsers.add_parser("runs", help="list training runs with their status")
    add_json_arguments(p, 'one JSON object, {"runs": [{"name", "state", "folder", "recipe", "status", "metrics", '
                       '"log_tail"}, ...]}, instead of a table')
    p.set_defaults(func=run_list)

    p = subparsers.add_parser("cancel", help="stop a queued or running training run")
    p.add_argument("name")
    p.set_defaults(func=run_cancel)


# BERT Lens's values for what the user left out (keys are argparse destinations).
DEFAULTS = {"classify": {"epochs": 2, "lr": 5e-5, "batch_size": 32, "max_length": 128, "lr_decay": 1.0},
            "contrastive": {"epochs": 1, "lr": 3e-5, "batch_size": 32, "max_length": 128, "temperature": 0.05, "pooling": "cls",
                            "lr_decay": 1.0}}


def recipe_from_args(args) -> Recipe:
    if args.recipe:
        return Recipe.from_dict(json.loads(Path(args.recipe).read_text(encoding="utf-8")), where=args.recipe)
    if not args.model or not args.run or not args.task:
        raise ValueError("--model, --task and --run are required (or --recipe FILE)")
    contrastive = args.objective is None
    protocol = getattr(args, "protocol", "bertlens")
    fixed = PAPER_SETTINGS.get(protocol, {})
    typed = {k: getattr(args, k, None) for k in DEFAULTS["contrastive" if contrastive else "classify"]}
    clashes = [f"--{k.replace('_', '-')} {v}" for k, v in typed.items() if v is not None and k in fixed and v != fixed[k]]
    if clashes:
        raise ValueError(f"{', '.join(clashes)} clash with --protocol {protocol}, which fixes "
                         + ", ".join(f"{k}={fixed[k]}" for k in typed if k in fixed) + "; drop them or use --protocol bertlens.")
    values = {k: (v if v is not None else DEFAULTS["contrastive" if contrastive else "classify"][k]) for k, v in typed.items()}
    if contrastive:
        values["objective"] = f"simcse-{args.mode}"
    else:
        values["head"] = args.head
    return paper_recipe(
        protocol, model=args.model, task=args.task, run_name=args.run, train_limit=args.train_limit,
        eval_limit=args.eval_limit, seed=args.seed, drop_last_layers=args.drop_last_layers,
        frozen_layers=(*range(args.freeze_lowest), *parse_frozen(args.freeze_layers)[0]),
        freeze_embeddings=args.freeze_embeddings or parse_frozen(args.freeze_layers)[1], data_source=args.source,
        device=args.device, cpu_threads=args.threads, gradient_accumulation=args.gradient_accumulation,
        processes=args.processes or launched_world_size(), **values,
        **({"timelapse": args.timelapse, "timelapse_corpus": args.timelapse_corpus,
            "keep_checkpoints": args.keep_checkpoints} if not contrastive else {}),
    )


def run_finetune(args) -> int:
    if getattr(args, "timelapse_corpus", None) is not None:
        corpora.resolve(args.timelapse_corpus, args.seed)  # a bad probe set is refused before a run folder exists
    recipe = recipe_from_args(args)
    if recipe.task in RATING_BUCKETS:
        print(f"{recipe.task} stands in for the slides' drug-review satisfaction task; what differs:\n- "
              + "\n- ".join(DRUG_RATING_DIFFERENCES), file=sys.stderr)
    if args.background:
        run = submit(recipe)
        if args.json:  # the queued run as `runs --json` lists it
            validation.dump_json(_run_json(run), args.out)
        else:
            print(f"queued {run.name}: python -m core runs shows its progress; python -m core cancel {run.name} stops it")
        return 0
    stop = SignalStop()
    shown = [-1]

    def progress(done: int, total: int, message: str | None = None) -> None:
        tenth = int(10 * done / max(total, 1))
        if tenth != shown[0] and not args.quiet:
            shown[0] = tenth
            print(f"{time.strftime('%H:%M:%S')} {done}/{total} examples" + (f"; {message}" if message else ""),
                  file=sys.stderr, flush=True)

    if recipe.processes > 1 and launched_world_size() == 1:
        # Foreground, several processes: the launcher starts the ranks; this process waits and reports.
        folder = RunFolder.create(recipe)
        write_text_atomic(folder.path / WORKER_PID, str(os.getpid()))
        metrics = launch_ranks(recipe, str(folder.path / RECIPE), progress, stop)
    else:
        metrics = finetune(recipe, progress=progress, should_stop=stop)
    if metrics.get("world_size", 1) != recipe.processes:
        print(f"warning: asked for {recipe.processes} processes, ran on {metrics.get('world_size', 1)} "
              "(world_size in metrics.json)", file=sys.stderr)
    warn_degenerate(run_degeneracy(metrics), recipe.run_name)
    if args.json:
        validation.dump_json(metrics, args.out)
    elif metrics.get("accuracy") is not None:
        print(
            f"{recipe.run_name}: accuracy {metrics['accuracy']:.4f} (majority {metrics['majority_accuracy']:.4f}) on "
            f"{metrics['eval_examples']} {metrics['eval_split']} examples, protocol {recipe.protocol}; "
            f"{metrics['train_seconds']:.1f} s, "
            f"{metrics['examples_per_second']:.1f} examples/s"
        )
    else:
        before, after = metrics["similarity_before"], metrics["similarity_after"]
        similarity = {k: f"{before[k]:.3f} -> {after[k]:.3f}" for k in after} or "too few held-out rows to measure"
        print(f"{recipe.run_name}: cosine similarity {similarity} (protocol {recipe.protocol}); {metrics['train_seconds']:.1f} s")
    return 0


def _describe(run) -> str:
    m = run.metrics or {}
    if run.state in ("queued", "running"):
        return report.progress_text(run)
    if run.state == "done":
        acc = m.get("accuracy")
        return (f"accuracy {acc:.4f}" if acc is not None else "encoder") + f", {m.get('train_seconds', 0):.1f} s"
    if run.state in ("failed", "cancelled", "killed"):
        return run.error_line  # the whole traceback stays in the run folder's traceback.txt
    return run.state


def _run_json(run) -> dict:
    """One run as `runs --json` lists it (the loss curves left out)."""
    return {"name": run.name, "state": run.state, "folder": run.folder, "recipe": run.recipe,
            "status": {k: v for k, v in run.status.items() if k != "losses"},
            "metrics": {k: v for k, v in (run.metrics or {}).items() if k != "loss_curve"} or None,
            "log_tail": run.log_tail}


def run_list(args) -> int:
    runs = list_runs()
    if args.json:
        validation.dump_json({"runs": [_run_json(r) for r in runs]}, args.out)
        return 0
    if not runs:
        print("no runs yet; start one with: python -m core finetune --model M --task snli --run NAME")
    for r in runs:
        print(f"{r.name}\t{r.state}\t{r.recipe.get('task', '')}\t{_describe(r)}")
    return 0


def run_cancel(args) -> int:
    if cancel(args.name):
        print(f"asked {args.name} to stop")
        return 0
    print(f"no queued or running run named {args.name}", file=sys.stderr)
    return 1
