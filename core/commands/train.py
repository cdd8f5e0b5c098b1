"""`finetune`, `contrastive`, `runs` and `cancel`: the fine-tuning page's command-line twin."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from core import validation
from core.commands import add_json_arguments, add_settings_arguments, settings_from_args, warn_degenerate
from core.data import corpus as corpora
from core.model.distributed import launched_world_size
from core.training import Recipe, cancel, list_runs, report, submit
from core.training.evaluation import run_degeneracy
from core.training.jobs import SignalStop
from core.training.recipe import RUN_NAME, RUN_NAME_RULE
from core.training.settings import CONTRASTIVE, FINETUNE, recipe_of, train
from core.training.tasks import BUILTIN_TASKS, DRUG_RATING_DIFFERENCES, RATING_BUCKETS, TASK_TITLES


def _common(p, analysis) -> None:
    """The run's inputs and where it runs (hand-written), then the settings of its declaration (core.training.settings)."""
    p.add_argument("--model", help="hub id, local folder, run name or data-folder model (e.g. all-MiniLM-L6-v2)")
    # --run-name: torchrun reads a bare --run after the script as an ambiguous abbreviation of its --run-path.
    p.add_argument("--run", "--run-name", dest="run", type=validation.name_type(RUN_NAME, RUN_NAME_RULE),
                   help="run name: the folder under models_cache/runs and the model name afterwards")
    p.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of the training examples")
    p.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of the evaluation examples")
    # Settings a paper protocol fixes default to None: only values the user typed are checked against it.
    add_settings_arguments(p, analysis)
    # The old spelling of --freeze-layers 1-N, kept for one release.
    p.add_argument("--freeze-lowest", type=validation.count, default=0, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--source", default="auto", choices=["auto", "hub", "local"], help="where snli/mrpc come from")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA when there is one)")
    p.add_argument("--threads", type=validation.positive, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--processes", type=validation.positive, default=None, metavar="N",
                   help="train on N processes (GPUs, or CPU processes): started through torchrun / accelerate "
                   "launch for you; under a launcher it defaults to the launcher's world size")
    p.add_argument("--recipe", default=None, help="a recipe.json (as saved in a run folder); replaces the options above")
    p.add_argument("--background", action="store_true", help="queue the run as a background job and return")
    add_json_arguments(p, "the run's metrics (metrics.json) as one JSON object")


def register(subparsers) -> None:
    p = subparsers.add_parser(FINETUNE.command, help=FINETUNE.summary)
    _common(p, FINETUNE)
    p.add_argument("--task", help="a built-in task (" + "; ".join(f"{t}: {TASK_TITLES[t]}" for t in BUILTIN_TASKS)
                   + ") or a CSV/JSONL file with text[, text_b], label columns (for drugs-rating* what differs from "
                   "the slides' WebMD satisfaction is printed when it runs)")
    p.add_argument("--timelapse-corpus", default=None, metavar="SPEC",
                   help="the time-lapse's probe set (" + corpora.CLI_HELP + "; default: 100 seeded pairs of the "
                   "task's dev split, snli:dev:100 or mrpc:dev:100); a treebank (ud, .conllu) adds UUAS per layer")
    p.set_defaults(func=run_finetune, objective="classify")

    p = subparsers.add_parser(CONTRASTIVE.command, help=CONTRASTIVE.summary)
    _common(p, CONTRASTIVE)
    p.add_argument("--task", default="snli", help=f"a built-in task ({', '.join(BUILTIN_TASKS)}; --mode sup: snli or "
                   "mrpc) or a file (text[, text_b, text_neg])")
    p.set_defaults(func=run_finetune, objective=None)

    p = subparsers.add_parser("runs", help="list training runs with their status")
    add_json_arguments(p, 'one JSON object, {"runs": [{"name", "state", "folder", "recipe", "status", "metrics", '
                       '"log_tail"}, ...]}, instead of a table')
    p.set_defaults(func=run_list)

    p = subparsers.add_parser("cancel", help="stop a queued or running training run")
    p.add_argument("name")
    p.set_defaults(func=run_cancel)


def recipe_from_args(args) -> Recipe:
    if args.recipe:
        return Recipe.from_dict(json.loads(Path(args.recipe).read_text(encoding="utf-8")), where=args.recipe)
    if not args.model or not args.run or not args.task:
        raise ValueError("--model, --task and --run are required (or --recipe FILE)")
    analysis = CONTRASTIVE if args.objective is None else FINETUNE
    return recipe_of(settings_from_args(analysis, args), model=args.model, task=args.task, run_name=args.run,
                     train_limit=args.train_limit, eval_limit=args.eval_limit, data_source=args.source,
                     device=args.device, cpu_threads=args.threads, processes=args.processes or launched_world_size(),
                     timelapse_corpus=getattr(args, "timelapse_corpus", None), freeze_lowest=args.freeze_lowest)


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

    metrics = train(recipe, progress, stop)  # several processes: the launcher starts the ranks, this one waits
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
