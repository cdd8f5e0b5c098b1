"""`pair-attention`: the Attention page's "Paraphrase heads" section's twin (core.analyses.heads.pair_heads)."""

from __future__ import annotations

from core import numbering
from core import validation
from core.analyses import heads
from core.analyses.heads import PAIR_DIRECTION_TITLES
from core.analyses.heads.pairs import ANALYSIS, MRPC_LABELS as LABELS, pair_heads_of
from core.commands import add_json_arguments, add_model_argument, add_settings_arguments, counted, settings_from_args, stderr_progress
from core.data import corpus as corpora
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(ANALYSIS.command, help=ANALYSIS.summary)
    add_model_argument(p)
    p.add_argument("--corpus", default="mrpc:test", help=corpora.CLI_HELP + "; default mrpc:test (labelled pairs)")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N pairs of the corpus (default 200)")
    add_settings_arguments(p, ANALYSIS)
    add_json_arguments(p, "JSON: model, corpus, labels, words_only, n_pairs, directions, mean, auc, top_heads")
    p.set_defaults(func=run_pair_attention)


def run_pair_attention(args) -> int:
    settings = settings_from_args(ANALYSIS, args)
    pairs, gold, _ = heads.mrpc_pairs(args.corpus, settings.seed, args.limit)
    lm = load_model(args.model)
    result, truncated = counted(lambda: pair_heads_of(lm, (pairs, gold), settings, progress=stderr_progress(args),
                                                      corpus=args.corpus))
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    n = result.n_pairs
    keys = "word pieces only" if settings.words_only else "bertviz slices"
    print(f"{lm.ref}: {n[0]} {LABELS[0]} and {n[1]} {LABELS[1]} pairs from {args.corpus} ({keys}; layers "
          "from 1, heads from 0)")
    print(f"AUC > 0.5: the head's share is higher on {LABELS[0]} pairs")
    print("direction\tlayer\thead\tAUC\tmean equivalent\tmean not equivalent")
    for c in result.top_heads(settings.top):
        print(f"{PAIR_DIRECTION_TITLES[c['direction']]}\t{numbering.shown(c['layer'])}\t{c['head']}\t{c['auc']:.3f}\t"
              f"{c['mean equivalent']:.4f}\t{c['mean not equivalent']:.4f}")
    return 0
