"""Heads over a dataset: the "Heads over a dataset" section of the attention page (call `render()`).

Five parts, each one batched pass over a sample, run as a core.jobs job started by its button (progress and
Cancel from `job_controls`), so a widget change never kills a half-done pass. Results are kept in
st.session_state under "heads.PART.jobstate", next to the settings they were computed with.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import streamlit as st

from app_pages.shell import prefetch
from app_pages.widgets.common import (cached_model, draw_chart, export_buttons, flag_degenerate, intro, job_controls, model_ref,
                                      warn_if_corpus_cut)
from app_pages.widgets.common import load_error
from app_pages.widgets.corpus_picker import MRPC, SNLI, UD, corpus_picker
from app_pages.widgets.settings_form import setting_input
from core import numbering
from core.analyses import heads as hd
from core.analyses.ablation import ANALYSIS as ABLATE, load_for_ablation, predict_disabled, run_ablation
from core.analyses.pattern_labels import RULES_NOT_COMPARABLE
from core.charts import attention as attention_charts
from core.charts import classification, heads_dataset
from core.model.encoding import run_counting_cuts
from core.model.loading import ModelUnavailable, available_models, display_name, resolve
from core.protocols import DEFAULT, describe
from core.safe_text import markdown_text
from core.training import is_classifier_folder, list_runs
from core.training.runs import run_eval_sample, saved_degeneracy
from core.views.attention import SURVEY_DEFAULTS, SURVEY_KEY, SURVEY_KIND, SURVEY_UNIT, survey_params, survey_work

P = "heads."
PARTS = ("Statistics", "Pattern types", "Ablation", "Change after fine-tuning", "Syntactic heads")
EXAMPLES = {
    "SNLI · 100 pairs": {"part": "Statistics", "source": SNLI, "split": "dev", "limit": 100},
    "MRPC patterns · 100 pairs": {"part": "Pattern types", "source": MRPC, "split": "validation", "limit": 100},
    "Syntax · 200 EWT sentences": {"part": "Syntactic heads", "tb.source": UD, "tb.split": "dev", "tb_limit": 200},
}


# ---- inputs ------------------------------------------------------------------------------------------------


def protocol_switch() -> str:
    """The "paper protocol" switch of the statistics and syntax parts. Off by default: BERT Lens's own rules read
    more plainly (any punctuation mark is punctuation; a head's guess is where the word itself looks); on, the
    numbers are computed as Clark et al.'s code computes them, comparable with the paper's."""
    on = st.toggle("Paper protocol (Clark et al. 2019)", key=P + "paper_protocol",
                   help="Periods and commas only as punctuation; syntactic heads scored in both directions with "
                        "roots as misses, the poss rule and offsets -3..+2; heads numbered from 1 as in the paper "
                        "(layers are numbered from 1 either way).")
    return "clark" if on else DEFAULT


def sample_widgets(key: str) -> tuple[tuple, list] | None:
    """The corpus picker; returns (a hashable description, the inputs: sentences or (A, B) pairs) or None with a
    message shown. The sample size is the picker's N for datasets; other sources are used whole."""
    corpus = corpus_picker(P, label="Sample", n_key=P + "limit", n_label="Examples")
    if corpus is None:
        return None
    return (corpus.name, corpus.digest), corpus.inputs


def loaded_model(ref: str):
    try:
        return cached_model(ref)
    except ModelUnavailable as err:
        load_error(err, ref)
        return None


# ---- parts -------------------------------------------------------------------------------------------------


def survey_part(show: str) -> None:
    ref = model_ref()
    protocol = protocol_switch()
    sample = sample_widgets("survey")
    if sample is None:
        return
    description, inputs = sample
    params = survey_params(ref, description, protocol)
    lm = loaded_model(ref)
    if lm is None:
        return
    work = survey_work(lm, inputs, protocol)
    prefetch.adopt(SURVEY_KEY, params)  # presenter mode may have started this very pass ahead of the slide
    kept = job_controls(SURVEY_KEY, f"Run {display_name(ref)} over {len(inputs)} examples", params, lambda: work, kind=SURVEY_KIND,
                        unit=SURVEY_UNIT)
    if kept is None:
        st.info("Press the button to pass the sample through the model (nothing is computed until then).")
        return
    survey: hd.HeadSurvey = kept.value
    st.caption(f"{markdown_text(display_name(survey.model))}: {survey.n_examples} inputs ({survey.n_pairs} pairs). "
               + describe(survey.protocol))
    warn_if_corpus_cut(kept)
    if show == "Statistics":
        statistics_view(survey)
    else:
        patterns_view(survey)


def statistics_view(survey: hd.HeadSurvey) -> None:
    name = st.selectbox("Statistic", hd.STAT_NAMES, key=P + "stat", format_func=hd.STAT_TITLES.get)
    values = survey.stat(name)
    title = heads_dataset.statistic_title(survey, name)
    chart, frame = attention_charts.statistic_chart(survey, name, f"Mean {title} per head")
    draw_chart(chart, key=P + "stat_chart")
    by_layer = ", ".join(f"L{numbering.shown(l)} {v:.2f}" for l, v in enumerate(values.mean(axis=1)))
    st.caption(f"Layer means: {by_layer}. Per input: the mass a head puts on those keys, averaged over all query "
               "positions (special tokens included), then over inputs (Clark et al. 2019). Clark et al. found over "
               "half of BERT-base's attention in layers 6–10 going to [SEP].")
    lines, _ = attention_charts.layer_means_chart(survey, name, f"Mean {title} per layer")
    draw_chart(lines, key=P + "stat_layers")
    if name in attention_charts.LAYER_REFERENCES:
        st.caption("Clark et al.'s line was read off his Figure 2 (bert-base-uncased, Wikipedia spans); it is "
                   "comparable only when the legend says 'same model and protocol', else compare the shape.")
    table = heads_dataset.statistics_table(survey)
    export_buttons(chart, table, f"head-statistics-{name}", P + "stat_export")
    with st.expander("All statistics (table)"):
        st.dataframe(table, hide_index=True, key=P + "stat_table")


def patterns_view(survey: hd.HeadSurvey) -> None:
    counts = survey.pattern_counts
    frame = attention_charts.pattern_frame(survey)
    combined = attention_charts.pattern_chart(survey, frame)
    draw_chart(combined, key=P + "pattern_chart")
    st.caption(
        "Each head's map on each input gets one type by these rules, over the rows of real tokens: V = mass on "
        f"[CLS]/[SEP], D = mass within one position of the diagonal, B = mass inside the query's own sentence. "
        f"vertical+diagonal if V ≥ {hd.MIXED_EACH}, D ≥ {hd.MIXED_EACH} and V + D ≥ {hd.MIXED_TOTAL}; vertical if "
        f"V ≥ {hd.VERTICAL}; diagonal if D ≥ {hd.DIAGONAL}; block if the input is a pair and B ≥ {hd.BLOCK}; "
        "heterogeneous otherwise. Paler cells: the dominant type won on fewer inputs. " + RULES_NOT_COMPARABLE
        + " To label maps by hand as they did: the fine-tuning page, Head studies, Label patterns."
    )
    table = frame[["layer", "head", "pattern", "share of inputs"]].copy()
    for k, p in enumerate(hd.PATTERNS):
        table[p] = counts[..., k].ravel()
    export_buttons(combined, table, "head-pattern-types", P + "pattern_export")
    with st.expander("Counts per head and type (table)"):
        st.dataframe(table, hide_index=True, key=P + "pattern_table")
    if survey.examples:
        st.markdown("**Example maps of each type** (rows: queries, columns: keys)")
        for pattern in hd.PATTERNS:
            found = [e for e in survey.examples if e.pattern == pattern]
            if not found:
                continue
            st.caption(pattern)
            row = attention_charts.examples_chart(found)
            draw_chart(row, key=f"{P}examples.{pattern}")


# ---- ablation ----------------------------------------------------------------------------------------------


def classification_runs() -> list[str]:
    return [r.name for r in list_runs() if r.state == "done" and is_classifier_folder(Path(r.folder))]


@st.cache_resource(show_spinner="Loading the classifier…", max_entries=4)
def ablation_classifier(ref: str, purpose: str = "sweep"):
    """A private copy for ablation only: its hooks (added and removed under the model's lock) never touch the
    models every page shares. The single-example view has its own copy, so it answers while a sweep runs."""
    return load_for_ablation(ref)


@st.cache_data(show_spinner="Reading the run's evaluation set…", max_entries=8)
def cached_run_sample(ref: str, limit: int | None):
    return run_eval_sample(ablation_classifier(ref), limit)


def ablation_part() -> None:
    runs = classification_runs()
    sidebar = model_ref()
    if sidebar not in runs and Path(sidebar).is_dir() and (Path(sidebar) / "head.json").is_file():
        runs.insert(0, sidebar)
    if not runs:
        st.info("No fine-tuned classification run yet. Train one on the Fine-tuning page (or `python -m core "
                "finetune`), then come back: ablation needs a classifier and the evaluation set it was scored on.")
        return
    if st.session_state.get(P + "run") not in runs:
        st.session_state[P + "run"] = runs[0]
    c1, c2, c3 = st.columns([2, 1, 1])
    ref = c1.selectbox("Fine-tuned run", runs, key=P + "run")
    # Choices and help: the analysis's declaration (core.analyses.ablation.ANALYSIS), as the CLI's --mode.
    mode = setting_input(ABLATE, "mode", "Disable by", key=P + "mode", container=c2, horizontal=True)
    limit = int(c3.number_input("Examples (0 = all)", 0, 20000, step=50, key=P + "ablation_limit"))
    try:
        clf = ablation_classifier(ref)
        sample = cached_run_sample(ref, limit or None)
    except Exception as err:  # a broken or foreign run folder: say so, keep the page
        st.error(markdown_text(f"Cannot use '{ref}': {err}"))
        return
    n_conditions = clf.encoder.num_layers * (clf.encoder.num_heads + 1)
    st.caption(f"{len(sample.examples)} examples of {sample.task} ({sample.eval_split}); {n_conditions} conditions "
               f"(each head, then each whole layer), one batched pass each.")
    params = (ref, mode, limit)

    def work(progress, should_stop):
        return run_ablation(clf, sample.examples, ABLATE.make(mode=mode), progress=progress, should_stop=should_stop)

    kept = job_controls(P + "ablation", "Run the ablation sweep", params, lambda: work, kind="heads", unit="batch passes")
    if kept is None:
        flag_degenerate(saved_degeneracy(ref), ref)
        st.info("Press the button to disable each head and each layer in turn.")
    else:
        result = kept
        flag_degenerate(result.degenerate, ref)
        warn_if_corpus_cut(result)
        m1, m2, m3 = st.columns(3)
        m1.metric("Intact accuracy", f"{result.base_accuracy:.3f}")
        if sample.run_accuracy is not None and sample.complete:
            m2.metric("Run's own metrics.json", f"{sample.run_accuracy:.3f}")
        best = np.unravel_index(np.nanargmax(result.head_delta), result.head_delta.shape)
        label = "Best single-head removal" if result.head_delta[best] > 0 else "Least harmful removal"
        m3.metric(label, numbering.head_name(*best), f"{result.head_delta[best]:+.3f}")
        chart, frame = attention_charts.ablation_chart(result)
        draw_chart(chart, key=P + "ablation_chart")
        st.caption("▲ marks heads whose removal *improves* accuracy. Red: removal hurts; blue: removal helps.")
        table = frame.rename(columns={"accuracy change": "head_delta"})
        table["accuracy"] = table["head_delta"] + result.base_accuracy
        export_buttons(chart, table, f"ablation-{ref}-{result.mode}", P + "ablation_export")
        improving = table[table["head_delta"] > 0].sort_values("head_delta", ascending=False)
        if len(improving):
            st.dataframe(improving, hide_index=True, key=P + "improving")

    st.markdown("**One example with a head disabled**")
    examples = sample.examples[:200]
    c1, c2, c3 = st.columns([3, 1, 1])
    index = c1.selectbox("Example", range(len(examples)), key=P + "example",
                         format_func=lambda i: f"{examples[i].text} | {examples[i].text_b or ''} ({examples[i].label})")
    layer = c2.selectbox("Layer", range(clf.encoder.num_layers), key=P + "ex_layer", format_func=numbering.label)
    head = c3.selectbox("Head", ["all"] + list(range(clf.encoder.num_heads)), key=P + "ex_head")
    item = [(examples[index].text, examples[index].text_b)]
    disabled = {layer: list(range(clf.encoder.num_heads)) if head == "all" else [head]}
    viewer = ablation_classifier(ref, "example")
    intact = predict_disabled(viewer, item, {}, mode)[0]
    changed = predict_disabled(viewer, item, disabled, mode)[0]
    probs = classification.probabilities_frame(["intact", f"L{numbering.shown(layer)} H{head} disabled"], [clf.labels] * 2,
                                               [intact, changed], series="model")
    chart = classification.probabilities_chart(probs, series="model", title=f"Class probabilities (gold: {examples[index].label})")
    draw_chart(chart, key=P + "example_chart")
    export_buttons(chart, probs, "ablation-example", P + "example_export")


# ---- change after fine-tuning ------------------------------------------------------------------------------


def base_model_of(ref: str) -> str | None:
    """The model a run was trained from (its recipe.json), when `ref` is a run."""
    try:
        _, folder = resolve(ref)
        return json.loads((Path(folder) / "recipe.json").read_text()).get("model") if folder else None
    except Exception:
        return None


def change_part() -> None:
    names = list(dict.fromkeys([e.name for e in available_models() if e.source == "run"] + [model_ref()]
                               + [e.name for e in available_models()]))
    c1, c2 = st.columns(2)
    if st.session_state.get(P + "model_b") not in names:
        st.session_state[P + "model_b"] = names[0]
    model_b = c2.selectbox("Fine-tuned model (B)", names, key=P + "model_b")
    suggested = base_model_of(model_b) or model_ref()
    if st.session_state.get(P + "model_a_for") != model_b:  # follow B's base model until the user picks another
        st.session_state[P + "model_a"] = suggested
        st.session_state[P + "model_a_for"] = model_b
    model_a = c1.text_input("Pretrained model (A)", key=P + "model_a", help="Defaults to the model B was trained from")
    sample = sample_widgets("change")
    if sample is None:
        return
    description, inputs = sample
    params = (model_a, model_b, description)
    lms = (loaded_model(model_a), loaded_model(model_b))
    if None in lms:
        return

    def work(progress, should_stop):  # the change with its cuts (core.model.encoding.Counted), for the notice
        return run_counting_cuts(lambda: hd.run_attention_change(lms, inputs, hd.CHANGE.make(), progress=progress,
                                                                 should_stop=should_stop))

    kept = job_controls(P + "change", f"Compare over {len(inputs)} examples", params, lambda: work, kind="heads", unit="passes")
    if kept is None:
        st.info("Press the button to run both models on the sample and compare each head's maps.")
        return
    change: hd.AttentionChange = kept.value
    warn_if_corpus_cut(kept)
    chart, frame = attention_charts.change_chart(change)
    draw_chart(chart, key=P + "change_chart")
    by_layer = ", ".join(f"L{numbering.shown(l)} {v:.3f}" for l, v in enumerate(change.cosine.mean(axis=1)))
    st.caption(f"Per head: cosine similarity of the flattened maps of A and B on the same input, averaged over "
               f"{change.n_examples} inputs (Kovaleva et al., Fig. 5). Lower = changed more. Layer means: {by_layer}.")
    export_buttons(chart, frame, "attention-change", P + "change_export")
    with st.expander("Most changed heads (table)"):
        st.dataframe(frame.sort_values("cosine").head(20), hide_index=True, key=P + "change_table")


# ---- syntactic heads ---------------------------------------------------------------------------------------


def syntax_part() -> None:
    ref = model_ref()
    c1, c2 = st.columns([3, 1])
    with c1:
        corpus = corpus_picker(P + "tb.", trees=True, label="Treebank", n_key=P + "tb_limit", n_label="Sentences",
                               default_n=200)
    with c2:
        protocol = protocol_switch()
    st.session_state.setdefault(P + "subtypes", False)  # the declared default None is the protocol's choice
    subtypes = setting_input(hd.SYNTAX, "subtypes", "Keep subtypes (nmod:poss)", key=P + "subtypes", container=c2,
                             disabled=protocol == "clark")
    if corpus is None:
        return
    sentences = list(corpus.trees)
    subtypes = True if protocol == "clark" else subtypes
    params = (ref, corpus.name, corpus.digest, subtypes, protocol)
    lm = loaded_model(ref)
    if lm is None:
        return

    def work(progress, should_stop):
        return hd.run_syntax_heads(lm, sentences, hd.SYNTAX.make(subtypes=subtypes, protocol=protocol),
                                   progress=progress, should_stop=should_stop)

    kept = job_controls(P + "syntax", f"Find syntactic heads in {len(sentences)} sentences", params, lambda: work, kind="heads", unit="sentences")
    if kept is None:
        st.info("Press the button to run the model on the treebank's words and score every head per relation.")
        return
    result: hd.SyntaxHeads = kept
    table = heads_dataset.syntax_table(result)
    chart = attention_charts.syntax_chart(table, result.protocol)
    draw_chart(chart, key=P + "syntax_chart")
    how = attention_charts.syntax_note(result.protocol)
    st.caption(f"{result.n_sentences} sentences" + (f" ({result.n_skipped} too long for the model, left out)" if result.n_skipped else "")
               + f". {how} Word pieces merged as Clark et al.: attention to a word summed over its pieces, from a "
               "word averaged. Relations with fewer than 20 dependents are in the table only. "
               + describe(result.protocol))
    columns = ["relation", "count", "best head", "direction", "accuracy", "baseline_offset", "baseline_accuracy"]
    st.dataframe(table[columns], hide_index=True, key=P + "syntax_table")
    export_buttons(chart, table, "syntactic-heads", P + "syntax_export")
    relation = st.selectbox("Every head for one relation", list(result.relations), key=P + "relation")
    heat, grid = attention_charts.relation_chart(result, relation)
    draw_chart(heat, key=P + "relation_chart")
    export_buttons(heat, grid, f"syntactic-heads-{relation.replace(':', '_')}", P + "relation_export")


# ---- the section -------------------------------------------------------------------------------------------


def use_example(settings: dict) -> None:
    for name, value in settings.items():
        st.session_state[P + name] = value


def render() -> None:
    """The whole "Heads over a dataset" section (statistics, pattern types, ablation, change, syntax)."""
    for key, value in SURVEY_DEFAULTS.items():  # core.views.attention's: a lesson step's view is read with them too
        st.session_state.setdefault(key, value)
    intro(
        "These views answer, over many examples at once, where each head's attention goes (Clark et al. 2019), "
        "which of Kovaleva et al.'s five pattern types it shows, what removing it does to a fine-tuned classifier, "
        "how fine-tuning changed it, and which heads track syntax.",
        "Pick a part and a sample, press its button, and read the layer × head grids; every chart exports as "
        "PNG/SVG and every table as CSV.",
    )
    columns = st.columns(len(EXAMPLES))
    for column, (label, settings) in zip(columns, EXAMPLES.items()):
        column.button(label, key=f"{P}example.{label}", on_click=use_example, args=(settings,), width="stretch")
    part = st.segmented_control("Part", PARTS, key=P + "part") or PARTS[0]
    if part in ("Statistics", "Pattern types"):
        survey_part(part)
    elif part == "Ablation":
        ablation_part()
    elif part == "Change after fine-tuning":
        change_part()
    else:
        syntax_part()
