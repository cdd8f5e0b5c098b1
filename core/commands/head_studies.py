"""`head-features`, `cls-attention`, `aspect-heads`, `head-map`, `pattern-shares`: the "Head studies" section's twins. Each takes
--model once or more (e.g. a pretrained model and a fine-tuned run); --json prints the result's to_json() for one
model, and {"models": [its to_json(), ...]} (in the order given) for several."""

from __future__ import annotations

import numpy as np

from core import numbering
from core import validation
from core.analyses import head_studies as studies
from core.analyses import pattern_labels
from core.analyses.head_features import CLS_FEATURE_TITLES, CLS_FEATURES, FEATURE_TITLES, FEATURES, TOKEN_TYPES
from core.analyses.head_features import ClsFeatureAttention
from core.commands import add_json_arguments, add_models_argument, add_settings_arguments, settings_from_args, stderr_progress, warn
from core.data import corpus as corpora
from core.model.loading import load_model
from core.views import analysis


def _common(p, name: str) -> None:
    """--model (repeatable), --corpus where the study reads one, the settings of its declaration, --json."""
    add_models_argument(p, "hub id, local folder or run name; repeat to compare (default: BERTLENS_MODEL)")
    if name in studies.DEFAULT_CORPUS:
        default = studies.DEFAULT_CORPUS[name]
        p.add_argument("--corpus", default=None, help=corpora.CLI_HELP + f"; default {default}")
    add_settings_arguments(p, analysis(name))
    add_json_arguments(p, "one JSON object instead of a table ({\"models\": [...]} for several models)")


def register(subparsers) -> None:
    for name, func in (("head-features", run_features), ("cls-attention", run_cls), ("aspect-heads", run_aspects),
                       ("pattern-shares", run_pattern_shares), ("head-map", run_head_map)):
        p = subparsers.add_parser(name, help=analysis(name).summary)
        _common(p, name)
        if name == "aspect-heads":
            p.add_argument("--limit", type=validation.count, default=studies.ASPECT_REVIEWS,
                           help=f"the first N reviews' pairs (default {studies.ASPECT_REVIEWS}; 0 = all)")
        if name == "pattern-shares":
            p.add_argument("--labels", default=None, help="labels file (default: the app's, models_cache/labels/"
                                                          "pattern_labels.json); BERT Lens ships none")
        p.set_defaults(func=func)


def _study(args, name: str, **extra):
    """(the settings, the corpus spec read, StudyResults) of the study `name` over every --model, its inputs read
    (and a bad corpus refused) before any model loads."""
    settings = settings_from_args(analysis(name), args)
    inputs, corpus = studies.study_inputs(name, getattr(args, "corpus", None), settings, getattr(args, "limit", None))
    if name == "pattern-shares":
        extra["classifier"] = studies.pattern_classifier(args.labels)
    models = [load_model(ref) for ref in (args.model or [None])]
    found = studies.study_models(analysis(name), models, inputs, settings, corpus=corpus,
                                 progress=stderr_progress(args), **extra)
    for notice in found.notices():
        warn(notice)
    return settings, corpus, found


def _emit(args, found, table) -> int:
    if args.json:
        validation.dump_json(found.to_json(), args.out)
    else:
        for r in found.results:
            table(r)
    return 0


def _grid_print(title: str, values: np.ndarray) -> None:
    print(title)
    for layer, row in enumerate(values):
        print(f"L{numbering.shown(layer)}\t" + " ".join("  -  " if np.isnan(v) else f"{v:.3f}" for v in row))


def run_features(args) -> int:
    _, corpus, results = _study(args, "head-features")

    def table(r):
        print(f"{r.model} on {corpus}: {r.n_sentences} sentences ({r.n_skipped} too long)")
        for f in FEATURES:
            _grid_print(f"{FEATURE_TITLES[f]} ({r.counts[FEATURES.index(f)]} sentences)", r.feature(f))
    return _emit(args, results, table)


def run_cls(args) -> int:
    _, corpus, results = _study(args, "cls-attention")

    def table(r):
        if isinstance(r, ClsFeatureAttention):
            return cls_features_table(r, corpus)
        print(f"{r.model} on {corpus}: {r.n_examples} inputs; last layer, [CLS] row")
        print("head\t" + "\t".join(TOKEN_TYPES))
        for h in range(r.shares.shape[1]):
            print(f"{h}\t" + "\t".join(f"{r.shares[k, h]:.3f}" for k in range(len(TOKEN_TYPES))))
    return _emit(args, results, table)


def cls_features_table(r, corpus: str) -> None:
    print(f"{r.model} on {corpus}: {r.n_sentences} sentences ({r.n_skipped} too long); last layer, [CLS] row")
    print("head\t" + "\t".join(CLS_FEATURES))
    for h in range(r.shares.shape[1]):
        print(f"{h}\t" + "\t".join("  -  " if np.isnan(v) else f"{v:.3f}" for v in r.shares[:, h]))
    print("sentences with the feature: " + ", ".join(f"{CLS_FEATURE_TITLES[f]} {n}"
                                                      for f, n in zip(CLS_FEATURES, r.counts)))


def run_aspects(args) -> int:
    settings, _, results = _study(args, "aspect-heads")

    def table(r):
        print(f"{r.model} on SemEval-14 {settings.split}: {r.n_present} scored present aspects, {r.n_absent} absent")
        print("top aspect heads (the blog's bertviz counts layers from 0; here, as on every chart, from 1): "
              + ", ".join(f"{numbering.head_name(l, h)} {s:.3f}" for l, h, s in r.top_heads()))
        _grid_print("aspect word -> term span", r.span_score)
        _grid_print("absent aspect: aspect word -> [SEP]", r.absent_parts[1])
    return _emit(args, results, table)


def run_head_map(args) -> int:
    _, corpus, results = _study(args, "head-map")

    def table(r):
        print(f"{r.model} on {corpus}: {r.n_examples} inputs")
        print("layer\thead\tx\ty\ttop statistic")
        for row in r.to_json()["heads"]:
            print(f"{row['layer']}\t{row['head']}\t{row['x']:.3f}\t{row['y']:.3f}\t{row['top_statistic']} {row['top_value']:.3f}")
    return _emit(args, results, table)


def run_pattern_shares(args) -> int:
    # study_inputs reads the corpus first: a bad corpus is named before a missing labels file.
    _, corpus, results = _study(args, "pattern-shares")

    def table(r):
        accuracy = (f"cross-validated accuracy {r.cv_accuracy:.3f} ({r.cv_folds} folds)" if r.cv_accuracy is not None
                    else "no cross-validated accuracy (a type has a single label)")
        print(f"{r.model} on {corpus}: {r.n_maps} head maps of {r.n_inputs} inputs; classifier on {r.n_labels} "
              f"labelled maps, {accuracy}")
        print("pattern\trules\tclassifier")
        for p in r.by_rules:
            print(f"{p}\t{r.by_rules[p]:.3f}\t{r.by_classifier[p]:.3f}")
        print(pattern_labels.RULES_NOT_COMPARABLE)
    return _emit(args, results, table)
