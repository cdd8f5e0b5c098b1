"""`head-features`, `cls-attention`, `aspect-heads`, `head-map`, `pattern-shares`: the "Head studies" section's twins. Each takes
--model once or more (e.g. a pretrained model and a fine-tuned run); --json prints the result's to_json() for one
model, and {"models": [its to_json(), ...]} (in the order given) for several."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from core import numbering
from core import validation
from core.analyses.aspect_heads import aspect_heads, semeval_pairs
from core.analyses.head_clustering import head_map
from core.analyses import pattern_labels
from core.analyses.head_features import (CLS_FEATURE_TITLES, CLS_FEATURES, FEATURE_TITLES, FEATURES, TOKEN_TYPES,
                                         cls_attention, cls_feature_attention, feature_attention)
from core.commands import add_json_arguments, add_models_argument, counted, stderr_progress
from core.data import corpus as corpora
from core.model.loading import load_model


def _common(p, corpus_default: str | None) -> None:
    add_models_argument(p, "hub id, local folder or run name; repeat to compare (default: BERTLENS_MODEL)")
    if corpus_default:
        p.add_argument("--corpus", default=corpus_default, help=corpora.CLI_HELP + f"; default {corpus_default}")
        p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample (default 0)")
    p.add_argument("--batch-size", type=validation.positive, default=16)
    add_json_arguments(p, "one JSON object instead of a table ({\"models\": [...]} for several models)")


def register(subparsers) -> None:
    p = subparsers.add_parser("head-features", help="Kovaleva Fig. 6: attention to nouns, verbs, pronouns, subjects, "
                                                    "objects, negation, [CLS], [SEP] per head on a treebank")
    _common(p, "ud:dev:200")
    p.set_defaults(func=run_features)
    p = subparsers.add_parser("cls-attention", help="Kovaleva Fig. 7: last-layer [CLS] attention per head, by token "
                                                    "type or (--by feature) by the Fig. 6 linguistic features")
    _common(p, "snli:dev:200")
    p.add_argument("--by", choices=("type", "feature"), default="type",
                   help="type: [CLS]/[SEP]/punctuation/other on any corpus; feature: nouns, verbs, pronouns, subjects, "
                        "objects, negation, [CLS], [SEP], punctuation from a treebank (default corpus then ud:dev:200)")
    p.set_defaults(func=run_cls, corpus=None)
    p = subparsers.add_parser("aspect-heads", help="aspect word -> aspect term attention per head on SemEval-14 "
                                                   "QA-M pairs, and where absent aspects attend")
    _common(p, None)
    p.add_argument("--split", choices=("train", "test"), default="test")
    p.add_argument("--limit", type=validation.count, default=500, help="the first N reviews' pairs (default 500; 0 = all)")
    p.set_defaults(func=run_aspects)
    p = subparsers.add_parser("pattern-shares", help="Kovaleva's five pattern types per head map of a corpus, from a "
                                                     "classifier trained on your labels (the app's Label patterns) "
                                                     "beside the threshold rules")
    _common(p, "builtin")
    p.add_argument("--labels", default=None, help="labels file (default: the app's, models_cache/labels/"
                                                  "pattern_labels.json); BERT Lens ships none")
    p.set_defaults(func=run_pattern_shares)
    p = subparsers.add_parser("head-map", help="Clark §6: heads embedded in 2-D by Jensen-Shannon distance (MDS)")
    _common(p, "snli:dev:100")
    p.set_defaults(func=run_head_map)


def _models(args) -> list:
    return [load_model(ref) for ref in (args.model or [None])]


def _each_model(args, measure) -> list:
    """measure(lm, batch_size=, progress=) for every model given, each inside `counted` ((result, "truncated")), the
    result stamped with the command's corpus spec when it reads one."""
    corpus = getattr(args, "corpus", None)

    def run(lm):
        result = measure(lm, batch_size=args.batch_size, progress=stderr_progress(args))
        return result if corpus is None else replace(result, corpus=corpus)

    return [counted(lambda: run(lm)) for lm in _models(args)]


def _emit(args, results, table) -> int:
    """results: (result, its "truncated" field) per model, from `counted`."""
    if args.json:
        out = [{**r.to_json(), "truncated": truncated} for r, truncated in results]
        validation.dump_json(out[0] if len(out) == 1 else {"models": out}, args.out)
    else:
        for r, _ in results:
            table(r)
    return 0


def _grid_print(title: str, values: np.ndarray) -> None:
    print(title)
    for layer, row in enumerate(values):
        print(f"L{numbering.shown(layer)}\t" + " ".join("  -  " if np.isnan(v) else f"{v:.3f}" for v in row))


def run_features(args) -> int:
    trees = corpora.require_trees(corpora.resolve(args.corpus, args.seed))
    results = _each_model(args, lambda lm, **options: feature_attention(lm, trees, **options))

    def table(r):
        print(f"{r.model} on {args.corpus}: {r.n_sentences} sentences ({r.n_skipped} too long)")
        for f in FEATURES:
            _grid_print(f"{FEATURE_TITLES[f]} ({r.counts[FEATURES.index(f)]} sentences)", r.feature(f))
    return _emit(args, results, table)


def run_cls(args) -> int:
    if args.by == "feature":
        return run_cls_features(args)
    args.corpus = "snli:dev:200" if args.corpus is None else args.corpus
    inputs = corpora.resolve(args.corpus, args.seed).inputs
    results = _each_model(args, lambda lm, **options: cls_attention(lm, inputs, **options))

    def table(r):
        print(f"{r.model} on {args.corpus}: {r.n_examples} inputs; last layer, [CLS] row")
        print("head\t" + "\t".join(TOKEN_TYPES))
        for h in range(r.shares.shape[1]):
            print(f"{h}\t" + "\t".join(f"{r.shares[k, h]:.3f}" for k in range(len(TOKEN_TYPES))))
    return _emit(args, results, table)


def run_cls_features(args) -> int:
    args.corpus = "ud:dev:200" if args.corpus is None else args.corpus
    trees = corpora.require_trees(corpora.resolve(args.corpus, args.seed))
    results = _each_model(args, lambda lm, **options: cls_feature_attention(lm, trees, **options))

    def table(r):
        print(f"{r.model} on {args.corpus}: {r.n_sentences} sentences ({r.n_skipped} too long); last layer, [CLS] row")
        print("head\t" + "\t".join(CLS_FEATURES))
        for h in range(r.shares.shape[1]):
            print(f"{h}\t" + "\t".join("  -  " if np.isnan(v) else f"{v:.3f}" for v in r.shares[:, h]))
        print("sentences with the feature: " + ", ".join(f"{CLS_FEATURE_TITLES[f]} {n}"
                                                          for f, n in zip(CLS_FEATURES, r.counts)))
    return _emit(args, results, table)


def run_aspects(args) -> int:
    pairs = semeval_pairs(args.split, args.limit or None)
    results = _each_model(args, lambda lm, **options: aspect_heads(lm, pairs, split=args.split, **options))

    def table(r):
        print(f"{r.model} on SemEval-14 {args.split}: {r.n_present} scored present aspects, {r.n_absent} absent")
        print("top aspect heads (the blog's bertviz counts layers from 0; here, as on every chart, from 1): "
              + ", ".join(f"{numbering.head_name(l, h)} {s:.3f}" for l, h, s in r.top_heads()))
        _grid_print("aspect word -> term span", r.span_score)
        _grid_print("absent aspect: aspect word -> [SEP]", r.absent_parts[1])
    return _emit(args, results, table)


def run_head_map(args) -> int:
    inputs = corpora.resolve(args.corpus, args.seed).inputs
    results = _each_model(args, lambda lm, **options: head_map(lm, inputs, seed=args.seed, **options))

    def table(r):
        print(f"{r.model} on {args.corpus}: {r.n_examples} inputs")
        print("layer\thead\tx\ty\ttop statistic")
        for row in r.to_json()["heads"]:
            print(f"{row['layer']}\t{row['head']}\t{row['x']:.3f}\t{row['y']:.3f}\t{row['top_statistic']} {row['top_value']:.3f}")
    return _emit(args, results, table)


def run_pattern_shares(args) -> int:
    inputs = corpora.resolve(args.corpus, args.seed).inputs  # a bad corpus is named before a missing labels file
    path = Path(args.labels) if args.labels else pattern_labels.labels_path()
    if not path.exists():
        raise ValueError(f"no labels file at {path}: label maps in the app first (fine-tuning page, Head studies, "
                         "Label patterns); BERT Lens ships no labels")
    labels = pattern_labels.read_labels(path)
    classifier = pattern_labels.train_classifier(labels)
    results = _each_model(args, lambda lm, **options: pattern_labels.pattern_shares(lm, inputs, classifier, **options))

    def table(r):
        accuracy = (f"cross-validated accuracy {r.cv_accuracy:.3f} ({r.cv_folds} folds)" if r.cv_accuracy is not None
                    else "no cross-validated accuracy (a type has a single label)")
        print(f"{r.model} on {args.corpus}: {r.n_maps} head maps of {r.n_inputs} inputs; classifier on {r.n_labels} "
              f"labelled maps, {accuracy}")
        print("pattern\trules\tclassifier")
        for p in r.by_rules:
            print(f"{p}\t{r.by_rules[p]:.3f}\t{r.by_classifier[p]:.3f}")
        print(pattern_labels.RULES_NOT_COMPARABLE)
    return _emit(args, results, table)
