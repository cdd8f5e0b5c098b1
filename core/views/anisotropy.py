"""Anisotropy by layer: the view, and its corpus pass as functions. The page's Run button and presenter mode's
prefetch build the same `Request` and submit the same core.jobs work, so a pass prepared ahead is found by the page
for exactly the settings it shows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from core import protocols
from core.analyses import anisotropy as an
from core.data import corpus as corpora
from core.data.sources import BUILTIN, named_spec
from core.model.encoding import run_counting_cuts
from core.model.loading import ModelUnavailable, available_models
from core.views import LAYER, LIMIT, Caches, Param, Planned, View, analysis_params, corpus_params, parse

P = "anisotropy."
JOB_KEY, KIND, UNIT = "anisotropy", "anisotropy", "sentences"


def model_options(sidebar_model: str) -> list[str]:
    return list(dict.fromkeys([sidebar_model, *(e.name for e in available_models())]))


def chosen_models(wanted, sidebar_model: str) -> list[str]:
    """The models the page keeps from `wanted`: those it offers, else the sidebar's."""
    options = model_options(sidebar_model)
    return [m for m in (wanted or []) if m in options] or [sidebar_model]


def make_settings(*, n_pairs, seed, min_contexts, baseline, paper_protocol, include_special) -> an.AnisotropySettings:
    """The page's settings through the declaration's one check (core.contract.Analysis.make); the page's paper
    protocol switch is the `protocol` setting, and it leaves [CLS]/[SEP] out."""
    return an.ANALYSIS.make(
        n_pairs=n_pairs, seed=seed, min_contexts=min_contexts, baseline=baseline,
        protocol=an.PAPER_PROTOCOL if paper_protocol else protocols.DEFAULT,
        include_special=bool(include_special) and not paper_protocol,
    )


@dataclass(frozen=True)
class Request:
    """What one view of the page measures: models (one line each), the corpus cut to its limit, the settings."""

    models: tuple[str, ...]
    corpus: corpora.Corpus
    settings: an.AnisotropySettings

    def keys(self) -> dict:
        return {ref: (ref, self.corpus.digest, self.settings) for ref in self.models}

    def missing(self, store: Mapping) -> list[str]:
        return [ref for ref, key in self.keys().items() if key not in store]

    def job_params(self, store: Mapping):
        """The params job_controls keys the page's job by: a prefetched job with equal params is this view's."""
        return (tuple(self.missing(store)), self.corpus.digest, self.settings)


def view_state(params: Mapping[str, str]) -> dict:
    """The page's session values for a view's URL params (a lesson step): its defaults, then what the URL sets."""
    return {p.key: p.default for p in VIEW.params} | parse(VIEW.url_path, params).values


def corpus_of_view(params: Mapping[str, str]) -> tuple[str, str]:
    """(core.data.corpus spec, the name the page shows) of a view's `corpus` / `split` / `n`. The URL carries the
    corpus picker's source name ("Built-in sentences", "SNLI", ...), read here for the page's prefetch and for
    core.lens.view alike. A corpus typed or uploaded on the page cannot be read from a URL: ValueError."""
    state = view_state(params)
    source = state.get(P + "source") or BUILTIN
    spec = named_spec(source, state.get(P + "split"), state.get(P + "dataset_limit"))
    if spec is None:
        raise ValueError(f"the corpus “{source}” is given on the page itself (typed or uploaded), so it cannot be "
                         "read from the link")
    return spec, source


def request_of_view(params: Mapping[str, str], resolve_corpus: Callable[[str], corpora.Corpus] = corpora.resolve) -> Request:
    """The request a view's URL params (a lesson step) make the page build, with the page's defaults for the rest.
    Only named corpora (built-in sentences, datasets) can be prepared ahead; others raise ValueError."""
    state = view_state(params)
    corpus = resolve_corpus(corpus_of_view(params)[0])
    limit = min(int(state.get(P + "limit") or 0), len(corpus))
    settings = make_settings(n_pairs=state[P + "pairs"], seed=state[P + "seed"], min_contexts=state[P + "min_contexts"],
                             baseline=state[P + "baseline"], paper_protocol=bool(state.get(P + "paper_protocol")),
                             include_special=bool(state.get(P + "include_special")))
    models = chosen_models(state.get(P + "models"), params.get("model") or "")
    return Request(tuple(models), corpus.head(limit or None), settings)


def make_work(request: Request, store, load_model: Callable[[str], object],
              on_load_error: Callable[[str | None], None] = lambda message: None):
    """Load every model still missing (with the caller's `load_model`: in the app, in the script thread, where
    st.cache_* is safe); a model that cannot be had is reported, the others run. Returns work(progress, should_stop)
    for core.jobs. Each model's profile is put in `store` (a core.shared.SharedResults) only once measured in full,
    so a cancelled or abandoned pass never leaves a half profile that looks complete."""
    keys = request.keys()
    loaded, failures = [], []
    for ref in request.missing(store):
        try:
            loaded.append((keys[ref], load_model(ref)))
        except ModelUnavailable as err:
            failures.append(str(err))
    if not loaded:
        raise ModelUnavailable(" ".join(failures) or "nothing left to measure")
    on_load_error(" ".join(failures) or None)

    def work(progress, should_stop):
        for i, (key, lm) in enumerate(loaded):
            stage = f"{key[0]} (model {i + 1} of {len(loaded)}):"
            try:
                counted = run_counting_cuts(lambda: an.measure_corpus(
                    lm, request.corpus, request.settings, should_stop=should_stop,
                    progress=lambda done, total: progress(done, total, stage)))
            except ValueError as err:  # too large a corpus for the paper protocol, too few sentences: say which model
                raise ValueError(f"{key[0]}: {err}") from err
            profile = replace(counted.value, dropped=counted.dropped, max_length=counted.max_length)
            store.put(key, profile)  # kept per model as soon as it is measured: a cancel loses only the model in progress

    return work


def plan(params: Mapping[str, str], caches: Caches) -> Planned:
    """The step's corpus pass, for the models not measured yet (make_work None when all are)."""
    request = request_of_view(params, caches.resolve_corpus)
    store = caches.shared_results(VIEW.name)
    make = (lambda: make_work(request, store, caches.load_model)) if request.missing(store) else None
    return Planned(JOB_KEY, request.job_params(store), make, KIND, UNIT)


def charts(lens, model: str, a: str, b: str | None, params: Mapping[str, str]) -> list:
    """The page's chart for a lesson step: the request the page would build from these params (request_of_view:
    its corpus, sentence limit, settings and models), drawn by core.lens."""
    request = request_of_view({**params, "model": model})
    measure = view_state(params).get(P + "measure") or "random_cosine"
    chosen = {f.name: getattr(request.settings, f.name) for f in an.ANALYSIS.fields}
    chart = lens.anisotropy(list(request.models), request.corpus, measure=measure, **chosen)
    return [(chart, f"{an.MEASURES[measure]} by layer over {corpus_of_view(params)[1]} "
                    f"({len(request.corpus)} sentences).")]


VIEW = View(
    name="anisotropy",
    title="Anisotropy by layer",
    url_path="anisotropy",
    icon=":material/stacked_line_chart:",
    page="app_pages/anisotropy.py",
    order=40,
    summary="How alike BERT's word vectors are at each layer: random words, the same word in different sentences, "
            "and words of one sentence. Measured over a whole corpus, for several models on one chart.",
    params=(
        Param("models", P + "models", "strs"),
        Param("protocol", P + "paper_protocol", "bool"),
        *corpus_params(P),
        Param("limit", P + "limit", **LIMIT),
        # n_pairs, seed, min_contexts, include_special, baseline: made from the declaration (core.contract)
        *analysis_params(an.ANALYSIS, P, keys={"n_pairs": P + "pairs"}),
        Param("measure", P + "measure", "str"),
        Param("reference", P + "reference", "bool"),
        Param("word_model", P + "word_model", "str"),
        Param("word", P + "word", "str"),
        Param("context", P + "context", "int", low=0, high=1_000_000),
        Param("word_layer", P + "word_layer", **LAYER),
    ),
    plan=plan,
    charts=charts,
)
