"""`explain` and `explain-faithfulness`: the "Why this prediction?" page's twins."""

from __future__ import annotations

from core import validation
from core.model.encoding import read_input
from core.analyses import explain as explanations, faithfulness as faithful
from core.analyses.explain import ANALYSIS as EXPLAIN, WORD_RULE, load_explainer
from core.analyses.faithfulness import ANALYSIS as FAITHFULNESS, QUICK_EXAMPLES
from core.commands import (add_json_arguments, add_settings_arguments, settings_from_args, stderr_progress, warn,
                           warn_degenerate, warn_truncated)
from core.data import corpus as corpora
from core.training.runs import saved_degeneracy


def register(subparsers) -> None:
    p = subparsers.add_parser(EXPLAIN.command, help=EXPLAIN.summary)
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or a folder); "
                   "a plain encoder works for rollout, value-zeroing and attention only")
    p.add_argument("--text", required=True, help="sentence A")
    p.add_argument("--text-b", default=None, help="sentence B (a pair)")
    add_settings_arguments(p, EXPLAIN)
    p.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when there is one)")
    add_json_arguments(p)
    p.set_defaults(func=run_explain)

    p = subparsers.add_parser(FAITHFULNESS.command, help=FAITHFULNESS.summary)
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or a folder)")
    p.add_argument("--corpus", default=f"snli:dev:{QUICK_EXAMPLES}",
                   help=corpora.CLI_HELP + f"; default snli:dev:{QUICK_EXAMPLES}")
    add_settings_arguments(p, FAITHFULNESS)
    p.add_argument("--device", default=None)
    add_json_arguments(p)
    p.set_defaults(func=run_faithfulness)


def _warn_if_degenerate(model: str) -> dict | None:
    """Whether the run explained learned (almost) nothing (warned on stderr); its JSON, None for no finished run."""
    found = saved_degeneracy(model)
    warn_degenerate(found, model)
    return None if found is None else found.to_json()


def run_explain(args) -> int:
    settings = settings_from_args(EXPLAIN, args)
    explainer = load_explainer(args.model, device=args.device)
    result = explanations.run_explain(explainer, (args.text, args.text_b), settings)
    degenerate = _warn_if_degenerate(args.model)
    truncated = warn_truncated(read_input(explainer.lm, args.text, args.text_b))
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated, "degenerate": degenerate}, args.out)
        return 0
    if result.predicted is not None:
        probs = ", ".join(f"{label} {p:.3f}" for label, p in zip(result.labels, result.probabilities))
        print(f"{explainer.lm.ref}: predicted {result.predicted} ({probs})")
    else:
        print(explainer.head_message)
    print(f"{settings.method}" + (f" for class {result.target}" if result.target else "") + f"; {WORD_RULE}")
    for word, score in zip(result.words, result.word_scores):
        print(f"{score:+.4f}\t{word}")
    if result.completeness_gap is not None:
        print(f"completeness gap {result.completeness_gap:.3g} ({result.relative_gap:.2%} of |f(x) - f(baseline)|, "
              f"{result.steps} steps)")
    return 0


def run_faithfulness(args) -> int:
    settings = settings_from_args(FAITHFULNESS, args)
    items = corpora.resolve(args.corpus, settings.seed).items
    explainer = load_explainer(args.model, device=args.device)
    result = faithful.run_faithfulness(explainer, items, settings, stderr_progress(args), corpus=args.corpus)
    degenerate = _warn_if_degenerate(args.model)
    warn(result.truncation_notice())
    if args.json:
        validation.dump_json({**result.to_json(), "degenerate": degenerate}, args.out)
        return 0
    print(f"{explainer.lm.ref}: {result.examples} inputs from {args.corpus} (AOPC over top "
          f"{', '.join(f'{f:.0%}' for f in result.fractions)} of words)")
    print("method\tcomprehensiveness\tsufficiency   (higher / lower is more faithful)")
    for m, c, s in zip(result.methods, result.aopc_comprehensiveness, result.aopc_sufficiency):
        print(f"{m}\t{c:+.4f}\t{s:+.4f}")
    return 0
