"""`pair-attention`: the Attention page's "Paraphrase heads" section's twin (core.analyses.heads.pair_heads)."""

from __future__ import annotations

from core import numbering
from core import validation
from core.analyses import heads
from core.analyses.heads import PAIR_DIRECTION_TITLES, pair_heads
from core.commands import add_json_arguments, add_model_argument, counted, stderr_progress
from core.data import corpus as corpora
from core.model.loading import load_model

LABELS = ("equivalent", "not equivalent")


def register(subparsers) -> None:
    p = subparsers.add_parser("pair-attention",
                              help="A→B and B→A attention share per head on MRPC, by gold label; the heads that "
                              "separate paraphrases from non-paraphrases most (the bertviz MRPC report)")
    add_model_argument(p)
    p.add_argument("--corpus", default="mrpc:test", help=corpora.CLI_HELP + "; default mrpc:test (labelled pairs)")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N pairs of the corpus (default 200)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    p.add_argument("--words-only", action="store_true",
                   help="keys: the other sentence's word pieces only (default: bertviz's slices, which count the "
                   "final [SEP] in B and [CLS] and the middle [SEP] in A)")
    p.add_argument("--top", type=validation.positive, default=10, help="how many of the most separating heads to list (default 10)")
    p.add_argument("--batch-size", type=validation.positive, default=16)
    add_json_arguments(p, "JSON: model, corpus, labels, words_only, n_pairs, directions, mean, auc, top_heads")
    p.set_defaults(func=run_pair_attention)


def run_pair_attention(args) -> int:
    pairs, gold, _ = heads.mrpc_pairs(args.corpus, args.seed, args.limit)
    lm = load_model(args.model)
    result, truncated = counted(lambda: pair_heads(lm, pairs, gold, LABELS, words_only=args.words_only, corpus=args.corpus,
                                                   batch_size=args.batch_size, progress=stderr_progress(args)))
    if args.json:
        payload = result.to_json()
        payload["top_heads"] = [{**c, "layer": numbering.shown(c["layer"])} for c in result.top_heads(args.top)]
        payload["truncated"] = truncated
        validation.dump_json(payload, args.out)
        return 0
    n = result.n_pairs
    keys = "word pieces only" if args.words_only else "bertviz slices"
    print(f"{lm.ref}: {n[0]} {LABELS[0]} and {n[1]} {LABELS[1]} pairs from {args.corpus} ({keys}; layers "
          "from 1, heads from 0)")
    print(f"AUC > 0.5: the head's share is higher on {LABELS[0]} pairs")
    print("direction\tlayer\thead\tAUC\tmean equivalent\tmean not equivalent")
    for c in result.top_heads(args.top):
        print(f"{PAIR_DIRECTION_TITLES[c['direction']]}\t{numbering.shown(c['layer'])}\t{c['head']}\t{c['auc']:.3f}\t"
              f"{c['mean equivalent']:.4f}\t{c['mean not equivalent']:.4f}")
    return 0
