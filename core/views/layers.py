"""Read the layers: every layer's vectors in words (logit and tuned lens), feed-forward neurons and sparse features."""

from __future__ import annotations

from core.views import LAYER, Param, View

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
    commands=("neurons", "neurons-diff", "sae-train", "sae-features"),
    charts=None,
)
