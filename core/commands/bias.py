"""`bias`: the biased-training-data experiment (full / biased / control runs), the Bias page's twin; and
`bias --corpus SPEC --model RUN`: counterfactual swaps scored on a corpus with one finished run, no training."""

from __future__ import annotations

import sys
import time

from core import jobs, validation
from core.commands import add_hidden_alias, add_json_arguments, add_settings_arguments, settings_from_args, warn, warn_degenerate
from core.data.corpus import resolve
from core.bias import ARMS, EXPERIMENT_NAME, attach_job, corpus_flips, load_result
from core.bias.erase_gender import corpus_flips_erased
from core.bias.experiment import EXPERIMENT_NAME_RULE, NO_TIMEOUT, run_settings
from core.bias_settings import BIAS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        BIAS.command,
        help=BIAS.summary,
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
    p.add_argument("--erase", metavar="NAME", default=None,
                   help="with --corpus: score the swaps again with a saved eraser (models_cache/erasers/NAME, made by "
                   "python -m core erase or the Bias page's Erase gender) applied at its layer; the JSON adds "
                   "\"erased\": the flip rate before and after")
    add_settings_arguments(p, BIAS)
    add_hidden_alias(p, "--test-limit", "--eval-limit")
    # argparse's get_default skips a None default, so the alias's SUPPRESS would be reported as --eval-limit's.
    next(a for a in p._actions if "--test-limit" in a.option_strings).default = None
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
    if args.erase:
        result = corpus_flips_erased(resolve(args.corpus, seed=args.seed), args.model, args.erase, device=args.device)
        erased, result = result.erased, result.flips
    else:
        erased, result = None, corpus_flips(resolve(args.corpus, seed=args.seed), args.model, device=args.device)
    warn(result.truncation_notice())
    if args.json:
        payload = result.to_json() if erased is None else {**result.to_json(), "erased": erased.to_json()}
        validation.dump_json(payload, args.out)
        return 0
    rate = "n/a (no item has a swappable word)" if not result.swappable else f"{result.flip_rate:.4f}"
    print(f"{result.corpus}: {result.swappable} of {result.items} items contain a swappable word; "
          f"run {result.run} changes {result.flips} of its predictions on the swapped copies (flip rate {rate})")
    for row in result.flipped:
        before = row["text"] if not row["text_b"] else f"{row['text']} / {row['text_b']}"
        after = row["swapped"] if not row["swapped_b"] else f"{row['swapped']} / {row['swapped_b']}"
        print(f"  {row['predicted']} -> {row['predicted after swap']}: {before}  =>  {after}")
    if erased is not None:
        print(f"with eraser {erased.eraser} ({erased.task}) at layer {erased.layer}: {erased.flips_after} of "
              f"{erased.swappable} predictions change (flip rate {erased.flip_rate_after:.4f}, before "
              f"{erased.flip_rate_before:.4f})")
    return 0


def run_bias(args) -> int:
    if args.erase and not args.corpus:
        raise ValueError("--erase needs --corpus SPEC and --model RUN: the swaps are scored on the corpus with and "
                         "without the eraser")
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
        settings = settings_from_args(BIAS, args)
        shown = {}

        def progress(stage: str, done: int, total: int) -> None:
            if args.quiet:
                return
            tenth = int(10 * done / max(total, 1))
            if shown.get(stage) != tenth:
                shown[stage] = tenth
                print(f"{time.strftime('%H:%M:%S')} {stage}: {done}/{total}", file=sys.stderr, flush=True)

        result = run_settings(args.model, args.name, settings, progress, device=args.device, threads=args.threads)
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
