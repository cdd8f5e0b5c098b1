"""`neuron`, `attention-norms`, `attention-norm-shares`: the "Inside a head" section's twins."""

from __future__ import annotations

from dataclasses import replace

from core import numbering
from core import validation
from core.model.encoding import read_input
from core.analyses.inside_head import attention_norms, neuron_view, norm_shares
from core.commands import add_json_arguments, add_model_argument, stderr_progress, warn, warn_truncated
from core.data import corpus as corpora
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser("neuron", help="one head's query, keys, q⊙k, scores and softmax for one query token")
    add_model_argument(p)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None, help="a second sentence (pair input)")
    p.add_argument("--layer", type=validation.count, required=True, help=numbering.LAYER_ARGUMENT_HELP)
    p.add_argument("--head", type=validation.count, required=True)
    p.add_argument("--query", type=validation.count, required=True, help="token position of the query ([CLS] = 0)")
    add_json_arguments(p)
    p.set_defaults(func=run_neuron)

    p = subparsers.add_parser("attention-norms", help="norm-weighted attention ‖α f(x)‖ (Kobayashi et al. 2020)")
    p.add_argument("--model", default=None)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None)
    add_json_arguments(p)
    p.set_defaults(func=run_norms)

    p = subparsers.add_parser("attention-norm-shares",
                              help="share of raw vs norm-weighted attention to [CLS]/[SEP]/punctuation/other per layer")
    p.add_argument("--model", default=None)
    p.add_argument("--corpus", default="builtin", help=corpora.CLI_HELP + "; default builtin")
    p.add_argument("--limit", type=validation.positive, default=200, help="the first N inputs of the corpus (default 200)")
    p.add_argument("--seed", type=validation.count, default=0)
    p.add_argument("--batch-size", type=validation.positive, default=16)
    add_json_arguments(p)
    p.set_defaults(func=run_shares)


def run_neuron(args) -> int:
    lm = load_model(args.model)
    view = neuron_view(lm, args.text, args.text_b, numbering.block_index(args.layer, lm.num_layers, "--layer"),
                       args.head, args.query)
    truncated = warn_truncated(read_input(lm, args.text, args.text_b))
    if args.json:
        validation.dump_json({**view.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"layer {numbering.shown(view.layer)}, head {view.head}, query {view.query_index}·{view.tokens[view.query_index]}")
    for j, token in enumerate(view.tokens):
        print(f"{j:3d} {token:15s} score {view.scores[j]:+8.3f}  attention {view.attention[j]:.3f}")
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
    inputs = corpora.resolve(args.corpus, args.seed).take(args.limit).inputs
    lm = load_model(args.model)

    shares = replace(norm_shares(lm, inputs, corpus=args.corpus, batch_size=args.batch_size, progress=stderr_progress(args)),
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
