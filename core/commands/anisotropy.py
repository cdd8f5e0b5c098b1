"""`anisotropy`: the command-line twin of the "Anisotropy by layer" page."""

from __future__ import annotations

import argparse
import sys

from core.data import corpus as corpora
from core import protocols, validation
from core.analyses.anisotropy import ANALYSIS, MEASURES, PAPER_PROTOCOL, measure_corpus
from core.commands import add_json_arguments, add_model_argument, add_settings_arguments, counted, settings_from_args
from core.model import distributed
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command,
        help=ANALYSIS.summary,
        description="Random-word cosine, self-similarity, intra-sentence similarity (raw and adjusted) and "
        "top-PC variance per layer; alignment/uniformity too when the corpus has sentence pairs. With "
        "--protocol ethayarajh: WordPiece tokens and the paper's sampling, plus MEV (maximum explainable variance).",
    )
    add_model_argument(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(p, ANALYSIS)
    # Before the declaration, the exact baseline was a flag: kept hidden for one release.
    p.add_argument("--exact", dest="baseline", action="store_const", const="exact", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    p.add_argument("--limit", type=validation.positive, default=None, help="use only the first N sentences")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA when there is one); under "
                   "torchrun / accelerate launch each rank encodes its share of the corpus")
    add_json_arguments(p)
    p.set_defaults(func=run_anisotropy)


def run_anisotropy(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed, limit=args.limit).head(args.limit)
    settings = settings_from_args(ANALYSIS, args)
    ctx = distributed.current()
    lm = load_model(args.model, device=ctx.device if ctx.distributed else args.device)

    def report(done: int, total: int) -> None:
        if not args.json or sys.stderr.isatty():
            print(f"\r{done}/{total} sentences", end="", file=sys.stderr, flush=True)

    profile, truncated = counted(lambda: measure_corpus(lm, corpus, settings, progress=None if args.quiet else report))
    if not args.quiet:
        print(file=sys.stderr)
    if args.json:
        validation.dump_json({**profile.to_json(), "truncated": truncated}, args.out)
        return 0
    paper = profile.protocol == PAPER_PROTOCOL
    print(protocols.describe(profile.protocol))
    print(f"{profile.model} on {profile.corpus}: {profile.n_sentences} sentences, {profile.n_tokens} "
          f"{'WordPiece tokens' if paper else 'words'}, {profile.n_pairs} random pairs"
          + (f" of tokens from {profile.n_baseline_sentences} sampled sentences" if paper else "")
          + f", {len(profile.words)} {'token' if paper else 'word'} types with >= {settings.min_contexts} "
          f"{'occurrences' if paper else 'contexts'}")
    for warning in profile.warnings:  # above the table whose NaN column it explains
        print(f"warning: {warning}")
    shown = [m for m in MEASURES if getattr(profile, m) is not None]
    print("layer\t" + "\t".join(shown))
    for layer in profile.layers:
        print(f"{layer}\t" + "\t".join(f"{getattr(profile, m)[layer]:.3f}" for m in shown))
    return 0
