"""Why this prediction?: which words a classifier's answer rests on, by several attribution methods."""

from __future__ import annotations

from typing import Mapping

from core.analyses.explain import METHOD_TITLES
from core.views import Param, View


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    if not a:
        return []
    # As the page: the methods asked for (default integrated gradients and rollout) that this model can run; a plain
    # encoder has no classifier head for the gradient and perturbation methods.
    available = lens.explain_methods(model)
    methods = [m for m in (params.get("methods") or "ig,rollout").split(",") if m in available]
    target = params.get("target")
    target = None if target in (None, "", "predicted") else target
    steps = int(params.get("steps") or 50)
    samples = int(params["samples"]) if params.get("samples") else None
    window = int(params.get("window") or 1)
    return [(lens.explain(model, a, b, method=m, target=target, steps=steps, samples=samples, window=window),
             METHOD_TITLES.get(m, m)) for m in methods]


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
        Param("target", "explain.target", "str"),
        Param("steps", "explain.steps", "int", low=10, high=300),
        Param("samples", "explain.samples", "int", low=1, high=5000),
        Param("window", "explain.window", "int", low=1, high=10),
        Param("layer", "explain.layer", "int", low=1, high=128),  # the flow slider shows layers 1..L
    ),
    commands=("explain", "explain-faithfulness"),
    charts=charts,
)
