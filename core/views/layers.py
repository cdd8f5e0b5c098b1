"""Read the layers: every layer's vectors in words (logit and tuned lens), feed-forward neurons and sparse features."""

from __future__ import annotations

from typing import Mapping

from core.analyses.logit_lens import LENS
from core.analyses.neurons import NEURONS
from core.views import Param, View, analysis_params

LENS_PARAMS = (  # the Lens tab (app_pages/widgets/layer_lens.py); kind and top_k made from the declaration
    *analysis_params(LENS, "layers.lens.", only=("kind",)),
    Param("lens", "layers.lens.name", "str"),
    *analysis_params(LENS, "layers.lens.", only=("top_k",)),
    Param("lens_layer", "layers.lens.layer", "int", low=0, high=200),
    Param("lens_token", "layers.lens.token", "int", low=0, high=4096),
)


def lens_charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's Lens tab: the grid of top guesses, then KL to the final layer."""
    if not a:
        return []
    kind, name = params.get("lens_kind") or LENS.field("kind").default, params.get("lens") or None
    top_k = int(params.get("lens_top_k") or LENS.field("top_k").default)
    return [(lens.logit_lens(model, a, b, kind=kind, lens=name, top_k=top_k),
             "The head's top guess at every layer and token."),
            (lens.logit_lens(model, a, b, kind=kind, lens=name, top_k=top_k, view="kl"),
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
        *analysis_params(NEURONS, "neurons.", only=("layer",)),  # neuron_layer, 1..L
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
)
