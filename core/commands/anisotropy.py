"""`anisotropy`: the command-line twin of the "Anisotropy by layer" page."""

from __future__ import annotations

import sys

from core.data import corpus as corpora
from core import protocols, validation
from core.analyses.anisotropy import MEASURES, PAPER_PROTOCOL, PROTOCOLS, AnisotropySettings, measure_corpus
from core.commands import add_json_arguments, add_model_argument, counted
from core.model import distributed
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "anisotropy",
        help="how alike word vectors are, layer by layer (Ethayarajh 2019)",
        description="Random-word cosine, self-similarity, intra-sentence similarity (raw and adjusted) and "
        "top-PC variance per layer; alignment/uniformity too when the corpus has sentence pairs. With "
        "--protocol ethayarajh: WordPiece tokens and the paper's sampling, plus MEV (maximum explainable variance).",
    )
    p.add_argument("--protocol", choices=PROTOCOLS, default=protocols.DEFAULT,
                   help="bertlens: whole words, first occurrence per sentence (default). ethayarajh: the paper's "
                   "protocol (kawine/contextual): WordPiece tokens, punctuation excluded from self-similarity and "
                   "MEV, every occurrence, at most 1,000 sampled pairs per word, baseline from 1,000 sentences")
    add_model_argument(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    p.add_argument("--pairs", type=validation.positive, default=1000, help="random word pairs for the baseline (default 1000)")
    p.add_argument("--seed", type=validation.count, default=0, help="seed for the random pairs and the corpus sample (default 0)")
    p.add_argument("--min-contexts", type=validation.positive, default=5, help="sentences a word needs for self-similarity (default 5; "
                   "under --protocol ethayarajh: occurrences a token needs)")
    p.add_argument("--pairs-per-word", type=validation.positive, default=1000,
                   help="ethayarajh: at most this many sampled occurrence pairs per word (default 1000)")
    p.add_argument("--baseline-sentences", type=validation.positive, default=1000,
                   help="ethayarajh: sentences sampled for the random baseline, one token each (default 1000)")
    p.add_argument("--include-special", action="store_true", help="count [CLS]/[SEP] as words")
    p.add_argument("--exact", action="store_true", help="adjust by the exact all-pairs cosine instead of the random pairs")
    p.add_argument("--limit", type=validation.positive, default=None, help="use only the first N sentences")
    p.add_argument("--batch-size", type=validation.positive, default=32)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA when there is one); under "
                   "torchrun / accelerate launch each rank encodes its share of the corpus")
    add_json_arguments(p)
    p.set_defaults(func=run_anisotropy)


def run_anisotropy(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed, limit=args.limit).head(args.limit)
    settings = AnisotropySettings(
        n_pairs=args.pairs, seed=args.seed, min_contexts=args.min_contexts, include_special=args.include_special,
        baseline="exact" if args.exact else "random", batch_size=args.batch_size, protocol=args.protocol,
        max_pairs_per_word=args.pairs_per_word, n_baseline_sentences=args.baseline_sentences,
    )
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
