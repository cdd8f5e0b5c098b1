"""Dataset explorer: a projector over a whole corpus with slices (after LIT), and nearest contexts of a word in
a corpus (after exBERT)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.widgets.common import (
    SENTENCE_A_KEY,
    SENTENCE_B_KEY,
    cached_encoding,
    cached_model,
    draw_chart,
    export_buttons,
    intro,
    job_controls,
    model_ref,
    sentences,
    warn_if_corpus_cut,
    warn_if_truncated,
)
from app_pages.widgets.common import load_error, sidebar_place
from app_pages.widgets.corpus_picker import parsed_upload
from app_pages.widgets.explain_view import cached_explainer
from app_pages.widgets.settings_form import setting_input
from core.data import corpus as corpora
from core.analyses import explorer as ex
from core.analyses import vector_index as vi
from core.charts import explorer as charts
from core.data.datasets import DataUnavailable
from core.model.loading import ModelUnavailable, available_models, display_name
from core.safe_text import markdown_text
from core.views import explorer as explorer_view

SOURCES = {"snli:dev": "SNLI dev", "snli:test": "SNLI test", "mrpc:validation": "MRPC dev", "mrpc:test": "MRPC test",
           "ud:dev": "UD EWT dev", "builtin": "Built-in sentences", "upload": "Upload a .csv / .jsonl / .txt"}
NEIGHBOUR_SOURCES = {"ud:dev": "UD EWT dev (POS and relations)", "builtin": "Built-in sentences", "snli:dev": "SNLI dev"}
PAGES = {"attention": "app_pages/attention.py", "explain": "app_pages/explain.py"}
P = "explorer."


def set_state(values: dict) -> None:
    for key, value in values.items():
        st.session_state[key] = value


def open_example(text_a: str, text_b: str | None, page: str) -> None:
    """Button callback: the example becomes the sidebar's sentences (so the URL carries it), then the page opens."""
    st.session_state[SENTENCE_A_KEY] = text_a
    st.session_state[SENTENCE_B_KEY] = text_b or ""
    st.session_state[P + "goto"] = PAGES[page]


if st.session_state.get(P + "goto"):
    # switch_page clears the URL's query; the router has just written model and sentences into it, so pass them on.
    st.switch_page(st.session_state.pop(P + "goto"), query_params=st.query_params.to_dict())

st.title("Dataset explorer")
intro(
    "Every example of a dataset becomes one point — its [CLS] or averaged vector at a layer, squeezed to 2-D — so "
    "you can see where the model puts whole groups of sentences and where it goes wrong; a second tab finds the "
    "places in a corpus where the model treats a word most like it treats your word.",
    "Pick a dataset and press Run, colour the points by label or prediction, drag a box to select some, and save "
    "the selection as a slice to compare its accuracy with the rest.",
)
TABS = explorer_view.TAB_TITLES  # the view's tabs (core.views.explorer.TABS, each with its analysis)
row = st.columns(3)
row[0].button("SNLI dev, 200 pairs, last layer", key=P + "ex.snli", width="stretch", on_click=set_state,
              args=({P + "source": "snli:dev", P + "n": 200, P + "method": "pca", P + "pooling": "cls"},))
row[1].button("UD EWT: sentence length, mean vectors", key=P + "ex.ud", width="stretch", on_click=set_state,
              args=({P + "source": "ud:dev", P + "n": 200, P + "pooling": "mean", P + "colour": "sentence length"},))
row[2].button("Nearest contexts of “bank”", key=P + "ex.bank", width="stretch", on_click=set_state,
              args=({P + "tab": TABS[1], SENTENCE_A_KEY: "She sat on the bank of the river and watched the water.", SENTENCE_B_KEY: "",
                     P + "word": "bank", P + "nsource": "builtin"},))

# A keyed switch, not st.tabs: tabs keep no state, so the rerun after a job finished reopened the first one and hid
# the index just built on the second (issue 37); the key also puts the open tab in the URL (core.views).
tab = st.segmented_control("View", TABS, key=P + "tab", label_visibility="collapsed") or TABS[0]


@st.cache_data(show_spinner="Reading the dataset…", max_entries=8)
def cached_examples(spec: str) -> ex.Examples:
    return ex.load_examples(spec)


def pick_examples() -> ex.Examples | None:
    st.session_state.setdefault(P + "source", "snli:dev")
    st.session_state.setdefault(P + "n", 300)
    cols = st.columns([2, 1])
    source = cols[0].selectbox("Dataset", list(SOURCES), format_func=SOURCES.get, key=P + "source")
    try:
        if source == "upload":
            upload = st.file_uploader("A .csv or .jsonl with a text column (a `label` column gives gold labels, "
                                      "other columns become colourings), or a .txt", type=["csv", "jsonl", "txt"],
                                      key=P + "upload")
            if upload is None:
                st.info("Upload a file to explore it, or pick a dataset.")
                return None
            return parsed_upload(upload.name, upload.getvalue(), ex.examples_from_upload)
        if source == "builtin":
            return cached_examples("builtin")
        n = cols[1].number_input("Examples (seeded sample)", 10, 5000, step=50, key=P + "n")
        return cached_examples(f"{source}:{int(n)}")
    except (corpora.CorpusError, DataUnavailable, ValueError) as err:
        st.error(markdown_text(err))
        return None


def model_run(ref: str, examples: ex.Examples, layer: int, method: str, pooling: str, label: str):
    """The projection of one model, a core.jobs job (progress, Cancel)."""

    def make_work():
        explainer = cached_explainer(ref)
        return lambda progress, should_stop: ex.explore(
            explainer.lm, examples, min(layer, explainer.lm.num_layers), method, pooling, explainer=explainer,
            progress=lambda d, t: progress(d, t, f"{label}:"), should_stop=should_stop)

    params = (ref, examples.name, len(examples), hash(examples.items), layer, method, pooling)
    return job_controls(f"{P}run.{ref}", f"Run {markdown_text(label)}", params, make_work, kind="explorer-project", unit="steps")


def selected_ids(event, frame: pd.DataFrame) -> list[int]:
    """Example ids inside the dragged box (Streamlit returns the box's x and y ranges)."""
    box = (event or {}).get("selection", {}).get(charts.SELECTION) if event else None
    if not box or "x" not in box or "y" not in box:
        return []
    (x0, x1), (y0, y1) = sorted(box["x"]), sorted(box["y"])
    inside = frame["x"].between(x0, x1) & frame["y"].between(y0, y1)
    return frame.loc[inside, "id"].astype(int).tolist()


if tab == TABS[0]:
    examples = pick_examples()
    ref = model_ref()
    if examples is not None:
        try:
            lm = cached_model(ref)
        except ModelUnavailable as err:
            load_error(err)
            st.stop()
        cols = st.columns(4)
        st.session_state.setdefault(P + "layer", lm.num_layers)
        layer = cols[0].slider("Layer (0 = embeddings)", 0, lm.num_layers, key=P + "layer")
        # Choices, defaults and help from the declaration (ProjectSettings), as the CLI's and core.lens's.
        pooling = setting_input(ex.ANALYSIS, "pooling", "Vector", key=P + "pooling", container=cols[1],
                                widget="segmented", format_func={"cls": "[CLS]", "mean": "Mean of pieces"}.get,
                                ) or ex.ANALYSIS.field("pooling").default
        method = setting_input(ex.ANALYSIS, "method", "Projection", key=P + "method", container=cols[2],
                               widget="segmented", format_func=ex.METHOD_NAMES.get) or ex.ANALYSIS.field("method").default
        others = [e.name for e in available_models() if e.name != ref]
        second = cols[3].selectbox("Second model, side by side", ["", *others], key=P + "second",
                                   accept_new_options=True, format_func=lambda n: n or "none",
                                   help="e.g. the pretrained model next to a fine-tuned run, on the same examples")
        refs = [ref] + ([second] if second else [])
        run_cols = st.columns(len(refs))
        results = {}
        for col, r in zip(run_cols, refs):
            with col:
                results[r] = model_run(r, examples, layer, method, pooling, "this model" if r == ref else display_name(r))
        if examples.labels is None:
            st.caption("This corpus has no gold labels, so the label colourings and accuracies are hidden.")
        first = next((r for r in results.values() if r is not None), None)
        if first is not None:
            has_pred = any(r is not None and r.predictions is not None for r in results.values())
            options = ex.colourings(examples.labels is not None, has_pred, list(examples.columns),
                                    examples.agreement is not None)
            if st.session_state.get(P + "colour") not in options:
                st.session_state[P + "colour"] = options[0]
            cols = st.columns([1, 2])
            colour = cols[0].selectbox("Colour by", options, key=P + "colour")
            words = cols[1].text_input("Words for the 'contains words' colouring (a bias slice)", "he, him, his",
                                       key=P + "words").split(",")
            if not has_pred:
                st.caption("No classifier head on this model: predicted label, confidence and correct / wrong need a "
                           "fine-tuned classification run.")
            chart_cols = st.columns(len(refs))
            frames, selections = {}, {}
            for col, r in zip(chart_cols, refs):
                res = results.get(r)
                if res is None:
                    continue
                frame = charts.points_frame(res, examples, words)
                frames[r] = frame
                use = colour if colour in frame.columns else "sentence length"
                chart = charts.scatter(frame, use, f"{r}: layer {res.layer}, {ex.METHOD_NAMES[res.method]}")
                with col:
                    event = draw_chart(chart, on_select="rerun", key=f"{P}chart.{r}", width="stretch")
                    if res.explained_variance_ratio is not None:
                        st.caption(f"The two axes hold {res.explained_variance_ratio.sum():.0%} of the variance.")
                    warn_if_corpus_cut(res)
                    export_buttons(chart, frame, f"explorer-{res.method}-layer{res.layer}", f"{P}export.{r}")
                selections[r] = selected_ids(event, frame)
            chosen = sorted(set().union(*selections.values())) if selections else []
            main_frame = frames.get(ref, next(iter(frames.values())))
            st.subheader(f"Selection: {len(chosen)} examples")
            if not chosen:
                st.caption("Drag a box over points on a chart to select examples.")
            else:
                table = main_frame.set_index("id").loc[chosen].drop(columns=["x", "y"]).reset_index()
                st.dataframe(table, hide_index=True, key=P + "table")
                cols = st.columns([2, 1])
                name = cols[0].text_input("Slice name", f"slice {len(st.session_state.get(P + 'slices', {})) + 1}",
                                          key=P + "slice_name")
                if cols[1].button("Save as slice", key=P + "save_slice"):
                    st.session_state.setdefault(P + "slices", {})[name.strip() or "slice"] = chosen
                pick = st.selectbox("Open one example", chosen, key=P + "open",
                                    format_func=lambda i: f"{i}: {examples.texts[i][:100]}")
                item = examples.items[pick]
                a, b = (item, None) if isinstance(item, str) else item
                cols = st.columns(2)
                cols[0].button("Open in Attention heads", key=P + "open.attention", on_click=open_example,
                               args=(a, b, "attention"))
                cols[1].button("Open in Why this prediction?", key=P + "open.explain", on_click=open_example,
                               args=(a, b, "explain"))
            if examples.agreement is not None and st.button(
                    "Add annotator-agreement slices", key=P + "agreement_slices", icon=":material/groups:",
                    help="One slice per level of agreement among the dataset's annotators (SNLI: 5, 4 or 3 of 5 "
                    "chose the gold label): models err more where people disagree."):
                st.session_state.setdefault(P + "slices", {}).update(ex.agreement_slices(examples.agreement))
            slices = st.session_state.get(P + "slices", {})
            if slices:
                st.subheader("Slices")
                for r, res in results.items():
                    if res is None:
                        continue
                    correct = (ex.correct_mask(res.labels, res.predictions.predicted)
                               if res.labels is not None and res.predictions is not None else None)
                    for sname, ids in slices.items():
                        comparison = ex.compare_slice(sname, ids, correct, len(res.ids))
                        if correct is None:
                            st.write(f"**{markdown_text(sname)}**: {comparison.n_in} examples, {comparison.n_out} in the rest "
                                     f"(no accuracy: {'no gold labels' if res.labels is None else 'no classifier head'}).")
                        else:
                            st.markdown(f"**{markdown_text(sname)}** — {markdown_text(r)}")
                            chart = charts.slice_chart(comparison)
                            draw_chart(chart, width="stretch")
                            export_buttons(chart, charts.slice_frame(comparison), f"slice-{sname}", f"{P}slice.{r}.{sname}")


@st.cache_resource(show_spinner="Opening the index…", max_entries=4)
def open_index(folder: str) -> vi.TokenIndex:
    return vi.TokenIndex(folder)


if tab == TABS[1]:
    text_a, text_b = sentences()
    ref = model_ref()
    if not text_a:
        st.info(f"Type a sentence in {sidebar_place()} (or press “Nearest contexts of “bank”” above), then pick one of its words.")
    else:
        try:
            lm = cached_model(ref)
            encoding = cached_encoding(ref, text_a, text_b)
        except ModelUnavailable as err:
            load_error(err)
            st.stop()
        except ValueError as err:
            st.error(markdown_text(err))
            st.stop()
        warn_if_truncated(encoding)
        words = list(encoding.words)
        st.session_state.setdefault(P + "nsource", "ud:dev")
        if st.session_state.get(P + "word") not in words:
            st.session_state[P + "word"] = words[0]
        cols = st.columns(4)
        word = cols[0].selectbox("Word", words, key=P + "word")
        st.session_state.setdefault(P + "nlayer", lm.num_layers)
        nlayer = cols[1].slider("Layer", 0, lm.num_layers, key=P + "nlayer")
        k = setting_input(vi.ANALYSIS, "k", "Neighbours (k)", key=P + "k", container=cols[2])
        nsource = cols[3].selectbox("Corpus", list(NEIGHBOUR_SOURCES), format_func=NEIGHBOUR_SOURCES.get, key=P + "nsource")
        n = st.number_input("Sentences to index (seeded sample)", 50, 20000, 500, step=100, key=P + "nn",
                            disabled=nsource == "builtin")
        spec = nsource if nsource == "builtin" else f"{nsource}:{int(n)}"

        def make_work():
            model = cached_model(ref)
            corpus = corpora.resolve(spec)
            return lambda progress, should_stop: str(vi.build_token_index(
                model, corpus, range(model.num_layers + 1), progress=progress, should_stop=should_stop).folder)

        st.caption("The index holds every layer, is built once per model and corpus in a background job, and is "
                   "kept on disk (models_cache/explorer_index) for later sessions.")
        folder = job_controls(f"{P}index", "Build / open the corpus index", (ref, spec), make_work,
                              kind="explorer-index", unit="sentences", hide_stale=True)
        if folder:
            index = open_index(folder)
            position = words.index(word)
            result = vi.neighbours(index, encoding, position, nlayer, int(k))
            info = index.info
            st.caption(f"**{info.mode.capitalize()} search** (faiss {'IndexFlatIP' if info.mode == 'exact' else f'IVF, {info.nlist} cells, {info.nprobe} probed'}) "
                       f"over {info.count:,} word occurrences of {info.corpus}; exact below {vi.EXACT_THRESHOLD:,}.")
            warn_if_corpus_cut(info)
            table = charts.neighbours_frame(result)
            st.dataframe(table[["rank", "similarity", "left", "word", "right"] + (["upos", "deprel"] if info.has_trees else [])],
                         hide_index=True, column_config={"similarity": st.column_config.NumberColumn(format="%.3f")})
            chart = charts.neighbours_chart(result)
            draw_chart(chart, width="stretch")
            export_buttons(chart, table, f"neighbours-{word}-layer{nlayer}", P + "nexport")
            if info.has_trees and result.pos:
                hist = charts.histogram_chart(result)
                draw_chart(hist)
                export_buttons(hist, charts.histogram_frame(result), f"neighbours-{word}-pos", P + "hexport")
            elif not info.has_trees:
                st.caption("POS and relation histograms need a treebank corpus: pick UD EWT.")
