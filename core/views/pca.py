"""Layerwise PCA: every word piece as a point in 2-D, layer by layer."""

from __future__ import annotations

from typing import Mapping

from core.analyses.projection import ANALYSIS
from core.views import LAYER, Param, View, analysis_params, flag


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    texts = ([(a, b)] if a else []) + [line.strip() for line in params.get("extra", "").splitlines() if line.strip()]
    if not texts:
        return []
    protocol = "visbert" if flag(params, "protocol") else "bertlens"
    chart = lens.layerwise_pca(model, texts, layer=int(params.get("layer") or 0),
                               method=None if protocol == "visbert" else params.get("method") or None,
                               protocol=protocol, colour=params.get("colour") or "sentence", word=params.get("word"),
                               hide_special=flag(params, "hide_special"), hide_punct=flag(params, "hide_punct"),
                               show_labels=flag(params, "labels", True))
    return [(chart, "Each point is one word piece at this layer, projected to two dimensions.")]


VIEW = View(
    name="pca",
    title="Layerwise PCA",
    url_path="pca",
    icon=":material/scatter_plot:",
    page="app_pages/pca.py",
    order=30,
    summary="Every word as a point in 2-D, layer by layer. Press play and watch the same word in different senses "
            "(a river bank, a money bank) start together and drift apart, in one model or two side by side.",
    params=(
        Param("extra", "pca.extra", "str", ""),
        Param("protocol", "pca.protocol", "bool"),
        *analysis_params(ANALYSIS, "pca.", only=("method",)),
        Param("colour", "pca.colour", "str", None, ("sentence", "segment", "word")),
        Param("background", "pca.background", "str", None, ("none", "builtin", "snli")),
        *analysis_params(ANALYSIS, "pca.", only=("hide_special", "hide_punct")),
        Param("labels", "pca.labels", "bool", True),
        Param("second", "pca.second_model", "str"),
        Param("word", "pca.word", "str"),
        Param("layer", "pca.layer", **LAYER),
    ),
    charts=charts,
)
