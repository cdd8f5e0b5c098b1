"""`project` and `neighbours`: the Dataset explorer page's twins."""

from __future__ import annotations

from core import validation
from core.analyses.explain import load_explainer
from core.analyses.explorer import ANALYSIS as PROJECT, load_examples, run_project as run_analysis
from core.analyses.vector_index import ANALYSIS as NEIGHBOURS, find_neighbours
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args,
                           stderr_progress, warn, warn_cuts, warn_truncated)
from core.data import corpus as corpora
from core.model.loading import load_model
from core.settings import default_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        PROJECT.command,
        help=PROJECT.summary,
        description="Prints the points with their example ids (row numbers of the corpus) and gold labels (null "
        "when the corpus has none).",
    )
    add_model_argument(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(p, PROJECT)
    add_json_arguments(p)
    p.set_defaults(func=run_project)

    n = subparsers.add_parser(
        NEIGHBOURS.command,
        help=NEIGHBOURS.summary,
        description="The corpus index is built once per (model, corpus, layers) under models_cache/explorer_index "
        "and reused; exact search below a size threshold, approximate (faiss IVF) above, the mode printed.",
    )
    add_model_argument(n)
    n.add_argument("--text", required=True, help="the sentence")
    n.add_argument("--word", required=True, help="a word of the sentence (its first occurrence)")
    n.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(n, NEIGHBOURS)
    add_json_arguments(n, "one JSON object instead of keyword-in-context lines")
    n.set_defaults(func=run_neighbours)


def run_project(args) -> int:
    settings = settings_from_args(PROJECT, args)
    examples = load_examples(args.corpus, settings.seed)
    explainer = load_explainer(args.model or default_model())
    result = run_analysis(explainer, examples, settings, stderr_progress(args))
    warn(result.truncation_notice())
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"{len(result.ids)} examples of {result.corpus}, layer {result.layer}, {result.pooling} vectors, "
          f"{result.method}")
    print("id\tx\ty\tlabel" + ("\tpredicted\tconfidence" if result.predictions else ""))
    for k, (i, (x, y)) in enumerate(zip(result.ids, result.coords)):
        label = result.labels[k] if result.labels is not None else ""
        extra = (f"\t{result.predictions.predicted[k]}\t{result.predictions.confidence[k]:.3f}"
                 if result.predictions else "")
        print(f"{i}\t{x:.4f}\t{y:.4f}\t{label}{extra}")
    return 0


def run_neighbours(args) -> int:
    settings = settings_from_args(NEIGHBOURS, args)
    corpus = corpora.resolve(args.corpus, settings.seed)  # before the model: a bad spec or file costs no load
    lm = load_model(args.model)
    result, encoding, index = find_neighbours(lm, args.text, args.word, corpus, settings, stderr_progress(args))
    truncated = warn_truncated(encoding)
    corpus_truncated = warn_cuts(index.info)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated, "corpus_truncated": corpus_truncated},
                             args.out)
        return 0
    q = result.query
    print(f"'{q['word']}' (word {q['position']}) at layer {q['layer']}: {q['mode']} search over {q['count']} "
          f"occurrences of {q['corpus']}")
    for n in result.neighbours:
        print(f"{n.similarity:.3f}\t{n.left[-40:]:>40} [{n.word}] {n.right[:40]}")
    for title, hist in (("POS", result.pos), ("relation", result.deprel)):
        if hist:
            print(f"{title}: " + ", ".join(f"{tag} {count}" for tag, count in hist))
    return 0
