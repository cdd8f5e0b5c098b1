"""`heads`, `ablate`, `attention-change`, `syntax-heads`: the "Heads over a dataset" section's twins, their options
made from the analyses' declarations (core.contract)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core import numbering
from core import validation
from core.analyses.ablation import ANALYSIS as ABLATE, load_for_ablation, run_ablation
from core.analyses.heads import (CHANGE, PATTERNS, STAT_NAMES, STAT_TITLES, SURVEY, SYNTAX, run_attention_change,
                                 run_survey, run_syntax_heads)
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, add_two_models_arguments,
                           counted, settings_from_args, stderr_progress, two_models, warn_cuts, warn_degenerate)
from core.data import corpus as corpora
from core.model.loading import load_model
from core.protocols import DEFAULT, describe
from core.training.runs import run_eval_sample


def _corpus_sample_arguments(p) -> None:
    """The inputs' sample (not a setting of the analysis: it picks what is analysed)."""
    p.add_argument("--corpus", default="snli", help=corpora.CLI_HELP + "; default snli")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N inputs of the corpus (default 200)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")


def register(subparsers) -> None:
    # Each analysis's options come from its declaration (core.analyses.heads, core.analyses.ablation).
    p = subparsers.add_parser(SURVEY.command, help=SURVEY.summary)
    add_model_argument(p)
    _corpus_sample_arguments(p)
    add_settings_arguments(p, SURVEY)
    add_json_arguments(p)
    p.set_defaults(func=run_heads)

    p = subparsers.add_parser(ABLATE.command, help=ABLATE.summary)
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or its folder)")
    p.add_argument("--limit", type=validation.positive, default=None, help="seeded subset of the run's evaluation set (default: all of it)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of that subset (default 0)")
    add_settings_arguments(p, ABLATE)  # --layers / --no-layers: --no-layers skips the whole-layer conditions, as before
    p.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when there is one)")
    add_json_arguments(p)
    p.set_defaults(func=run_ablate)

    p = subparsers.add_parser(CHANGE.command, help=CHANGE.summary)
    add_two_models_arguments(p)
    _corpus_sample_arguments(p)
    add_settings_arguments(p, CHANGE)
    add_json_arguments(p)
    p.set_defaults(func=run_attention_change_command)

    p = subparsers.add_parser(SYNTAX.command, help=SYNTAX.summary)
    p.add_argument("--model", default=None)
    p.add_argument("--corpus", "--treebank", dest="corpus", default="ud:dev:all",
                   help=corpora.CLI_HELP + "; it must have dependency trees (ud or .conllu); default ud:dev:all")
    p.add_argument("--limit", type=validation.positive, default=None, help="the first N sentences of the corpus only")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    add_settings_arguments(p, SYNTAX)
    add_json_arguments(p)
    p.set_defaults(func=run_syntax_heads_command)


def _grid(name: str, values: np.ndarray, fmt: str = "{:.3f}", protocol: str = DEFAULT) -> None:
    """Rows are layers, numbered 1..L as on every chart (core.numbering); heads from 1 under the Clark protocol, as
    in the paper, else from 0."""
    first = 1 if protocol == "clark" else 0
    print(f"{name} [layer x head, layers from 1, heads from {first}]")
    if first:
        print("\t" + "\t".join(str(h + 1) for h in range(values.shape[1])))
    for layer, row in enumerate(values):
        print(f"L{numbering.shown(layer)}\t" + "\t".join(fmt.format(v) for v in row))


def run_heads(args) -> int:
    inputs = corpora.resolve(args.corpus, args.seed).take(args.limit).inputs
    settings = settings_from_args(SURVEY, args)
    lm = load_model(args.model)
    survey, truncated = counted(lambda: replace(run_survey(lm, inputs, settings, progress=stderr_progress(args)),
                                                corpus=args.corpus))
    if args.json:
        validation.dump_json({**survey.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{lm.ref}: {survey.n_examples} inputs from {args.corpus} ({survey.n_pairs} pairs)")
    print(describe(settings.protocol))
    for name in STAT_NAMES:
        title = "attention to periods and commas" if name == "punct" and settings.protocol == "clark" else STAT_TITLES[name]
        _grid(title, survey.stat(name), protocol=settings.protocol)
    print("pattern share: " + ", ".join(f"{p} {s:.1%}" for p, s in survey.pattern_share.items()))
    initials = {p: p[0].upper() if p != "vertical+diagonal" else "X" for p in PATTERNS}
    print("dominant pattern (V vertical, D diagonal, X vertical+diagonal, B block, H heterogeneous)")
    for layer, row in enumerate(survey.dominant_pattern):
        print(f"L{numbering.shown(layer)}\t" + " ".join(initials[PATTERNS[k]] for k in row))
    return 0


def run_ablate(args) -> int:
    clf = load_for_ablation(args.model, device=args.device)
    sample = run_eval_sample(clf, args.limit, args.seed)
    settings = settings_from_args(ABLATE, args)
    result = run_ablation(clf, sample.examples, settings, progress=stderr_progress(args))
    result = replace(result, task=sample.task, eval_split=sample.eval_split, run_accuracy=sample.run_accuracy)
    warn_degenerate(result.degenerate, clf.encoder.ref)
    truncated = warn_cuts(result)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{clf.encoder.ref}: {result.n_examples} {sample.task} {sample.eval_split} examples, mode {result.mode}")
    print(f"intact accuracy {result.base_accuracy:.4f} (run's metrics.json: {sample.run_accuracy})")
    _grid("accuracy change with one head disabled", result.head_delta, "{:+.3f}")
    if settings.sweep_layers:
        print("accuracy change with a whole layer disabled")
        for layer, delta in enumerate(result.layer_delta):
            print(f"L{numbering.shown(layer)}\t{delta:+.3f}")
    return 0


def run_attention_change_command(args) -> int:
    inputs = corpora.resolve(args.corpus, args.seed).take(args.limit).inputs
    settings = settings_from_args(CHANGE, args)
    models = tuple(load_model(ref) for ref in two_models(args))
    change, truncated = counted(lambda: run_attention_change(models, inputs, settings, progress=stderr_progress(args)))
    if args.json:
        validation.dump_json({**change.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{change.model_a} vs {change.model_b}: {change.n_examples} inputs from {args.corpus}")
    _grid("cosine of the flattened attention maps", change.cosine)
    return 0


def run_syntax_heads_command(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed).take(args.limit)
    settings = settings_from_args(SYNTAX, args)
    lm, trees = load_model(args.model), corpora.require_trees(corpus)
    result, truncated = counted(lambda: run_syntax_heads(lm, trees, settings, progress=stderr_progress(args)))
    result = replace(result, treebank=args.corpus)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{result.model} on {args.corpus}: {result.n_sentences} sentences ({result.n_skipped} too long, skipped)")
    print(describe(settings.protocol))
    clark = settings.protocol == "clark"
    print("relation\tcount\tbest head" + (" (layer-head, from 1)\tdirection" if clark else " (layers from 1, heads from 0)")
          + "\taccuracy\tbaseline (offset)")
    for row in result.to_json()["relations"]:
        print(f"{row['relation']}\t{row['count']}\t{row['label']}" + (f"\t{row['direction']}" if clark else "")
              + f"\t{row['accuracy']:.3f}\t{row['baseline_accuracy']:.3f} ({row['baseline_offset']:+d})")
    return 0


