"""`neuron`, `attention-norms`, `attention-norm-shares`: the "Inside a head" section's twins; their settings'
options are made from the declarations (core.analyses.inside_head ANALYSES)."""

from __future__ import annotations

from dataclasses import replace

from core import numbering
from core import validation
from core.model.encoding import read_input
from core.analyses.inside_head import ANALYSES, attention_norms, neuron_of, shares_of
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args,
                           stderr_progress, warn, warn_truncated)
from core.data import corpus as corpora
from core.model.loading import load_model


NEURON, NORMS, SHARES = ANALYSES


def register(subparsers) -> None:
    p = subparsers.add_parser(NEURON.command, help=NEURON.summary)
    add_model_argument(p)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None, help="a second sentence (pair input)")
    add_settings_arguments(p, NEURON)
    add_json_arguments(p)
    p.set_defaults(func=run_neuron)

    p = subparsers.add_parser(NORMS.command, help=NORMS.summary)
    p.add_argument("--model", default=None)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None)
    add_json_arguments(p)
    p.set_defaults(func=run_norms)

    p = subparsers.add_parser(SHARES.command, help=SHARES.summary)
    p.add_argument("--model", default=None)
    p.add_argument("--corpus", default="builtin", help=corpora.CLI_HELP + "; default builtin")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N inputs of the corpus (default 200)")
    add_settings_arguments(p, SHARES)
    add_json_arguments(p)
    p.set_defaults(func=run_shares)


def run_neuron(args) -> int:
    settings = settings_from_args(NEURON, args)
    lm = load_model(args.model)
    view = neuron_of(lm, (args.text, args.text_b), settings)
    truncated = warn_truncated(read_input(lm, args.text, args.text_b))
    if args.json:
        validation.dump_json({**view.to_json(), "truncated": truncated}, args.out)
        return 0
    shown = "" if view.pair_filter == "all" else f", keys of {view.pair_filter}"
    print(f"layer {numbering.shown(view.layer)}, head {view.head}, query {view.query_index}·{view.tokens[view.query_index]}{shown}")
    for row, j in enumerate(view.positions()):
        print(f"{j:3d} {view.tokens[j]:15s} score {view.scores[row]:+8.3f}  attention {view.attention[row]:.3f}")
    return 0


def run_norms(args) -> int:
    lm = load_model(args.model)
    result = attention_norms(lm, args.text, args.text_b)
    truncated = warn_truncated(read_input(lm, args.text, args.text_b))
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print("per layer: mean ‖f(x)‖ of each token over heads")
    for layer, row in enumerate(result.value_norms.mean(axis=1)):
        print(f"L{numbering.shown(layer)}\t" + " ".join(f"{t}:{v:.2f}" for t, v in zip(result.tokens, row)))
    return 0


def run_shares(args) -> int:
    settings = settings_from_args(SHARES, args)
    inputs = corpora.resolve(args.corpus, settings.seed).take(args.limit).inputs
    lm = load_model(args.model)

    shares = replace(shares_of(lm, inputs, settings, progress=stderr_progress(args), corpus=args.corpus),
                     corpus=args.corpus)
    warn(shares.truncation_notice())
    if args.json:
        validation.dump_json(shares.to_json(), args.out)
        return 0
    print(f"{lm.ref}: {shares.n_inputs} inputs from {args.corpus}; raw α / norm-weighted ‖α f(x)‖")
    print("layer\t" + "\t".join(f"{c:>15s}" for c in shares.categories))
    for layer in range(len(shares.raw)):
        print(f"L{numbering.shown(layer)}\t" + "\t".join(f"{r:6.3f} / {n:6.3f}" for r, n in zip(shares.raw[layer], shares.norm[layer])))
    return 0
