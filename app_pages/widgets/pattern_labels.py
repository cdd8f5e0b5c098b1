"""Label patterns: the "Head studies" tab's labelling mode (call `render(refs)`). Attention maps one at a time with
Kovaleva et al.'s five types as buttons (each with a keyboard shortcut); every label is saved at once to the labels
file (core.analyses.pattern_labels); a logistic regression trained on the labels types every head map of a dataset,
its shares beside the threshold rules'."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from app_pages.widgets.common import (cached_encoding, cached_model, draw_chart, export_buttons, intro, job_controls,
                                      warn_if_corpus_cut)
from app_pages.widgets.common import load_error
from app_pages.widgets.corpus_picker import corpus_picker
from core import numbering
from core.analyses import pattern_labels as pl
from core.analyses.heads import PATTERNS, PatternExample
from core.charts import attention as attention_charts
from core.charts import head_studies as charts
from core.charts import layout
from core.model.encoding import run_counting_cuts
from core.model.loading import ModelUnavailable, display_name_among
from core.safe_text import markdown_text

P = "studies.lab."
NOT_COMPARABLE = (pl.RULES_NOT_COMPARABLE + " The classifier's shares are comparable only as far as your labels are "
                  "as careful as theirs.")


def _split(item) -> tuple[str, str | None]:
    return (item, None) if isinstance(item, str) else (item[0], item[1])


def _save(path, label: pl.MapLabel, step: int) -> None:
    """Button callback: save the label (the file rewritten atomically), then show the next map."""
    try:
        pl.add_label(path, label)
    except (pl.LabelFileError, OSError) as err:
        st.session_state[P + "error"] = str(err)
        return
    st.session_state.pop(P + "error", None)
    st.session_state[P + "position"] = step + 1


def _skip(step: int) -> None:
    st.session_state[P + "position"] = step + 1


def label_one(ref: str, inputs, labels, path) -> None:
    """The next unlabelled map of the seeded queue over every (input, layer, head), and the five type buttons."""
    first = cached_encoding(ref, *_split(inputs[0]))
    n_layers, n_heads = first.attentions.shape[:2]
    queue = pl.map_queue(len(inputs), n_layers, n_heads)
    done = {label.key for label in labels}
    position = st.session_state.setdefault(P + "position", 0)
    step = next((i for i in range(position, len(queue))
                 if (ref, *_split(inputs[queue[i][0]]), queue[i][1], queue[i][2]) not in done), None)
    if step is None:
        st.success("Every map of this dataset is labelled (or skipped): pick more examples to label more.")
        return
    example, layer, head = queue[step]
    text, text_b = _split(inputs[example])
    encoding = cached_encoding(ref, text, text_b)
    attention = np.asarray(encoding.attentions[layer, head], dtype=np.float64)
    st.markdown(f"**Map {step + 1} of {len(queue)}**: layer {numbering.shown(layer)}, head {head}, example {example}")
    shown = PatternExample("", example, layer, head, encoding.tokens, attention)
    draw_chart(layout.fixed_size(attention_charts.map_chart(shown, size=300)), key=P + "map_chart")  # square
    st.caption("Rows are queries, columns keys, darker = more attention. " + markdown_text(
        text + (f" ‖ {text_b}" if text_b else "")))
    label = pl.MapLabel(ref, text, text_b, int(layer), int(head), "", tuple(pl.downsample(attention)))
    columns = st.columns([1.6 if len(p) > 10 else 1 for p in PATTERNS] + [1])  # long names not cut
    for column, pattern in zip(columns, PATTERNS):
        shortcut = pl.SHORTCUTS[pattern]
        column.button(pattern, key=f"{P}type.{pattern}", shortcut=shortcut, width="stretch",
                      on_click=_save, args=(path, replace(label, pattern=pattern), step))
    columns[-1].button("skip", key=P + "skip", shortcut="s", width="stretch", on_click=_skip, args=(step,))
    if st.session_state.get(P + "error"):
        st.error(markdown_text(st.session_state[P + "error"]))


def _shares_work(ref: str, inputs, labels):
    """make_work for job_controls: train in the button's callback (too few labels: a message), then type every
    head map of the dataset in the job."""
    classifier = pl.train_classifier(labels)
    try:
        lm = cached_model(ref)
    except ModelUnavailable as err:
        raise ValueError(str(err)) from err

    def work(progress, should_stop):
        return run_counting_cuts(lambda: pl.pattern_shares(lm, inputs, classifier, progress=progress,
                                                           should_stop=should_stop))
    return work


def shares_part(ref: str, corpus, labels) -> None:
    st.markdown("**Pattern shares from your labels**")
    inputs = corpus.inputs
    params = ("pattern-shares", ref, corpus.digest, tuple((label.key, label.pattern) for label in labels))
    counted = job_controls(P + "shares", f"Train on {len(labels)} labels and type every map of {len(inputs)} examples",
                           params, lambda: _shares_work(ref, inputs, labels), kind="pattern-shares", unit="examples")
    if counted is None:
        st.info("Label maps of at least two types, then press the button: a logistic regression on the downsampled "
                f"maps ({pl.GRID}×{pl.GRID}) types every head's map of the dataset.")
        return
    warn_if_corpus_cut(counted)
    result = counted.value
    accuracy = (f"cross-validated accuracy {result.cv_accuracy:.0%} ({result.cv_folds} stratified folds)"
                if result.cv_accuracy is not None else
                "no cross-validated accuracy yet (label at least two maps of every type you use)")
    st.markdown(f"Classifier trained on **{result.n_labels} labelled maps** ("
                + ", ".join(f"{p} {n}" for p, n in result.label_counts.items()) + f"): {accuracy}.")
    chart, frame = charts.pattern_shares_chart(result)
    draw_chart(chart, key=P + "shares_chart")
    st.caption(f"Both bars type the same {result.n_maps} maps (every head on every one of {result.n_inputs} inputs). "
               + NOT_COMPARABLE)
    export_buttons(chart, frame, "pattern-shares", P + "shares_export")


def render(refs: list[str]) -> None:
    intro("Kovaleva et al. (2019) sorted 400 attention maps by eye into five types (vertical, diagonal, "
          "vertical+diagonal, block, heterogeneous), trained a classifier on them and found about 30 % vertical.",
          "Label maps one at a time with the buttons or the keys V, D, X, B, H (S skips); each label is saved at once. "
          "Then train a small classifier on your labels and compare its shares with the threshold rules'.")
    ref = st.selectbox("Maps from", refs, key=P + "model", format_func=display_name_among(refs))
    corpus = corpus_picker(P, label="Dataset", n_key=P + "limit", n_label="Examples")
    if corpus is None or not corpus.inputs:
        return
    path = pl.labels_path()
    try:
        labels = pl.read_labels(path)
        label_one(ref, corpus.inputs, labels, path)
    except pl.LabelFileError as err:
        st.error(markdown_text(err) + " Move the file away to start a new one; nothing was written to it.")
        return
    except ModelUnavailable as err:
        load_error(err, ref)
        return
    labels = pl.read_labels(path)
    counts = {p: sum(label.pattern == p for label in labels) for p in PATTERNS}
    st.caption(f"{len(labels)} maps labelled, saved in " + markdown_text(str(path)) + ": "
               + ", ".join(f"{p} {n}" for p, n in counts.items()) + ". BERT Lens ships no labels: these are yours.")
    shares_part(ref, corpus, labels)
