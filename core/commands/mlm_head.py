"""`fit-mlm-head`: fit a masked-word head for an encoder that has none (the Masked words page's "Fit a head")."""

from __future__ import annotations

import sys

from core import validation
from core.analyses.masked import FIT_MLM_HEAD as ANALYSIS
from core.commands import add_json_arguments, add_settings_arguments, settings_from_args, stderr_progress, warn
from core.data import corpus as corpora
from core.data.corpus import GRAMMAR
from core.model.loading import load_model

# core.training.mlm_head (torch) imported in functions: only when the command runs, never for --help.


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command,
        help=ANALYSIS.summary,
        description="Trains the family's MLM head (dense + activation + LayerNorm + decoder tied to the word "
        "embeddings, + bias) on the frozen encoder's last layer with BERT's objective (15 % whole words masked, "
        "80/10/10), measures it on held-out sentences against the best constant guess, and saves a whole model "
        "folder under models_cache/heads/NAME that AutoModelForMaskedLM and pipeline('fill-mask') load. "
        "Ctrl-C cancels and leaves nothing behind.",
        epilog=GRAMMAR,
    )
    p.add_argument("--model", required=True, help="hub id, local folder or run name of an encoder without an MLM head")
    p.add_argument("--corpus", required=True,
                   help="corpus spec, e.g. snli:train (pairs give both sentences; a dataset without N samples 4,000)")
    p.add_argument("--limit", type=validation.positive, default=None, help="at most this many sentences")
    add_settings_arguments(p, ANALYSIS)
    p.add_argument("--out", required=True, help="name of the saved head, e.g. minilm-mlm (loadable by that name)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a saved head of that name (kept until the new one is saved); without it the name is refused")
    add_json_arguments(p, 'one JSON object {"name", "path", "model", "top1_accuracy", "constant_accuracy", ...}')
    p.set_defaults(func=run_fit_mlm_head)


def run_fit_mlm_head(args) -> int:
    from core.training.mlm_head import fit_mlm_head

    estimate = None if args.quiet else _estimate(args)
    if estimate:
        print(estimate, file=sys.stderr, flush=True)  # before it starts (issue 48)
    settings = settings_from_args(ANALYSIS, args)
    fit = fit_mlm_head(args.model, args.corpus, args.out, limit=args.limit, steps=settings.steps, seed=settings.seed,
                       progress=stderr_progress(args), overwrite=args.overwrite)
    warn(fit.warning)  # a weak head (under 1.5x the constant guess) is said on stderr; --json carries it too
    if args.json:
        validation.dump_json(fit.to_json(), None)
    else:
        print(f"{fit.path}: top-1 on {fit.held_out_words} held-out masked words {fit.top1_accuracy:.3f} "
              f"(best constant guess '{fit.constant_word}' {fit.constant_accuracy:.3f}, {fit.ratio_to_constant:.2f}×); "
              f"{fit.seconds:.0f} s",
              file=sys.stdout)
    return 0


def _estimate(args) -> str | None:
    """The fit's estimated time here, timed on a few of its sentences (a few seconds; the fit then loads again);
    None for a model the fit will refuse (it says why)."""
    from core.training.mlm_head import DEFAULT_PAIRS, DEFAULT_STEPS, estimate_fit

    sentences = list(corpora.resolve(args.corpus, seed=args.seed, default_n=DEFAULT_PAIRS).sentences)[: args.limit]
    lm = load_model(args.model, masked_lm=True)
    if lm.masked_lm is not None:
        return None
    return estimate_fit(lm, sentences, args.steps or DEFAULT_STEPS).text()
