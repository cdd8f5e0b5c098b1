"""Attention heads: the view, and the "Heads over a dataset" survey (statistics, pattern types) as functions, which
the page's Run button and presenter mode's prefetch share, so a survey prepared ahead is the one the page shows."""

from __future__ import annotations

from typing import Mapping

from core import numbering
from core.analyses import heads as hd
from core.analyses import patching
from core.analyses.attention import PAIR_FILTERS
from core.analyses.model_view import SCALES
from core.data.sources import SNLI, named_spec
from core.model.encoding import run_counting_cuts
from core.progress import check_stop
from core.protocols import DEFAULT
from core.views import HEAD_LAYER, HEADS, Caches, Param, Planned, View, corpus_params, flag, ints, parse

P = "heads."
CAUSES = "What causes it?"
TABS = ("One sentence", "Heads over a dataset", "Inside a head", CAUSES)
# core.analyses.patching.METHODS, named; "compare" runs both and shows how well the fast estimate tracks the exact one
PATCH_METHODS = {"exact": "exact", "attribution": "attribution (fast)", "compare": "attribution vs exact"}
# What the "Heads over a dataset" section starts from (the page sets them; a step's view is read with them too).
SURVEY_DEFAULTS = {P + "part": "Statistics", P + "source": SNLI, P + "limit": 100, P + "ablation_limit": 200,
                   P + "tb_limit": 200}
SURVEY_KEY, SURVEY_KIND, SURVEY_UNIT = P + "survey", "heads", "examples"
DATASET = "Heads over a dataset"  # the tab of the survey, ablation, change and syntax parts


def survey_params(ref: str, description: tuple, protocol: str) -> tuple:
    """The params the survey's job is keyed by: a prefetched job with equal params is the one on screen."""
    return (ref, description, protocol)


def survey_work(lm, inputs, protocol: str):
    def work(progress, should_stop):  # the survey with its cuts (core.model.encoding.Counted), for the page's notice
        return run_counting_cuts(lambda: hd.run_survey(lm, inputs, hd.SURVEY.make(protocol=protocol),
                                                       progress=progress, should_stop=should_stop))

    return work


def patching_work(subject, clean: str, corrupt: str, goal, method: str):
    """The "What causes it?" tab's job: (over heads, over positions) of one pair, exact or attribution patching;
    "compare": (attribution over heads, over positions, exact over heads, over positions), for the correlation of
    the estimate with the exact grid. Progress counts the exact cells (attribution: one step per grid)."""
    pair = patching.prepare(subject, clean, corrupt, goal)  # PatchingError here, before a job is submitted
    grids = [pair.adapter.num_layers * pair.adapter.num_heads, pair.adapter.num_layers * len(pair.clean.tokens)]
    runs = {"exact": ["exact"], "attribution": ["attribution"], "compare": ["attribution", "exact"]}[method]
    steps = [(run, over, size) for run in runs for over, size in zip(("heads", "positions"), grids)]
    total = sum(size for _, _, size in steps)

    def work(progress, should_stop):
        results, before = [], 0
        for run, over, size in steps:
            check_stop(should_stop)
            options = {} if run == "attribution" else {
                "progress": lambda done, _, before=before: progress(before + done, total), "should_stop": should_stop}
            settings = patching.ANALYSIS.make(over=over, method=run)
            results.append(patching.run_patch(subject, (clean, corrupt, goal), settings, **options))
            before += size
            progress(before, total)
        return tuple(results)

    return work


def _dataset_state(params: Mapping[str, str]) -> dict:
    """The "Heads over a dataset" section's session values a step's view sets, over the page's defaults."""
    return {p.key: p.default for p in VIEW.params} | SURVEY_DEFAULTS | parse(VIEW.url_path, params).values


def _survey_spec(state: Mapping) -> str:
    """The corpus spec of the survey's sample; ValueError for a sample given on the page (pasted or uploaded)."""
    source = state.get(P + "source") or SNLI
    spec = named_spec(source, state.get(P + "split"), state.get(P + "limit"))
    if spec is None:
        raise ValueError(f"the sample “{source}” is given on the page itself and cannot be prepared ahead")
    return spec


def _protocol(state: Mapping) -> str:
    return "clark" if state.get(P + "paper_protocol") else DEFAULT


def plan(params: Mapping[str, str], caches: Caches) -> Planned | None:
    """The survey a step's view shows, None when that view does not open the statistics or pattern parts;
    ValueError for a sample that cannot be read ahead (pasted or uploaded)."""
    state = _dataset_state(params)
    if state.get("attention.tab") != DATASET or state.get(P + "part") not in ("Statistics", "Pattern types"):
        return None
    corpus = caches.resolve_corpus(_survey_spec(state))
    ref = params.get("model") or ""
    protocol = _protocol(state)
    return Planned(SURVEY_KEY, survey_params(ref, (corpus.name, corpus.digest), protocol),
                   lambda: survey_work(caches.load_model(ref), corpus.inputs, protocol), SURVEY_KIND, SURVEY_UNIT)


def dataset_charts(lens, model: str, params: Mapping[str, str]) -> list:
    """The "Heads over a dataset" part a step names, drawn by its core.lens twin with the step's settings: the
    survey (statistics, pattern types) over the step's sample, the ablation of its run, the syntactic heads on the
    page's treebank (UD EWT dev, its first heads.tb_limit sentences). Change after fine-tuning needs a second model,
    which a link does not carry: no chart."""
    state = _dataset_state(params)
    part, protocol = state.get(P + "part"), _protocol(state)
    if part in ("Statistics", "Pattern types"):
        show = (state.get(P + "stat") or "sep") if part == "Statistics" else "patterns"
        chart = lens.heads(model, _survey_spec(state), limit=None, protocol=protocol, show=show)
        return [(chart, "Clark et al. (2019)'s statistic per head over the sample." if part == "Statistics" else
                 "Each head's dominant pattern type over the sample (Kovaleva et al. 2019).")]
    if part == "Ablation" and state.get(P + "run"):
        return [(lens.ablate(state[P + "run"], limit=state.get(P + "ablation_limit") or None),
                 "Accuracy change with each head, then each whole layer, disabled.")]
    if part == "Syntactic heads":
        chart = lens.syntax_heads(model, f"ud:dev:{int(state.get(P + 'tb_limit') or 200)}", protocol=protocol,
                                  relation=state.get(P + "relation") or None)
        return [(chart, "Per relation, the head whose most-attended word is most often the gold head.")]
    return []


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    if params.get("tab") == CAUSES:
        return patching_charts(lens, model, params)
    if params.get("tab") == DATASET:
        return dataset_charts(lens, model, params)
    if not a:
        return []
    if params.get("view") == "Model view":
        return [(lens.model_view(model, a, b, pair_filter=params.get("filter", "all") if b else "all",
                                 scale=params.get("scale") or "head"),
                 "Every layer × head: each square is one head's attention; a pixel shows the largest weight it covers.")]
    heads = ints(params.get("heads"), (0,))
    # URL layers are 1..L (core.numbering); the notebook API takes array indices
    layer = numbering.index_of(params["layer"]) if params.get("layer") not in (None, "") else None
    chart = lens.head_view(model, a, b, layer=layer, heads=heads, pair_filter=params.get("filter", "all"),
                           hide_special=flag(params, "hide_special"), word_level=flag(params, "words"),
                           style="heatmap" if params.get("style") == "Heatmap" else "lines")
    out = [(chart, "Lines from each token to the tokens it attends to; darker = more attention.")]
    if params.get("inside_layer") not in (None, ""):  # the "Inside a head" tab's choice travels in the link too
        where = dict(layer=numbering.index_of(params["inside_layer"]), head=int(params.get("inside_head") or 0),
                     query=int(params.get("inside_query") or 0))
        out += [(lens.neuron_view(model, a, b, **where), "Inside the head: query, key, q⊙k and the scores."),
                (lens.attention_norms(model, a, b, **where), "Raw attention vs norm-weighted ‖α f(x)‖ for this query.")]
    return out


def patching_charts(lens, model: str, params: Mapping[str, str]) -> list:
    """The "What causes it?" tab's two heatmaps for a step: heads, then residual stream positions."""
    clean, corrupt = params.get("clean"), params.get("corrupt")
    if not clean or not corrupt:
        return []
    goal = {"label": params["class"]} if params.get("class") else {"target": params.get("target")}
    method = {"compare": "attribution"}.get(params.get("method") or "exact", params.get("method") or "exact")
    out = []
    for over, note in (
            ("heads", "Each head's output copied from the clean run into the corrupted one: how much of the answer returns."),
            ("positions", "The residual stream after each layer at each token, copied the same way (Meng et al.'s trace).")):
        chart, _, result = lens.patch(model, clean, corrupt, over=over, method=method, return_data=True, **goal)
        # the page's warnings above its grid go into the step's note, so the deck and PDF say it too
        out.append((chart, " ".join(["Warning: " + w.message for w in result.warnings] + [note])))
    return out


VIEW = View(
    name="attention",
    title="Attention heads",
    url_path="attention",
    icon=":material/hub:",
    page="app_pages/attention.py",
    order=10,
    summary="BERT reads a sentence with many small \"heads\", each deciding which other words to look at. See those "
            "links as lines or as a grid, for one head or all of them, and over a whole dataset.",
    params=(
        Param("tab", "attention.tab", "str", "One sentence", TABS),
        Param("view", "attention.mode", "str", "Head view", ("Head view", "Model view")),
        Param("show_all", "attention.show_all", "bool", False),
        Param("scale", "attention.scale", "str", "head", SCALES),
        Param("layer", "attention.layer", **HEAD_LAYER),
        Param("heads", "attention.heads", **HEADS),
        Param("filter", "attention.filter", "str", "all", tuple(PAIR_FILTERS)),
        Param("hide_special", "attention.hide_special", "bool", False),
        Param("words", "attention.word_level", "bool", False),
        Param("style", "attention.style", "str", "Lines", ("Lines", "Heatmap")),
        Param("weights", "attention.weights", "str"),
        Param("inside_layer", "inside.layer", **HEAD_LAYER),
        Param("inside_head", "inside.head", type="int", low=0, high=256),
        Param("inside_query", "inside.query", type="int", low=0, high=4096),
        Param("part", "heads.part", "str", "Statistics", ("Statistics", "Pattern types", "Ablation",
                                                          "Change after fine-tuning", "Syntactic heads")),
        Param("heads_protocol", "heads.paper_protocol", "bool"),
        *corpus_params("heads.", "heads.limit", "heads_"),
        Param("stat", "heads.stat", "str", None, hd.STAT_NAMES),
        Param("run", "heads.run", "str"),
        Param("relation", "heads.relation", "str"),
        Param("pairs_split", "pairheads.split", "str", None, ("test", "validation", "train")),
        Param("pairs_n", "pairheads.limit", "int", low=10, high=5000),
        Param("pairs_words_only", "pairheads.words_only", "bool"),
        Param("clean", "causes.clean", "str"),
        Param("corrupt", "causes.corrupt", "str"),
        Param("target", "causes.target", "str"),
        Param("class", "causes.class", "str"),
        Param("method", "causes.method", "str", "exact", tuple(PATCH_METHODS)),
    ),
    commands=("model-view", "heads", "ablate", "attention-change", "syntax-heads", "neuron", "attention-norms",
              "attention-norm-shares", "pair-attention", "patch"),
    plan=plan,
    charts=charts,
)
