"""What each layer knows: label probes per layer with control tasks, MDL and the expected layer (issue 49)."""

from __future__ import annotations

from typing import Mapping

from core.analyses.layer_knowledge.probes import ANALYSIS as PROBE_LABELS
from core.views import Param, View, analysis_params, parse

P = "layer_knowledge."
# The tasks the page offers (several on one chart); any morph:FEAT works on the command line and in a notebook.
TASKS = ("upos", "xpos", "deprel", "morph:Number", "morph:Tense", "morph:Person", "morph:VerbForm", "morph:Gender")
DEFAULT_TRAIN, DEFAULT_EVAL = "ud:dev", "ud:test"
# The page's tabs, each with the analyses (core.contract, by registry name) it shows; app_pages/layer_knowledge.py
# draws each with its renderer.
TABS: tuple[tuple[str, tuple[str, ...]], ...] = (("Probes per layer", ("probe-labels",)),
                                                  ("Erase a concept", ("erase",)))
TAB_TITLES = tuple(title for title, _ in TABS)


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """A lesson step's charts: the first task's probes per layer (accuracy, control, selectivity; MDL), the link's
    settings read by the view's own params (core.views.parse), each param's default where the link has none."""
    state = parse(VIEW.url_path, params).values
    chosen = {param.name: state.get(param.key) or param.default for param in VIEW.params}
    chart = lens.probe_labels(model, chosen["corpus"], chosen["eval_corpus"], task=chosen["tasks"][0],
                              control=chosen["control"], mdl=chosen["mdl"])
    return [(chart, "Accuracy of a linear probe at each layer (0 = embeddings), with its control task, the "
                    "majority line and the expected layer.")]


VIEW = View(
    name="layer_knowledge",
    title="What each layer knows",
    url_path="layer_knowledge",
    icon=":material/stacks:",
    page="app_pages/layer_knowledge.py",
    order=55,
    summary="A small linear probe reads part of speech, dependency relations or morphology off each layer's word "
            "vectors. Controls, compression and the expected layer say whether the layer knows it or the probe "
            "only memorised words.",
    params=(
        Param("tab", P + "tab", "str", TAB_TITLES[0], TAB_TITLES),
        Param("tasks", P + "tasks", "strs", ["upos"]),
        Param("second", P + "second", "str"),
        Param("corpus", P + "corpus", "str", DEFAULT_TRAIN),
        Param("eval_corpus", P + "eval_corpus", "str", DEFAULT_EVAL),
        *analysis_params(PROBE_LABELS, P, only=("control", "mdl")),
    ),
    charts=charts,
)
