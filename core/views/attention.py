"""Attention heads: the view, and the "Heads over a dataset" survey (statistics, pattern types) as functions, which
the page's Run button and presenter mode's prefetch share, so a survey prepared ahead is the one the page shows."""

from __future__ import annotations

from typing import Callable, Mapping

from core.analyses import attention as head_view
from core.analyses import heads as hd
from core.analyses import inside_head, model_view
from core.analyses import patching
from core.analyses.heads import pairs as pair_heads
from core.data.sources import SNLI, named_spec
from core.model.encoding import run_counting_cuts
from core.progress import check_stop
from core.protocols import DEFAULT
from core.views import Caches, Param, Planned, View, analysis_params, corpus_params, parse

# core.charts (altair) imported in functions: view modules stay light for the router (tests/unit/test_views.py).
P = "heads."
ONE_SENTENCE, DATASET, INSIDE, CAUSES = "One sentence", "Heads over a dataset", "Inside a head", "What causes it?"
# The page's tabs, each with the analyses (core.contract, by registry name) it shows, in the page's order. The page
# draws its tabs from this (tab_renderers); an analysis of this view names its tab as its `title`.
TABS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (ONE_SENTENCE, ("head-view", "model-view")),
    (DATASET, ("heads", "ablate", "attention-change", "syntax-heads", "pair-attention")),
    (INSIDE, ("neuron", "attention-norms", "attention-norm-shares")),
    (CAUSES, ("patch",)),
)
TAB_TITLES = tuple(title for title, _ in TABS)
# Each analysis's settings: {field: the page widget's session key}; the URL params are made from the declarations.
HEAD_VIEW_KEYS = {"layer": "attention.layer", "heads": "attention.heads", "pair_filter": "attention.filter",
                  "hide_special": "attention.hide_special", "word_level": "attention.word_level"}
MODEL_VIEW_KEYS = {"pair_filter": "attention.filter", "scale": "attention.scale"}  # the filter is the head view's
NEURON_KEYS = {"layer": "inside.layer", "head": "inside.head", "query": "inside.query", "pair_filter": "inside.filter"}
PAIR_HEADS_KEYS = {"words_only": "pairheads.words_only"}


def tab_renderers(renderers: Mapping[str, Callable]) -> list[tuple[str, Callable]]:
    """(title, renderer) for each of TABS in order, from the page's {tab title: renderer}; ValueError naming the
    difference when the page draws a tab the view does not list, or leaves one out."""
    drawn, listed = list(renderers), list(TAB_TITLES)
    if sorted(drawn) != sorted(listed):
        raise ValueError(f"the Attention heads page draws the tabs {drawn}, its view (core.views.attention.TABS) "
                         f"lists {listed}")
    return [(title, renderers[title]) for title in listed]


def settings_of(params: Mapping[str, str], keys: Mapping[str, str]) -> dict:
    """{setting: value} a step's URL params set, read through the view's Params (a layer 1..L becomes its array
    index; a value that does not fit is left out, as the page drops it)."""
    values = parse(VIEW.url_path, params).values
    return {name: values[key] for name, key in keys.items() if key in values}


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
    from core.charts.attention import HEAD_VIEW_CAPTION, MODEL_VIEW_CAPTION  # altair: only when a step is drawn

    if params.get("view") == "Model view":
        chosen = settings_of(params, MODEL_VIEW_KEYS)
        if not b:
            chosen.pop("pair_filter", None)  # a single sentence has no pair to filter
        return [(lens.model_view(model, a, b, **chosen), MODEL_VIEW_CAPTION)]
    chart = lens.head_view(model, a, b, **settings_of(params, HEAD_VIEW_KEYS),
                           style="heatmap" if params.get("style") == "Heatmap" else "lines")
    out = [(chart, HEAD_VIEW_CAPTION)]
    if params.get("inside_layer") not in (None, ""):  # the "Inside a head" tab's choice travels in the link too
        where = settings_of(params, NEURON_KEYS)
        row = {name: where[name] for name in ("layer", "head", "query") if name in where}
        out += [(lens.neuron_view(model, a, b, **where), "Inside the head: query, key, q⊙k and the scores."),
                (lens.attention_norms(model, a, b, **row), "Raw attention vs norm-weighted ‖α f(x)‖ for this query.")]
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
        Param("tab", "attention.tab", "str", ONE_SENTENCE, TAB_TITLES),
        Param("view", "attention.mode", "str", "Head view", ("Head view", "Model view")),
        Param("show_all", "attention.show_all", "bool", False),
        # layer, heads, filter, hide_special, words, scale: made from the declarations (core.contract)
        *analysis_params(head_view.ANALYSIS, "attention.", only=tuple(HEAD_VIEW_KEYS), keys=HEAD_VIEW_KEYS),
        *analysis_params(model_view.ANALYSIS, "attention.", only=("scale",), keys=MODEL_VIEW_KEYS),
        Param("style", "attention.style", "str", "Lines", ("Lines", "Heatmap")),
        Param("weights", "attention.weights", "str"),
        # inside_layer, inside_head, inside_query, inside_filter: the neuron view's declaration
        *analysis_params(inside_head.ANALYSES[0], "inside.", only=tuple(NEURON_KEYS), keys=NEURON_KEYS),
        Param("part", "heads.part", "str", "Statistics", ("Statistics", "Pattern types", "Ablation",
                                                          "Change after fine-tuning", "Syntactic heads")),
        Param("heads_protocol", "heads.paper_protocol", "bool"),
        *corpus_params("heads.", "heads.limit", "heads_"),
        Param("stat", "heads.stat", "str", None, hd.STAT_NAMES),
        Param("run", "heads.run", "str"),
        Param("relation", "heads.relation", "str"),
        Param("pairs_split", "pairheads.split", "str", None, ("test", "validation", "train")),
        Param("pairs_n", "pairheads.limit", "int", low=10, high=5000),
        *analysis_params(pair_heads.ANALYSIS, "pairheads.", only=tuple(PAIR_HEADS_KEYS), keys=PAIR_HEADS_KEYS),
        Param("clean", "causes.clean", "str"),
        Param("corrupt", "causes.corrupt", "str"),
        Param("target", "causes.target", "str"),
        Param("class", "causes.class", "str"),
        Param("method", "causes.method", "str", "exact", tuple(PATCH_METHODS)),
    ),
    plan=plan,
    charts=charts,
    declared_tabs=True,  # app_pages/attention.py draws page_tabs: an analysis declared with a tab here gets one
)
