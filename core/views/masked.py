"""Masked words: BERT's guesses for a hidden word, and how they form layer by layer."""

from __future__ import annotations

from typing import Mapping

from core.analyses.masked import FILL_MASK
from core.views import HEAD_LAYER, HEADS, Param, View, analysis_params


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    if not a:
        return []
    top_k = int(params.get("top_k") or FILL_MASK.field("top_k").default)
    return [(lens.fill_mask(model, a, b, top_k=top_k), "The model's top guesses at each [MASK]."),
            (lens.fill_mask(model, a, b, top_k=top_k, view="layers", mask=int(params.get("which") or 0)),
             "The masked-word head on every layer's vector at the mask (only the last layer feeds it).")]


VIEW = View(
    name="masked",
    title="Masked words",
    url_path="masked",
    icon=":material/quiz:",
    page="app_pages/masked.py",
    order=20,
    summary="Hide a word (write [MASK] or click it) and see BERT's best guesses. Watch the guess form layer by layer, "
            "and see which words the hidden position looked at.",
    params=(
        *analysis_params(FILL_MASK, "masked.", only=("top_k",)),  # made from the declaration (core.contract)
        Param("which", "masked.which", "str"),
        Param("layer", "masked.layer", **HEAD_LAYER),  # the attention section's layer
        Param("heads", "masked.heads", **HEADS),
    ),
    charts=charts,
)
