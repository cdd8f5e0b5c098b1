"""`neurons` and `neurons-diff`: the Read-the-layers page's Neurons tab, from the command line."""

from __future__ import annotations

from core import validation
from core.analyses import neurons as nr
from core.commands import (add_json_arguments, add_model_argument, add_two_models_arguments, stderr_progress,
                           two_models, warn, warn_cuts)
from core.data import corpus as corpora
from core.model.loading import load_model

LAYER_HELP = "1..L: layer l's feed-forward neurons, which write into hidden_states[l] (default: the last layer)"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "neurons",
        help="a layer's feed-forward neurons: each one's top-activating contexts over a corpus",
        description="One streaming pass over the corpus keeps each neuron's top activations (after the GELU) with "
        "their contexts, its mean and firing rate; the index is kept under models_cache/neuron_index per (model, "
        "corpus, layer, top) and reused. Neurons are listed by their highest activation, or give --neuron. With "
        "--text, the neurons listed are also read on that sentence.",
    )
    add_model_argument(p)
    p.add_argument("--layer", type=validation.positive, default=None, help=LAYER_HELP)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    p.add_argument("--top", type=validation.positive, default=nr.DEFAULT_K,
                   help=f"contexts kept per neuron (default {nr.DEFAULT_K})")
    p.add_argument("--neuron", type=validation.count, action="append", default=None,
                   help="a neuron to show (repeat for several); default: the --neurons highest")
    p.add_argument("--neurons", type=validation.positive, default=10,
                   help="how many neurons to show, highest activation first, without --neuron (default 10)")
    p.add_argument("--text", default=None, help="a sentence: each neuron shown is also read on it")
    p.add_argument("--seed", type=validation.count, default=0, help="corpus sample seed (default 0)")
    add_json_arguments(p, "one JSON object instead of keyword-in-context lines")
    p.set_defaults(func=run_neurons)

    d = subparsers.add_parser(
        "neurons-diff",
        help="the feed-forward neurons of a layer that change most between two models on the same corpus",
        description="Both models' neurons are indexed over the same corpus (models_cache/neuron_index, reused) and "
        "ranked by |Cohen's d| of their activations, B against A; the firing-rate change is printed beside it. Give "
        "the pretrained model as A and a run fine-tuned from it as B: --model A --model B.",
    )
    add_two_models_arguments(d)
    d.add_argument("--layer", type=validation.positive, default=None, help=LAYER_HELP)
    d.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    d.add_argument("--top", type=validation.positive, default=20, help="how many neurons to list (default 20)")
    d.add_argument("--seed", type=validation.count, default=0, help="corpus sample seed (default 0)")
    add_json_arguments(d, "one JSON object instead of a table")
    d.set_defaults(func=run_diff)


def run_neurons(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed)  # before the model: a bad spec or file costs no load
    lm = load_model(args.model)
    layer = nr.check_layer(lm, lm.num_layers if args.layer is None else args.layer)
    index = nr.build_neuron_index(lm, corpus, layer, k=args.top, progress=stderr_progress(args))
    corpus_truncated = warn_cuts(index)
    neurons = args.neuron if args.neuron else [int(n) for n in index.by_max()[:args.neurons]]
    for n in neurons:
        index.contexts(n, 0)  # a neuron out of range is named before anything is printed
    payload = {**index.to_json(neurons), "corpus_truncated": corpus_truncated}
    sentence = nr.neuron_sentence(lm, args.text, layer) if args.text else None
    if sentence is not None:
        payload["sentence"] = sentence.to_json(neurons)
        payload["truncated"] = {"tokens_dropped": sentence.truncated}
        if sentence.truncated:
            warn(f"your sentence was cut to the model's length ({sentence.truncated} word pieces dropped)")
    if args.json:
        validation.dump_json(payload, args.out)
        return 0
    print(f"layer {index.layer} of {index.model}: {index.n_neurons} neurons over {index.n_tokens:,} word pieces of "
          f"{index.corpus}")
    for n in neurons:
        print(f"\nneuron {n}: max {index.max_activation[n]:.3f}, mean {index.mean[n]:.3f}, "
              f"firing {index.firing_rate[n]:.1%}")
        for c in index.contexts(n):
            print(f"{c.value:8.3f}  {c.left[-40:]:>40} [{c.word}] {c.right[:40]}")
        if sentence is not None:
            print("  on your sentence: " + " ".join(f"{t}={v:.2f}" for t, v in zip(sentence.tokens, sentence.of(n))))
    return 0


def run_diff(args) -> int:
    corpus = corpora.resolve(args.corpus, args.seed)
    indexes = []
    for ref in two_models(args):
        lm = load_model(ref)
        layer = nr.check_layer(lm, lm.num_layers if args.layer is None else args.layer)
        indexes.append(nr.build_neuron_index(lm, corpus, layer, progress=stderr_progress(args)))
    changes = nr.neuron_changes(*indexes)
    corpus_truncated = warn_cuts(indexes[0])
    if args.json:
        validation.dump_json({**changes.to_json(args.top), "corpus_truncated": corpus_truncated}, args.out)
        return 0
    print(f"layer {changes.layer}, {changes.corpus}: B = {changes.model_b} against A = {changes.model_a}")
    print(f"measure: {nr.CHANGE_MEASURE}")
    print("neuron\tCohen's d\tmean A\tmean B\tfiring A\tfiring B")
    for n in changes.order[:args.top]:
        print(f"{n}\t{changes.effect[n]:+.3f}\t{changes.mean_a[n]:.3f}\t{changes.mean_b[n]:.3f}\t"
              f"{changes.firing_a[n]:.1%}\t{changes.firing_b[n]:.1%}")
    return 0
