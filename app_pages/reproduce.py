"""Reproduce: run a published BERT analysis the paper's way and see its numbers beside the measured ones.

One study at a time: its card (paper, model, data, offline stand-in, protocol, cost), the model and corpus to
measure, Run (a core.jobs job with progress and Cancel), then paper vs measured per layer with a verdict.
The chosen study is in the URL (?study=NAME), so a link reopens it.
"""

from __future__ import annotations

import streamlit as st

from app_pages.shell import prefetch, url_state
from app_pages.widgets.common import draw_chart, export_buttons, flag_degenerate, intro, job_controls, model_ref
from app_pages.widgets.common import PRESENTING
from core import protocols, references, studies
from core.studies import seeds as seed_runs
from core.views import reproduce as reproduce_view
from core.charts import reproduce as reproduce_charts
from core.data.corpus import GRAMMAR
from core.model.loading import availability, display_name
from core.safe_text import markdown_code, markdown_text
from core.training.evaluation import Degeneracy
from core.training.runs import saved_degeneracy

P = "reproduce."
VERDICT_STYLE = {"reproduced": st.success, "differs": st.error, "different model: shape only": st.info, "not measured": st.warning,
                 "inconclusive": st.warning}
INTERVAL_NAMES = {"t": "Student-t interval over the seeds", "bootstrap": "percentile bootstrap of the seeds' mean"}

st.title("Reproduce a paper")
intro(
    "Published BERT analyses report numbers per layer: how alike words become, which heads follow syntax, what "
    "fine-tuning changes.",
    "Pick a study, choose the model and data to measure, press Run, and see the paper's numbers beside yours with "
    "a plain verdict; the paper's own model and protocol are the default.",
)

names = list(studies.NAMES)
# ?study=NAME comes in through app_pages/shell/url_state.py (core.views); a name that is no study falls back to the first.
if st.session_state.get(P + "study") not in names:
    st.session_state[P + "study"] = names[0]
catalogue = {name: studies.get(name) for name in names}
name = st.selectbox("Study", names, key=P + "study", format_func=lambda n: f"{n} — {catalogue[n].title}")
url_state.write_now("reproduce")  # now, not after the page: a run that ends in st.stop() drops later URL writes
study = catalogue[name]

with st.container(border=True):
    st.markdown(f"**{study.title}**  \n{study.summary}")
    c1, c2 = st.columns(2)
    c1.markdown(f"**Paper's model:** `{study.model}`  \n**Paper's data:** {study.data}")
    stand_in = study.stand_in or "none needed: the paper's data is on this computer"
    c2.markdown(f"**Offline stand-in:** {stand_in}  \n**Expected time:** CPU {study.cost_cpu}; GPU {study.cost_gpu}")
    st.caption(protocols.describe(study.protocol))
    if study.stand_in:
        st.caption("The paper's data is not available offline, so the numbers measured here are indicative.")

sidebar_model = model_ref()
model_options = reproduce_view.model_options(study, sidebar_model)
loadable = {ref: availability(ref) for ref in model_options}
# The paper's model when it loads now, else one that does (offline, the paper's model would only fail at Run).
st.session_state.setdefault(P + f"{name}.model", reproduce_view.default_model(study, sidebar_model))


def use_sidebar_model() -> None:
    st.session_state[P + f"{name}.model"] = sidebar_model


c1, c2, c3, c4, c5 = st.columns([3, 3, 1, 1, 1])
c1.button("Measure this step's model" if PRESENTING.get() else "Measure the sidebar's model", key=P + "use_sidebar", on_click=use_sidebar_model,
          disabled=not sidebar_model, help=markdown_code(sidebar_model))
model = c1.selectbox("Model to measure", model_options, key=P + f"{name}.model", accept_new_options=True,
                     format_func=lambda ref: ref if (loadable.get(ref) or availability(ref)).loadable else f"{ref} (cannot load now)",
                     help="The paper's model needs internet the first time; any model, folder or finished run works.")
corpus = c2.text_input("Corpus", value=study.default_corpus or "", key=P + f"{name}.corpus",
                       help="Leave as is for the study's default. " + GRAMMAR, disabled=study.default_corpus is None)
limit = c3.number_input("Items (0 = default)", 0, 1_000_000, 0, key=P + f"{name}.limit")
seeds_text = c5.text_input("Seeds", key=P + "seeds", placeholder="e.g. 0,1,2",
                           help="Run the study once per seed (its corpus sample and any training redone) to see "
                                "whether a finding survives another seed: every seed's value, the mean, a 95 % "
                                "interval and a verdict on the interval. Empty: one run with the seed beside it.")
seed = c4.number_input("Seed", 0, 1_000_000, 0, key=P + f"{name}.seed", disabled=bool(seeds_text.strip()))
seed_list, seeds_error = None, None
if seeds_text.strip():
    try:
        seed_list = seed_runs.parse_seeds(seeds_text, "Seeds", "the Seed field (and leave Seeds empty)")
    except ValueError as err:
        seeds_error = str(err)
        st.error(markdown_text(seeds_error))
flag_degenerate(saved_degeneracy(model or ""), model)
options = studies.StudyOptions(model=model or None, corpus=(corpus.strip() or None) if study.default_corpus else None,
                               seed=int(seed), limit=int(limit) or None)


def make_work():
    return reproduce_view.run_work(study, options, seed_list)


def show_seeds(found: seed_runs.SeedsResult) -> None:
    """A study run once per seed: the verdict on the intervals, paper vs the seeds' mean with error bars, every
    number's values per seed, and the named heads' ranks per seed."""
    summary = found.summary
    first = found.per_seed[0]
    seeds = ", ".join(map(str, found.seeds))
    VERDICT_STYLE.get(summary.verdict, st.info)(
        f"**{summary.verdict.capitalize()}** over seeds {seeds} — {markdown_code(display_name(found.model))} on "
        f"{markdown_text(first.corpus)}, protocol `{first.protocol}`.")
    st.caption(f"Each number's {summary.confidence:.0%} interval is the {INTERVAL_NAMES[summary.interval]}. Reproduced: "
               "the whole interval lies within the paper's tolerance; differs: it lies wholly outside; inconclusive: "
               "it straddles an edge (more seeds narrow it).")
    for run, degenerate in {r: d for result in found.per_seed for r, d in result.degenerate.items()}.items():
        flag_degenerate(Degeneracy.from_json(degenerate), run)
    layer_chart = reproduce_charts.seeds_layer_chart(found)
    if layer_chart is not None:
        draw_chart(layer_chart, key=P + "seeds_layer_chart")
    table_chart = reproduce_charts.seeds_table_chart(found)
    if table_chart is not None:
        draw_chart(table_chart, key=P + "seeds_table_chart")
    numbers = reproduce_charts.seeds_frame(found)
    st.markdown("**Every number, per seed**")
    three = st.column_config.NumberColumn(format="%.3f")
    st.dataframe(numbers, hide_index=True, column_order=["label", "key", "verdict", "paper", "tolerance", "mean", "low",
                                                         "high", "values"],
                 column_config={"label": st.column_config.TextColumn("reference", width="medium"), "mean": three,
                                "low": three, "high": three, "values": "per seed"})
    heads = reproduce_charts.head_ranks_frame(found)
    if not heads.empty:
        st.markdown(f"**The paper's heads: rank per seed** (1 = best), and in how many seeds each is in the top {summary.top_k}")
        st.dataframe(heads, hide_index=True)
    with st.expander("Each seed's notes"):
        for seed, result in zip(found.seeds, found.per_seed):
            st.caption(f"Seed {seed}: " + " ".join(markdown_text(note) for note in result.notes))
    export_buttons(layer_chart or table_chart, numbers, f"reproduce_{found.study}_seeds", key=P + "seeds_export")


chosen = loadable.get(model) or availability(model or "")
if not chosen.loadable:
    st.warning(f"Pick a model that loads now to run this study: {markdown_text(chosen.reason)}")
elif not references.same_model_name(model, study.model):
    compared = ("the verdict will compare the shape of the paper's curves with yours, not the numbers"
                if references.for_study(name) else "compare your figures with the paper's in shape only")
    st.info(f"**Different model: shape only** — {markdown_code(model)} is not the paper's model ({markdown_code(study.model)}): {compared}.")
job_params = reproduce_view.job_params(study, options, seed_list)
prefetch.adopt(P + name, job_params)  # presenter mode may have run this very study ahead of the slide
result = job_controls(P + name, "Run the study", job_params, make_work, kind="reproduce",
                      unit="steps", hide_stale=True, disabled=not chosen.loadable or seeds_error is not None,
                      load_result=studies.StudyResult.from_json if seed_list is None else seed_runs.SeedsResult.from_json)
if result is None:
    if chosen.loadable and seeds_error is None:  # otherwise the message above is the next step, not "Press Run"
        st.info("Press **Run the study** to measure (nothing is computed until then).")
    st.stop()
if isinstance(result, seed_runs.SeedsResult):
    show_seeds(result)
    st.stop()

if result.comparisons:
    VERDICT_STYLE.get(result.verdict, st.info)(f"**{result.verdict.capitalize()}** — {markdown_code(display_name(result.model))} on {markdown_text(result.corpus)}, "
                                               f"protocol `{result.protocol}`.")
else:
    st.info(f"**No published numbers to compare with** — {markdown_code(display_name(result.model))} on {markdown_text(result.corpus)}, protocol "
            f"`{result.protocol}`: the measured values below are for a qualitative comparison with the paper's figures.")
for run, found in result.degenerate.items():
    if run != model:  # the model measured is flagged above, beside its choice
        flag_degenerate(Degeneracy.from_json(found), run)
for note in result.notes:
    st.caption(markdown_text(note))
layer_chart = reproduce_charts.layer_comparison_chart(result)
if layer_chart is not None:
    draw_chart(layer_chart, key=P + "layer_chart")
table_chart = reproduce_charts.table_comparison_chart(result)
if table_chart is not None:
    draw_chart(table_chart, key=P + "table_chart")
for comparison in result.comparisons:
    ref = comparison.reference
    shape = f"; {comparison.shape_note}" if comparison.shape_note else ""
    st.caption(f"**{ref.title}** — {comparison.verdict}{shape}. Paper: {ref.model}, {ref.corpus}, {ref.unit}; "
               f"source: {ref.source}. Tolerance ±{ref.tolerance:g}." + (f" {ref.layer_note}" if ref.layer_note else "")
               + (f" {ref.note}" if ref.note else ""))
table = reproduce_charts.comparison_frame(result)
with st.expander("Paper vs measured, every number"):
    st.dataframe(table, hide_index=True)
measured = reproduce_charts.measured_frame(result)
measured_chart = reproduce_charts.measured_chart(result)
if not measured.empty:
    with st.expander("Everything measured", expanded=not result.comparisons):
        if measured_chart is not None:
            draw_chart(measured_chart, key=P + "measured_chart")
        st.dataframe(measured.pivot_table(index="key", columns="series", values="value", sort=False).reset_index(), hide_index=True)
export_buttons(layer_chart or table_chart or measured_chart, table if result.comparisons else measured, f"reproduce_{name}",
               key=P + "export")
