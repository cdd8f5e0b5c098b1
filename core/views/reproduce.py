"""Reproduce a paper: a published analysis run the paper's way, its numbers beside yours."""

from core.views import Param, View

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
)
