"""`bias`: the biased-training-data experiment (full / biased / control runs), the Bias page's twin."""

from __future__ import annotations

import json
import sys
import time

from core.bias import (
    ARMS,
    DEFAULT_WORDS,
    SLICES,
    TASKS,
    ExperimentSpec,
    attach,
    load_result,
    new_experiment_name,
    run_experiment,
)
from core.training.jobs import SignalStop


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bias",
        help="train full / biased (word matches removed) / control (as many removed at random) and compare",
        description="Trains three runs with one recipe, one after another in this process, and scores them on the "
        "unchanged test split: overall, on test examples with and without the words (bootstrap 95% intervals), "
        "and on gender-swapped copies (flip rate). The runs are saved as NAME-full, NAME-biased, NAME-control.",
    )
    p.add_argument("--model", help="hub id, local folder, run name or data-folder model (e.g. all-MiniLM-L6-v2)")
    p.add_argument("--task", default="snli", choices=TASKS)
    p.add_argument("--words", default=",".join(DEFAULT_WORDS), help="comma-separated words (default: the slides')")
    p.add_argument("--train-limit", type=int, default=None, help="seeded subset of the training split, before filtering")
    p.add_argument("--test-limit", type=int, default=None, help="seeded subset of the test split")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--head", default="linear", choices=["linear", "mlp"])
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals")
    p.add_argument("--device", default=None)
    p.add_argument("--name", default=None, help="experiment name (default: bias-DATE-TIME)")
    p.add_argument("--attach", metavar="NAME", default=None,
                   help="wait for an experiment started from the page and score it (used by the page's background job)")
    p.add_argument("--show", metavar="NAME", default=None, help="print a finished experiment's results")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run_bias)


def run_bias(args) -> int:
    if args.show:
        result = load_result(args.show)
        if result is None:
            raise ValueError(f"experiment '{args.show}' has no results yet")
    elif args.attach:
        result = attach(args.attach, should_stop=SignalStop())
    else:
        if not args.model:
            raise ValueError("--model is required (e.g. --model all-MiniLM-L6-v2)")
        spec = ExperimentSpec(
            name=args.name or new_experiment_name(), model=args.model, task=args.task, words=args.words,
            train_limit=args.train_limit, test_limit=args.test_limit, epochs=args.epochs, seed=args.seed, lr=args.lr,
            batch_size=args.batch_size, max_length=args.max_length, head=args.head, device=args.device,
            bootstrap=args.bootstrap,
        )
        shown = {}

        def progress(stage: str, done: int, total: int) -> None:
            tenth = int(10 * done / max(total, 1))
            if shown.get(stage) != tenth:
                shown[stage] = tenth
                print(f"{time.strftime('%H:%M:%S')} {stage}: {done}/{total}", file=sys.stderr, flush=True)

        result = run_experiment(spec, progress=progress, should_stop=SignalStop())
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"experiment {result.name}: {result.removed} training examples removed; test {result.test_size} "
          f"({result.test_with_words} with the words)")
    for arm in ARMS:
        r = result.runs[arm]
        cells = [f"{arm:8s} train {r.train_size:6d}  accuracy {r.overall.accuracy:.4f} "
                 f"[{r.overall.ci[0]:.4f}, {r.overall.ci[1]:.4f}]"]
        cells += [f"{s} {r.slices[s].accuracy:.4f} (n={r.slices[s].n})" for s in SLICES]
        cells.append(f"flip rate {r.flip_rate:.4f} ({r.flips}/{r.swapped})")
        print("  ".join(cells))
    return 0
