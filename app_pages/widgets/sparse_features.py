"""Read the layers: the Sparse features tab (call `render()`).

Pick a saved sparse autoencoder of the sidebar's model, or train one (a core.jobs job with progress and Cancel; a
cancelled training keeps its state and resumes when started again under the same name). Then the features firing
on the sidebar's sentence, one feature over a corpus (top contexts, activation histogram, its words through the
masked-word head) and the features whose firing rate changes most in a fine-tuned run
(core.analyses.sparse_features; charts in core.charts.sparse_features).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, intro, job_controls, model_or_error,
                                      model_ref, sentences, warn_if_truncated)
from app_pages.widgets.common import sidebar_place
from app_pages.widgets.corpus_picker import corpus_picker
from core.analyses import sparse_features as sf
from core.data.sources import SNLI
from core.charts import sparse_features as charts
from core.model.artefacts import list_artefacts
from core.model.encoding import read_input
from core.model.loading import ModelUnavailable, available_models, display_name, display_name_among
from core.safe_text import markdown_text

P = "features."
SHOWN = 15  # features drawn on the sentence


@st.cache_resource(show_spinner="Reading the autoencoder…", max_entries=4)
def cached_sae(name: str, version: float) -> sf.SparseAutoencoder:  # version: the file's mtime, a retrained SAE
    return sf.load_sae(name)


def sae_version(name: str) -> float:
    found = [a for a in list_artefacts("sae") if a.name == name]
    return (Path(found[0].path) / sf.WEIGHTS).stat().st_mtime if found else 0.0


@st.cache_data(show_spinner="Reading the features on your sentence…", max_entries=16)
def cached_sentence(name: str, version: float, ref: str, text_a: str, text_b: str | None) -> sf.SentenceFeatures:
    return sf.sentence_features(cached_sae(name, version), cached_model(ref), text_a, text_b)


def render() -> None:
    intro("A sparse autoencoder rewrites each token's vector at one layer as a few active 'features' out of "
          "thousands, each a direction that tends to mean one thing, which is easier to read than the raw numbers.",
          "Pick or train an autoencoder for the model you picked, see which features fire on your sentence, read one "
          "feature's top contexts, histogram and words, and find the features that fine-tuning changed most.")
    lm = model_or_error()
    if lm is None:
        return
    ref = model_ref()
    saes = list_artefacts("sae")
    train_part(ref, lm, expanded=not saes)
    saes = list_artefacts("sae")
    if not saes:
        st.info("No sparse autoencoder is saved yet: train one above (or `python -m core sae-train ...`).")
        return
    names = [a.name for a in saes]
    if st.session_state.get(P + "sae") not in names:
        mine = [a.name for a in saes if sf.same_folder(lm, a.model)]
        st.session_state[P + "sae"] = (mine or names)[0]
    models = {a.name: a.model for a in saes}
    name = st.selectbox("Autoencoder", names, key=P + "sae",
                        format_func=lambda n: f"{n} ({display_name(models[n])})")
    sae = cached_sae(name, sae_version(name))
    try:
        sf.check_model(sae, lm)
    except sf.SaeError as err:
        st.error(markdown_text(err))
        return
    st.caption(f"Layer {sae.layer} (0 = embeddings), {sae.F:,} features, k = {sae.k} active per token, "
               f"{sae.d} dimensions.")
    top_feature = sentence_part(name, ref)
    feature_part(sae, name, ref, lm, top_feature)


def train_part(ref: str, lm, expanded: bool) -> None:
    with st.expander("Train a new autoencoder", expanded=expanded, icon=":material/model_training:"):
        st.caption("A TopK sparse autoencoder (Gao et al. 2024) on one layer's vectors at every word piece of the "
                   "corpus; a tenth of the sentences is kept aside to measure how well it reconstructs them.")
        # SNLI's training split by default: the built-in sentences are too few for the quality bar (issue 47).
        st.session_state.setdefault(P + "train.source", SNLI)
        st.session_state.setdefault(P + "train.split", "train")
        corpus = corpus_picker(P + "train.", label="Training sentences", default_n=sf.DEFAULT_PAIRS)
        row = st.columns(5)
        st.session_state.setdefault(P + "train.layer", min(lm.num_layers, max(1, 2 * lm.num_layers // 3)))
        layer = int(row[0].number_input("Layer", 0, lm.num_layers, key=P + "train.layer"))
        features = int(row[1].number_input("Features (F)", 16, 65536, value=8 * lm.hidden_size, step=64,
                                           key=P + "train.features", help="8 × the model's width is a common choice"))
        k = int(row[2].number_input("Active per token (k)", 1, 256, value=32, key=P + "train.k"))
        steps = int(row[3].number_input("Steps", 10, 100_000, value=sf.DEFAULT_STEPS, step=50, key=P + "train.steps",
                                        help="Adam steps of 1,024 tokens each"))
        out = row[4].text_input("Save as", value=f"{display_name(ref)}-l{layer}-{features}", key=P + "train.name")
        if corpus is None:
            return
        try:
            sf.check_name(out)
            sf.TrainSettings(features=features, k=k).check()
        except sf.SaeError as err:
            st.error(markdown_text(err))
            return
        settings = sf.TrainSettings(features=features, k=k, steps=steps)
        params = (ref, corpus.digest, layer, features, k, steps, out)
        sentences_ = list(corpus.sentences)

        def make_work():
            model = cached_model(ref)
            return lambda progress, should_stop: sf.train_sae(model, sentences_, layer, settings, out,
                                                              corpus=corpus.name, progress=progress,
                                                              should_stop=should_stop)

        trained = job_controls(P + "train", "Train the autoencoder", params, make_work, kind="sae-train",
                               unit="steps", cancelled_note="Cancelled: the training state is kept; start it again "
                               "with the same name to resume.")
        if trained is not None:
            q = trained.quality
            st.success(markdown_text(f"Saved {trained.name}: on {q.n_tokens:,} held-out word pieces it explains "
                                     f"{q.fve:.1%} of the variance; {q.dead_fraction:.1%} of the features never "
                                     f"fire there ({trained.steps} steps, {trained.seconds:.0f} s)."))
            if q.warning:
                st.warning(markdown_text(q.warning), icon=":material/warning:")


def sentence_part(name: str, ref: str) -> int | None:
    """The features on the sidebar's sentence; returns the one with the largest activation."""
    st.markdown("#### Features on your sentence")
    text_a, text_b = sentences()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} to see which features fire on it.")
        return None
    warn_if_truncated(read_input(cached_model(ref), text_a, text_b))
    found = cached_sentence(name, sae_version(name), ref, text_a, text_b)
    st.caption(f"{len(found.features)} features fire somewhere in the sentence; the {min(SHOWN, len(found.features))} "
               f"with the largest activation are drawn. The autoencoder reconstructs "
               f"{found.reconstruction_fve:.1%} of these vectors' variance.")
    chart = charts.sentence_chart(found, SHOWN)
    draw_chart(chart)
    export_buttons(chart, charts.sentence_frame(found, SHOWN), f"features-{name}-sentence", P + "sentence_export")
    return int(found.features[0]) if len(found.features) else None


def atlas_job(key: str, sae: sf.SparseAutoencoder, name: str, ref: str, corpus, same_model: bool = True):
    def make_work():
        model = cached_model(ref)
        return lambda progress, should_stop: sf.feature_atlas(
            sae, model, list(corpus.sentences), corpus=corpus.name, digest=corpus.digest, same_model=same_model,
            progress=progress, should_stop=should_stop)

    return job_controls(P + key, f"Read the features of {display_name(ref)} over the corpus",
                        (name, sae_version(name), ref, corpus.digest), make_work, kind="sae-atlas", unit="sentences",
                        hide_stale=True)


def feature_part(sae: sf.SparseAutoencoder, name: str, ref: str, lm, top_feature: int | None) -> None:
    st.markdown("#### One feature over a corpus")
    corpus = corpus_picker(P, label="Corpus", default_n=300)
    if corpus is None:
        return
    atlas = atlas_job("atlas", sae, name, ref, corpus)
    if atlas is None:
        st.caption("One pass encodes the corpus and keeps each feature's firing rate, top contexts and activations.")
        return
    st.caption(f"{sae.F:,} features over {atlas.n_tokens:,} word pieces of {markdown_text(atlas.corpus)}; "
               f"{(atlas.firing_rate == 0).mean():.1%} never fire on it.")
    if st.session_state.get(P + "feature") is None or not 0 <= int(st.session_state[P + "feature"]) < sae.F:
        st.session_state[P + "feature"] = top_feature if top_feature is not None else int(atlas.by_firing()[0])
    feature = int(st.number_input(f"Feature (0–{sae.F - 1}; the strongest on your sentence: {top_feature})", 0,
                                  sae.F - 1, key=P + "feature"))
    if not len(atlas.contexts(feature)):
        st.info(f"Feature {feature} does not fire on this corpus: pick another, or a larger corpus.")
    else:
        contexts = charts.contexts_chart(atlas, feature)
        draw_chart(contexts)
        export_buttons(contexts, charts.contexts_frame(atlas, feature), f"feature-{feature}-contexts",
                       P + "contexts_export")
        histogram = atlas.histogram(feature)
        hist_chart = charts.histogram_chart(histogram)
        draw_chart(hist_chart)
        export_buttons(hist_chart, charts.histogram_frame(histogram), f"feature-{feature}-histogram",
                       P + "histogram_export")
    lens_part(sae, feature, lm)
    change_part(sae, name, ref, corpus, atlas)


def lens_part(sae: sf.SparseAutoencoder, feature: int, lm) -> None:
    # A weak fitted head (under 1.5× the best constant guess) last: its words would read every feature as one word.
    heads = [e.name for e in sorted(available_models(), key=lambda e: bool(e.warning))
             if e.source == "fitted-head" and sf.same_folder(lm, e.fitted_on)]
    head_ref = lm.ref if lm.masked_lm is not None else (heads[0] if heads else None)
    if head_ref is None:
        st.info(f"{markdown_text(display_name(lm.ref))} has no masked-word head, so a feature's direction cannot "
                "be read as words: fit one with fit-mlm-head (below, or on the Lens tab), then come back.")
        st.code(f"python -m core fit-mlm-head --model {lm.ref} --corpus snli --out NAME", language="bash")
        return
    try:
        lens = sf.lens_tokens(sae, cached_model(head_ref), feature)
    except (sf.SaeError, ModelUnavailable) as err:
        st.error(markdown_text(err))
        return
    chart = charts.lens_chart(lens)
    draw_chart(chart)
    export_buttons(chart, charts.lens_frame(lens), f"feature-{feature}-lens", P + "lens_export")


def change_part(sae: sf.SparseAutoencoder, name: str, ref: str, corpus, atlas: sf.FeatureAtlas) -> None:
    st.markdown("#### What fine-tuning changed")
    names = [e.name for e in available_models() if e.name != ref and e.source != "fitted-head"]
    runs = [e.name for e in available_models() if e.source == "run" and e.name != ref]
    if not names:
        st.info("No other model to compare with: fine-tune a run on the Fine-tuning comparison page first.")
        return
    if st.session_state.get(P + "b") not in names:
        st.session_state[P + "b"] = (runs or names)[0]
    other = st.selectbox("Fine-tuned model (B)", names, key=P + "b", format_func=display_name_among(names),
                         help="A run fine-tuned from the model you picked: the same autoencoder reads its vectors "
                              "of the same layer over the same corpus.")
    try:
        sf.check_model(sae, cached_model(other), same_model=False)
    except (sf.SaeError, ModelUnavailable) as err:
        st.error(markdown_text(err))
        return
    other_atlas = atlas_job("atlas_b", sae, name, other, corpus, same_model=False)
    if other_atlas is None:
        return
    change = sf.firing_change(atlas, other_atlas)
    chart = charts.change_chart(change)
    draw_chart(chart)
    export_buttons(chart, charts.change_frame(change), f"features-{name}-firing-change", P + "change_export")
