"""Layerwise PCA after VisBERT (van Aken et al. 2019): every token's vector at every layer, drawn in 2-D.

BERT Lens's default is a joint PCA (one plane for all layers, so moving the slider shows real motion); the
"paper protocol" switch gives VisBERT's own: a new PCA per layer, fitted on the input itself."""

from __future__ import annotations

import re

import numpy as np
import streamlit as st

from app_pages.widgets.common import (
    SENTENCE_A_KEY,
    SENTENCE_B_KEY,
    cached_encoding,
    cached_model,
    current_model,
    draw_chart,
    export_buttons,
    intro,
    job_controls,
    model_ref,
    sentences,
    warn_if_corpus_cut,
)
from app_pages.widgets.common import sidebar_place
from app_pages.widgets.player import player
from app_pages.widgets.settings_form import setting_input
from core.data import corpus as corpora
from core.data.datasets import DataUnavailable
from core.model.encoding import run_counting_cuts
from core.data.examples import EXAMPLES
from core.model.loading import ModelUnavailable, available_models, display_name
from core.analyses.projection import (
    ANALYSIS as PCA,
    LayerProjection,
    background_vectors,
    collect_tokens,
    layerwise_projection,
)
from core.charts.pca import projection_frame, scatter, sentence_names, variance_chart
from core.safe_text import markdown_text

PLAY_SECONDS = 1.2
METHOD_NAMES = {"joint": "Joint PCA (all layers)", "per-layer": "PCA per layer (VisBERT)", "tsne": "t-SNE per layer"}
BACKGROUND_NAMES = {"none": "None: fit on these sentences", "builtin": "Built-in sentences (first 100)", "snli": "SNLI (100 dev pairs)"}
COLOUR_NAMES = {"sentence": "Sentence", "segment": "Segment (A/B)", "word": "A chosen word"}
SNLI_PAIRS = 100
# Background choice -> corpus spec; the CLI's `pca --background SPEC --background-size 100` reads the same sentences.
BACKGROUND_SPECS = {"builtin": "builtin", "snli": f"snli:dev:{SNLI_PAIRS}"}
TSNE_SEED = 0

BANK_SENTENCES = re.split(r"(?<=\.)\s+", EXAMPLES["“bank”: river / money / verb"][0])


def load_example(text_a: str, text_b: str | None, extra: str) -> None:
    st.session_state[SENTENCE_A_KEY] = text_a
    st.session_state[SENTENCE_B_KEY] = text_b or ""
    st.session_state["pca.extra"] = extra
    if extra:
        st.session_state["pca.colour"] = "word"
        st.session_state["pca.word"] = "bank"


st.title("Layerwise PCA")
intro(
    "Every word piece becomes a vector of hundreds of numbers at each layer of BERT; this page squeezes those "
    "vectors into two dimensions so you can watch words drift, cluster and separate as the layers go up.",
    f"Type sentences (one in {sidebar_place()}, more below), then move the layer slider or press play; the same word in "
    "different senses, like “bank”, should start together and move apart.",
)

examples = {"“bank” in three senses, one input each": (BANK_SENTENCES[0], None, "\n".join(BANK_SENTENCES[1:]))}
examples.update({label: (a, b, "") for label, (a, b) in EXAMPLES.items()})
for column, (label, args) in zip(st.columns(len(examples)), examples.items()):
    column.button(label, key=f"pca.example.{label}", on_click=load_example, args=args, width="stretch")

st.session_state.setdefault("pca.extra", "")
st.text_area(
    "More sentences, one per line (each is its own input)",
    key="pca.extra",
    height=90,
    placeholder="She went to the bank to deposit her pay.\nYou can bank on him to arrive on time.",
)

text_a, text_b = sentences()
items: list[tuple[str, str | None]] = [(text_a, text_b)] if text_a else []
items += [(line.strip(), None) for line in st.session_state["pca.extra"].splitlines() if line.strip()]
if not items:
    st.info(f"Type a sentence in {sidebar_place()} or below (one per line), or pick an example above.")
    st.stop()

# --- settings shared by both models -------------------------------------------------------------------------
st.session_state.setdefault("pca.method", "joint")
st.session_state.setdefault("pca.colour", "sentence")
st.session_state.setdefault("pca.background", "none")
paper = st.toggle(
    "Paper protocol (VisBERT: a new PCA per layer on your input)", key="pca.protocol",
    help="van Aken et al. (2019) fit a new PCA for every layer on the one input shown. BERT Lens's default is one "
    "joint PCA over all layers, so the axes stay put and layers can be compared.",
)
protocol = "visbert" if paper else "bertlens"
row = st.columns(2)
row += st.columns(2)
method = row[0].segmented_control(
    "Projection", list(METHOD_NAMES), format_func=METHOD_NAMES.get, key="pca.method", disabled=paper,
    help="Joint (BERT Lens's default): one PCA over every layer's vectors, so the axes stay the same as the slider "
    "moves. Per layer (VisBERT's choice): the best plane for each layer, axes not comparable across layers. "
    "t-SNE keeps neighbours, not distances.",
) or "joint"
if paper:
    method = "per-layer"
colour = row[1].segmented_control("Colour by", list(COLOUR_NAMES), format_func=COLOUR_NAMES.get, key="pca.colour") or "sentence"
if paper:
    background = "none"
    row[2].caption("VisBERT fits each layer's PCA on the input itself, so no background corpus.")
elif method == "tsne":
    background = "none"
    row[2].caption(
        "t-SNE starts from the PCA picture with a fixed seed, so the same sentences always give the same map. "
        "It has no fixed map to place new tokens in, so it takes no background corpus."
    )
else:
    background = row[2].selectbox(
        "Fit on a background corpus", list(BACKGROUND_NAMES), format_func=BACKGROUND_NAMES.get, key="pca.background",
        help="Fit the PCA on many ordinary sentences and project yours into that space, instead of letting your "
        "few sentences define the axes.",
    )
toggles = st.columns(3)
hide_special = setting_input(PCA, "hide_special", "Hide special tokens", key="pca.hide_special", container=toggles[0])
hide_punct = setting_input(PCA, "hide_punct", "Hide punctuation", key="pca.hide_punct", container=toggles[1])
show_labels = toggles[2].toggle("Token labels", value=True, key="pca.labels")
others = [e.name for e in available_models() if e.name != model_ref() and str(e.path) != model_ref()]
second_ref = row[3].selectbox(
    "Second model, side by side", ["", *others], key="pca.second_model", accept_new_options=True,
    format_func=lambda name: name or "none", help="e.g. the pretrained model next to a fine-tuned run",
)


# --- model runs and projections (cached: moving the slider recomputes nothing) ------------------------------
def encode_background(ref: str, source: str, keep_special: bool, keep_punct: bool) -> np.ndarray | None:
    """Background vectors from a core.jobs job that starts by itself (progress and Cancel shown); None until
    they are ready, and the projection is fitted on the user's sentences meanwhile."""
    try:
        texts = list(corpora.resolve(BACKGROUND_SPECS[source]).take(SNLI_PAIRS).sentences)
    except (DataUnavailable, corpora.CorpusError) as err:
        st.warning(f"SNLI is not available, so the projection is fitted on your sentences. {markdown_text(err)}")
        return None

    def make_work():
        lm = cached_model(ref)
        stage = f"Background for {display_name(ref)}:"
        return lambda progress, should_stop: run_counting_cuts(lambda: background_vectors(  # with its cuts
            lm, texts, keep_special=keep_special, keep_punct=keep_punct, should_stop=should_stop,
            progress=lambda done, total: progress(done, total, stage)))

    params = (ref, source, keep_special, keep_punct)
    kept = job_controls(f"pca.background.{ref}", f"Encode {len(texts)} background sentences", params, make_work,
                        kind="pca-background", unit="sentences", autostart=True, hide_stale=True)
    if kept is None:
        st.caption("Until the background corpus is encoded, the projection is fitted on your sentences.")
        return None
    warn_if_corpus_cut(kept)
    return kept.value


@st.cache_data(show_spinner="Projecting the layers…", max_entries=16)
def cached_projection(
    ref: str,
    inputs: tuple[tuple[str, str | None], ...],
    method: str,
    keep_special: bool,
    keep_punct: bool,
    background_key: str,
    seed: int,
    _background: np.ndarray | None,
    protocol: str = "bertlens",
) -> LayerProjection:
    """One projection per (model, inputs, settings); the background array is keyed by background_key."""
    encodings = [cached_encoding(ref, a, b) for a, b in inputs]
    tokens = collect_tokens(encodings, keep_special=keep_special, keep_punct=keep_punct)
    return layerwise_projection(tokens, method, protocol=protocol, background=_background, seed=seed)


def projection_for(ref: str) -> LayerProjection:
    truncated = [i for i, (a, b) in enumerate(items) if cached_encoding(ref, a, b).truncated]
    if truncated:
        st.warning(f"Input {', '.join(map(str, truncated))} is longer than {markdown_text(display_name(ref))} reads: its end was cut off.")
    vectors = None
    if background != "none":
        vectors = encode_background(ref, background, not hide_special, not hide_punct)
    key = background if vectors is not None else "none"
    return cached_projection(ref, tuple(items), method, not hide_special, not hide_punct, key, TSNE_SEED, vectors, protocol)


current_model()  # shows the loading error and stops the page if the sidebar's model is unavailable
try:
    projections = {model_ref(): projection_for(model_ref())}
except ValueError as err:
    st.error(markdown_text(err))
    st.stop()
if second_ref:
    try:
        projections[second_ref] = projection_for(second_ref)
    except (ModelUnavailable, ValueError) as err:
        st.error(f"Second model: {markdown_text(err)}")


# --- drawing --------------------------------------------------------------------------------------------------
def variance_note(projection: LayerProjection, layer: int) -> str:
    fitted_on = f"{projection.n_fit} background token vectors per layer" if projection.background else "these tokens"
    if projection.method == "tsne":
        return "t-SNE has no explained variance: distances between far-apart groups mean little; neighbours do."
    a, b = projection.explained_variance_ratio[layer]
    if projection.method == "joint":
        ja, jb = projection.joint_explained_variance_ratio
        return (
            f"Layer {layer}: the two shared axes hold {a:.0%} + {b:.0%} = {a + b:.0%} of this layer's variance "
            f"(fitted on {fitted_on}, all layers pooled; over all layers together: {ja:.0%} + {jb:.0%})."
        )
    return f"Layer {layer}: PC 1 and PC 2 explain {a:.0%} + {b:.0%} = {a + b:.0%} of this layer's variance (fitted on {fitted_on})."


main_projection = projections[model_ref()]
word_list = [
    w.lower() for w, special, punct in zip(main_projection.word, main_projection.is_special, main_projection.is_punct)
    if w and not special and not punct
]
words_seen = list(dict.fromkeys(word_list))
chosen_word = None
if colour == "word" and words_seen:
    if st.session_state.get("pca.word") not in words_seen:
        repeated = [w for w in words_seen if word_list.count(w) > 1]
        st.session_state["pca.word"] = "bank" if "bank" in words_seen else (repeated or words_seen)[0]
    chosen_word = st.selectbox("Word to highlight", words_seen, key="pca.word")

n_layers = max(len(p.layers) for p in projections.values())
st.session_state.setdefault("pca.layer", 0)
st.session_state["pca.layer"] = min(st.session_state["pca.layer"], n_layers - 1)


def layer_view(layer: int) -> None:
    """The charts and exports of one layer (the player below shows the next one while playing)."""
    columns = st.columns(len(projections))
    for index, (column, (ref, projection)) in enumerate(zip(columns, projections.items())):
        shown_layer = min(layer, len(projection.layers) - 1)
        name = display_name(ref)
        note = "" if shown_layer == layer else f" (its last layer; it has {len(projection.layers) - 1})"
        with column:
            chart, _ = scatter(projection, shown_layer, f"{name}, layer {shown_layer}{note}", names=sentence_names(items),
                               colour=colour, chosen_word=chosen_word, show_labels=show_labels, columns=len(columns))
            draw_chart(chart, key=f"pca.chart.{index}")
            st.caption(variance_note(projection, shown_layer))
            if projection.method != "tsne":
                draw_chart(variance_chart(projection, shown_layer, columns=len(columns)), key=f"pca.variance.{index}")
            export_buttons(chart, projection_frame(projection), f"pca_{name}_{projection.method}_L{shown_layer}", key=f"pca.export.{index}")


player("pca.", "pca.layer", lambda: range(n_layers),
       lambda column: column.slider("Layer (0 = embeddings)", 0, n_layers - 1, key="pca.layer"), layer_view,
       seconds=PLAY_SECONDS)
st.caption(
    "Each point is one word piece; its position comes from the layer's vectors through the projection above. "
    "The CSV holds every layer's coordinates. Command line: `python -m core pca --model M --text \"…\" --json`."
)
