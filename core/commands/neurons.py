"""`neurons` and `neurons-diff`: the Read-the-layers page's Neurons tab, from the command line."""

from __future__ import annotations

from core import validation
from core.analyses import neurons as nr
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, add_two_models_arguments,
                           settings_from_args, stderr_progress, two_models, warn, warn_cuts)
from core.data import corpus as corpora
from core.model.loading import load_model

def register(subparsers) -> None:
    p = subparsers.add_parser(
        nr.NEURONS.command,
        help=nr.NEURONS.summary,
        description="One streaming pass over the corpus keeps each neuron's top activations (after the GELU) with "
        "their contexts, its mean and firing rate; the index is kept under models_cache/neuron_index per (model, "
        "corpus, layer, top) and reused. Neurons are listed by their highest activation, or give --neuron. With "
        "--text, the neurons listed are also read on that sentence.",
    )
    add_model_argument(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(p, nr.NEURONS)  # --layer, --top (contexts kept), --seed
    p.add_argument("--neuron", type=validation.count, action="append", default=None,
                   help="a neuron to show (repeat for several); default: the --neurons highest")
    p.add_argument("--neurons", type=validation.positive, default=10,
                   help="how many neurons to show, highest activation first, without --neuron (default 10)")
    p.add_argument("--text", default=None, help="a sentence: each neuron shown is also read on it")
    add_json_arguments(p, "one JSON object instead of keyword-in-context lines")
    p.set_defaults(func=run_neurons)

    d = subparsers.add_parser(
        nr.NEURONS_DIFF.command,
        help=nr.NEURONS_DIFF.summary,
        description="Both models' neurons are indexed over the same corpus (models_cache/neuron_index, reused) and "
        "ranked by |Cohen's d| of their activations, B against A; the firing-rate change is printed beside it. Give "
        "the pretrained model as A and a run fine-tuned from it as B: --model A --model B.",
    )
    add_two_models_arguments(d)
    d.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(d, nr.NEURONS_DIFF)  # --layer, --top (neurons listed), --seed
    add_json_arguments(d, "one JSON object instead of a table")
    d.set_defaults(func=run_diff)


def run_neurons(args) -> int:
    settings = settings_from_args(nr.NEURONS, args)
    corpus = corpora.resolve(args.corpus, settings.seed)  # before the model: a bad spec or file costs no load
    lm = load_model(args.model)
    index = nr.run_index(lm, corpus, settings, progress=stderr_progress(args))
    warn_cuts(index)
    neurons = nr.shown_neurons(index, args.neuron, args.neurons)  # a neuron out of range is named before any print
    sentence = nr.neuron_sentence(lm, args.text, index.layer) if args.text else None
    if sentence is not None and sentence.truncated:
        warn(f"your sentence was cut to the model's length ({sentence.truncated} word pieces dropped)")
    if args.json:
        validation.dump_json(nr.NeuronsShown(index, neurons, sentence).to_json(), args.out)
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
    settings = settings_from_args(nr.NEURONS_DIFF, args)
    corpus = corpora.resolve(args.corpus, settings.seed)
    shown = nr.run_diff([load_model(ref) for ref in two_models(args)], corpus, settings,
                        progress=stderr_progress(args))
    changes = shown.changes
    warn_cuts(shown.index_a)
    if args.json:
        validation.dump_json(shown.to_json(), args.out)
        return 0
    print(f"layer {changes.layer}, {changes.corpus}: B = {changes.model_b} against A = {changes.model_a}")
    print(f"measure: {nr.CHANGE_MEASURE}")
    print("neuron\tCohen's d\tmean A\tmean B\tfiring A\tfiring B")
    for n in shown.shown:
        print(f"{n}\t{changes.effect[n]:+.3f}\t{changes.mean_a[n]:.3f}\t{changes.mean_b[n]:.3f}\t"
              f"{changes.firing_a[n]:.1%}\t{changes.firing_b[n]:.1%}")
    return 0
