"""Bias experiment: train on SNLI with the "female" words removed, against a size-matched random control."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.widgets.common import draw_chart, export_buttons, flag_degenerate, intro, model_ref, warn_if_truncated
from app_pages.widgets import bias_erase as erase_gender
from app_pages.widgets import bias_heads as flip_heads
from app_pages.widgets.explain_view import cached_explainer, cached_explanation, show
from core import bias, numbering, references
from core.bias_settings import BIAS
from core.analyses.explain import HEAD_METHODS, METHOD_TITLES, METHODS, prepare
from core.charts import bias as charts
from core.data.datasets import DataUnavailable
from core.model.loading import ModelUnavailable, display_name, pick_device
from core.protocols import describe
from core.training import report as run_report
from core.training.recipe import PAPER_SETTINGS
from core.safe_text import markdown_text

P = "bias."
ARM_TITLES = {"full": "full (all data)", "biased": "biased (words removed)", "control": "control (as many removed at random)"}
MALE_WORDS = ("men", "man", "boy", "boys", "father", "husband", "male")
ON_GPU = pick_device() != "cpu"
# On a processor, all 20k local SNLI training pairs x 3 runs take hours; a 2,000-pair subset takes minutes.
DEFAULT_TRAIN_LIMIT = 0 if ON_GPU else 2000
DEFAULT_TEST_LIMIT = 0 if ON_GPU else 1000
SLIDES_RECIPE = {k: PAPER_SETTINGS["slides"][k] for k in ("epochs", "lr", "batch_size")}


@st.cache_data(show_spinner="Reading the data…", max_entries=8)
def cached_split(task: str, split: str, limit: int | None, seed: int):
    return bias.load_split(task, split, limit, seed)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_matches(task: str, words: tuple[str, ...], train_limit: int | None, test_limit: int | None, seed: int,
                   protocol: str = "bertlens"):
    train, test = cached_split(task, "train", train_limit, seed), cached_split(task, "test", test_limit, seed)
    matches = bias.word_matches(train, words, protocol)
    shown = [train[i] for i in matches.mask.nonzero()[0][:5]]
    return matches, int(bias.match_mask(test, words, protocol).sum()), len(test), shown


@st.cache_data(show_spinner="Preparing the test set…", max_entries=4)
def cached_experiment_data(spec_json: dict):
    return bias.experiment_data(bias.ExperimentSpec.from_json(spec_json))


def set_words(words: tuple[str, ...]) -> None:
    st.session_state[P + "words"] = ", ".join(words)


def quick_demo() -> None:
    set_words(bias.DEFAULT_WORDS)
    st.session_state.update({P + name: value for name, value in bias.QUICK_DEMO.items()})


def limit(value: int) -> int | None:
    return int(value) if value else None


def form_of(spec: bias.ExperimentSpec) -> dict:
    """The page's settings (session keys) that launch `spec`: the form shows the settings of the results below."""
    return {P + "paper_protocol": spec.protocol == "slides", P + "words": ", ".join(spec.words),
            P + "swaps": bias.format_swaps(spec.swaps), P + "task": spec.task, P + "train_limit": spec.train_limit or 0,
            P + "test_limit": spec.test_limit or 0, P + "seed": spec.seed, P + "epochs": spec.epochs, P + "lr": spec.lr,
            P + "batch_size": spec.batch_size, P + "max_length": spec.max_length, P + "head": spec.head}


def shown_experiment(experiments: list[str]) -> str | None:
    """The experiment the Results section shows: the one picked (or linked), else the newest."""
    picked = st.session_state.get(P + "experiment")
    return picked if picked in experiments else (experiments[0] if experiments else None)


def show_form_of_picked() -> None:
    """The Experiment box's callback: the form takes the settings of the experiment now shown."""
    try:
        st.session_state.update(form_of(bias.load_spec(st.session_state[P + "experiment"])))
    except ValueError:
        pass  # an unreadable spec: the Results section says so


st.title("Bias experiment")
intro(
    "A CS4650 class project removed every SNLI training pair containing a “female” word and saw test accuracy "
    "fall from 90.45 % to 59.47 %; this page reruns that experiment with a control that removes just as many "
    "pairs at random, so the effect of the words is separated from the effect of having less data.",
    "Edit the word list, launch the three training runs (full, biased, control), and compare their accuracy on "
    "test pairs with and without the words, their confusion matrices, and how often swapping gendered words "
    "(woman ↔ man, she ↔ he …) changes a prediction.",
)

# Reopened, the form shows the settings of the results below (not the defaults beside other numbers); a setting
# this session or a link already holds is kept.
shown = shown_experiment(bias.list_experiments())
if shown is not None:
    try:
        for key, value in form_of(bias.load_spec(shown)).items():
            st.session_state.setdefault(key, value)
    except ValueError:
        pass  # an unreadable spec: the Results section says so

st.toggle(
    "Paper protocol", key=P + "paper_protocol",
    help="On: the slides' filter (the words as whole space-separated tokens of the premise, exact case: 23.1 % of "
         "SNLI train, as their batch counts imply) and their recipe (AdamW lr 5e-5, eps 1e-8, no weight decay, no "
         "schedule, 2 epochs, batch 32). Off (BERT Lens's default): whole words in any case in premise or "
         "hypothesis (28.6 %: every pair that mentions the words) and BERT Lens's recipe. The control run is "
         "BERT Lens's addition either way.",
)
protocol = "slides" if st.session_state[P + "paper_protocol"] else "bertlens"
st.caption(describe(protocol) + (f" Filter: {bias.FILTER_TITLES[protocol]}." if protocol == "slides" else
                                 f" Filter: {bias.FILTER_TITLES[protocol]}; recipe: weight decay 0.01, clipping 1.0."))

st.session_state.setdefault(P + "words", ", ".join(bias.DEFAULT_WORDS))
st.session_state.setdefault(P + "swaps", bias.format_swaps(bias.DEFAULT_SWAPS))
# The recipe's defaults are the declaration's (core.bias_settings.BiasSettings), as the CLI's and core.lens's; the
# subset sizes are this page's own (a CPU trains on 2000 pairs, not all).
for key, value in {**{name: BIAS.field(name).default for name in ("task", "epochs", "seed", "lr", "batch_size",
                                                                   "max_length", "head", "freeze_embeddings")},
                   "freeze_layers": BIAS.field("freeze_lowest").default, "train_limit": DEFAULT_TRAIN_LIMIT,
                   "test_limit": DEFAULT_TEST_LIMIT, "cpu_threads": 0}.items():
    st.session_state.setdefault(P + key, value)

c1, c2, c3 = st.columns(3)
c1.button("The slides' female words", key=P + "ex.female", on_click=set_words, args=(bias.DEFAULT_WORDS,), width="stretch")
c2.button("The male counterparts", key=P + "ex.male", on_click=set_words, args=(MALE_WORDS,), width="stretch")
c3.button(f"Quick demo ({bias.QUICK_DEMO['train_limit']:,} pairs, {bias.QUICK_DEMO['epochs']} epochs)", key=P + "ex.quick",
          on_click=quick_demo, width="stretch")

# ---- the words and what they match -------------------------------------------------------------------

st.subheader("1. The words")
left, right = st.columns([3, 1])
left.text_input("Words to remove from the training data (comma-separated; "
                + ("whole tokens of the premise, exact case)" if protocol == "slides" else "whole words, any capitalisation)"),
                key=P + "words")
right.selectbox("Task", bias.TASKS, key=P + "task", format_func=lambda t: {"snli": "SNLI (3 classes)", "mrpc": "MRPC (paraphrase)"}[t])
a, b, c = st.columns(3)
a.number_input("Training pairs (0 = all)", min_value=0, step=500, key=P + "train_limit",
               help="A seeded random subset of the training split, taken before the words are removed.")
b.number_input("Test pairs (0 = all)", min_value=0, step=500, key=P + "test_limit")
c.number_input("Seed", min_value=0, step=1, key=P + "seed", help="Subsets, the control's removals, training, bootstrap.")

words_ok = True
try:
    words = bias.parse_words(st.session_state[P + "words"], keep_case=protocol == "slides")
except ValueError as err:
    st.error(markdown_text(err))
    words_ok, words = False, ()

task = st.session_state[P + "task"]
train_limit, test_limit, seed = limit(st.session_state[P + "train_limit"]), limit(st.session_state[P + "test_limit"]), int(st.session_state[P + "seed"])
matches = None
if words_ok:
    try:
        matches, test_matches, test_n, shown = cached_matches(task, words, train_limit, test_limit, seed, protocol)
    except DataUnavailable as err:
        st.error(f"The {task} data is missing: {markdown_text(err)}")
if matches is not None:
    m1, m2, m3 = st.columns(3)
    m1.metric("Training pairs with a word", f"{matches.count:,} of {matches.n:,}", f"{matches.count / max(matches.n, 1):.1%} removed", delta_color="off", delta_arrow="off")
    m2.metric("Biased and control runs train on", f"{matches.n - matches.count:,} pairs")
    m3.metric("Test pairs with a word", f"{test_matches:,} of {test_n:,}")
    per_word = bias.word_count_frame(matches)
    word_chart = charts.word_count_chart(per_word, protocol)
    draw_chart(word_chart, width="stretch")
    export_buttons(word_chart, per_word, "bias_word_counts", P + "export.words")
    if shown:
        st.markdown("**Some training pairs that would be removed**")
        for e in shown:
            # The slides' filter reads premises only, so their hypotheses get no bold.
            hypothesis = markdown_text(e.text_b or "") if protocol == "slides" else bias.highlight(e.text_b or "", words)
            st.markdown(f"- {bias.highlight(e.text, words, protocol)} → {hypothesis} *({markdown_text(e.label)})*")
    elif matches.count == 0:
        st.warning("No training pair contains these words, so the biased run would equal the full one.")

# ---- the recipe and launch ---------------------------------------------------------------------------

st.subheader("2. The runs")
with st.expander("Counterfactual swap list (used when scoring)"):
    st.text_area("One pair per line; each pair swaps both ways and keeps capitalisation (Woman → Man)", key=P + "swaps", height=200)
    st.caption("“her” has two partners: “his” before a noun (her hat → his hat) and “him” before a function word, "
               "punctuation or the end (gave her a cup → gave him a cup). Only test pairs a swap changes are counted.")
with st.form(P + "recipe"):
    st.caption(f"Model: **{markdown_text(display_name(model_ref()))}** (the one you picked). All three runs use this recipe and run one after another "
               f"on the {'GPU' if ON_GPU else 'processor'} as training jobs; they also appear on the fine-tuning page.")
    fixed = protocol == "slides"
    if fixed:
        st.caption("Paper protocol: epochs, learning rate and batch size are the slides' (2, 5e-5, 32).")
    r1, r2, r3, r4, r5, r6 = st.columns(6)
    r1.number_input("Epochs", min_value=1, max_value=20, key=P + "epochs", disabled=fixed)
    r2.number_input("Learning rate", min_value=1e-7, max_value=1e-2, step=1e-5, format="%.0e", key=P + "lr", disabled=fixed)
    r3.number_input("Batch size", min_value=1, max_value=512, key=P + "batch_size", disabled=fixed)
    r4.number_input("Max tokens", min_value=16, max_value=512, step=16, key=P + "max_length")
    r5.selectbox("Head", ["linear", "mlp"], key=P + "head", format_func=lambda h: {"linear": "linear", "mlp": "MLP (→50→classes)"}[h])
    r6.number_input("CPU threads (0 = all)", min_value=0, max_value=256, key=P + "cpu_threads",
                    help="On a shared or small processor 1 thread is often several times faster (the quick demo uses 1).")
    f1, f2, _ = st.columns([1, 1, 3])
    f1.number_input(f"{numbering.FREEZE_LABEL} 1 to N", min_value=0, max_value=48, key=P + "freeze_layers",
                    help="N: layers 1..N, the lowest N numbered as on every chart (0 = none), kept fixed in all three "
                         "runs: fewer weights to train, about half the time for 3 of 6 layers.")
    f2.checkbox("Freeze embeddings", key=P + "freeze_embeddings")
    launched = st.form_submit_button("Launch full, biased and control", type="primary", disabled=not words_ok)

if launched:
    try:
        spec = bias.ExperimentSpec(
            name=bias.new_experiment_name(), model=model_ref(), task=task, words=words,
            swaps=bias.parse_swaps(st.session_state[P + "swaps"]), train_limit=train_limit, test_limit=test_limit,
            seed=seed, max_length=int(st.session_state[P + "max_length"]), head=st.session_state[P + "head"],
            cpu_threads=int(st.session_state[P + "cpu_threads"]) or None,
            freeze_layers=int(st.session_state[P + "freeze_layers"]),
            freeze_embeddings=bool(st.session_state[P + "freeze_embeddings"]),
            protocol=protocol, **(SLIDES_RECIPE if protocol == "slides" else {
                "epochs": int(st.session_state[P + "epochs"]), "lr": float(st.session_state[P + "lr"]),
                "batch_size": int(st.session_state[P + "batch_size"])}),
        )
        with st.spinner("Writing the three training sets…"):
            bias.launch(spec)
    except (ValueError, DataUnavailable, ModelUnavailable) as err:
        st.error(markdown_text(err))
    else:
        st.session_state[P + "experiment"] = spec.name
        st.toast(f"Queued {spec.name}: three runs")

# ---- progress and results ----------------------------------------------------------------------------

ENDED_TITLES = {"failed": "failed", "cancelled": "was cancelled", "killed": "was killed"}


def cancel_clicked(experiment: str) -> None:
    bias.cancel_experiment(experiment)


def draw_progress(status: bias.ExperimentStatus) -> None:
    spec = status.spec
    st.caption(f"{markdown_text(spec.model)} on {spec.task}: words {markdown_text(', '.join(spec.words))}; {spec.epochs} epoch(s), lr {spec.lr:g}, "
               f"batch {spec.batch_size}, max {spec.max_length} tokens, seed {spec.seed}"
               + (f", layers 1-{spec.freeze_layers} frozen" if spec.freeze_layers else "")
               + (", embeddings frozen" if spec.freeze_embeddings else "") + f". {describe(spec.protocol)}")
    for arm in bias.ARMS:
        run = status.runs[arm]
        if run is None:
            st.progress(0.0, text=f"{ARM_TITLES[arm]}: not started")
            continue
        if run.state == "running":
            detail = run_report.progress_text(run)
        elif run.state == "done":
            accuracy = (run.metrics or {}).get("accuracy")  # null in a run's metrics.json when it was not scored
            detail = f"done, engine accuracy {accuracy:.2%}" if accuracy is not None else "done, no accuracy recorded"
        else:
            detail = run.state + (f": {run.error}" if run.error and run.state != "queued" else "")
        fraction = 1.0 if run.state == "done" else run.progress_fraction()
        st.progress(fraction, text=f"{ARM_TITLES[arm]} — {detail}")
    job = status.job
    if status.state == "evaluating" and job is not None:
        st.progress(job.fraction, text=f"Scoring: {job.message} {job.done}/{job.total or '?'} predictions")
    if status.active:
        st.button("Cancel the experiment", key=P + "cancel", on_click=cancel_clicked, args=(spec.name,), icon=":material/cancel:")
    elif status.state in ENDED_TITLES:
        st.error(f"The experiment {ENDED_TITLES[status.state]} ({status.state}): {markdown_text(status.error or '')}")


def draw_results(name: str, status: bias.ExperimentStatus) -> None:
    spec, result = status.spec, status.result
    table = bias.accuracy_frame(result)
    full, biased_run, control = (result.runs[a] for a in bias.ARMS)
    k1, k2, k3, k4 = st.columns(4)
    k1.metric("Training pairs removed", f"{result.removed:,}", f"{result.removed / full.train_size:.1%} of {full.train_size:,}", delta_color="off", delta_arrow="off")
    k2.metric("Full run", f"{full.overall.accuracy:.2%}")
    k3.metric("Biased run", f"{biased_run.overall.accuracy:.2%}", f"{(biased_run.overall.accuracy - full.overall.accuracy) * 100:+.2f} points")
    k4.metric("Control run", f"{control.overall.accuracy:.2%}", f"{(control.overall.accuracy - full.overall.accuracy) * 100:+.2f} points")
    for arm in bias.ARMS:
        flag_degenerate(result.runs[arm].degeneracy(result.labels), f"The {ARM_TITLES[arm]} run")
    reference = references.get("slides-bias-accuracy")
    st.caption(
        f"The slides' reference — {references.overlay_label(reference, spec.model, result.protocol)}: "
        f"{bias.SLIDES_REFERENCE['full']:.2%} → {bias.SLIDES_REFERENCE['biased']:.2%} on the test set, all 550k SNLI "
        f"training pairs, 2 epochs, no control, {bias.SLIDES_REFERENCE['train_batches_full']:,} → "
        f"{bias.SLIDES_REFERENCE['train_batches_biased']:,} batches (23.1 % removed). "
        f"Here: {spec.model}, {full.train_size:,} training pairs ({result.removed / max(full.train_size, 1):.1%} "
        f"removed), {result.test_size:,} test pairs ({result.test_with_words:,} with the words), protocol "
        f"{result.protocol}."
    )

    accuracy_chart = charts.accuracy_chart(table, result.protocol)
    draw_chart(accuracy_chart, width="stretch")
    export_buttons(accuracy_chart, table, f"{name}_accuracy", P + "export.accuracy")

    shown_table = table[["run", "slice", "n", "accuracy", "ci_low", "ci_high", "macro_f1"] + [f"f1_{l}" for l in result.labels]]
    st.dataframe(shown_table.style.format({c: "{:.4f}" for c in shown_table.columns if c not in ("run", "slice", "n")}),
                 hide_index=True, width="stretch")

    differences = bias.difference_frame(result)
    d = {(row.comparison, row.slice): row for row in differences.itertuples()}
    with_key, without_key = ("biased-full", "with_words"), ("biased-full", "without_words")
    if with_key in d and ("control-full", "with_words") in d:
        st.markdown(
            f"**Reading it.** On test pairs *with* the words, removing them changed accuracy by "
            f"**{d[with_key].difference * 100:+.1f} points** (95 % interval {d[with_key].ci_low * 100:+.1f} to "
            f"{d[with_key].ci_high * 100:+.1f}); removing as many random pairs changed it by "
            f"**{d[('control-full', 'with_words')].difference * 100:+.1f}** points. On pairs *without* the words the biased "
            f"run moved {d[without_key].difference * 100:+.1f} points. A drop that shows up only in the with-words slice, "
            f"and beyond the control's, is the words' own effect."
        )
    points = differences.assign(**{c: differences[c] * 100 for c in ("difference", "ci_low", "ci_high")}).rename(
        columns={"difference": "accuracy difference (points)", "ci_low": "95 % low", "ci_high": "95 % high"})
    st.dataframe(points.style.format({c: "{:+.2f}" for c in points.columns[2:]}), hide_index=True, width="stretch")
    export_buttons(None, differences, f"{name}_differences", P + "export.differences")

    st.markdown("#### Per-class F1")
    f1 = bias.f1_frame(result)
    f1_chart = charts.f1_chart(f1, result.labels)
    draw_chart(f1_chart)
    export_buttons(f1_chart, f1, f"{name}_f1", P + "export.f1")

    st.markdown("#### Confusion matrices")
    confusion = bias.confusion_frame(result)
    present = [s for s in bias.SLICE_ORDER if s in set(confusion["slice"])]
    present += sorted(set(confusion["slice"]) - set(present))  # an agreement level outside AGREEMENT_LEVELS
    chosen_slice = st.radio("Slice", present, key=P + "confusion_slice", horizontal=True, format_func=bias.slice_title)
    confusion = confusion[confusion["slice"] == chosen_slice]
    confusion_chart = charts.confusion_chart(confusion, result.labels, chosen_slice)
    draw_chart(confusion_chart)
    export_buttons(confusion_chart, confusion, f"{name}_confusion_{chosen_slice}", P + "export.confusion")

    st.markdown("#### Counterfactual swaps")
    flips = bias.flip_frame(result)
    flip_chart = charts.flip_chart(flips)
    draw_chart(flip_chart, width="stretch")
    st.caption(f"{full.swapped:,} test pairs change under the swap list; a model that ignores gender would keep all its predictions.")
    export_buttons(flip_chart, flips, f"{name}_flips", P + "export.flips")
    flip_arm = st.radio("Flipped examples of run", bias.ARMS, key=P + "flip_arm", horizontal=True)
    try:
        data = cached_experiment_data(spec.to_json())
        examples = bias.flipped_examples(name, flip_arm, data)
    except DataUnavailable as err:
        st.warning(f"The test data is missing, so flipped examples cannot be shown: {markdown_text(err)}")
        examples = []
    if examples:
        st.dataframe(pd.DataFrame(examples), hide_index=True, width="stretch")
        explain_both(spec.run_name(flip_arm), examples)
        flip_heads.render(spec.run_name(flip_arm), data.test, spec.swaps, f"{name} test set")
        erase_gender.render(spec.run_name(flip_arm), data.sets.full, data.test, spec.swaps, f"{name} test set")
    else:
        st.caption("No prediction of this run changed under the swaps.")


def explain_both(run: str, examples: list[dict]) -> None:
    """One method's explanation (integrated gradients unless another gradient or perturbation method is picked) of
    one flipped example before and after its swap, side by side."""
    index = st.selectbox("Explain both sides of flipped example", range(len(examples)), key=P + "explain_both",
                         format_func=lambda i: examples[i]["premise"][:80])
    row = examples[index]
    if not st.toggle("Explain both", key=P + "explain_both.on"):
        return
    method = st.selectbox("Method", [m for m in METHODS if m in HEAD_METHODS], index=2, format_func=METHOD_TITLES.get,
                          key=P + "explain_both.method")
    for column, (a, b, title) in zip(st.columns(2), ((row["premise"], row["hypothesis"], "Before the swap"),
                                                    (row["swapped premise"], row["swapped hypothesis"], "After the swap"))):
        with column:
            st.markdown(f"**{title}**")
            try:
                warn_if_truncated(prepare(cached_explainer(run), a, b or None))
                show(cached_explanation(run, a, b or None, method, None, 50), f"{P}explain_both.{title}")
            except (ValueError, ModelUnavailable) as err:
                st.error(markdown_text(err))


def show_experiment(name: str) -> None:
    status = bias.experiment_status(name)
    if status.active:
        @st.fragment(run_every="2s")
        def live_progress() -> None:
            current = bias.experiment_status(name)
            draw_progress(current)
            if not current.active:
                st.rerun()  # the whole page, to draw the results

        live_progress()
    else:
        draw_progress(status)
        if status.result is not None:
            draw_results(name, status)


st.subheader("3. Results")
experiments = bias.list_experiments()
if not experiments:
    st.info("No experiment yet. Launch one above; it keeps running if you leave the page, and its results stay here.")
else:
    if st.session_state.get(P + "experiment") not in experiments:
        st.session_state[P + "experiment"] = experiments[0]
    chosen = st.selectbox("Experiment", experiments, key=P + "experiment", on_change=show_form_of_picked,
                          help="Newest first; each is saved under models_cache/experiments. The form above shows "
                               "the settings of the one picked.")
    show_experiment(chosen)
