"""Reproduce a paper: a published analysis run the paper's way, its numbers beside yours."""

from core.views import Param, View


def charts(lens, model, a, b, params) -> list:
    """A lesson step's chart: the study run as the page runs it (the paper's model when it loads here, else the
    step's), once per seed when the step names several. A long job (about 2 minutes on MiniLM with 2 CPU cores)."""
    if not params.get("study"):
        return []
    from core import studies
    from core.model.loading import availability, display_name

    study = studies.get(params["study"])
    chosen = study.model if availability(study.model).loadable else model
    seeds = [int(s) for s in str(params.get("seeds") or "").split(",") if s.strip()]
    chart = lens.reproduce(study.name, model=chosen, seeds=seeds if len(seeds) > 1 else None,
                           seed=seeds[0] if len(seeds) == 1 else 0)
    over = f" over seeds {', '.join(map(str, seeds))}" if len(seeds) > 1 else ""
    return [(chart, f"{study.title}: the paper's numbers beside those measured on {display_name(chosen)}{over}.")]

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
    commands=("reproduce",),
    charts=charts,
)
