"""Read the layers: every layer's vectors in words (logit and tuned lens), feed-forward neurons and sparse features."""

from __future__ import annotations

from typing import Mapping

from core.analyses.logit_lens import LENS
from core.analyses.neurons import NEURONS
from core.analyses.sparse_features import SAE_FEATURES
from core.data.sources import BUILTIN, named_spec
from core.views import Param, View, analysis_params, parse

LENS_PARAMS = (  # the Lens tab (app_pages/widgets/layer_lens.py); kind and top_k made from the declaration
    *analysis_params(LENS, "layers.lens.", only=("kind",)),
    Param("lens", "layers.lens.name", "str"),
    *analysis_params(LENS, "layers.lens.", only=("top_k",)),
    Param("lens_layer", "layers.lens.layer", "int", low=0, high=200),
    Param("lens_token", "layers.lens.token", "int", low=0, high=4096),
)


# The page's tabs, each the analysis it shows (the trainings, fit-tuned-lens and sae-train, sit inside the Lens and
# Sparse features tabs; neurons-diff inside Neurons): app_pages/layers.py reads them from here.
TABS = (LENS.title, NEURONS.title, SAE_FEATURES.title)
TAB_SAMPLE = 300  # the Neurons and Sparse features tabs' corpus picker samples this many items of a dataset


def lens_charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's charts: its tab's (`tab`; default the Lens tab: the grid of top guesses, then KL to the
    final layer)."""
    tab = params.get("tab") or LENS.title
    if tab == NEURONS.title:
        return neuron_charts(lens, model, a, b, params)
    if tab == SAE_FEATURES.title:
        return feature_charts(lens, model, a, b, params)
    if not a:
        return []
    kind, name = params.get("lens_kind") or LENS.field("kind").default, params.get("lens") or None
    top_k = int(params.get("lens_top_k") or LENS.field("top_k").default)
    return [(lens.logit_lens(model, a, b, kind=kind, lens=name, top_k=top_k),
             "The head's top guess at every layer and token."),
            (lens.logit_lens(model, a, b, kind=kind, lens=name, top_k=top_k, view="kl"),
             "How far each layer's guesses are from the model's output (KL, nats).")]


def _tab_corpus(source: str | None) -> str:
    """The core.data.corpus spec of a tab's corpus picker source (the built-in sentences when none is given);
    ValueError for a corpus typed or uploaded on the page, which a link cannot carry."""
    spec = named_spec(source or BUILTIN, None, TAB_SAMPLE)
    if spec is None:
        raise ValueError(f"the corpus “{source}” is given on the page itself (typed or uploaded), so it cannot be read "
                         "from the link")
    return spec


def neuron_charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's Neurons tab, as the tab draws it: the neurons listed (by highest activation, or by change in
    `neuron_b`), then the chosen neuron's top contexts with its activation over the step's sentence."""
    state = parse(VIEW.url_path, params).values
    spec = _tab_corpus(state.get("neurons.source"))
    layer = state.get("neurons.layer") or max(1, lens.load(model).num_layers // 2)  # the tab's default layer
    compare = state.get("neurons.b") if state.get("neurons.by") == "change" else None
    listed = lens.neurons(model, spec, layer=layer, compare=compare or None)
    out = [(listed, f"The neurons of layer {layer} " + (f"that changed most in {compare}." if compare else
                                                         "with the highest activation."))]
    if state.get("neurons.neuron") is not None:
        neuron = int(state["neurons.neuron"])
        out.append((lens.neurons(model, spec, layer=layer, neuron=neuron, text=a or None, text_b=b),
                    f"Neuron {neuron}'s top contexts" + (" and its activation over the sentence." if a else ".")))
    return out


def feature_charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's Sparse features tab: the features of `sae` firing on the sentence, with `feature`'s top
    contexts, histogram and lens words over the tab's corpus, and the firing change in `sae_b` when given."""
    state = parse(VIEW.url_path, params).values
    sae, feature, compare = state.get("features.sae"), state.get("features.feature"), state.get("features.b")
    if not sae or not a:
        return []
    spec = _tab_corpus(state.get("features.source")) if feature is not None or compare else "builtin"
    chart = lens.features(sae, a, b, model=model, feature=feature, corpus=spec, compare=compare or None)
    return [(chart, f"The features of {sae} firing on the sentence" + (f", and feature {feature} over the corpus."
                                                                       if feature is not None else "."))]


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
        Param("tab", "layers.tab", "str", None, TABS),
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
    charts=lens_charts,
    declared_tabs=True,  # app_pages/layers.py draws page_tabs: an analysis declared with a tab here gets one
)
