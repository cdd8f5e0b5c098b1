"""Head studies: the "Head studies" tab of the fine-tuning page (call `render()`), a pretrained model and a
fine-tuned one side by side on four published head analyses: Kovaleva et al.'s attention to linguistic features
(Fig. 6) and last-layer [CLS] attention by token type and by those features (Fig. 7), the fine-tuned-attention
blog's aspect heads, and Clark et al.'s map of heads by Jensen–Shannon distance (§6); and Kovaleva's labelling of
attention maps by hand (app_pages.widgets.pattern_labels). Each pass is a core.jobs job (progress, Cancel).
"""

from __future__ import annotations

import streamlit as st

from app_pages.widgets.common import cached_model, draw_chart, export_buttons, intro, job_controls, model_ref, warn_if_corpus_cut
from app_pages.widgets import pattern_labels
from app_pages.widgets.corpus_picker import SNLI, UD, corpus_picker
from core import numbering
from core.analyses.aspect_heads import aspect_heads, aspect_row, semeval_pairs
from core.analyses.head_clustering import head_map
from core.analyses.head_features import FEATURE_TITLES, FEATURES, cls_attention, cls_feature_attention, feature_attention
from core.charts import head_studies as charts
from core.model.encoding import run_counting_cuts
from core.data.corpus import require_trees
from core.data.datasets import DataUnavailable
from core.model.loading import ModelUnavailable, available_models, display_name, display_name_among
from core.safe_text import markdown_text

P = "studies."
PARTS = ("Linguistic features", "[CLS] by token type", "[CLS] by feature", "Aspect heads", "Head map", "Label patterns")
EXAMPLES = {
    "Features · 100 EWT sentences": {"part": PARTS[0], "tb.source": UD, "tb.split": "dev", "tb_limit": 100},
    "[CLS] · 100 SNLI pairs": {"part": PARTS[1], "source": SNLI, "split": "dev", "limit": 100},
    "Aspects · 100 reviews": {"part": PARTS[3], "reviews": 100},
    "Head map · 50 SNLI pairs": {"part": PARTS[4], "source": SNLI, "split": "dev", "limit": 50},
}
NONE = "(none)"


def use_example(settings: dict) -> None:
    for key, value in settings.items():
        st.session_state[P + key] = value


def model_pair() -> list[str]:
    """The pretrained model (sidebar's by default) and, optionally, a fine-tuned run or any other model."""
    names = list(dict.fromkeys(n for n in [model_ref(), *(e.name for e in available_models())] if n))
    runs = [e.name for e in available_models() if e.source == "run"]
    st.session_state.setdefault(P + "base", model_ref())
    row = st.columns(2)
    base = row[0].selectbox("Pretrained model (A)", names, key=P + "base", accept_new_options=True,
                            format_func=display_name_among(names))
    others = [NONE] + [n for n in runs if n != base] + [n for n in names if n != base and n not in runs]
    if st.session_state.get(P + "other") not in others:
        st.session_state[P + "other"] = others[1] if len(others) > 1 and others[1] in runs else NONE
    other = row[1].selectbox("Fine-tuned model (B)", others, key=P + "other", accept_new_options=True,
                             format_func=display_name_among(others),
                             help="A run from the Runs tab, or any model; (none) shows A alone.")
    if not runs:
        st.caption("No fine-tuned run yet: train one in the Runs tab (the aspect task is `absa_qa`), or compare any "
                   "two models.")
    return [m for m in (base, other) if m and m != NONE]


def models_work(refs: list[str], study):
    """make_work for job_controls: load every model in the callback (errors shown), then run `study(lm, ...)` on
    each with one progress bar over all of them."""
    try:
        loaded = [cached_model(r) for r in refs]
    except ModelUnavailable as err:
        raise ValueError(str(err)) from err

    def work(progress, should_stop):
        out = []
        for i, lm in enumerate(loaded):
            def step(done, total, message=None, i=i):
                progress(i * total + done, total * len(loaded), f"model {i + 1} of {len(loaded)}")
            out.append(run_counting_cuts(lambda: study(lm, step, should_stop)))  # each model's cuts: its own length
        return out
    return work


def shown_results(kept):
    """models_work's per-model results, after each model's notice of examples cut to its length; None until run."""
    if kept is None:
        return None
    for counted in kept:
        warn_if_corpus_cut(counted, counted.value.model if len(kept) > 1 else None)
    return [counted.value for counted in kept]


def _treebank_part(refs: list[str], name: str, kind: str, compute):
    """The two treebank studies' shared flow: treebank picker, one job over every model, its result (None until
    run)."""
    corpus = corpus_picker(P + "tb.", trees=True, label="Treebank", n_key=P + "tb_limit", n_label="Sentences")
    if corpus is None:
        return None
    trees = require_trees(corpus)
    params = (name, tuple(refs), corpus.digest)
    result = shown_results(job_controls(P + name, f"Run over {len(trees)} sentences", params,
                                        lambda: models_work(refs, lambda lm, p, s: compute(lm, trees, progress=p, should_stop=s)),
                                        kind=kind, unit="sentences"))
    if result is None:
        st.info("Press the button to pass the treebank through the model(s).")
    return result


TREEBANK_FEATURES_NOTE = ("Features from the treebank's tags (nouns NOUN/PROPN, verbs VERB, pronouns PRON), relations "
                          "(subjects nsubj/csubj, objects obj/iobj) and a list of negation words.")


def features_part(refs: list[str]) -> None:
    intro("Kovaleva et al. (2019) found that heads paying extra attention to nouns, objects or negation exist, but "
          "that after fine-tuning most attention still goes to [CLS] and [SEP], which is what this heat map checks.",
          "Each cell is one head: the attention its tokens pay to a word of the feature, summed and divided by the "
          "sentence length, the most-attended such word per sentence, averaged over the treebank's sentences.")
    result = _treebank_part(refs, "features", "head-features", feature_attention)
    if result is None:
        return
    feature = st.selectbox("Feature", FEATURES, key=P + "feature", format_func=FEATURE_TITLES.get)
    chart, _ = charts.features_chart(result, feature)
    draw_chart(chart, key=P + "features_chart")
    st.caption(" · ".join(f"{markdown_text(display_name(r.model))}: {r.counts[FEATURES.index(feature)]} of {r.n_sentences} sentences "
                          f"have the feature ({r.n_skipped} too long)" for r in result) + ". " + TREEBANK_FEATURES_NOTE)
    export_buttons(chart, charts.features_table(result), f"head-features-{feature}", P + "features_export")


def cls_features_part(refs: list[str]) -> None:
    intro("Kovaleva et al. (2019, Fig. 7) read the last layer's [CLS] row, the one the classifier reads, for the "
          "linguistic features of their §4.3: does [CLS] look at nouns, verbs, negation, or mostly at [SEP]?",
          "Each cell is one head of the last layer: the share of its [CLS] row on all the tokens of the feature, "
          "averaged over the treebank sentences that have it; the models are side by side on one colour scale.")
    result = _treebank_part(refs, "cls_features", "cls-attention", cls_feature_attention)
    if result is None:
        return
    chart, frame = charts.cls_features_chart(result)
    draw_chart(chart, key=P + "cls_features_chart")
    st.caption(" · ".join(f"{markdown_text(display_name(r.model))}: {r.n_sentences} sentences ({r.n_skipped} too long)"
                          for r in result) + ". " + TREEBANK_FEATURES_NOTE + " Punctuation is UPOS PUNCT. Features "
               "overlap (a subject is mostly a noun too), so a head's column does not add up to 1; hover a cell for "
               "how many sentences had the feature.")
    export_buttons(chart, frame, "cls-by-feature", P + "cls_features_export")


def _dataset_part(refs: list[str], name: str, kind: str, compute, waiting: str):
    """The two dataset studies' shared flow: corpus picker, one job over every model, its result (None until run)."""
    corpus = corpus_picker(P, label="Dataset", n_key=P + "limit", n_label="Examples")
    if corpus is None:
        return None
    inputs = corpus.inputs
    params = (name, tuple(refs), corpus.digest)
    result = shown_results(job_controls(P + name, f"Run over {len(inputs)} examples", params,
                                        lambda: models_work(refs, lambda lm, p, s: compute(lm, inputs, progress=p, should_stop=s)),
                                        kind=kind, unit="examples"))
    if result is None:
        st.info(waiting)
    return result


def _draw(chart, frame, name: str, export_name: str) -> None:
    draw_chart(chart, key=f"{P}{name}_chart")
    export_buttons(chart, frame, export_name, f"{P}{name}_export")


def cls_part(refs: list[str]) -> None:
    intro("Kovaleva et al. (2019) found that in the last layer the [CLS] token, the one the classifier reads, "
          "attends mostly to [SEP] in most tasks, and in some tasks to punctuation as much.",
          "Each bar is one head of the last layer: its [CLS] row split into [CLS], [SEP], punctuation and other "
          "tokens, averaged over the dataset; the models are side by side.")
    result = _dataset_part(refs, "cls", "cls-attention", cls_attention,
                           "Press the button to pass the dataset through the model(s).")
    if result is not None:
        _draw(*charts.cls_chart(result), "cls", "cls-by-token-type")


def aspect_part(refs: list[str]) -> None:
    intro("The fine-tuned-attention blog found, in a BERT fine-tuned on SemEval-14 aspect questions (Sun et al. 2019), "
          "a head (9-8, counted from 0) where the question's aspect word points at that aspect's words in the review, "
          "and heads that look at [SEP] when the review does not mention the aspect.",
          "The first map scores each head by the attention the aspect word pays to the review's aspect terms; the "
          "second shows, for absent aspects, how much of it goes to [SEP].")
    c1, c2 = st.columns(2)
    split = c1.radio("SemEval-14 split", ["test", "train"], key=P + "split", horizontal=True)
    reviews = int(c2.number_input("Reviews (5 questions each)", 10, 3044, step=50, key=P + "reviews"))
    try:
        pairs = semeval_pairs(split, reviews)
    except DataUnavailable as err:
        st.error(markdown_text(err))
        return
    params = ("aspects", tuple(refs), split, reviews)
    result = shown_results(job_controls(P + "aspects", f"Run over {len(pairs)} question–review pairs", params,
                                        lambda: models_work(refs, lambda lm, p, s: aspect_heads(lm, pairs, split=split, progress=p,
                                                                                                should_stop=s)),
                                        kind="aspect-heads", unit="pairs"))
    if result is None:
        st.info("Press the button to score the heads (a run trained on the `absa_qa` task is the blog's setting).")
        return
    chart, frame = charts.aspect_chart(result)
    draw_chart(chart, key=P + "aspect_chart")
    st.caption(" · ".join(f"{markdown_text(display_name(r.model))}: {r.n_present} present aspects scored, {r.n_absent} absent; top "
                          + ", ".join(f"{l}-{h} ({s:.2f})" for l, h, s in r.top_heads(3)) for r in result)
               + ". Scored only where the review names one category, so its aspect terms are that category's.")
    absent, _ = charts.absent_chart(result, "sep")
    draw_chart(absent, key=P + "absent_chart")
    export_buttons(chart, frame, "aspect-heads", P + "aspect_export")
    example_view(refs, pairs, result)


def example_view(refs: list[str], pairs, result) -> None:
    """One pair, one head: the blog's bertviz view as a bar per token (absent aspects: look for [SEP])."""
    st.markdown("**One example**")
    shown = [i for i, p in enumerate(pairs) if not p.present or p.span_words][:200]
    row = st.columns([3, 2, 1, 1])
    index = row[0].selectbox("Pair", shown, key=P + "pair", format_func=lambda i: f"[{pairs[i].label}] "
                             f"{pairs[i].category}: {' '.join(pairs[i].review_words)[:70]}")
    name = display_name_among(refs)
    which = row[1].selectbox("Model", range(len(refs)), key=P + "pair_model", format_func=lambda i: name(refs[i]))
    top = result[which].top_heads(1)[0]
    layers, heads = result[which].span_score.shape
    layer = numbering.index_of(row[2].number_input("Layer", numbering.shown(0), numbering.shown(layers - 1),
                                                   value=numbering.shown(top[0]), key=P + "pair_layer"))
    head = int(row[3].number_input("Head", 0, heads - 1, value=top[1], key=P + "pair_head"))
    chart, frame = charts.aspect_row_chart(aspect_row(cached_model(refs[which]), pairs[index], layer, head))
    draw_chart(chart, key=P + "pair_chart")
    export_buttons(chart, frame, f"aspect-example-{index}", P + "pair_export")


def map_part(refs: list[str]) -> None:
    intro("Clark et al. (2019) found that heads of the same layer behave alike, and that heads group by behaviour "
          "(attending to [CLS], [SEP], the next or previous token, or broadly).",
          "Each point is a head placed so that heads whose attention maps differ little (Jensen–Shannon divergence "
          "over the corpus) sit close; colour is the layer, and hovering shows the head's largest statistic.")
    result = _dataset_part(refs, "map", "head-map", head_map,
                           "Press the button to compute the distances between heads.")
    if result is not None:
        _draw(*charts.head_map_chart(result), "map", "head-map")


def render() -> None:
    st.session_state.setdefault(P + "part", PARTS[0])
    st.session_state.setdefault(P + "source", SNLI)
    st.session_state.setdefault(P + "limit", 100)
    st.session_state.setdefault(P + "tb_limit", 100)
    st.session_state.setdefault(P + "reviews", 100)
    intro("Published studies of attention heads, run on a pretrained model and a fine-tuned one side by side, and "
          "Kovaleva et al.'s labelling of attention maps by hand.",
          "Pick a study, a dataset and press Run; every chart exports as PNG or SVG and its table as CSV.")
    columns = st.columns(len(EXAMPLES))
    for column, (label, settings) in zip(columns, EXAMPLES.items()):
        column.button(label, key=f"{P}example.{label}", on_click=use_example, args=(settings,), width="stretch")
    refs = model_pair()
    if not refs:
        st.info("Choose a model.")
        return
    part = st.segmented_control("Study", PARTS, key=P + "part") or PARTS[0]
    {PARTS[0]: features_part, PARTS[1]: cls_part, PARTS[2]: cls_features_part, PARTS[3]: aspect_part,
     PARTS[4]: map_part, PARTS[5]: pattern_labels.render}[part](refs)
