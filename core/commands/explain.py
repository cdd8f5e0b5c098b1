"""`explain` and `explain-faithfulness`: the "Why this prediction?" page's twins."""

from __future__ import annotations

from core import validation
from core.model.encoding import read_input
from core.analyses.explain import DEFAULT_SAMPLES, DEFAULT_STEPS, METHODS, WORD_RULE, explain, load_explainer
from core.analyses.faithfulness import QUICK_EXAMPLES, QUICK_METHODS, faithfulness
from core.commands import add_json_arguments, stderr_progress, warn, warn_degenerate, warn_truncated
from core.data import corpus as corpora
from core.training.runs import saved_degeneracy


def register(subparsers) -> None:
    p = subparsers.add_parser("explain", help="word attributions of a fine-tuned classifier's prediction, or token flow")
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or a folder); "
                   "a plain encoder works for rollout, value-zeroing and attention only")
    p.add_argument("--text", required=True, help="sentence A")
    p.add_argument("--text-b", default=None, help="sentence B (a pair)")
    p.add_argument("--method", choices=METHODS, default="ig")
    p.add_argument("--steps", type=validation.positive, default=DEFAULT_STEPS, help=f"integrated-gradients steps (default {DEFAULT_STEPS})")
    p.add_argument("--target", default=None, help="the class to explain (default: the predicted one)")
    add_perturbation_arguments(p)
    p.add_argument("--window", type=validation.positive, default=1, help="occlusion: words per window (default 1)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when there is one)")
    add_json_arguments(p)
    p.set_defaults(func=run_explain)

    p = subparsers.add_parser("explain-faithfulness",
                              help="comprehensiveness / sufficiency (AOPC) of each explanation method over a corpus")
    p.add_argument("--model", required=True, help="a classification run (name under models_cache/runs, or a folder)")
    p.add_argument("--corpus", default=f"snli:dev:{QUICK_EXAMPLES}",
                   help=corpora.CLI_HELP + f"; default snli:dev:{QUICK_EXAMPLES}")
    p.add_argument("--methods", default=",".join(QUICK_METHODS),
                   help=f"comma-separated methods, or 'all' for all {len(METHODS)} ({', '.join(METHODS)}); default "
                        f"{','.join(QUICK_METHODS)}: the quick ones (Shapley, KernelSHAP and LIME run ~200 inputs "
                        "per example)")
    p.add_argument("--steps", type=validation.positive, default=20, help="integrated-gradients steps per input (default 20)")
    add_perturbation_arguments(p)
    p.add_argument("--seed", type=validation.count, default=0,
                   help="seed of the corpus sample, of the random control and of the sampling methods")
    p.add_argument("--device", default=None)
    add_json_arguments(p)
    p.set_defaults(func=run_faithfulness)


def add_perturbation_arguments(p) -> None:
    defaults = ", ".join(f"{m} {n}" for m, n in DEFAULT_SAMPLES.items())
    p.add_argument("--samples", type=validation.positive, default=None,
                   help=f"shapley: word orders; kernel-shap, lime: coalitions (default: {defaults})")


def _warn_if_degenerate(model: str) -> dict | None:
    """Whether the run explained learned (almost) nothing (warned on stderr); its JSON, None for no finished run."""
    found = saved_degeneracy(model)
    warn_degenerate(found, model)
    return None if found is None else found.to_json()


def run_explain(args) -> int:
    explainer = load_explainer(args.model, device=args.device)
    result = explain(explainer, args.text, args.text_b, args.method, target=args.target, steps=args.steps,
                     samples=args.samples, window=args.window)
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
    print(f"{args.method}" + (f" for class {result.target}" if result.target else "") + f"; {WORD_RULE}")
    for word, score in zip(result.words, result.word_scores):
        print(f"{score:+.4f}\t{word}")
    if result.completeness_gap is not None:
        print(f"completeness gap {result.completeness_gap:.3g} ({result.relative_gap:.2%} of |f(x) - f(baseline)|, "
              f"{result.steps} steps)")
    return 0


def run_faithfulness(args) -> int:
    methods = METHODS if args.methods.strip() == "all" else tuple(m.strip() for m in args.methods.split(",") if m.strip())
    items = corpora.resolve(args.corpus, args.seed).items
    explainer = load_explainer(args.model, device=args.device)
    result = faithfulness(explainer, items, methods=methods, steps=args.steps, samples=args.samples, seed=args.seed,
                          corpus=args.corpus, progress=stderr_progress(args))
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
