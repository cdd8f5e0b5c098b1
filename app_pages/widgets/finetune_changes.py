"""What fine-tuning changes: the section of the fine-tuning page that compares a pretrained model with its
fine-tuned runs (call `render()`).

Two parts, after Merchant et al. (2020): representational similarity per layer (RSA and linear CKA, and every
layer against every layer), and a Hewitt & Manning (2019) structural probe per layer (did syntax survive?).
Each pass is a core.jobs job started by its button (progress and Cancel from `job_controls`), so a widget change
never kills a half-done pass. Results stay in st.session_state under "changes.PART.jobstate", next to the
settings they were computed with; trained probes are also cached on disk per (model, layer, treebank).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app_pages.widgets import ask_class
from app_pages.widgets.common import cached_model, draw_chart, export_buttons, intro, job_controls, model_ref
from app_pages.widgets.common import load_error, sidebar_place
from app_pages.widgets.corpus_picker import corpus_picker, keep_parsed
from app_pages.widgets.settings_form import setting_input
from core.charts.finetune import (
    CONTROL,
    MEASURES,
    arcs_chart,
    cross_chart,
    cross_frame,
    probe_chart,
    probe_export_chart,
    probe_frame,
    similarity_chart,
    similarity_frame,
)
from core.data.datasets import DataUnavailable
from core.model.loading import LoadedModel, ModelUnavailable, available_models, display_name, display_name_among
from core.analyses.probe import ProbeData, ProbeResult, ProbeSettings, parse_sentence, probe_data, probe_layers, random_control
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.protocols import describe
from core.references import same_model, get as get_reference
from core.analyses.changes import COMPARE, PROBE
from core.analyses.similarity import Similarity, compare_many
from core.data.treebank import TreebankError, parse_conllu, read_conllu, ud_ewt_path
from core.safe_text import markdown_text

P = "changes."
MAX_WORDS_ON_PAGE = 6000  # the page's cap on words compared: memory grows with its square (the CLI has none)
TREEBANKS = {"ewt": "UD English EWT: train on dev, score on test", "upload": "Upload .conllu"}


# ---- inputs -------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner="Building the random-initialised control…", max_entries=2)
def cached_control(ref: str, seed: int = 0) -> LoadedModel:
    return random_control(cached_model(ref), seed)


@st.cache_data(show_spinner="Reading the treebank…", max_entries=4)
def ewt_data(max_train: int, max_eval: int) -> ProbeData:
    return probe_data(read_conllu(ud_ewt_path("dev")), read_conllu(ud_ewt_path("test")), name="UD English EWT",
                      max_train=max_train, max_eval=max_eval)


def uploaded_data(name: str, raw: bytes, eval_name: str | None, eval_raw: bytes | None, max_train: int, max_eval: int) -> ProbeData:
    """The uploaded treebanks' probe data, in the byte-bounded cache of parsed uploads (not st.cache_data, which
    keeps whole parsed files of any size)."""
    def parse() -> ProbeData:
        train = parse_conllu(raw.decode("utf-8-sig"), source=name)
        evaluation = parse_conllu(eval_raw.decode("utf-8-sig"), source=eval_name) if eval_raw is not None else None
        label = name + (f" / {eval_name}" if eval_name else "")
        return probe_data(train, evaluation, name=label, max_train=max_train, max_eval=max_eval)

    return keep_parsed(("probe treebanks", name, raw, eval_name, eval_raw, max_train, max_eval), parse)


def load_all(refs: list[str]) -> list[LoadedModel] | None:
    loaded = []
    for ref in refs:
        try:
            loaded.append(cached_model(ref))
        except ModelUnavailable as err:
            load_error(err, ref)
            return None
    return loaded


def use_example(kind: str) -> None:
    if kind == "similarity":
        st.session_state[P + "corpus"] = "builtin"
        st.session_state[P + "limit"] = 150
    else:
        st.session_state[P + "treebank"] = "ewt"
        st.session_state[P + "max_train"] = 300
        st.session_state[P + "max_eval"] = 100
        st.session_state[P + "epochs"] = 5
        st.session_state[P + "control"] = True


# ---- the section --------------------------------------------------------------------------------------------
def model_choice() -> tuple[str, list[str]]:
    names = list(dict.fromkeys(n for n in [model_ref(), *(e.name for e in available_models())] if n))
    runs = [e.name for e in available_models() if e.source == "run"]
    st.session_state.setdefault(P + "base", model_ref() if model_ref() in names else (names[0] if names else ""))
    row = st.columns([2, 3])
    base = row[0].selectbox("Pretrained model (A)", names, key=P + "base", accept_new_options=True,
                            format_func=display_name_among(names), help="The model the runs started from.")
    others = [n for n in names if n != base]
    st.session_state.setdefault(P + "others", [r for r in runs if r != base][:3])
    # A choice that is no longer offered (base changed, run deleted) would make the widget fail.
    st.session_state[P + "others"] = [n for n in st.session_state[P + "others"] if n in others]
    compared = row[1].multiselect("Fine-tuned runs or other models (B)", others, key=P + "others",
                                  help="Finished runs appear here by name; any other model can be compared too.")
    if not runs:
        st.caption("No fine-tuned runs yet: start one on this page, or compare any two models.")
    return base or "", list(compared)


def similarity_part(base: str, compared: list[str]) -> None:
    st.markdown("#### Which layers changed: representational similarity")
    st.caption(
        "Each word's vector is its word pieces averaged; special tokens are left out. RSA correlates the two models' "
        "word-by-word cosine-similarity matrices (Merchant et al. 2020); linear CKA (Kornblith et al. 2019) "
        "compares the centred vectors directly. Both are 1 for an unchanged layer."
    )
    st.session_state.setdefault(P + "limit", 200)
    corpus = corpus_picker(P, label="Sentences", default_n=200)
    row = st.columns(4)
    limit = int(row[0].number_input("Sentences read", 10, 5000, step=50, key=P + "limit"))
    # Default, bounds and help from the compare declaration (core.analyses.changes); the page keeps a memory cap.
    max_words = int(setting_input(COMPARE, "max_words", "Words compared", key=P + "max_words", container=row[1],
                                  high=MAX_WORDS_ON_PAGE, step=100))
    seed = int(setting_input(COMPARE, "seed", "Sample seed", key=P + "sample_seed", container=row[2]))
    paper = row[3].toggle("Paper protocol (Merchant)", key=P + "similarity_protocol",
                          help="Words drawn uniformly from all sentences read (Merchant et al. 2020); off: whole "
                          "sentences in a seeded random order.")
    protocol = "merchant" if paper else DEFAULT_PROTOCOL
    st.caption(describe(protocol) if paper else
               "Protocol: BERT Lens. Whole sentences in a seeded random order until the word budget is reached; "
               "RSA and CKA as described above.")
    if corpus is None:
        return
    corpus = corpus.head(limit)
    sentences = list(corpus.sentences)
    st.caption(f"{markdown_text(corpus.name)}: {len(sentences)} sentences.")
    if not compared:
        st.info("Pick at least one model B above to compare with A.")
        return
    params = (base, tuple(compared), corpus.digest, max_words, seed, protocol)

    def make_work():
        models = [cached_model(ref) for ref in (base, *compared)]

        def work(progress, should_stop):
            stage = f"Encoding sentences with {len(models)} models:"
            return compare_many(models[0], models[1:], sentences, max_words=max_words, seed=seed, protocol=protocol,
                                should_stop=should_stop,
                                progress=lambda done, total: progress(done, total, stage))

        return work

    results: list[Similarity] | None = job_controls(P + "similarity", "Compare layers", params, make_work,
                                                    kind="similarity", unit="sentences")
    if results is None:
        return
    first = results[0]
    # Skipped, never cut: compare_many reads only sentences every model reads whole and splits into the same words.
    skipped = (f"; {first.n_skipped} sentences skipped (longer than a model reads, or split into other words by "
               "the tokenizers)" if first.n_skipped else "")
    st.caption(f"Measured on {first.n_words} words from {first.n_sentences} sentences{skipped}; protocol "
               f"{first.protocol}, seed {first.seed}.")
    frame = similarity_frame(results)
    chart = similarity_chart(frame, first.model_a, first.protocol)
    if ask_class.render("finetune", ask_class.changed_layer_questions(results), chart):
        return  # a class question is on screen: the per-layer lines wait for its reveal
    draw_chart(chart, width="stretch")
    export_buttons(chart, frame, "similarity-per-layer", key=P + "export.lines")

    row = st.columns([2, 1])
    chosen = row[0].selectbox("Cross-layer map for", [r.model_b for r in results], key=P + "cross_model")
    measure = row[1].radio("Measure", list(MEASURES), format_func=MEASURES.get, key=P + "cross_measure", horizontal=True)
    result = next(r for r in results if r.model_b == chosen)
    cframe = cross_frame(result, measure)
    heat = cross_chart(cframe, result, measure)
    draw_chart(heat, width="stretch")
    st.caption("A bright diagonal means each layer kept its place; brightness off the diagonal means a layer of B "
               "now looks like another layer of A.")
    export_buttons(heat, cframe, f"cross-layer-{measure}", key=P + "export.cross")


def probe_part(base: str, compared: list[str]) -> None:
    st.markdown("#### Did syntax survive: structural probe")
    st.caption(
        "Per layer, a linear map is trained so that squared distances between projected word vectors match the "
        "number of edges between words in the dependency tree (Hewitt & Manning 2019). UUAS: share of gold tree "
        "edges recovered by the minimum spanning tree of the predicted distances (punctuation left out). DSpr: "
        "Spearman correlation of predicted and gold distances, averaged over sentences of 5 to 50 words."
    )
    paper = st.toggle("Paper protocol (Hewitt & Manning)", key=P + "protocol",
                      help="Full-rank probe (rank = the model's hidden size), early stop after 5 epochs without gain, "
                      "and H&M's punctuation list (PTB tags) in UUAS. Off: BERT Lens's settings below.")
    protocol = "hewitt-manning" if paper else DEFAULT_PROTOCOL
    st.caption(describe(protocol))
    st.session_state.setdefault(P + "treebank", "ewt")
    st.session_state.setdefault(P + "max_train", 1000)
    st.session_state.setdefault(P + "max_eval", 400)
    st.session_state.setdefault(P + "epochs", 10)
    st.session_state.setdefault(P + "rank", 128)
    st.session_state.setdefault(P + "control", True)
    treebank = st.radio("Treebank", list(TREEBANKS), format_func=TREEBANKS.get, key=P + "treebank", horizontal=True)
    row = st.columns(5)
    max_train = int(row[0].number_input("Training sentences", 20, 20000, step=100, key=P + "max_train"))
    max_eval = int(row[1].number_input("Evaluation sentences", 10, 20000, step=100, key=P + "max_eval"))
    # Bounds and help from the probe declaration (core.analyses.changes), within the page's caps.
    rank = int(setting_input(PROBE, "rank", "Probe rank k", key=P + "rank", container=row[2], high=1024, step=16,
                             disabled=paper))
    epochs = int(setting_input(PROBE, "epochs", "Epochs", key=P + "epochs", container=row[3], high=100))
    control = row[4].toggle("Random-init control", key=P + "control", help="The same architecture with random weights: what a probe finds without learned syntax.")
    try:
        if treebank == "ewt":
            data = ewt_data(max_train, max_eval)
        else:
            cols = st.columns(2)
            upload = cols[0].file_uploader("Training treebank (.conllu)", type=["conllu", "txt"], key=P + "tb_upload")
            eval_upload = cols[1].file_uploader("Evaluation treebank (optional)", type=["conllu", "txt"], key=P + "tb_eval_upload")
            if upload is None:
                st.info("Upload a CoNLL-U file; without an evaluation file a seeded fifth of it is held out.")
                return
            data = uploaded_data(upload.name, upload.getvalue(), eval_upload.name if eval_upload else None,
                                 eval_upload.getvalue() if eval_upload else None, max_train, max_eval)
    except (DataUnavailable, TreebankError, ValueError, UnicodeDecodeError) as err:
        st.error(markdown_text(err) if not isinstance(err, UnicodeDecodeError) else "The treebank is not UTF-8 text; save it as UTF-8 and upload again.")
        return
    models = load_all([base, *compared])
    if models is None:
        return
    top = max(m.num_layers for m in models)
    st.session_state.setdefault(P + "layers", list(range(top + 1)))
    st.session_state[P + "layers"] = [layer for layer in st.session_state[P + "layers"] if layer <= top]
    layers = st.multiselect("Layers", list(range(top + 1)), key=P + "layers", help="0 = the input embeddings")
    st.caption(f"{markdown_text(data.name)}: {len(data.train)} training and {len(data.eval)} evaluation sentences.")
    if not layers:
        st.info("Pick at least one layer.")
        return
    entries = [(base, "pretrained", False)] + [(ref, "fine-tuned", False) for ref in compared]
    if control:
        entries.append((base, CONTROL, True))
    # Full rank differs between models of different widths, so each model gets its own settings.
    settings_of = {ref: (ProbeSettings.for_protocol(protocol, m.hidden_size, epochs=epochs) if paper
                         else ProbeSettings(rank=rank, epochs=epochs)) for ref, m in zip([base, *compared], models)}
    params = (tuple(entries), data.digest, tuple(sorted(layers)), tuple(settings_of.items()))

    def make_work():
        loaded = [cached_control(ref) if is_control else cached_model(ref) for ref, _, is_control in entries]

        def work(progress, should_stop):
            out = []
            for k, (lm, (_, kind, _)) in enumerate(zip(loaded, entries)):
                stage = f"Model {k + 1} of {len(entries)} ({lm.ref}), sentences encoded + epochs trained:"
                usable = [layer for layer in sorted(layers) if layer <= lm.num_layers]
                result = probe_layers(lm, data, usable, settings_of[entries[k][0]], should_stop=should_stop,
                                      progress=lambda done, total: progress(done, total, stage))
                out.append((lm.ref, kind, result))
            return data, out, tuple(entries)

        return work

    kept = job_controls(P + "probe", "Train probes", params, make_work, kind="probe", unit="steps",
                        cancelled_note="Cancelled. Probes of layers that had finished are kept on disk.")
    if kept is None:
        return
    kept_data, results, kept_entries = kept
    frame = probe_frame(results)
    # One notice per distinct cut: models sharing a tokenizer (pretrained, fine-tuned, control) read the same one.
    for notice in dict.fromkeys(n for _, _, result in results if (n := result.truncation_notice())):
        st.warning(notice)  # numbers only: safe as Markdown
    shown_protocol = results[0][2].protocol if results else protocol
    reference = get_reference("hewitt-manning.uuas")
    # Drawn by default only where it is a like-for-like number; elsewhere it stays a landmark to switch on.
    st.session_state.setdefault(P + "reference", same_model(base, reference))
    show_reference = st.toggle(
        "Show the Hewitt & Manning reference", key=P + "reference",
        help="bert-base-cased, BERT Lens layer 8 (their 'layer 7': they count encoder layers from 0 without the "
        "embeddings), full-rank probe, Penn Treebank with Stanford Dependencies. Drawn as a target only for "
        "bert-base-cased under the paper protocol; otherwise a grey landmark: compare the shape.")
    charts = [probe_chart(frame, metric, show_reference, model=base, protocol=shown_protocol) for metric in ("UUAS", "DSpr")]
    for chart in charts:  # one under the other: side by side, each plot was ~200 px beside its legend
        draw_chart(chart, width="stretch")
    st.dataframe(frame, hide_index=True, width="stretch")
    export_buttons(probe_export_chart(charts), frame, "structural-probe", key=P + "export.probe")
    sentence_tree(kept_data, results, kept_entries)


def sentence_tree(data: ProbeData, results: list[tuple[str, str, ProbeResult]], entries: tuple) -> None:
    st.markdown("##### One sentence: the probe's tree against the gold tree")
    labels = [f"{r[0]} ({r[1]})" for r in results]
    row = st.columns([3, 2, 1])
    shown = [i for i, s in enumerate(data.eval) if 4 <= len(s) <= 25][:300] or list(range(min(300, len(data.eval))))
    index = row[0].selectbox("Evaluation sentence", shown, key=P + "sentence",
                             format_func=lambda i: f"{len(data.eval[i])} words: {' '.join(data.eval[i].words)[:90]}")
    which = row[1].selectbox("Model", range(len(results)), format_func=lambda i: labels[i], key=P + "tree_model")
    ref, kind, result = results[which]
    layer = row[2].selectbox("Layer", list(result.layers), key=P + "tree_layer",
                             index=int(np.argmax(result.uuas)) if len(result.layers) else 0)
    is_control = entries[which][2]
    lm = cached_control(entries[which][0]) if is_control else cached_model(entries[which][0])
    parse = parse_sentence(lm, result.probe(int(layer)), data.eval[index], result.protocol)
    chart = arcs_chart(parse, f"{display_name(ref)}, layer {layer}: gold tree above, probe's tree below (UUAS {parse.uuas:.2f})")
    draw_chart(chart, width="content")
    edges = pd.DataFrame(
        [{"tree": "gold", "from": i, "to": j, "words": f"{parse.words[i]} — {parse.words[j]}", "correct": True} for i, j in sorted(parse.gold_edges)]
        + [{"tree": "probe", "from": i, "to": j, "words": f"{parse.words[i]} — {parse.words[j]}", "correct": (i, j) in parse.gold_edges}
           for i, j in sorted(parse.predicted_edges)]
    )
    export_buttons(chart, edges, "probe-tree", key=P + "export.tree")


def render() -> None:
    st.subheader("What fine-tuning changes")
    intro(
        "Fine-tuning nudges every layer of a pretrained model, but not equally: this section measures how far each "
        "layer moved (RSA and CKA against the pretrained model) and whether the layers still hold syntax trees.",
        "Pick the pretrained model and one or more fine-tuned runs, then compare their layers on a set of sentences "
        "and train a structural probe per layer; the random-initialised control shows what a probe finds by chance.",
    )
    cols = st.columns(2)
    cols[0].button("Example: layers of the runs on 150 built-in sentences", key=P + "example.similarity",
                   on_click=use_example, args=("similarity",), width="stretch")
    cols[1].button("Example: a quick probe (300 EWT sentences, 5 epochs, with control)", key=P + "example.probe",
                   on_click=use_example, args=("probe",), width="stretch")
    base, compared = model_choice()
    if not base:
        st.info(f"Choose the pretrained model in {sidebar_place()} or above.")
        return
    similarity_part(base, compared)
    st.divider()
    probe_part(base, compared)
