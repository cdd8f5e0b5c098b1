"""`pca`: token vectors of every layer in 2-D (the Layerwise PCA page's twin)."""

from __future__ import annotations

from dataclasses import replace

from core.data import corpus as corpora
from core import validation
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, counted, settings_from_args,
                           warn_truncated)
from core.model.loading import load_model
from core.analyses.projection import ANALYSIS, background_vectors, run_pca as project_inputs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pca",
        help=ANALYSIS.summary,
        description="By default every word piece is kept, special tokens included, so the output lines up with "
        "the tokenizer's tokens; --drop-special and --drop-punct leave those out of the fit and the output.",
    )
    add_model_argument(p)
    p.add_argument("--text", action="append", default=[], help="a sentence; repeat for several")
    p.add_argument("--corpus", default=None, help="inputs from a corpus (after any --text): " + corpora.CLI_HELP)
    p.add_argument("--limit", type=validation.positive, default=None, help="the first N inputs of --corpus only")
    add_settings_arguments(p, ANALYSIS)
    p.add_argument("--background", default=None, metavar="SPEC",
                   help="fit PCA on this corpus instead (same specs as --corpus, e.g. builtin or snli:dev:100)")
    p.add_argument("--background-size", type=validation.positive, default=100,
                   help="the first N items of the background corpus (default 100)")
    add_json_arguments(p)
    p.set_defaults(func=run_pca)


def run_pca(args) -> int:
    settings = settings_from_args(ANALYSIS, args)
    inputs = list(args.text)
    if args.corpus is not None:  # "" is refused by resolve, not taken as no corpus
        inputs += corpora.resolve(args.corpus, settings.seed).take(args.limit).inputs
    if not inputs:
        raise corpora.CorpusError("pca needs inputs: give --text SENTENCE (repeatable) and/or --corpus SPEC.")
    background_sentences = (corpora.resolve(args.background, settings.seed).take(args.background_size).sentences
                            if args.background is not None else None)  # read before any model loads
    lm = load_model(args.model)
    keep = {"keep_special": not settings.hide_special, "keep_punct": not settings.hide_punct}
    background, background_truncated = (counted(lambda: background_vectors(lm, background_sentences, **keep))
                                        if background_sentences is not None else (None, None))
    projection, encodings = project_inputs(lm, inputs, settings, background=background)
    projection = replace(projection, background_name=args.background)
    truncated = warn_truncated(encodings)
    if args.json:
        extra = {"background_truncated": background_truncated} if background_truncated is not None else {}
        validation.dump_json({**projection.to_json(), "truncated": truncated, **extra}, args.out)
        return 0
    ratio = projection.explained_variance_ratio
    print(f"{len(projection.tokens)} tokens, {len(projection.layers)} layers (0 = embeddings), fit: "
          f"{projection.method_label}; protocol {projection.protocol}")
    if projection.method != "tsne":
        print("layer\tPC1\tPC2\t(share of the layer's variance on the 2 axes)")
        for layer, (a, b) in zip(projection.layers, ratio):
            print(f"{layer}\t{a:.3f}\t{b:.3f}")
    last = projection.layers[-1]
    print(f"coordinates at layer {last}:")
    for label, (x, y) in zip(projection.labels, projection.coords[last]):
        print(f"{label}\t{x:.3f}\t{y:.3f}")
    return 0
