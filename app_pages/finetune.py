"""Fine-tuning comparison: launch training runs, follow them live, and compare the finished ones."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from app_pages.widgets.common import (draw_chart, example_buttons, export_buttons, flag_degenerate, intro, model_ref, sentences,
                               warn_if_truncated)
from app_pages.widgets.analysis_tab import page_tabs
from app_pages.widgets.common import sidebar_place
from app_pages.widgets.finetune_changes import render as render_changes
from app_pages.widgets.finetune_timelapse import missing_notice as timelapse_missing_notice
from app_pages.widgets.finetune_timelapse import render as render_timelapse
from app_pages.widgets.head_studies import render as render_head_studies
from app_pages.widgets.settings_form import setting_input
from core import numbering
from core.charts import finetune as finetune_charts
from core.model.distributed import visible_gpus
from core.data.examples import EXAMPLES
from core.model.loading import ModelUnavailable, available_models, display_name_among, model_num_layers
from core.protocols import describe
from core.training import (
    BUILTIN_TASKS,
    TASK_TITLES,
    Recipe,
    RunExists,
    cancel,
    list_runs,
    load_classifier,
    queue_position,
    report,
    submit,
)
from core.training.settings import DEFAULTS as TRAINING_DEFAULTS
from core.training.settings import FINETUNE
from core.views import finetune as finetune_view
from core.training.tasks import save_user_file
from core.training.evaluation import run_degeneracy
from core.training.tasks import DRUG_RATING_DIFFERENCES
from core.model.encoding import read_input
from core.safe_text import markdown_text
from core.training.recipe import (
    BERTLENS_DIFFERENCES,
    PAPER_SETTINGS,
    PROTOCOLS,
    QUICK_FINETUNE,
    paper_recipe,
    parse_frozen,
    protocol_table,
)

FILE_TASK = "my file"
K = "finetune."  # session-state prefix of this page
FORM_KEYS = {"drop_last_layers": "drop", "freeze_layers": "freeze_spec", "gradient_accumulation": "accumulation"}


@st.cache_resource(show_spinner="Loading the fine-tuned classifier…", max_entries=4)
def cached_classifier(name: str, finished_at: str):
    """finished_at is part of the key so a run deleted and trained again under the same name reloads."""
    return load_classifier(name, attention="sdpa")


@st.cache_data(max_entries=64, show_spinner=False)
def cached_prediction(name: str, finished_at: str, text_a: str, text_b: str | None):
    """Class labels, probabilities, and the input as this run's encoder reads it (to say what its length cut off)."""
    clf = cached_classifier(name, finished_at)
    read = read_input(clf.encoder, text_a, text_b)
    return clf.labels, clf.predict_proba([(text_a, text_b)])[0], read


def task_of_form(task: str, upload) -> str:
    """The recipe's task: a built-in task's name, or the uploaded file's saved path. A file uploaded while Task
    names a built-in task stops the launch with a message (issue 48: it was dropped and an SNLI run started)."""
    if task != FILE_TASK:
        if upload is not None:
            short = TASK_TITLES.get(task, task).split(":")[0]
            raise ValueError(f"A file is uploaded ({upload.name}) but Task is {short}, so the file would not be used: "
                             f"set Task to “My file” to train on it, or remove the file to train on {short}.")
        return task
    if upload is None:
        raise ValueError("Task “My file” needs a file: upload a CSV or JSONL above.")
    return str(save_user_file(upload.name, upload.getvalue()))


def launch(recipes: list[Recipe]) -> None:
    for recipe in recipes:
        try:
            submit(recipe)
        except (RunExists, ValueError) as err:
            st.error(markdown_text(err))
            return
    st.session_state[K + "compare"] = [r.run_name for r in recipes]
    st.success(f"Queued {markdown_text(', '.join(r.run_name for r in recipes))}. Progress shows below; runs go one at a time.")


def freeze_last_arm(base: Recipe, run_name: str) -> Recipe:
    """The preset's third run: all layers, the last one frozen (its index read from the model's config)."""
    return base.replace(run_name=run_name, frozen_layers=(model_num_layers(base.model) - 1,))


def paper_protocol_for(objective: str) -> str:
    """The paper protocol of an objective: the slides' for classification, Gao et al.'s for unsupervised SimCSE."""
    papers = [p for p in PROTOCOLS[objective] if p != "bertlens"]
    if not papers:
        raise ValueError("No paper protocol covers supervised SimCSE here; turn the paper protocol off.")
    return papers[0]


def use_quick_example() -> None:
    st.session_state.update({K + name: value for name, value in QUICK_FINETUNE.items()})
    st.session_state[K + "objective"] = "classify"


THREADS_HELP = ("Threads torch trains with on a processor. On a shared or small machine 1 is often several times "
                "faster than all cores (no OpenMP spin-waiting); the quick example uses 1.")
QUICK_LABEL = (f"Quick example: SNLI, {QUICK_FINETUNE['train_limit']:,} pairs, {QUICK_FINETUNE['epochs']} epoch "
               "(about a minute on 2 cores)")


st.title("Fine-tuning comparison")
intro(
    "Fine-tuning trains a BERT model further on one task, such as telling whether one sentence follows from "
    "another; this page runs such trainings and puts their results side by side.",
    "Start a run (or the ready-made “remove the last layer” experiment), watch its loss fall, then pick finished "
    "runs to compare their accuracy, per-class scores and mistakes, and to classify your own sentences.",
)


def active_phases(runs) -> dict[str, str]:
    """{name: phase} of the queued and running runs: what the runs table and the progress lines must agree on."""
    return {r.name: report.phase(r) for r in runs if r.state in ("queued", "running")}


def render_runs() -> None:
    """The "Runs" tab: launch, follow, compare and use training runs."""

    model_names = list(dict.fromkeys([model_ref(), *[e.name for e in available_models()]]))
    model_names = [m for m in model_names if m]
    timelapse_missing_notice()  # a lesson step's time-lapse run that is not here: its command, at the top of the slide

    # ---- launch -------------------------------------------------------------------------------------------

    paper = st.toggle(
        "Paper protocol", key=K + "paper_protocol",
        help="On: classification runs follow the CS4650 slides (AdamW lr 5e-5, eps 1e-8, no weight decay, no schedule, "
             "2 epochs, batch 32, scored on the test split) and unsupervised SimCSE follows Gao et al.; the settings "
             "they fix are then ignored below. Off: BERT Lens's own recipe, " + "; ".join(BERTLENS_DIFFERENCES) + ".",
    )
    if paper:
        with st.expander("What the paper protocols fix, and where each value comes from", icon=":material/menu_book:"):
            for name in ("slides", "gao"):
                st.caption(describe(name))
                st.dataframe(pd.DataFrame(protocol_table(name)), hide_index=True, width="stretch")
    else:
        st.caption("Protocol: BERT Lens (default). Training uses the slides' AdamW (lr 5e-5, eps 1e-8, 2 epochs), but "
                   + "; ".join(BERTLENS_DIFFERENCES) + ". Turn on the paper protocol to reproduce the papers' runs.")

    with st.expander("Start a run", expanded=not list_runs(), icon=":material/play_arrow:"):
        st.button(QUICK_LABEL, key=K + "quick", on_click=use_quick_example)
        with st.form(K + "form"):
            if paper:
                st.caption("Paper protocol on: the values it fixes (table above: the slides' for classification, Gao "
                           "et al.'s for unsupervised SimCSE) replace the form's.")
            c1, c2, c3 = st.columns(3)
            model = c1.selectbox("Model", model_names, key=K + "model", accept_new_options=True,
                                 format_func=display_name_among(model_names))
            task = c2.selectbox("Task", [*BUILTIN_TASKS, FILE_TASK], key=K + "task",
                                format_func=lambda t: TASK_TITLES.get(t, "My file (CSV/JSONL, below)"))
            objective = c3.selectbox(
                "Objective", ["classify", "simcse-unsup", "simcse-sup"], key=K + "objective",
                format_func={"classify": "Classification (cross-entropy)", "simcse-unsup": "SimCSE, unsupervised",
                             "simcse-sup": "SimCSE, supervised (pairs)"}.get,
            )
            upload = st.file_uploader(
                "My file (used when Task is “My file”): CSV or JSONL with columns text, label and optionally text_b "
                "(and split: train/test)",
                type=["csv", "tsv", "jsonl", "json"], key=K + "upload",
            )
            # The settings' widgets: bounds and help from the finetune declaration (core.training.settings), within
            # the form's caps; a setting a protocol fixes starts at BERT Lens's value (DEFAULTS).
            for name, value in TRAINING_DEFAULTS["classify"].items():
                if name != "lr":  # the learning rate's widget is hand-written with its own default
                    st.session_state.setdefault(K + FORM_KEYS.get(name, name), value)
            c1, c2, c3, c4 = st.columns(4)
            run_name = c1.text_input("Run name", key=K + "run_name", placeholder="e.g. minilm-snli")
            train_limit = c2.number_input("Training examples (0 = all)", 0, 10_000_000, 2000, step=500, key=K + "train_limit")
            eval_limit = c3.number_input("Evaluation examples (0 = all)", 0, 10_000_000, 1000, step=500, key=K + "eval_limit")
            epochs = setting_input(FINETUNE, "epochs", "Epochs", key=K + "epochs", container=c4, high=50)
            c1, c2, c3, c4 = st.columns(4)
            # Hand-written: the declared learning rate is None (the protocol decides); the form starts at 5e-5.
            lr = c1.number_input("Learning rate", 1e-7, 1e-2, 5e-5, format="%.1e", key=K + "lr")
            batch_size = setting_input(FINETUNE, "batch_size", "Batch size", key=K + "batch_size", container=c2, high=1024)
            max_length = setting_input(FINETUNE, "max_length", "Max tokens", key=K + "max_length", container=c3,
                                       high=512, step=16)
            seed = setting_input(FINETUNE, "seed", "Seed", key=K + "seed", container=c4, high=2**31 - 1)
            c1, c2, c3, c4 = st.columns(4)
            head = setting_input(FINETUNE, "head", "Head", key=K + "head", container=c1, horizontal=True,
                                 format_func={"linear": "linear", "mlp": "MLP (→50→)"}.get)
            drop = setting_input(FINETUNE, "drop_last_layers", "Drop last K layers", key=K + "drop", container=c2, high=47)
            freeze_spec = setting_input(FINETUNE, "freeze_layers", f"{numbering.FREEZE_LABEL} (e.g. 12 or 0-6,12)",
                                        key=K + "freeze_spec", container=c3)
            freeze_embeddings = setting_input(FINETUNE, "freeze_embeddings", "Freeze embeddings",
                                              key=K + "freeze_embeddings", container=c4, widget="checkbox")
            c1, c2, c3, c4 = st.columns(4)
            gpus = visible_gpus()
            processes = c1.number_input(
                "Processes / GPUs", 1, 64, max(1, gpus), key=K + "processes",
                help=f"{gpus} GPU(s) visible. More than 1 starts the run through accelerate launch (torchrun on CPU), "
                "one process per GPU; each batch is split across them.")
            accumulation = setting_input(FINETUNE, "gradient_accumulation", "Gradient accumulation",
                                         key=K + "accumulation", container=c2, high=256)
            threads = c3.number_input("CPU threads (0 = all cores)", 0, 256, 0, key=K + "cpu_threads", help=THREADS_HELP)
            lr_decay = setting_input(FINETUNE, "lr_decay", "Layer-wise LR decay", key=K + "lr_decay", container=c4,
                                     step=0.05)
            c1, c2, c3 = st.columns([1, 1, 2], vertical_alignment="bottom")
            timelapse = c1.checkbox("Time-lapse", key=K + "timelapse_on",
                                    help="Measure the model at evenly spaced steps while it trains (step 0 and the last "
                                    "included) and play the frames below: similarity to the starting model, attention "
                                    "change, anisotropy, dev loss and accuracy. Each frame reads its probe set in one "
                                    "forward pass (the word vectors, the attention maps and, on the default probe of "
                                    "100 dev pairs, their predictions for the dev loss and accuracy): with 10 frames "
                                    "over 2,000 pairs, measuring costs about a sixth (16 %) of the training time on 2 "
                                    "CPU cores. More frames or a larger probe cost more; the page says how much.")
            frames = c2.number_input("Frames", 2, 200, 10, key=K + "timelapse_frames")
            probe = c3.text_input("Time-lapse probe corpus", key=K + "timelapse_corpus",
                                  placeholder="empty: 100 dev pairs of the task; or builtin, ud:dev:100, a .txt file",
                                  help="The sentences every frame is measured on (the corpus grammar of `--corpus`).")
            if st.form_submit_button("Queue run", type="primary", icon=":material/play_arrow:"):
                try:
                    protocol = paper_protocol_for(objective) if paper else "bertlens"
                    values = dict(
                        model=model or "", task=task_of_form(task, upload),
                        run_name=run_name.strip() or f"{(model or 'model').split('/')[-1]}-{task.replace(' ', '-')}-{time.strftime('%H%M%S')}",
                        objective=objective, epochs=int(epochs), lr=float(lr), batch_size=int(batch_size),
                        max_length=int(max_length), train_limit=int(train_limit) or None, eval_limit=int(eval_limit) or None,
                        seed=int(seed), head=head, drop_last_layers=int(drop), frozen_layers=parse_frozen(freeze_spec)[0],
                        freeze_embeddings=bool(freeze_embeddings) or parse_frozen(freeze_spec)[1], processes=int(processes),
                        gradient_accumulation=int(accumulation), cpu_threads=int(threads) or None,
                        lr_decay=float(lr_decay), timelapse=int(frames) if timelapse else 0,
                        timelapse_corpus=(probe.strip() or None) if timelapse else None,
                    )
                    # The protocol's own values replace the form's (the toggle's help says so).
                    recipe = paper_recipe(protocol, **{k: v for k, v in values.items() if k not in PAPER_SETTINGS.get(protocol, {})})
                except ValueError as err:
                    st.error(markdown_text(err))
                else:
                    launch([recipe])

    with st.expander("Drug reviews as in the slides: the closest label and what differs", icon=":material/medication:"):
        st.markdown(
            "The slides' second experiment fine-tunes on WebMD drug reviews to predict the reviewer's "
            "**satisfaction**. The local Druglib data has no such field; its overall **rating** (1-10) is the "
            "closest, offered as task **drugs-rating** (5 buckets of two ratings, like 1-5 stars) and "
            "**drugs-rating3** (1-4 / 5-6 / 7-10). What differs:"
        )
        st.markdown("\n".join(f"- {line}" for line in DRUG_RATING_DIFFERENCES))

    with st.expander("Ready-made experiment: remove the last layer (the slides' “remove layer 12”)", icon=":material/layers_clear:"):
        st.markdown(
            "The CS4650 slides fine-tuned BERT-base on SNLI and on drug reviews with and without its 12th (last) layer "
            "and found almost the same accuracy for ~8 % less training time; their conclusion adds that *freezing* "
            "layer 12 made 'no much difference … but the process is much faster' (no numbers given). This launches "
            "the same recipe three times: all layers, without the last one, and with the last one frozen (its "
            "weights stay the base model's, bit for bit). By default all three use the **same head**, so only depth "
            "or freezing differs; the slides changed the head of the shortened model too (linear → 768→50→3 MLP), "
            "which the checkbox reproduces. Accuracy and train seconds of the three runs appear side by side below."
        )
        st.dataframe(report.SLIDES_REFERENCE, hide_index=True, width="stretch")
        st.caption("The slides' accuracies are on the **test** split (source: core.references). With the paper "
                   "protocol on, the runs follow the slides' recipe and are scored on the test split too; off, they "
                   "are scored on SNLI **dev** (BERT Lens's default, so the test split stays unseen): the side-by-side "
                   "table below names each run's split.")
        c1, c2, c3, c4 = st.columns(4)
        preset_model = c1.selectbox("Model", model_names, key=K + "preset_model", accept_new_options=True,
                                    format_func=display_name_among(model_names))
        preset_task = c2.selectbox("Task", ["snli", "drugs", "drugs-rating"], key=K + "preset_task",
                                   help="drugs-rating: Druglib's rating in 5 buckets, the closest label to the slides' "
                                   "satisfaction (see 'Drug reviews as in the slides' above)")
        preset_limit = c3.number_input("Training examples (0 = all)", 0, 10_000_000, 2000, step=500, key=K + "preset_limit")
        preset_epochs = c4.number_input("Epochs", 1, 10, 2, key=K + "preset_epochs", disabled=paper,
                                        help="The slides' 2 under the paper protocol.")
        preset_eval = st.number_input(f"{'Test' if paper else 'Dev'} examples scored (0 = all)", 0, 10_000_000,
                                      0 if paper else 2000, step=500, key=K + ("preset_eval_test" if paper else "preset_eval"))
        as_slides = st.checkbox("As in the slides: linear head with all layers, MLP head without the last layer "
                                "(depth and head change together)", key=K + "preset_as_slides")
        if st.button("Launch the three runs", key=K + "preset_go", icon=":material/compare_arrows:"):
            stem = f"{(preset_model or 'model').split('/')[-1]}-{preset_task}-{time.strftime('%H%M%S')}"
            values = dict(model=preset_model or "", task=preset_task, run_name=f"{stem}-all-layers",
                          train_limit=int(preset_limit) or None, eval_limit=int(preset_eval) or None, head="linear")
            try:
                base = paper_recipe("slides", **values) if paper else Recipe(**values, epochs=int(preset_epochs))
            except ValueError as err:
                st.error(markdown_text(err))
            else:
                launch([base, base.replace(run_name=f"{stem}-minus-last", drop_last_layers=1,
                                           head="mlp" if as_slides else "linear"),
                        freeze_last_arm(base, f"{stem}-freeze-last")])

    # ---- live progress ------------------------------------------------------------------------------------


    def live_runs() -> None:
        """Progress of queued and running runs; polled every 2 s by a fragment while any run is active."""
        active = [r for r in list_runs() if r.state in ("queued", "running")]
        # The runs table below is drawn by the page, not by this fragment: when a run moves on (queued -> loading
        # model -> training -> ended, or one started elsewhere) the whole page reruns, so the table never says
        # another phase than the progress line.
        if active_phases(active) != st.session_state.get(K + "table_phases"):
            st.rerun(scope="app")
        if not active:
            return
        st.subheader("In progress")
        for r in active:
            s = r.status
            c1, c2 = st.columns([4, 1])
            if r.state == "queued":
                c1.write(f"**{r.name}** — {report.progress_text(r, queue_position(r.name))}")
            else:
                c1.progress(r.progress_fraction(), text=f"**{r.name}** — {report.progress_text(r)}")
            if c2.button("Cancel", key=f"{K}cancel.{r.name}", icon=":material/cancel:"):
                cancel(r.name)
                st.toast(f"Asked {r.name} to stop.")
            frame = finetune_charts.loss_frame(s, r.name)
            if len(frame) > 1:
                draw_chart(finetune_charts.loss_chart(frame, f"Loss of {r.name}"), width="stretch")


    runs = list_runs()  # read once for the table below and the phases it shows
    st.session_state[K + "table_phases"] = active_phases(runs)
    any_active = bool(st.session_state[K + "table_phases"])
    # Poll only while something runs: an idle page stays still (a run started from a terminal shows on Refresh).
    st.fragment(run_every="2s" if any_active else None)(live_runs)()
    if not any_active:
        st.button("Refresh", key=K + "refresh", icon=":material/refresh:", help="Look for runs started elsewhere")

    render_timelapse(runs)  # above the runs table: a lesson's link opens on it

    # ---- finished runs ------------------------------------------------------------------------------------

    st.subheader("Runs")
    if not runs:
        st.info("No runs yet. Start one above, or from a terminal: "
                "`python -m core finetune --model all-MiniLM-L6-v2 --task snli --run my-run --train-limit 2000`.")
        return
    table = report.runs_table(runs)
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_config={"accuracy": st.column_config.NumberColumn(format="%.3f"),
                       "macro F1": st.column_config.NumberColumn(format="%.3f"),
                       "train seconds": st.column_config.NumberColumn(format="%.1f"),
                       "examples/s": st.column_config.NumberColumn(format="%.1f")},
    )
    export_buttons(None, table, "runs", key=K + "runs_export")

    for r in runs:
        if r.state in ("failed", "cancelled", "killed"):
            with st.expander(markdown_text(f"{r.name}: {r.state} — {r.error or ''}"), icon=":material/error:"):
                st.code(r.log_tail or "(no log)", language=None)

    done = [r for r in runs if r.state == "done"]
    if not done:
        return
    names = [r.name for r in done]
    st.session_state[K + "compare"] = [n for n in st.session_state.get(K + "compare", []) if n in names] or names[-2:]
    selected_names = st.multiselect("Compare runs", names, key=K + "compare")
    selected = [r for r in done if r.name in selected_names]
    if not selected:
        st.info("Pick one or more finished runs to compare.")
        return

    st.subheader("Side by side")
    shown = sorted({r.recipe.get("protocol", "bertlens") for r in selected})
    st.caption(" ".join(describe(p) for p in shown))
    for r in selected:
        flag_degenerate(run_degeneracy(r.metrics), r.name)
    comparison = report.compare_table(selected)
    st.dataframe(comparison, width="stretch")
    export_buttons(None, comparison.reset_index(names="metric"), "runs-compared", key=K + "compare_export")

    classifiers = [r for r in selected if r.metrics.get("accuracy") is not None]
    if classifiers:
        f1 = finetune_charts.f1_chart(classifiers)
        draw_chart(f1, width="stretch")
        export_buttons(f1, finetune_charts.f1_frame(classifiers), "f1-per-class", key=K + "f1_export")
        st.markdown("**Confusion matrices** (rows: true class, columns: predicted; colour: share of the row)")
        confusion = finetune_charts.confusion_chart(classifiers)
        draw_chart(confusion)
        export_buttons(confusion, pd.concat([finetune_charts.confusion_frame(r) for r in classifiers]), "confusion", key=K + "confusion_export")

    loss_all = pd.concat([finetune_charts.loss_frame(r.metrics, r.name) for r in selected])
    if len(loss_all):
        chart = finetune_charts.loss_chart(loss_all)
        draw_chart(chart, width="stretch")
        export_buttons(chart, loss_all, "training-loss", key=K + "loss_export")

    # ---- predict ------------------------------------------------------------------------------------------

    st.subheader("Classify your sentences")
    example_buttons({k: v for k, v in EXAMPLES.items() if v[1]}, key=K + "examples")
    text_a, text_b = sentences()
    if not classifiers:
        st.caption("The selected runs are contrastive encoders with no classifier head; pick a classification run.")
    elif not text_a:
        st.info(f"Type a sentence (and for pair tasks a second one) in {sidebar_place()}, or pick an example above.")
    else:
        names, labels, probabilities, cuts = [], [], [], {}
        for r in classifiers:
            try:
                classes, probs, read = cached_prediction(r.name, str(r.metrics.get("finished_at")), text_a, text_b)
            except ModelUnavailable as err:
                st.error(markdown_text(err))
                continue
            names.append(r.name)
            labels.append(classes)
            probabilities.append(probs)
            cuts[read.n_tokens_full, read.max_length] = read  # runs of one base model cut the same pieces: one notice
        for read in cuts.values():
            warn_if_truncated(read)
        if names:
            frame = finetune_charts.probabilities_frame(names, labels, probabilities)
            chart = finetune_charts.probabilities_chart(frame)
            draw_chart(chart, width="stretch")
            st.dataframe(frame.pivot(index="run", columns="class", values="probability"), width="stretch")
            export_buttons(chart, frame, "predictions", key=K + "predict_export")


# The tabs the view lists (core.views.finetune.TABS, each with its analyses), then one per analysis declared with a
# tab on this view (core.contract).
page_tabs("finetune", dict(zip(finetune_view.TAB_TITLES, (render_runs, render_changes, render_head_studies), strict=True)),
          key="finetune.tab")
