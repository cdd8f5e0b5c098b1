"""Read the layers: every layer's vectors in words (logit and tuned lens), feed-forward neurons and sparse features."""

from __future__ import annotations

from typing import Mapping

from core.views import LAYER, Param, View

LENS_PARAMS = (  # the Lens tab (app_pages/widgets/layer_lens.py)
    Param("lens_kind", "layers.lens.kind", "str", "logit", choices=("logit", "tuned")),
    Param("lens", "layers.lens.name", "str"),
    Param("lens_top_k", "layers.lens.top_k", "int", 5, low=1, high=20),
    Param("lens_layer", "layers.lens.layer", "int", low=0, high=200),
    Param("lens_token", "layers.lens.token", "int", low=0, high=4096),
)


def lens_charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's Lens tab: the grid of top guesses, then KL to the final layer."""
    if not a:
        return []
    kind, name = params.get("lens_kind") or "logit", params.get("lens") or None
    return [(lens.logit_lens(model, a, b, kind=kind, lens=name), "The head's top guess at every layer and token."),
            (lens.logit_lens(model, a, b, kind=kind, lens=name, view="kl"),
             "How far each layer's guesses are from the model's output (KL, nats).")]


VIEW = View(
    name="layers",
    title="Read the layers",
    url_path="layers",
    icon=":material/translate:",
    page="app_pages/layers.py",
    order=25,
    summary="Read what every layer holds in words: a masked-word head applied to each layer's vector at every "
            "token (logit and tuned lens). Browse the feed-forward neurons and the sparse features a layer is "
            "made of, and see which change after fine-tuning.",
    params=(
        *LENS_PARAMS,
        Param("tab", "layers.tab", "str", None, ("Lens", "Neurons", "Sparse features")),
        # the Neurons tab (app_pages/widgets/neurons.py)
        Param("neuron_layer", "neurons.layer", **LAYER),
        Param("neuron", "neurons.neuron", "int", low=0, high=1_000_000),
        Param("neuron_by", "neurons.by", "str", None, ("max", "change")),
        Param("neuron_b", "neurons.b", "str"),
        Param("neuron_corpus", "neurons.source", "str"),
        # the Sparse features tab (app_pages/widgets/sparse_features.py)
        Param("sae", "features.sae", "str"),
        Param("feature", "features.feature", "int", low=0, high=1_000_000),
        Param("sae_b", "features.b", "str"),
        Param("sae_corpus", "features.source", "str"),
    ),
    commands=("lens", "fit-tuned-lens", "neurons", "neurons-diff", "sae-train", "sae-features"),
    charts=lens_charts,
    declared_tabs=True,  # app_pages/layers.py draws page_tabs: an analysis declared with a tab here gets one
)
