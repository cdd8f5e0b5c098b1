"""Why this prediction?: which words a classifier's answer rests on, by several attribution methods."""

from __future__ import annotations

from typing import Mapping

from core.analyses.explain import ANALYSIS, METHOD_TITLES
from core.views import Param, View, analysis_params


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    if not a:
        return []
    # As the page: the methods asked for (default integrated gradients and rollout) that this model can run; a plain
    # encoder has no classifier head for the gradient and perturbation methods.
    available = lens.explain_methods(model)
    methods = [m for m in (params.get("methods") or "ig,rollout").split(",") if m in available]
    # The settings as the page reads them: each URL value parsed by its declared Param (bounds, type).
    settings = {name: param.parse(params[param.name]) for name, param in zip(_SETTINGS, _PARAMS)
                if params.get(param.name) not in (None, "")}
    if settings.get("target") == "predicted":  # the page's choice of "the predicted class"
        del settings["target"]
    return [(lens.explain(model, a, b, **{**settings, "method": m}), METHOD_TITLES.get(m, m)) for m in methods]


_SETTINGS = ("target", "steps", "samples", "window")
_PARAMS = analysis_params(ANALYSIS, "explain.", only=_SETTINGS)


VIEW = View(
    name="explain",
    title="Why this prediction?",
    url_path="explain",
    icon=":material/psychology_alt:",
    page="app_pages/explain.py",
    order=60,
    summary="Which words a fine-tuned classifier's answer rests on, scored by several methods (integrated gradients, "
            "occlusion, Shapley values, LIME, attention rollout and more) side by side. Check how faithful each method is by removing the words it ranks first.",
    params=(
        Param("methods", "explain.methods", "strs"),
        *_PARAMS,  # target, steps, samples, window: made from ExplainSettings
        Param("layer", "explain.layer", "int", low=1, high=128),  # the flow slider shows layers 1..L
    ),
    charts=charts,
)
