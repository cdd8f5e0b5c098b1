"""`bias`: the biased-training-data experiment (full / biased / control runs), the Bias page's twin; and
`bias --corpus SPEC --model RUN`: counterfactual swaps scored on a corpus with one finished run, no training."""

from __future__ import annotations

import sys
import time

from core import jobs, validation
from core.commands import add_hidden_alias, add_json_arguments, warn, warn_degenerate
from core.data.corpus import resolve
from core.bias import (
    ARMS,
    DEFAULT_WORDS,
    EXPERIMENT_NAME,
    TASKS,
    ExperimentSpec,
    attach_job,
    corpus_flips,
    load_result,
    new_experiment_name,
    start_job,
)
from core.bias.experiment import EXPERIMENT_NAME_RULE

# The experiment can take hours; a job is waited for as long as it runs.
NO_TIMEOUT = 10 * 365 * 24 * 3600.0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bias",
        help="train full / biased (word matches removed) / control (as many removed at random) and compare",
        description="Trains three runs with one recipe, one after another in this process, and scores them on the "
        "unchanged test split: overall, on test examples with and without the words (bootstrap 95% intervals), "
        "and on gender-swapped copies (flip rate). The runs are saved as NAME-full, NAME-biased, NAME-control. "
        "With --corpus SPEC and --model RUN it trains nothing: it counts the corpus items that contain a "
        "swappable word and the flip rate of RUN's predictions on their swapped copies.",
    )
    p.add_argument("--model", help="hub id, local folder, run name or data-folder model (e.g. all-MiniLM-L6-v2); "
                   "with --corpus, a finished classification run")
    p.add_argument("--corpus", metavar="SPEC", default=None,
                   help="score the swaps on a corpus instead of training (e.g. builtin, snli:dev:20); needs --model RUN")
    p.add_argument("--task", default="snli", choices=TASKS)
    p.add_argument("--words", default=",".join(DEFAULT_WORDS), help="comma-separated words (default: the slides')")
    p.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of the training split, before filtering")
    p.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of the test split (scored)")
    add_hidden_alias(p, "--test-limit", "--eval-limit")
    p.add_argument("--epochs", type=validation.positive, default=2)
    p.add_argument("--seed", type=validation.count, default=0)
    p.add_argument("--lr", type=validation.positive_number, default=5e-5)
    p.add_argument("--batch-size", type=validation.positive, default=32)
    p.add_argument("--max-length", type=validation.positive, default=128)
    p.add_argument("--head", default="linear", choices=["linear", "mlp"])
    p.add_argument("--freeze-lowest", type=validation.count, default=0, metavar="N", help="freeze layers 1..N: the lowest N transformer layers, numbered as on every chart")
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--bootstrap", type=validation.positive, default=1000, help="bootstrap resamples for the intervals")
    p.add_argument("--protocol", default="bertlens", choices=["bertlens", "slides"],
                   help="slides: the CS4650 slides' filter (case-sensitive whole space-separated tokens of the premise "
                   "only: 23.1%% of SNLI train removed) and recipe (AdamW 5e-5, eps 1e-8, no weight decay, 2 epochs, "
                   "batch 32); bertlens (default): whole words in any case in premise or hypothesis (28.6%%), BERT "
                   "Lens's recipe")
    p.add_argument("--device", default=None)
    p.add_argument("--threads", type=validation.positive, default=None, help="CPU threads for training and scoring (default: all cores)")
    experiment_name = validation.name_type(EXPERIMENT_NAME, EXPERIMENT_NAME_RULE)
    p.add_argument("--name", type=experiment_name, default=None, help="experiment name (default: bias-DATE-TIME)")
    p.add_argument("--attach", metavar="NAME", type=experiment_name, default=None,
                   help="wait for an experiment's three runs and score them in this process (e.g. after its scorer died)")
    p.add_argument("--show", metavar="NAME", type=experiment_name, default=None, help="print a finished experiment's results")
    add_json_arguments(p, "the results as one JSON object")
    p.set_defaults(func=run_bias)


def run_corpus(args) -> int:
    if not args.model:
        raise ValueError("--corpus needs --model RUN: a finished classification run whose predictions are compared")
    result = corpus_flips(resolve(args.corpus, seed=args.seed), args.model, device=args.device)
    warn(result.truncation_notice())
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    rate = "n/a (no item has a swappable word)" if not result.swappable else f"{result.flip_rate:.4f}"
    print(f"{result.corpus}: {result.swappable} of {result.items} items contain a swappable word; "
          f"run {result.run} changes {result.flips} of its predictions on the swapped copies (flip rate {rate})")
    for row in result.flipped:
        before = row["text"] if not row["text_b"] else f"{row['text']} / {row['text_b']}"
        after = row["swapped"] if not row["swapped_b"] else f"{row['swapped']} / {row['swapped_b']}"
        print(f"  {row['predicted']} -> {row['predicted after swap']}: {before}  =>  {after}")
    return 0


def run_bias(args) -> int:
    if args.corpus:
        return run_corpus(args)
    if args.show:
        result = load_result(args.show)
        if result is None:
            raise ValueError(f"experiment '{args.show}' has no results yet")
    elif args.attach:
        result = jobs.wait_in_foreground(attach_job(args.attach), timeout=NO_TIMEOUT)
    else:
        if not args.model:
            raise ValueError("--model is required (e.g. --model all-MiniLM-L6-v2)")
        spec = ExperimentSpec(
            name=args.name or new_experiment_name(), model=args.model, task=args.task, words=args.words,
            train_limit=args.train_limit, test_limit=args.eval_limit, epochs=args.epochs, seed=args.seed, lr=args.lr,
            batch_size=args.batch_size, max_length=args.max_length, head=args.head, freeze_layers=args.freeze_lowest,
            freeze_embeddings=args.freeze_embeddings, device=args.device, cpu_threads=args.threads,
            bootstrap=args.bootstrap, protocol=args.protocol,
        )
        shown = {}

        def progress(stage: str, done: int, total: int) -> None:
            if args.quiet:
                return
            tenth = int(10 * done / max(total, 1))
            if shown.get(stage) != tenth:
                shown[stage] = tenth
                print(f"{time.strftime('%H:%M:%S')} {stage}: {done}/{total}", file=sys.stderr, flush=True)

        result = jobs.wait_in_foreground(start_job(spec, progress), timeout=NO_TIMEOUT)
    for arm in ARMS:
        warn_degenerate(result.runs[arm].degeneracy(result.labels), f"the {arm} run")
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"experiment {result.name} (protocol {result.protocol}): {result.removed} training examples removed; "
          f"test {result.test_size} ({result.test_with_words} with the words)")
    for arm in ARMS:
        r = result.runs[arm]
        cells = [f"{arm:8s} train {r.train_size:6d}  accuracy {r.overall.accuracy:.4f} "
                 f"[{r.overall.ci[0]:.4f}, {r.overall.ci[1]:.4f}]"]
        cells += [f"{s} {r.slices[s].accuracy:.4f} (n={r.slices[s].n})" for s in r.slices]  # agreement ones too
        cells.append(f"flip rate {r.flip_rate:.4f} ({r.flips}/{r.swapped})")
        print("  ".join(cells))
    return 0
