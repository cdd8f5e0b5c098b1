"""`heads`, `ablate`, `attention-change`, `syntax-heads`: the "Heads over a dataset" section's twins."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core import numbering
from core import validation
from core.analyses.ablation import ablation_sweep, load_for_ablation
from core.analyses.heads import PATTERNS, PROTOCOLS, STAT_NAMES, STAT_TITLES, attention_change, survey_heads, syntax_heads
from core.commands import (add_json_arguments, add_model_argument, add_two_models_arguments, counted, stderr_progress,
                           two_models, warn_cuts, warn_degenerate)
from core.data import corpus as corpora
from core.model.loading import load_model
from core.protocols import DEFAULT, describe
from core.training.runs import run_eval_sample

PROTOCOL_HELP = ("bertlens: BERT Lens's readable default (any punctuation; dependent->head only, roots skipped, any "
                 "offset as baseline); clark: Clark et al. 2019 as his code (periods and commas; both directions, "
                 "roots as misses, poss rule, offsets -3..+2, heads from 1). Default bertlens")


def register(subparsers) -> None:
    p = subparsers.add_parser("heads", help="Clark statistics and Kovaleva pattern types of every head over a corpus")
    add_model_argument(p)
    p.add_argument("--corpus", default="snli", help=corpora.CLI_HELP + "; default snli")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N inputs of the corpus (default 200)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    p.add_argument("--batch-size", type=validation.positive, default=16)
    p.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT, help=PROTOCOL_HELP)
    add_json_arguments(p)
    p.set_defaults(func=run_heads)

    p = subparsers.add_parser("ablate", help="accuracy of a fine-tuned run with each head / layer disabled")
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or its folder)")
    p.add_argument("--limit", type=validation.positive, default=None, help="seeded subset of the run's evaluation set (default: all of it)")
    p.add_argument("--mode", choices=("uniform", "mask"), default="uniform",
                   help="uniform: the head's attention becomes 1/L (Kovaleva); mask: its output is zeroed")
    p.add_argument("--no-layers", action="store_true", help="skip the whole-layer conditions")
    p.add_argument("--seed", type=validation.count, default=0)
    p.add_argument("--batch-size", type=validation.positive, default=32)
    p.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when there is one)")
    add_json_arguments(p)
    p.set_defaults(func=run_ablate)

    p = subparsers.add_parser("attention-change", help="per-head cosine between two models' attention maps")
    add_two_models_arguments(p)
    p.add_argument("--corpus", default="snli", help=corpora.CLI_HELP + "; default snli")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N inputs of the corpus (default 200)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    p.add_argument("--batch-size", type=validation.positive, default=16)
    add_json_arguments(p)
    p.set_defaults(func=run_attention_change)

    p = subparsers.add_parser("syntax-heads", help="the best head per dependency relation on a CoNLL-U treebank")
    p.add_argument("--model", default=None)
    p.add_argument("--corpus", "--treebank", dest="corpus", default="ud:dev:all",
                   help=corpora.CLI_HELP + "; it must have dependency trees (ud or .conllu); default ud:dev:all")
    p.add_argument("--limit", type=validation.positive, default=None, help="the first N sentences of the corpus only")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    p.add_argument("--subtypes", action="store_true", default=None,
                   help="keep relation subtypes (nmod:poss) apart (always under --protocol clark)")
    p.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT, help=PROTOCOL_HELP)
    p.add_argument("--batch-size", type=validation.positive, default=16)
    add_json_arguments(p)
    p.set_defaults(func=run_syntax_heads)


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
    lm = load_model(args.model)
    survey, truncated = counted(lambda: replace(survey_heads(lm, inputs, batch_size=args.batch_size, protocol=args.protocol,
                                                             progress=stderr_progress(args)), corpus=args.corpus))
    if args.json:
        validation.dump_json({**survey.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{lm.ref}: {survey.n_examples} inputs from {args.corpus} ({survey.n_pairs} pairs)")
    print(describe(args.protocol))
    for name in STAT_NAMES:
        title = "attention to periods and commas" if name == "punct" and args.protocol == "clark" else STAT_TITLES[name]
        _grid(title, survey.stat(name), protocol=args.protocol)
    print("pattern share: " + ", ".join(f"{p} {s:.1%}" for p, s in survey.pattern_share.items()))
    initials = {p: p[0].upper() if p != "vertical+diagonal" else "X" for p in PATTERNS}
    print("dominant pattern (V vertical, D diagonal, X vertical+diagonal, B block, H heterogeneous)")
    for layer, row in enumerate(survey.dominant_pattern):
        print(f"L{numbering.shown(layer)}\t" + " ".join(initials[PATTERNS[k]] for k in row))
    return 0


def run_ablate(args) -> int:
    clf = load_for_ablation(args.model, device=args.device)
    sample = run_eval_sample(clf, args.limit, args.seed)
    result = ablation_sweep(clf, sample.examples, mode=args.mode, sweep_layers=not args.no_layers,
                            batch_size=args.batch_size, progress=stderr_progress(args))
    result = replace(result, task=sample.task, eval_split=sample.eval_split, run_accuracy=sample.run_accuracy)
    warn_degenerate(result.degenerate, clf.encoder.ref)
    truncated = warn_cuts(result)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{clf.encoder.ref}: {result.n_examples} {sample.task} {sample.eval_split} examples, mode {result.mode}")
    print(f"intact accuracy {result.base_accuracy:.4f} (run's metrics.json: {sample.run_accuracy})")
    _grid("accuracy change with one head disabled", result.head_delta, "{:+.3f}")
    if not args.no_layers:
        print("accuracy change with a whole layer disabled")
        for layer, delta in enumerate(result.layer_delta):
            print(f"L{numbering.shown(layer)}\t{delta:+.3f}")
    return 0


def run_attention_change(args) -> int:
    inputs = corpora.resolve(args.corpus, args.seed).take(args.limit).inputs
    a, b = (load_model(ref) for ref in two_models(args))
    change, truncated = counted(lambda: attention_change(a, b, inputs, batch_size=args.batch_size,
                                                         progress=stderr_progress(args)))
    if args.json:
        validation.dump_json({**change.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{change.model_a} vs {change.model_b}: {change.n_examples} inputs from {args.corpus}")
    _grid("cosine of the flattened attention maps", change.cosine)
    return 0


def run_syntax_heads(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed).take(args.limit)
    lm, trees = load_model(args.model), corpora.require_trees(corpus)
    result, truncated = counted(lambda: syntax_heads(lm, trees, batch_size=args.batch_size, subtypes=args.subtypes,
                                                     protocol=args.protocol, progress=stderr_progress(args)))
    result = replace(result, treebank=args.corpus)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{result.model} on {args.corpus}: {result.n_sentences} sentences ({result.n_skipped} too long, skipped)")
    print(describe(args.protocol))
    clark = args.protocol == "clark"
    print("relation\tcount\tbest head" + (" (layer-head, from 1)\tdirection" if clark else " (layers from 1, heads from 0)")
          + "\taccuracy\tbaseline (offset)")
    for row in result.to_json()["relations"]:
        print(f"{row['relation']}\t{row['count']}\t{row['label']}" + (f"\t{row['direction']}" if clark else "")
              + f"\t{row['accuracy']:.3f}\t{row['baseline_accuracy']:.3f} ({row['baseline_offset']:+d})")
    return 0


