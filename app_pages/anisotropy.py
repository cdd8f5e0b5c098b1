"""Anisotropy by layer (Ethayarajh 2019): how alike word vectors are, for several models on one chart.

The corpus pass is a core.jobs job started by the Run button (progress and Cancel from `job_controls`), so
changing a widget never kills a half-done pass. Profiles are kept per (model, corpus, settings) for every session.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.shell import prefetch
from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, intro, job_controls, job_running, model_ref,
                                      shared_results, warn_if_corpus_cut)
from app_pages.widgets import ask_class
from app_pages.widgets.corpus_picker import corpus_picker
from app_pages.widgets.settings_form import setting_input
from core.analyses import anisotropy as an
from core.charts import anisotropy as anisotropy_charts
from core.data import corpus as corpora
from core import protocols
from core import references as refs
from core.model.loading import availability, display_name
from core.safe_text import markdown_code, markdown_text
from core.views import anisotropy as anisotropy_view

P = "anisotropy."
MEASURE_HELP = {
    "random_cosine": "Mean cosine between two words drawn at random from different sentences. 0 = no shared "
    "direction; high = all vectors crowd into a narrow cone. The adjusted measures subtract it.",
    "exact_cosine": "The same mean over every pair of words from different sentences (no sampling).",
    "self_similarity": "For each word seen in enough sentences: how alike its vectors are across those sentences "
    "(1 = the same vector whatever the context). Averaged over words.",
    "adjusted_self_similarity": "Self-similarity minus the baseline: how much more alike a word is to itself "
    "than to random words. Lower = more context-specific.",
    "intra_sentence": "How close each word is to its sentence's mean vector: do words in one sentence move together?",
    "adjusted_intra_sentence": "Intra-sentence similarity minus the baseline.",
    "top_pc_variance": "BERT Lens's own measure, not the paper's MEV: share of the variance of all words together "
    "that lies along their single most common direction.",
    "mev": "Ethayarajh's maximum explainable variance: for each word, the share of the variance of its vectors "
    "(one per occurrence) on their first principal component, averaged over words. 1 = one static vector would do. "
    "Paper protocol only.",
    "mev_random": "The same share for the sampled random words (one per sampled sentence): the MEV baseline.",
    "adjusted_mev": "MEV minus the random-word MEV, as the paper charts it.",
    "alignment": "Wang & Isola: mean squared distance between the two sides of a positive pair "
    "(entailment / paraphrase), sentence vectors = mean of word vectors. Lower = pairs closer.",
    "uniformity": "Wang & Isola: log of the mean exp(−2·distance²) over every two sentences among those in the "
    "positive pairs (at most 500 pairs, seeded). Lower = sentences spread more evenly over the sphere.",
}


@st.cache_data(show_spinner="Finding the word in the corpus…", max_entries=16)
def cached_drilldown(ref: str, corpus: corpora.Corpus, word: str) -> an.WordDrilldown:
    return an.collect_word(cached_model(ref), corpus, word)


def use_example(source: str, word: str = "", limit: int = 0, measure: str = "random_cosine") -> None:
    st.session_state[P + "source"] = source
    st.session_state[P + "limit"] = limit
    st.session_state[P + "measure"] = measure
    if word:
        st.session_state[P + "word"] = word


st.title("Anisotropy by layer")
intro(
    "Word vectors inside BERT are not spread evenly in every direction: layer by layer they crowd into a narrow "
    "cone, so even unrelated words look alike (Ethayarajh, 2019).",
    "Pick models and a corpus, press Run, and compare how alike random words, the same word in different "
    "sentences, and words of one sentence are at each layer. By default a word is its word pieces averaged; "
    "the paper protocol switch computes everything as Ethayarajh's own code does (WordPiece tokens, his "
    "sampling) and adds MEV.",
)
examples = st.columns(3)
examples[0].button("Built-in sentences", key=P + "ex.builtin", on_click=use_example, args=("Built-in sentences",), width="stretch")
examples[1].button("SNLI pairs: alignment & uniformity", key=P + "ex.snli", on_click=use_example, args=("SNLI", "", 300, "uniformity"), width="stretch")
examples[2].button("One word, many senses: “bank”", key=P + "ex.bank", on_click=use_example, args=("Built-in sentences", "bank"), width="stretch")

# --- models -------------------------------------------------------------------------------------------------
sidebar_model = model_ref()
options = anisotropy_view.model_options(sidebar_model)
st.session_state.setdefault(P + "models", [sidebar_model])
st.session_state[P + "models"] = anisotropy_view.chosen_models(st.session_state[P + "models"], sidebar_model)
checked = {ref: availability(ref) for ref in options}
models = st.multiselect("Models", options, key=P + "models", help="Each model becomes one line on the chart. "
                        "The model you picked, cached downloads, fine-tuned and contrastive runs are offered.",
                        format_func=lambda ref: display_name(ref) if checked[ref].loadable else f"{display_name(ref)} (cannot load now)")
if not models:
    st.info("Pick at least one model to measure.")
    st.stop()
# A model that cannot load now is said here, once, and left out of the run: the others still run.
blocked = [ref for ref in models if not checked[ref].loadable]
for ref in blocked:
    st.warning(markdown_text(checked[ref].reason))
models = [ref for ref in models if checked[ref].loadable]
if not models:
    st.stop()

# --- corpus -------------------------------------------------------------------------------------------------
st.session_state.setdefault(P + "limit", 0)
corpus = corpus_picker(P)
if corpus is None:
    st.stop()

# A smaller corpus than last time: keep the sentence limit inside it rather than fail.
st.session_state[P + "limit"] = min(int(st.session_state.get(P + "limit") or 0), len(corpus))
paper_protocol = st.toggle(
    "Paper protocol (Ethayarajh 2019)", key=P + "paper_protocol",
    help=protocols.describe(an.PAPER_PROTOCOL) + " Adds MEV. Off: BERT Lens's readable protocol, whole words "
    "(word pieces averaged), first occurrence per sentence.",
)
protocol = an.PAPER_PROTOCOL if paper_protocol else protocols.DEFAULT
with st.expander("Settings"):
    cols = st.columns(3)
    limit = cols[0].number_input("Use only the first N sentences (0 = all)", 0, len(corpus), key=P + "limit")
    # Defaults, bounds, choices and help: the analysis's declaration (core.analyses.anisotropy.ANALYSIS).
    n_pairs = setting_input(an.ANALYSIS, "n_pairs", "Random word pairs for the baseline", key=P + "pairs",
                            container=cols[1], step=500)
    seed = setting_input(an.ANALYSIS, "seed", "Seed", key=P + "seed", container=cols[2])
    cols = st.columns(3)
    min_contexts = setting_input(an.ANALYSIS, "min_contexts", "Occurrences a token needs (k)" if paper_protocol else
                                 "Sentences a word needs (k) for self-similarity", key=P + "min_contexts",
                                 container=cols[0])
    include_special = setting_input(an.ANALYSIS, "include_special", "Count [CLS] / [SEP] as words",
                                    key=P + "include_special", container=cols[1], disabled=paper_protocol)
    baseline = setting_input(an.ANALYSIS, "baseline", "Baseline subtracted by the adjusted measures", key=P + "baseline",
                             container=cols[2], format_func={"random": "random pairs (as in the paper)",
                                                             "exact": "all pairs (exact)"}.get)
corpus = corpus.head(int(limit) or None)
settings = anisotropy_view.make_settings(n_pairs=n_pairs, seed=seed, min_contexts=min_contexts, baseline=baseline,
                                         paper_protocol=paper_protocol, include_special=include_special)
request = anisotropy_view.Request(tuple(models), corpus, settings)
st.caption(f"Corpus: **{markdown_text(corpus.name)}**, {len(corpus)} sentences"
           + (f", {len(corpus.pairs)} positive pairs" if corpus.pairs else "") + ".")

store = shared_results(anisotropy_view.VIEW.name)
keys = request.keys()
missing = request.missing(store)


def make_work():
    return anisotropy_view.make_work(request, store, cached_model,
                                     on_load_error=lambda m: st.session_state.__setitem__(P + "load_error", m))


params = request.job_params(store)
prefetch.adopt(anisotropy_view.JOB_KEY, params)  # presenter mode may have started this very pass ahead of the slide
if missing or job_running(anisotropy_view.JOB_KEY):
    label = f"Run on {len(missing)} model{'s' if len(missing) > 1 else ''}" if missing else "Run"
    job_controls(anisotropy_view.JOB_KEY, label, params, make_work, kind=anisotropy_view.KIND, unit=anisotropy_view.UNIT)
message = st.session_state.pop(P + "load_error", None)
if message:
    st.warning(markdown_text(message))

profiles = [p for p in (store.get(keys[ref]) for ref in models) if p is not None]  # one read each: a worker may trim
if not profiles:
    if not message:  # after a load error the next step is that message, not "Press Run"
        st.info("Press **Run** to pass the corpus through the chosen models (nothing is computed until then).")
    st.stop()

# --- results ------------------------------------------------------------------------------------------------
frame = anisotropy_charts.profile_frame(profiles)
available = [m for m in an.MEASURES if m in set(frame["measure"])]
st.session_state.setdefault(P + "measure", "random_cosine")
if st.session_state[P + "measure"] not in available:
    st.session_state[P + "measure"] = "random_cosine"
measure = st.selectbox("Measure", available, key=P + "measure", format_func=an.MEASURES.get)
reference = an.reference_for(measure)
reference_rows = None
if reference is not None:
    judged = an.reference_model_for(reference, [p.model for p in profiles], protocol)
    same = refs.overlay_kind(reference, judged, protocol) == "same"
    # Drawn unasked only beside its own model and protocol; otherwise the reader asks for the shape.
    if same or st.toggle(f"Show Ethayarajh's published curve ({reference.model}, {reference.corpus})", key=P + "reference"):
        reference_rows = anisotropy_charts.reference_frame(reference, judged, protocol)
st.caption(MEASURE_HELP[measure])
chart = anisotropy_charts.layer_chart(frame, measure, reference=reference_rows, protocol=protocol)
if ask_class.render("anisotropy", ask_class.direction_questions(profiles, measure, an.MEASURES[measure]), chart):
    st.stop()  # a class question is on screen: the curve waits for its reveal
draw_chart(chart, key=P + "chart")
st.caption(protocols.describe(protocol))
if reference_rows is not None:
    st.caption(f"Dashed: {refs.overlay_label(reference, judged, protocol)}. Source: {reference.source}. "
               + (f"{reference.note} " if reference.note else "")
               + ("" if same else "Measured on another model, corpus or protocol: compare the shape only."))
paper = protocol == an.PAPER_PROTOCOL
for p in profiles:
    notes = [f"{p.n_sentences} sentences", f"{p.n_tokens} {'WordPiece tokens' if paper else 'words'}",
             f"{p.n_pairs} random pairs" + (f" from {p.n_baseline_sentences} sampled sentences" if paper else ""),
             f"{len(p.words)} {'token' if paper else 'word'} types in ≥ {p.settings.min_contexts} "
             + ("occurrences" if paper else "sentences")]
    if p.n_alignment_pairs:
        notes.append(f"{p.n_alignment_pairs} pairs for alignment")
    st.caption(f"{markdown_code(display_name(p.model))}: " + ", ".join(notes) + ".")
    warn_if_corpus_cut(p)  # under its model's caption: the notice names no model
for p in profiles:
    for warning in p.warnings:  # the profile's own words, as the CLI and the notebook say them
        st.warning(f"{markdown_code(display_name(p.model))}: {markdown_text(warning)}")

table = frame.pivot_table(index=["model", "layer"], columns="measure", values="value", sort=False).reset_index()
table = table[["model", "layer", *[m for m in an.MEASURES if m in table.columns]]]
with st.expander("Table"):
    st.dataframe(table, hide_index=True, column_config={m: st.column_config.NumberColumn(an.MEASURES[m], format="%.3f") for m in an.MEASURES})
export_buttons(chart, table, f"anisotropy_{measure}", key=P + "export")

# Per word: what the paper's code writes for each word (self-similarity, and MEV under its protocol), layer by layer.
words = anisotropy_charts.per_word_frame(profiles)
if not words.empty:
    with st.expander(f"Per word ({words['word'].nunique()} {'token' if paper else 'word'} types)"):
        shown_layer = st.selectbox("Layer", sorted(words["layer"].unique()), key=P + "words_layer",
                                   index=len(words["layer"].unique()) - 1, help="0 = the embeddings")
        at_layer = words[words["layer"] == shown_layer].sort_values("self_similarity", ascending=False)
        st.dataframe(at_layer, hide_index=True, column_config={
            "self_similarity": st.column_config.NumberColumn("self-similarity", format="%.3f"),
            "mev": st.column_config.NumberColumn("MEV", format="%.3f")})
        export_buttons(None, words, "anisotropy_words", key=P + "words_export")

# --- words --------------------------------------------------------------------------------------------------
st.subheader("Words")
by_model = {p.model: p for p in profiles}
pick = st.selectbox("Model for the word views", list(by_model), key=P + "word_model", format_func=display_name) if len(by_model) > 1 else profiles[0].model
profile = by_model[pick]
last = int(profile.layers[-1])
if len(profile.words):
    words = pd.DataFrame({
        "word": profile.words,
        "occurrences" if paper else "sentences": profile.word_contexts,
        "self-similarity, layer 0": profile.word_self_similarity[:, 0],
        f"self-similarity, layer {last}": profile.word_self_similarity[:, last],
    })
    if profile.word_mev is not None:
        words[f"MEV, layer {last}"] = profile.word_mev[:, last]
    words = words.sort_values(f"self-similarity, layer {last}")
    st.caption(f"{'WordPiece token' if paper else 'Word'} types in ≥ {profile.settings.min_contexts} "
               f"{'occurrences' if paper else 'sentences'}, most context-specific at the last layer first.")
    st.dataframe(words, hide_index=True, height=220)

word = st.text_input("Look at one word across its sentences (whole words, first occurrence per sentence)",
                     key=P + "word", placeholder="e.g. bank")
if word.strip():
    try:
        drill = cached_drilldown(pick, corpus, word)
    except ValueError as err:
        st.warning(markdown_text(err))
        st.stop()
    word_frame = anisotropy_charts.word_frame(drill, profile, frame)
    word_chart = anisotropy_charts.layer_chart(word_frame, "self_similarity", title=f"Self-similarity of “{drill.word}” in {len(drill.contexts)} sentences")
    draw_chart(word_chart, key=P + "word_chart")
    cols = st.columns([3, 1])
    context = cols[0].selectbox("Sentence", range(len(drill.contexts)), format_func=lambda i: drill.contexts[i], key=P + "context")
    layer = cols[1].selectbox("Layer", list(profile.layers), index=last, key=P + "word_layer")
    nearest = drill.nearest(int(context), int(layer), k=5)
    near = pd.DataFrame({"nearest sentences (same word)": [drill.contexts[i] for i, _ in nearest],
                         "cosine": [round(c, 3) for _, c in nearest]})
    st.dataframe(near, hide_index=True)
    export_buttons(word_chart, near, f"anisotropy_word_{drill.word}", key=P + "word_export")
