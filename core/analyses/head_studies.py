"""The "Head studies" analyses declared once (core.contract): head-features (Kovaleva Fig. 6), cls-attention
(Fig. 7, by token type or by the Fig. 6 features), aspect-heads (SemEval-14 QA-M), head-map (Clark §6) and
pattern-shares (Kovaleva's five pattern types). Each runs over one model or several (e.g. a pretrained model and a
fine-tuned run); `study_models` runs them the same way for the CLI and core.lens, and `StudyResults.to_json()` is
the one JSON both give: the result's to_json() with its "truncated" field for one model, {"models": [...]} (in the
order given) for several.

The analyses themselves live in head_features, aspect_heads, head_clustering and pattern_labels; this module reads
their inputs (a treebank, a corpus, SemEval pairs) and adapts them to run(subject, inputs, settings, progress,
should_stop). No streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from core.analyses import aspect_heads as aspects
from core.analyses import head_clustering, head_features, pattern_labels
from core.contract import Analysis, setting
from core.data import corpus as corpora
from core.model.encoding import counting_cuts

# The corpus each study reads when none is given (cls-attention's depends on `by`: a treebank for the features).
DEFAULT_CORPUS = {"head-features": "ud:dev:200", "cls-attention": "snli:dev:200", "cls-attention/feature": "ud:dev:200",
                  "head-map": "snli:dev:100", "pattern-shares": "builtin"}
ASPECT_REVIEWS = 500  # aspect-heads reads the first N reviews' pairs by default (0: all)

_SEED = "seed of the corpus sample"
_BATCH = "inputs encoded at once (the numbers do not depend on it)"


@dataclass(frozen=True)
class HeadStudySettings:
    """head-features' and pattern-shares' settings."""

    seed: int = setting(0, _SEED, low=0)
    batch_size: int = setting(16, _BATCH, low=1, url=None)


@dataclass(frozen=True)
class HeadMapSettings:
    seed: int = setting(0, _SEED + " and of the MDS layout", low=0)
    batch_size: int = setting(16, _BATCH, low=1, url=None)


@dataclass(frozen=True)
class ClsAttentionSettings:
    by: str = setting("type", "type: [CLS]/[SEP]/punctuation/other on any corpus; feature: nouns, verbs, pronouns, "
                      "subjects, objects, negation, [CLS], [SEP], punctuation from a treebank (default corpus then "
                      "ud:dev:200)", choices=("type", "feature"))
    seed: int = setting(0, _SEED, low=0)
    batch_size: int = setting(16, _BATCH, low=1, url=None)


@dataclass(frozen=True)
class AspectHeadsSettings:
    split: str = setting("test", "the SemEval-14 restaurants split", choices=("train", "test"), url=None)
    batch_size: int = setting(16, _BATCH, low=1, url=None)


def default_corpus(name: str, settings) -> str:
    """The corpus spec a study reads when none is given."""
    if name == "cls-attention" and settings.by == "feature":
        return DEFAULT_CORPUS["cls-attention/feature"]
    return DEFAULT_CORPUS[name]


def study_inputs(name: str, corpus: str | None, settings, limit: int | None = ASPECT_REVIEWS):
    """(the inputs a study runs on, the corpus spec its results are stamped with; None for aspect-heads, which
    reads SemEval-14). A bad spec or a corpus without trees where trees are needed raises ValueError before any
    model loads. `limit`: aspect-heads' first N reviews (None or 0: all)."""
    if name == "aspect-heads":
        return aspects.semeval_pairs(settings.split, limit or None), None
    spec = corpus if corpus is not None else default_corpus(name, settings)
    chosen = corpora.resolve(spec, settings.seed)
    trees = name == "head-features" or (name == "cls-attention" and settings.by == "feature")
    return (corpora.require_trees(chosen) if trees else chosen.inputs), spec


def run_head_features(lm, sentences, settings: HeadStudySettings, progress=None, should_stop=None):
    return head_features.feature_attention(lm, sentences, batch_size=settings.batch_size, progress=progress,
                                           should_stop=should_stop)


def run_cls_attention(lm, inputs, settings: ClsAttentionSettings, progress=None, should_stop=None):
    measure = head_features.cls_feature_attention if settings.by == "feature" else head_features.cls_attention
    return measure(lm, inputs, batch_size=settings.batch_size, progress=progress, should_stop=should_stop)


def run_aspect_heads(lm, pairs, settings: AspectHeadsSettings, progress=None, should_stop=None):
    return aspects.aspect_heads(lm, pairs, split=settings.split, batch_size=settings.batch_size, progress=progress,
                                should_stop=should_stop)


def run_head_map(lm, inputs, settings: HeadMapSettings, progress=None, should_stop=None):
    return head_clustering.head_map(lm, inputs, seed=settings.seed, batch_size=settings.batch_size,
                                    progress=progress, should_stop=should_stop)


def run_pattern_shares(lm, inputs, settings: HeadStudySettings, progress=None, should_stop=None, *, classifier):
    """`classifier`: core.analyses.pattern_labels.train_classifier of the labels (see pattern_classifier)."""
    return pattern_labels.pattern_shares(lm, inputs, classifier, batch_size=settings.batch_size, progress=progress,
                                         should_stop=should_stop)


def pattern_classifier(labels: str | None = None):
    """The classifier pattern-shares needs, trained on a labels file (default: the app's); ValueError when there
    is none (BERT Lens ships no labels)."""
    path = Path(labels) if labels else pattern_labels.labels_path()
    if not path.exists():
        raise ValueError(f"no labels file at {path}: label maps in the app first (fine-tuning page, Head studies, "
                         "Label patterns); BERT Lens ships no labels")
    return pattern_labels.train_classifier(pattern_labels.read_labels(path))


@dataclass(frozen=True)
class StudyResults:
    """One study over several models: `results` (each model's, in the order given) and `cuts` (what truncation cut
    off, core.model.encoding.CutCount per model). to_json(): what the CLI's --json prints."""

    results: tuple
    cuts: tuple

    def to_json(self) -> dict:
        out = [{**r.to_json(), "truncated": c.truncation()} for r, c in zip(self.results, self.cuts)]
        return out[0] if len(out) == 1 else {"models": out}

    def notices(self) -> list[str]:
        return [n for n in (c.truncation_notice() for c in self.cuts) if n]


def study_models(analysis: Analysis, models: Sequence, inputs, settings, *, corpus: str | None = None,
                 progress: Callable | None = None, **extra) -> StudyResults:
    """The analysis's run over every model (loaded models, in order), each counting what truncation cut off; each
    result stamped with the corpus spec it read (None: left as it is)."""
    run = analysis.run_function()
    results, cuts = [], []
    for lm in models:
        with counting_cuts() as count:
            result = run(lm, inputs, settings, progress=progress, **extra)
        results.append(result if corpus is None else replace(result, corpus=corpus))
        cuts.append(count.over_ranks())
    return StudyResults(tuple(results), tuple(cuts))


_VIEW = "finetune"  # the fine-tuning page's Head studies section shows them
ANALYSES = (
    Analysis(name="head-features", view=_VIEW, command="head-features", lens="head_features",
             settings=HeadStudySettings, run=run_head_features, charts="core.charts.head_studies:features_charts",
             title="Linguistic features", order=30,
             summary="Kovaleva Fig. 6: attention to nouns, verbs, pronouns, subjects, objects, negation, [CLS], "
                     "[SEP] per head on a treebank"),
    Analysis(name="cls-attention", view=_VIEW, command="cls-attention", lens="cls_attention",
             settings=ClsAttentionSettings, run=run_cls_attention, charts="core.charts.head_studies:cls_charts",
             title="[CLS] attention", order=31,
             summary="Kovaleva Fig. 7: last-layer [CLS] attention per head, by token type or (--by feature) by the "
                     "Fig. 6 linguistic features"),
    Analysis(name="aspect-heads", view=_VIEW, command="aspect-heads", lens="aspect_heads",
             settings=AspectHeadsSettings, run=run_aspect_heads, charts="core.charts.head_studies:aspect_charts",
             title="Aspect heads", order=32,
             summary="aspect word -> aspect term attention per head on SemEval-14 QA-M pairs, and where absent "
                     "aspects attend"),
    Analysis(name="head-map", view=_VIEW, command="head-map", lens="head_map", settings=HeadMapSettings,
             run=run_head_map, charts="core.charts.head_studies:head_map_charts", title="Head map", order=33,
             summary="Clark §6: heads embedded in 2-D by Jensen-Shannon distance (MDS)"),
    Analysis(name="pattern-shares", view=_VIEW, command="pattern-shares", lens="pattern_shares",
             settings=HeadStudySettings, run=run_pattern_shares, charts="core.charts.head_studies:pattern_charts",
             title="Label patterns", order=34,
             summary="Kovaleva's five pattern types per head map of a corpus, from a classifier trained on your "
                     "labels (the app's Label patterns) beside the threshold rules"),
)
