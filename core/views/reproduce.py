"""Reproduce a paper: a published analysis run the paper's way, its numbers beside yours."""

from typing import Mapping

from core import studies
from core.model.loading import availability, available_models, display_name
from core.studies import seeds as seed_runs
from core.views import Caches, Param, Planned, View, parse

P = "reproduce."
KIND, UNIT = "reproduce", "steps"


def model_options(study, step_model: str) -> list[str]:
    """The models the page offers for a study: the paper's, the session's, then every local one."""
    return list(dict.fromkeys([study.model, step_model, *(e.name for e in available_models())]))


def default_model(study, step_model: str) -> str:
    """The model the page starts a study on: the paper's when it loads now, else the first offered that does
    (offline, the paper's model would only fail at Run)."""
    return next((ref for ref in model_options(study, step_model) if availability(ref).loadable), study.model)


def run_work(study, options, seed_list):
    """The page's Run-button job: the study once, or once per seed."""
    def work(progress, should_stop):
        if seed_list is not None:
            return seed_runs.run_seeds(study, options, seed_list, progress, should_stop)
        return study.run(options, progress, should_stop)

    return work


def step_run(params: Mapping[str, str]):
    """(study, StudyOptions, seed list or None) a step's link makes the page run with its defaults; None when the link
    names no study. ValueError for seeds that do not parse."""
    values = parse(VIEW.url_path, params).values
    if values.get(P + "study") not in studies.NAMES:
        return None
    study = studies.get(values[P + "study"])
    text = str(values.get(P + "seeds") or "").strip()
    seed_list = seed_runs.parse_seeds(text, "Seeds", "the Seed field (and leave Seeds empty)") if text else None
    options = studies.StudyOptions(model=default_model(study, params.get("model") or "") or None,
                                   corpus=(study.default_corpus or "").strip() or None, seed=0, limit=None)
    return study, options, seed_list


def job_params(study, options, seed_list) -> tuple:
    """What the page keys its job by: a prefetched job with equal params is the one on screen."""
    return (study.name, repr(options.to_json()), seed_list)


def plan(params: Mapping[str, str], caches: Caches) -> Planned | None:
    """Presenter mode runs the step's study ahead (about 2 minutes on MiniLM with 2 CPU cores), so its slide draws
    without a Run click."""
    found = step_run(params)
    if found is None:
        return None
    return Planned(P + found[0].name, job_params(*found), lambda: run_work(*found), KIND, UNIT)


def charts(lens, model, a, b, params) -> list:
    """A lesson step's chart: the study run as the page runs it (its model and seeds; `step_run`). A long job
    (about 2 minutes on MiniLM with 2 CPU cores)."""
    found = step_run({**params, "model": model})
    if found is None:
        return []
    study, options, seeds = found
    chart = lens.reproduce(study.name, model=options.model, corpus=options.corpus, seeds=seeds)
    over = f" over seeds {', '.join(map(str, seeds))}" if seeds else ""
    return [(chart, f"{study.title}: the paper's numbers beside those measured on {display_name(options.model)}{over}.")]

VIEW = View(
    name="reproduce",
    title="Reproduce a paper",
    url_path="reproduce",
    icon=":material/fact_check:",
    page="app_pages/reproduce.py",
    order=90,
    summary="Run a published analysis (Ethayarajh, Clark, Hewitt & Manning, the course slides…) the paper's way. "
            "See its numbers beside yours, with a plain verdict: reproduced, differs, or other model.",
    params=(
        Param("study", "reproduce.study", "str"),
        Param("seeds", "reproduce.seeds", "str"),  # "0,1,2": the study run once per seed (core.studies.seeds)
    ),
    plan=plan,
    charts=charts,
)
