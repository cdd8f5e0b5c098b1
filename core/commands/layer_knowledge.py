"""`probe-labels`: the command-line twin of the "What each layer knows" page's probes (issue 49)."""

from __future__ import annotations

import sys

from core import validation
from core.analyses import probe as probes
from core.analyses.changes import probe_layer_numbers
from core.analyses.layer_knowledge.probes import ANALYSIS, run_label_probes
from core.analyses.layer_knowledge.tasks import check_task
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args,
                           stderr_progress)
from core.data import corpus as corpora
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command,
        help=ANALYSIS.summary,
        description="Per layer (0 = the embeddings), a multinomial logistic-regression probe predicts each word's "
        "label from its vector (the mean of its word pieces), trained on --corpus and scored on --eval-corpus. "
        "--control adds Hewitt & Liang's control task (each word type a fixed random label drawn from the task's "
        "label distribution) and selectivity = accuracy - control accuracy; --mdl adds Voita & Titov's online "
        "codelength of the training labels and its compression over the uniform code. expected_layer is Tenney et "
        "al.'s sum l·Δ(l) / sum Δ(l) over the accuracies' gains.",
    )
    add_model_argument(p)
    p.add_argument("--corpus", required=True,
                   help="treebank to train the probes on: ud[:SPLIT[:N]] or a .conllu file (" + corpora.CLI_HELP + ")")
    p.add_argument("--eval-corpus", required=True, help="the same kind of spec to score them on (e.g. ud:test)")
    add_settings_arguments(p, ANALYSIS)  # --task, --layers, --control, --mdl, --seed, --max-iter
    p.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of training sentences")
    p.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of evaluation sentences")
    add_json_arguments(p, "JSON: task, n_train, n_eval, labels, majority, layers, expected_layer")
    p.set_defaults(func=run_probe_labels)


def run_probe_labels(args) -> int:
    settings = settings_from_args(ANALYSIS, args)
    # A misspelt task, layer list or treebank is refused before any model loads.
    check_task(settings.task)
    probe_layer_numbers(settings.layers)
    data = probes.probe_inputs(args.corpus, args.eval_corpus, settings.seed, args.train_limit, args.eval_limit)
    lm = load_model(args.model)
    probe_layer_numbers(settings.layers, lm.num_layers)
    result = run_label_probes(lm, data, settings, progress=stderr_progress(args))
    if result.n_sentences_skipped:
        print(f"warning: {result.n_sentences_skipped} sentences longer than the model reads were left out",
              file=sys.stderr)
    if result.below_majority_notice():
        print(f"warning: {result.below_majority_notice()}", file=sys.stderr)
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"{result.model}, {result.task} on {result.corpus}: {result.n_train} training, {result.n_eval} evaluation "
          f"words, {len(result.labels)} labels, majority {result.majority:.3f}")
    print("layer\taccuracy\tcontrol\tselectivity\tbits\tcompression")
    for s in result.layers:
        cells = [s.accuracy, s.control_accuracy, s.selectivity, s.codelength_bits, s.compression]
        print(f"{s.layer}\t" + "\t".join("-" if v is None else f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}" for v in cells))
    print("expected layer: " + ("undefined (no gain over the layers)" if result.expected_layer is None
                                else f"{result.expected_layer:.2f}"))
    return 0
