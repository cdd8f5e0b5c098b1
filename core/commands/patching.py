"""`patch`: activation patching of one clean / corrupted pair (core.analyses.patching); `bias-heads`: the heads
behind a run's bias flips on a corpus (core.bias.heads)."""

from __future__ import annotations

import numpy as np

from core import numbering
from core import training, validation
from core.analyses import patching
from core.analyses.patching import ANALYSIS as PATCH, SMALL_GAP
from core.bias.heads import run_bias_heads as run_bias_heads_analysis
from core.bias_settings import BIAS_HEADS
from core.commands import add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args, stderr_progress
from core.data import corpus as corpora
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        PATCH.command, help=PATCH.summary,
        description="Copies each cell's activation from the clean run into the corrupted run and measures the metric: "
        "the log-probability of --target at the clean input's [MASK] (a model with an MLM head), or the logit of "
        "--class K (a classification run). The two inputs must have the same number of word pieces. --over heads: "
        "each head's output (z) at every position, [layer][head]; positions: the residual stream after each layer "
        "at each token; attn / mlp: the attention / feed-forward block's output at each token. Layers are numbered "
        "1..L as on every chart (row 1 = the first transformer layer); recovered = (patched - corrupt) / (clean - corrupt). "
        "A warning (JSON: \"warnings\", codes small_gap and clean_not_top) says when that is noise: a gap under "
        f"{SMALL_GAP}, or a clean input that does not give the target / class.")
    add_model_argument(p)
    p.add_argument("--clean", required=True, help='the clean input, whose activations are copied into the corrupted run, '
                   'e.g. "The man said [MASK] was late." (a warning says when it does not give the target)')
    p.add_argument("--corrupt", required=True, help="the same input with a word swapped, as many word pieces long")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--target", metavar="WORD", help="a word piece scored at the [MASK] (MLM models)")
    target.add_argument("--class", dest="class_", metavar="K", help="a class of a classification run, index or label")
    add_settings_arguments(p, PATCH)  # --over, --method: from the analysis's declaration (core.analyses.patching)
    add_json_arguments(p, "the result as one JSON object")
    p.set_defaults(func=run_patch)

    p = subparsers.add_parser(
        BIAS_HEADS.command, help=BIAS_HEADS.summary,
        description="For the corpus items whose gender-swapped copy (woman <-> man, ...) changes the run's prediction, "
        "each head is patched from the original into the swapped copy (metric: the logit of the original's class "
        "minus the swapped copy's); heads are ranked by mean recovery, then the top-k are disabled and the flip rate "
        "scored again on every swappable item.")
    p.add_argument("--model", required=True, metavar="RUN", help="a finished classification run (name or folder)")
    p.add_argument("--corpus", required=True, metavar="SPEC", help=corpora.CLI_HELP)
    add_settings_arguments(p, BIAS_HEADS)
    add_json_arguments(p, "the result as one JSON object")
    p.set_defaults(func=run_bias_heads)


def run_patch(args) -> int:
    if args.target is not None:
        model, target = load_model(args.model, masked_lm=True), args.target
    else:
        model, target = training.load_classifier(args.model), args.class_
    result = patching.run_patch(model, (args.clean, args.corrupt, target), settings_from_args(PATCH, args),
                                progress=stderr_progress(args))
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"metric {result.metric}: clean {result.clean_metric:.4f}, corrupted {result.corrupt_metric:.4f}, "
          f"gap {result.gap:.4f}")
    for warning in result.warnings:  # stdout, above the grid it qualifies (stderr is the progress, --quiet hides it)
        print(f"warning ({warning.code}): {warning.message}")
    print(f"recovered, [layer, {'head' if result.over == 'heads' else 'token'}] (over {result.over}):")
    columns = range(result.patched.shape[1]) if result.over == "heads" else result.tokens
    print("layer\t" + "\t".join(str(c) for c in columns))
    for layer, row in enumerate(result.recovered):
        print(f"{numbering.shown(layer)}\t" + "\t".join("n/a" if not np.isfinite(v) else f"{v:.3f}" for v in row))
    return 0


def run_bias_heads(args) -> int:
    result = run_bias_heads_analysis(args.model, corpora.resolve(args.corpus), settings_from_args(BIAS_HEADS, args),
                                     stderr_progress(args))
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"{result.corpus}: {result.flips} of {result.swappable} swappable items flip run {result.run}'s prediction; "
          f"{result.patched_pairs} patched ({result.skipped} left out: the swap changed their length)")
    for warning in result.warnings:
        print(f"warning ({warning.code}): {warning.message}")
    for rank, (layer, head) in enumerate(result.ranking[:max(result.top_k, 5)], start=1):
        print(f"  {rank}. layer {numbering.shown(layer)} head {head}: mean recovery {result.recovery[layer, head]:.3f}")
    print(f"flip rate {result.flip_rate_before:.4f} intact, {result.flip_rate_after:.4f} with the top {result.top_k} "
          f"head(s) disabled ({result.mode})")
    return 0
