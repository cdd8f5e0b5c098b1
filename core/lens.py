"""BERT Lens in a notebook: one function per view of the app, each returning the app's own altair chart.

    from core import lens
    lens.head_view("bert-base-uncased", "The cat sat on the mat.", layer=2, heads=[0, 1])
    chart, frame = lens.anisotropy("bert-base-uncased", corpus="builtin", return_data=True)

Every function takes a model reference (hub id, folder, run name) or a `core.model.loading.LoadedModel`, runs the same
core analysis the page runs and draws it with the same `core.charts` builder (nothing is computed twice here);
`return_data=True` returns `(chart, frame)`, the frame being the rows the chart draws (what the page's CSV export
holds). `view(page, params)` draws a lesson step (page url_path + URL params) as `[(chart, caption), ...]`.

Layer numbers: a `layer=` argument of a head's view (head_view, neuron_view, attention_norms) is the array index of
`attentions` (as HuggingFace's `outputs.attentions[i]`); charts and frames show it as layer i + 1, 0 being the
embeddings (core.numbering), so `layer=2` draws "Layer 3". A URL's (lesson step's) layer is already 1..L.

Offline rendering: importing this module switches altair to the "bertlens" renderer unless another one was
chosen: each chart becomes a sandboxed <iframe srcdoc> holding `charts.chart_html` (Vega, Vega-Lite and
Vega-Embed inlined from vl-convert, about 1 MB per chart), so Jupyter, JupyterLab, VS Code and Colab draw it with
no CDN; the iframe keeps each chart's scripts apart, so several charts on one notebook page never clash, and its
opaque origin keeps any script out of the notebook.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from core import bias, numbering, studies, views
from core.analyses import anisotropy as an
from core.analyses import explain as explanations
from core.analyses import changes
from core.analyses import head_studies as head_study_runs
from core.analyses.head_features import ClsFeatureAttention
from core.analyses import inside_head as ih
from core.analyses import logit_lens as layer_lenses
from core.analyses import masked as masked_words
from core.analyses import neurons as nr
from core.analyses import patching as patchings
from core.analyses import probe as probes
from core.analyses import sparse_features as sparse
from core.analyses.attention import attention_view
from core.analyses.model_view import DEFAULT_PIXELS, model_view as build_model_view
from core.analyses.projection import collect_tokens, layerwise_projection
from core.charts import anisotropy as anisotropy_charts
from core.charts import attention as attention_charts
from core.charts import bias as bias_charts
from core.charts import finetune as finetune_charts
from core.charts import explain as explain_charts
from core.charts import head_studies as head_studies_charts
from core.charts import inside_head as inside_head_charts
from core.charts import layout
from core.charts import layer_lens as layer_lens_charts
from core.charts import masked as masked_charts
from core.charts import neurons as neuron_charts
from core.charts import patching as patching_charts
from core.charts import timelapse as timelapse_charts_module
from core.charts import reproduce as reproduce_charts
from core.charts import sparse_features as sparse_charts
from core.charts.export import chart_html
from core.charts.pca import projection_frame, scatter, sentence_names
from core.data import corpus as corpora
from core.model.encoding import encode
from core.model.loading import LoadedModel, display_name, load_model
from core.safe_text import html_text
from core.settings import default_model
from core.training import list_runs, load_classifier
from core.training.runs import get_run
from core.training.settings import run_training
from core.training.timelapse import read_timelapse
from core.studies import seeds as seed_runs
from core.model.encoding import read_input
from core.validation import truncation_notice

# core.training (torch) imported in functions: `from core import lens` stays light until a run is patched.
RENDERER = "bertlens"
_MODELS: dict[tuple[str, bool], object] = {}
_EXPLAINERS: dict[str, object] = {}


# ---- offline notebook renderer ---------------------------------------------------------------------------------

def _iframe(spec: dict, **_metadata) -> dict:
    """Altair renderer: the chart's self-contained HTML in a sandboxed iframe as wide as the cell (a wider chart
    scrolls) and as tall as the chart."""
    document = chart_html(spec, post_size=True)
    # sandbox="allow-scripts" without allow-same-origin: the chart runs in an opaque origin, so nothing in its data
    # can reach the notebook (in Jupyter, the notebook's origin reaches the kernel). The parent cannot read such a
    # frame's document either, so the chart posts its height (chart_html(post_size=True)); vega draws asynchronously
    # and may finish before this onload runs, hence the question sent after the listener is in place. The width
    # stays the cell's: a frame sized to its document's width measured wider each time and grew without end.
    fit = ("var f=this;window.addEventListener('message',function(e){if(e.source!==f.contentWindow||!e.data"
           "||!e.data.bertlensHeight)return;f.style.height=(e.data.bertlensHeight+4)+'px';});"
           "f.contentWindow.postMessage('bertlens-size?','*');")
    frame = (f'<iframe sandbox="allow-scripts" srcdoc="{html_text(document)}" '
             f'style="border:none;width:100%;height:420px" onload="{html_text(fit)}"></iframe>')
    return {"text/html": frame, "text/plain": "<BERT Lens chart: rendered offline in an iframe>"}


def enable_offline() -> None:
    """Draw altair charts offline in notebooks (see the module docstring); called on import."""
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _iframe)
    alt.renderers.enable(RENDERER)


if alt.renderers.active == "default":
    enable_offline()


# ---- models ----------------------------------------------------------------------------------------------------

def load(model, *, masked_lm: bool = True):
    """A LoadedModel for a reference (cached per reference), or the LoadedModel given. masked_lm=True, as in the
    app: a checkpoint with an MLM head is loaded once as the masked-word model, whose encoder every view uses."""
    if isinstance(model, LoadedModel):
        return model
    key = (str(model), masked_lm)
    if key not in _MODELS:
        _MODELS[key] = load_model(str(model), masked_lm=masked_lm)
    return _MODELS[key]


def _ref(model) -> str:
    return model if isinstance(model, str) else getattr(model, "ref", str(model))


def _warn_if_cut(encodings) -> None:
    """The pages' notice of an input cut to the model's length, as a Python warning: a notebook shows it under the
    cell that drew the view."""
    notice = truncation_notice(encodings)
    if notice:
        warnings.warn(notice, stacklevel=3)


def _encoding(model, text: str, text_b: str | None):
    lm = load(model)
    encoding = encode(lm, (text, text_b) if text_b else text)
    _warn_if_cut(encoding)
    return lm, encoding


class Data(tuple):
    """What `return_data=True` gives: `(chart, frame)` as before, and `result`, the analysis's own frozen result,
    whose `to_json()` is what the CLI twin's `--json` prints (`data.to_json()`)."""

    result = None

    def __new__(cls, chart, frame, result=None):
        made = super().__new__(cls, (chart, frame))
        made.result = result
        return made

    def to_json(self) -> dict:
        if self.result is None:
            raise ValueError("this chart's data has no result of its own: read the frame")
        return self.result.to_json()


def _out(chart, frame, return_data: bool, result=None):
    return Data(chart, frame, result) if return_data else chart


def twin(name: str):
    """Make a function the notebook twin of a declared analysis (core.contract): its keyword arguments are the
    analysis's settings, with their declared defaults, and its docstring lists them. The function itself takes
    `settings` (the settings dataclass, built and checked by `Analysis.make`, aliases read) and its own inputs."""
    analysis = views.analysis(name)
    names = [f.name for f in analysis.fields]

    def wrap(fn):
        signature = inspect.signature(fn)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        clash = sorted(set(names) & {p.name for p in own})
        if clash:
            raise TypeError(f"{fn.__name__} repeats the declared settings {clash}: take them from `settings`")
        kind = inspect.Parameter.KEYWORD_ONLY
        declared = [inspect.Parameter(f.name, kind, default=list(f.default) if isinstance(f.default, tuple)
                                      else f.default) for f in analysis.fields]
        positional = [p for p in own if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        keyword = [p for p in own if p.kind == p.KEYWORD_ONLY]

        @functools.wraps(fn)
        def call(*args, **kwargs):
            chosen = {n: kwargs.pop(n) for n in names if n in kwargs}
            return fn(*args, settings=analysis.make(chosen), **kwargs)

        call.__signature__ = signature.replace(parameters=positional + declared + keyword)
        call.__doc__ = (inspect.cleandoc(fn.__doc__ or "") + "\n\n" + analysis.docstring()).strip()
        call.analysis = analysis
        return call

    return wrap


def _stacked(charts) -> alt.VConcatChart:
    """Charts one above the other, sized as a whole (a part of a concatenation may not size itself)."""
    parts = [chart.copy() for chart in charts]
    for part in parts:
        part.autosize = alt.Undefined
    return layout.fixed_size(alt.vconcat(*parts))


# ---- attention ---------------------------------------------------------------------------------------------------

def head_view(model, text: str, text_b: str | None = None, *, layer: int | None = None,
              heads: Sequence[int] | int = (0,), pair_filter: str = "all", hide_special: bool = False,
              word_level: bool = False, style: str = "lines", return_data: bool = False):
    """One layer's heads (several are averaged) as lines between tokens (style "lines") or a heatmap ("heatmap"),
    as on the Attention heads page. layer (an array index, drawn as layer + 1) None: the page's default (index 2, or the last of a
    shallower model).
    Frame: query, key, weight."""
    _, encoding = _encoding(model, text, text_b)
    n_layers = encoding.attentions.shape[0]
    layer = min(n_layers - 1, 2) if layer is None else int(layer)
    heads = [int(heads)] if isinstance(heads, (int, np.integer)) else [int(h) for h in heads]
    if not heads:
        raise ValueError("pick at least one head")
    view = attention_view(encoding, layer, heads, pair_filter=pair_filter, hide_special=hide_special,
                          word_level=word_level)
    title = f"Layer {numbering.shown(layer)}, head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
    if style not in ("lines", "heatmap"):
        raise ValueError(f"style must be 'lines' or 'heatmap', not {style!r}")
    chart = attention_charts.head_view_lines(view, title) if style == "lines" else attention_charts.attention_heatmap(view, title)
    return _out(chart, attention_charts.view_frame(view)[["query", "key", "weight"]], return_data)


def model_view(model, text: str, text_b: str | None = None, *, pair_filter: str = "all", scale: str = "head",
               pixels: int = DEFAULT_PIXELS, return_data: bool = False):
    """Every layer × head as a thumbnail of its attention matrix (the page's model view): each pixel the largest
    weight of the cells it covers; scale "head" (each head darkest at its own maximum) or "shared" (one maximum);
    pair_filter as head_view's. Frame: layer, head, query, key, weight (token positions), every head's matrix
    (the pairs the filter keeps)."""
    _, encoding = _encoding(model, text, text_b)
    a = encoding.attentions
    view = build_model_view(a, encoding.tokens, encoding.segment_ids, pixels=pixels, scale=scale,
                            pair_filter=pair_filter)
    chart = attention_charts.model_view_grid(view)
    if not return_data:
        return chart
    rows, columns = np.asarray(view.query_positions), np.asarray(view.key_positions)
    layer, head, query, key = np.indices((*a.shape[:2], len(rows), len(columns))).reshape(4, -1)
    frame = pd.DataFrame({"layer": numbering.shown(0) + layer, "head": head, "query": rows[query], "key": columns[key],
                          "weight": a[layer, head, rows[query], columns[key]]})
    return chart, frame


def neuron_view(model, text: str, text_b: str | None = None, *, layer: int = 0, head: int = 0, query: int = 1,
                return_data: bool = False):
    """Inside one head for one query token: q, k, q⊙k and the scores (Attention heads page, "Inside a head").
    Frame: the per-dimension rows of core.charts.inside_head.neuron_frame."""
    lm = load(model)
    view = ih.neuron_view(lm, text, text_b, int(layer), int(head), int(query))
    _warn_if_cut(read_input(lm, text, text_b))
    return _out(inside_head_charts.neuron_chart(view), inside_head_charts.neuron_frame(view), return_data)


def attention_norms(model, text: str, text_b: str | None = None, *, layer: int = 0, head: int = 0, query: int = 0,
                    return_data: bool = False):
    """One query's attention row, raw vs norm-weighted ‖α f(x)‖ (Kobayashi et al. 2020), rescaled to sum to 1.
    Frame: key, key_order, measure, share, ‖f(x)‖."""
    lm = load(model)
    norms = ih.attention_norms(lm, text, text_b)
    _warn_if_cut(read_input(lm, text, text_b))
    frame = inside_head_charts.row_frame(norms, int(layer), int(head), int(query))
    chart = inside_head_charts.row_chart(frame, f"Layer {numbering.shown(layer)}, head {head}, query {query}")
    return _out(chart, frame, return_data)


attention_neuron = neuron_view  # the name the list uses for the same view


# ---- masked words ------------------------------------------------------------------------------------------------

def fill_mask(model, text: str, text_b: str | None = None, *, top_k: int = 5, view: str = "top", mask: int = 0,
              return_data: bool = False):
    """The model's guesses at each [MASK] (a checkpoint with an MLM head). view "top": the final guesses;
    "layers": the MLM head on every layer's vector at mask number `mask` (logit lens); "final": that mask's
    final top-k. Frames: core.charts.masked top_frame / lens_frame / final_frame."""
    lm = load(model)
    pred = masked_words.fill_mask(lm, text, text_b, top_k=int(top_k))
    _warn_if_cut(read_input(lm, masked_words.prepare_text(lm, text), masked_words.prepare_text(lm, text_b) if text_b else None))
    if view == "top":
        frame = masked_charts.top_frame(pred)
        return _out(masked_charts.top_chart(pred, frame), frame, return_data)
    if not 0 <= int(mask) < len(pred.positions):
        raise ValueError(f"mask must be 0…{len(pred.positions) - 1}")
    if view == "layers":
        frame = masked_charts.lens_frame(pred, int(mask))
        return _out(masked_charts.lens_chart(pred, int(mask), frame), frame, return_data)
    if view == "final":
        frame = masked_charts.final_frame(pred, int(mask))
        return _out(masked_charts.final_chart(pred, int(mask), frame), frame, return_data)
    raise ValueError(f"view must be 'top', 'layers' or 'final', not {view!r}")


def logit_lens(model, text: str, text_b: str | None = None, *, kind: str = "logit", lens=None, top_k: int = 5,
               view: str = "grid", return_data: bool = False):
    """Every layer read in words: the MLM head on each layer's vector at every token (kind "logit"), or through
    a fitted tuned lens (kind "tuned", lens=NAME; python -m core fit-tuned-lens). view "grid": top guess per
    layer and token; "kl": KL to the final layer per layer. Frames: core.charts.layer_lens grid_frame /
    kl_frame; with return_data the LayerLens result comes third."""
    lm = load(model)
    result = layer_lenses.logit_lens(lm, text, text_b, kind=kind, lens=lens, top_k=int(top_k))
    _warn_if_cut(read_input(lm, text, text_b))
    if view == "grid":
        frame = layer_lens_charts.grid_frame(result)
        chart = layer_lens_charts.grid_chart(result, frame)
    elif view == "kl":
        frame = layer_lens_charts.kl_frame(result)
        chart = layer_lens_charts.kl_chart(result, frame=frame)
    else:
        raise ValueError(f"view must be 'grid' or 'kl', not {view!r}")
    return (chart, frame, result) if return_data else chart


# ---- what causes the output -------------------------------------------------------------------------------------

def patch(model, clean, corrupt, *, target=None, label=None, over: str = "heads", method: str = "exact", path=None,
          return_data: bool = False):
    """Activation patching (core.analyses.patching): each head (over="heads") or each layer x token cell
    ("positions", "attn", "mlp") copied from the clean input into the corrupted one (same number of word pieces).
    target: a word scored at the clean input's [MASK] (a model with an MLM head); label: a class of a
    classification run (its name or folder as `model`), or two classes for their logit difference. method
    "attribution": Nanda's gradient estimate of every cell at once. path ((layer, head), (layer, head)): the
    sender's effect through the receiver only (result.path_metric). Frame: core.charts.patching.patching_frame;
    with return_data the Patching result comes third. A grid that is noise (result.warnings: a clean - corrupt gap
    under core.analyses.patching.SMALL_GAP, or a clean input that does not give the target) is drawn with a Python
    warning per reason, which a notebook shows under the cell."""
    if (target is None) == (label is None):
        raise ValueError("give target=WORD (a model with an MLM head) or label=CLASS (a classification run)")
    if method not in patchings.METHODS:
        raise ValueError(f"method must be one of {', '.join(patchings.METHODS)}")
    if label is not None:
        subject, goal = (model if hasattr(model, "labels") else load_classifier(_ref(model))), label
    else:
        subject, goal = load(model), target
    if method == "attribution":
        result = patchings.attribution_patch(subject, clean, corrupt, goal, over)
    else:
        result = patchings.patch(subject, clean, corrupt, goal, over, path=path)
    for warning in result.warnings:
        warnings.warn(f"{warning.code}: {warning.message}", stacklevel=2)
    frame = patching_charts.patching_frame(result)
    chart = patching_charts.patching_chart(result, frame)
    return (chart, frame, result) if return_data else chart


# ---- representations ---------------------------------------------------------------------------------------------

@twin("anisotropy")
def anisotropy(models, corpus="builtin", *, settings, text_column: str | None = None, measure: str = "random_cosine",
               limit: int = 0, progress=None, return_data: bool = False):
    """Anisotropy by layer (Ethayarajh 2019) of one model or several over a corpus, one line per model. corpus: a
    corpus spec (core.data.corpus grammar, e.g. "snli:dev:200"), a list of sentences and / or (a, b) pairs, a pandas
    Series, or a DataFrame whose text is in `text_column` (default "sentence", "text", ..., else its first column of
    strings; see core.data.corpus.corpus_of). `measure` is one of core.analyses.anisotropy.MEASURES. Frame:
    core.charts.anisotropy.profile_frame (every measure; the chart draws one). With return_data, `.result` is the
    profile (one model) or the list of profiles, and `.to_json()` what `python -m core anisotropy --json` prints,
    per-word self-similarity and MEV ("words") included."""
    if measure not in an.MEASURES:
        raise ValueError(f"measure must be one of {', '.join(an.MEASURES)}")
    chosen = corpora.corpus_of(corpus, text_column=text_column, limit=int(limit) or None).head(int(limit) or None)
    models = [models] if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
    profiles = [an.measure_corpus(load(m), chosen, settings, progress=progress) for m in models]
    for profile in profiles:
        for warning in profile.warnings:  # a NaN curve is said once, under the notebook cell
            warnings.warn(f"{profile.model}: {warning}", stacklevel=2)
    frame = anisotropy_charts.profile_frame(profiles)
    if measure not in set(frame["measure"]):
        raise ValueError(f"{measure} was not measured with protocol {settings.protocol!r}")
    chart = anisotropy_charts.layer_chart(frame, measure, protocol=settings.protocol)
    return _out(chart, frame, return_data, profiles[0] if len(profiles) == 1 else _Results(profiles))


class _Results(list):
    """Several models' results: `to_json()` a list of each one's."""

    def to_json(self) -> list:
        return [r.to_json() for r in self]


def layerwise_pca(model, texts: str | Sequence[str | tuple[str, str | None]], *, layer: int = 0,
                  method: str | None = None, protocol: str = "bertlens", colour: str = "sentence",
                  word: str | None = None, hide_special: bool = False, hide_punct: bool = False,
                  show_labels: bool = True, seed: int = 0, return_data: bool = False):
    """Every word piece of the sentences at one layer, projected to 2-D (Layerwise PCA page). texts: one sentence,
    or a list of sentences / (a, b) pairs; method "joint" (one PCA over all layers), "per-layer" or "tsne"; colour
    "sentence", "segment" or "word" (with `word` highlighted). Frame: the page's CSV, every layer's coordinates."""
    items = [(texts, None)] if isinstance(texts, str) else [(t, None) if isinstance(t, str) else tuple(t) for t in texts]
    if not items:
        raise ValueError("give at least one sentence")
    lm = load(model)
    encodings = [encode(lm, (a, b) if b else a) for a, b in items]
    _warn_if_cut(encodings)
    tokens = collect_tokens(encodings, keep_special=not hide_special, keep_punct=not hide_punct)
    projection = layerwise_projection(tokens, method, protocol=protocol, seed=int(seed))
    layer = int(layer)
    if not 0 <= layer < len(projection.layers):
        raise ValueError(f"layer must be 0…{len(projection.layers) - 1}")
    name = display_name(_ref(model))
    chart, _ = scatter(projection, layer, f"{name}, layer {layer}", names=sentence_names(items), colour=colour,
                       chosen_word=word, show_labels=show_labels)
    return _out(chart, projection_frame(projection), return_data)


def neurons(model, corpus="builtin", *, layer: int, neuron: int | None = None, text: str | None = None,
            text_b: str | None = None, compare=None, top: int = 20, k: int = nr.DEFAULT_K, text_column: str | None = None,
            progress=None, return_data: bool = False):
    """Feed-forward neurons of `layer` (1..L: layer l's neurons write into hidden_states[l]) over a corpus (Read
    the layers page, Neurons tab; corpus as in `anisotropy`). Without `neuron`: the `top` neurons by highest
    activation, or, with `compare` (a model fine-tuned from `model`, read over the same corpus), by how much they
    changed (Cohen's d). With `neuron`: its top-k contexts, and with `text` its activation shaded over that
    sentence below. The index is kept under models_cache/neuron_index and reused. Frame: the chart's table."""
    chosen = corpora.corpus_of(corpus, text_column=text_column)
    lm = load(model)
    index = nr.build_neuron_index(lm, chosen, layer, k=int(k), progress=progress)
    if neuron is None:
        changes = None
        if compare is not None:
            changes = nr.neuron_changes(index, nr.build_neuron_index(load(compare), chosen, layer, k=int(k),
                                                                     progress=progress))
        order = index.by_max() if changes is None else changes.order
        frame = neuron_charts.neurons_frame(index, order[:int(top)], changes)
        measure = "max activation" if changes is None else "change"
        title = (f"Neurons of layer {index.layer}, highest activation first" if changes is None else
                 f"Neurons of layer {index.layer} that changed most in {display_name(_ref(compare))}")
        return _out(neuron_charts.neurons_chart(frame, measure, title), frame, return_data)
    chart = neuron_charts.contexts_chart(index, int(neuron), int(k))
    frame = neuron_charts.contexts_frame(index, int(neuron), int(k))
    if text:
        sentence = nr.neuron_sentence(lm, text, layer, text_b)
        shaded = neuron_charts.sentence_chart(sentence, int(neuron), reach=float(index.max_activation[int(neuron)]))
        chart = _stacked([chart, shaded])
    return _out(chart, frame, return_data)


def features(sae, text: str, text_b: str | None = None, *, model=None, feature: int | None = None,
             corpus="builtin", compare=None, top: int = 15, text_column: str | None = None, progress=None,
             return_data: bool = False):
    """Sparse features (Read the layers page, Sparse features tab) of a saved SAE (its name, or a
    SparseAutoencoder) on `text` (model: default the SAE's own). With `feature`: that feature's top contexts over
    `corpus`, its activation histogram and (when the model has a masked-word head) its lens words. With `compare`
    (a run fine-tuned from the SAE's model): the features whose firing rate over `corpus` changed most.
    Frame: the first chart's table."""
    sae = sae if isinstance(sae, sparse.SparseAutoencoder) else sparse.load_sae(str(sae))
    lm = load(model if model is not None else sae.model)
    found = sparse.sentence_features(sae, lm, text, text_b)
    chart, frame = sparse_charts.sentence_chart(found, top), sparse_charts.sentence_frame(found, top)
    if feature is None and compare is None:
        return _out(chart, frame, return_data)
    chosen = corpora.corpus_of(corpus, text_column=text_column)
    atlas = sparse.feature_atlas(sae, lm, list(chosen.sentences), corpus=chosen.name, digest=chosen.digest,
                                 progress=progress)
    charts = [chart]
    if feature is not None:
        charts += [sparse_charts.contexts_chart(atlas, int(feature)),
                   sparse_charts.histogram_chart(atlas.histogram(int(feature)))]
        if lm.masked_lm is not None:
            charts.append(sparse_charts.lens_chart(sparse.lens_tokens(sae, lm, int(feature))))
    if compare is not None:
        other = sparse.feature_atlas(sae, load(compare), list(chosen.sentences), corpus=chosen.name,
                                     digest=chosen.digest, same_model=False, progress=progress)
        charts.append(sparse_charts.change_chart(sparse.firing_change(atlas, other), top))
    return _out(_stacked(charts), frame, return_data)


# ---- explanations ------------------------------------------------------------------------------------------------

def explain(model, text: str, text_b: str | None = None, *, method: str = "ig", target=None, steps: int = 50,
            samples: int | None = None, window: int = 1, return_data: bool = False):
    """Why this prediction: one method's word scores (Why this prediction? page). method: one of
    core.analyses.explain.METHODS; gradient and perturbation methods need a classifier head. samples: Shapley's
    word orders / KernelSHAP's and LIME's coalitions (None: their defaults); window: occlusion's words per window.
    Frame: core.charts.explain.word_frame."""
    explainer = _explainer(model)
    result = explanations.explain(explainer, text, text_b, method, target=target, steps=int(steps),
                                  samples=None if samples is None else int(samples), window=int(window))
    _warn_if_cut(read_input(explainer.lm, text, text_b))
    return _out(explain_charts.word_bars(result), explain_charts.word_frame(result), return_data)


def _explainer(model):
    ref = _ref(model)
    if ref not in _EXPLAINERS:
        _EXPLAINERS[ref] = explanations.load_explainer(ref)
    return _EXPLAINERS[ref]


def explain_methods(model) -> tuple[str, ...]:
    """The methods `explain` can run on this model: all of core.analyses.explain.METHODS for a classifier, those
    that need no classifier head (attention rollout, value zeroing) for a plain encoder."""
    return explanations.available_methods(_explainer(model))


# ---- bias experiment ---------------------------------------------------------------------------------------------

def bias_words(words=None, *, task: str = "snli", train_limit: int | None = 2000, seed: int = 0,
               protocol: str = "bertlens", return_data: bool = False):
    """How many training pairs mention each word (the Bias experiment page's first chart: what a biased run would
    lose). words: a list or a comma-separated string (default the slides' female words); train_limit: the seeded
    training subset (None or 0: the whole split). Frame: word, training pairs."""
    chosen = bias.parse_words(words or bias.DEFAULT_WORDS, keep_case=protocol == "slides")
    train = bias.load_split(task, "train", int(train_limit or 0) or None, int(seed))
    frame = bias.word_count_frame(bias.word_matches(train, chosen, protocol))
    return _out(bias_charts.word_count_chart(frame, protocol), frame, return_data)


# ---- head studies ------------------------------------------------------------------------------------------------

def _study(name: str, models, corpus, settings, progress, return_data: bool, *, limit: int | None = None,
           labels: str | None = None):
    """A head study (core.analyses.head_studies) over one model or several, drawn by its declared charts (stacked);
    with return_data, `.result` is the StudyResults and `.to_json()` what the CLI's --json prints. The inputs are
    read first (a bad corpus is named before a missing labels file or a model loads), as the CLI reads them."""
    analysis = views.analysis(name)
    inputs, spec = head_study_runs.study_inputs(name, corpus, settings, limit)
    extra = {"classifier": head_study_runs.pattern_classifier(labels)} if name == "pattern-shares" else {}
    models = [models] if isinstance(models, (str, LoadedModel)) or models is None else list(models)
    found = head_study_runs.study_models(analysis, [load(m) for m in models], inputs, settings, corpus=spec,
                                         progress=progress, **extra)
    for notice in found.notices():
        warnings.warn(notice, stacklevel=3)
    drawn = analysis.charts_function()(found)
    chart = drawn[0][0] if len(drawn) == 1 else _stacked([c for c, _ in drawn])
    return _out(chart, _study_frame(name, found), return_data, found)


def _study_frame(name: str, found) -> pd.DataFrame:
    """The rows a study's page exports (core.charts.head_studies)."""
    each = list(found.results)
    if name == "head-features":
        return head_studies_charts.features_table(each)
    if name == "cls-attention":
        by_feature = isinstance(each[0], ClsFeatureAttention)
        return (head_studies_charts.cls_features_frame if by_feature else head_studies_charts.cls_frame)(each)
    if name == "aspect-heads":
        return head_studies_charts.aspect_frame(each)
    if name == "head-map":
        return head_studies_charts.head_map_frame(each)
    return pd.concat([head_studies_charts.pattern_shares_frame(r).assign(model=r.model) for r in each],
                     ignore_index=True)


@twin("head-features")
def head_features(models=None, corpus: str | None = None, *, settings, progress=None, return_data: bool = False):
    """Kovaleva Fig. 6: per head, attention to nouns, verbs, pronouns, subjects, objects, negation, [CLS] and [SEP]
    on a treebank (corpus: a treebank spec, default "ud:dev:200", or a .conllu file), one panel per model. Frame:
    every feature of every model (core.charts.head_studies.features_table). With return_data, `.to_json()` is what
    `python -m core head-features --json` prints."""
    return _study("head-features", models, corpus, settings, progress, return_data)


@twin("cls-attention")
def cls_attention(models=None, corpus: str | None = None, *, settings, progress=None, return_data: bool = False):
    """Kovaleva Fig. 7: per head, the last layer's [CLS] row by token type ([CLS], [SEP], punctuation, other; any
    corpus, default "snli:dev:200") or, with by="feature", by the §4.3 linguistic features (a treebank, default
    "ud:dev:200"), one panel per model (e.g. pretrained and fine-tuned). Frame: core.charts.head_studies.cls_frame
    or cls_features_frame. With return_data, `.to_json()` is what `python -m core cls-attention --json` prints."""
    return _study("cls-attention", models, corpus, settings, progress, return_data)


def cls_by_feature(models, corpus="ud:dev:200", *, seed: int = 0, progress=None, return_data: bool = False):
    """`cls_attention(models, corpus, by="feature")`, its name before the declaration (kept)."""
    return cls_attention(models, corpus, by="feature", seed=seed, progress=progress, return_data=return_data)


@twin("aspect-heads")
def aspect_heads(models=None, *, settings, limit: int = head_study_runs.ASPECT_REVIEWS, progress=None,
                 return_data: bool = False):
    """Aspect heads on SemEval-14 QA-M pairs (the first `limit` reviews' pairs; 0: all): per head, the attention
    of the question's aspect word to the review's aspect term, and where absent aspects attend. Frame:
    core.charts.head_studies.aspect_frame. With return_data, `.to_json()` is what `python -m core aspect-heads
    --json` prints."""
    return _study("aspect-heads", models, None, settings, progress, return_data, limit=limit)


@twin("head-map")
def head_map(models=None, corpus: str | None = None, *, settings, progress=None, return_data: bool = False):
    """Clark §6: every head placed in 2-D by the Jensen-Shannon distance between attention maps (MDS), over a
    corpus (default "snli:dev:100"). Frame: core.charts.head_studies.head_map_frame. With return_data,
    `.to_json()` is what `python -m core head-map --json` prints."""
    return _study("head-map", models, corpus, settings, progress, return_data)


@twin("pattern-shares")
def pattern_shares(models=None, corpus: str | None = None, *, settings, labels: str | None = None, progress=None,
                   return_data: bool = False):
    """Kovaleva's five pattern types over every head map of a corpus (default "builtin"), by a classifier trained
    on your labels (`labels`: a labels file, default the app's Label patterns file) beside the threshold rules.
    Frame: core.charts.head_studies.pattern_shares_frame per model. With return_data, `.to_json()` is what
    `python -m core pattern-shares --json` prints."""
    return _study("pattern-shares", models, corpus, settings, progress, return_data, labels=labels)


# ---- fine-tuning -------------------------------------------------------------------------------------------------

def timelapse(run):
    """The time-lapse of a fine-tuning run trained with `--timelapse N` (its name, or its folder): a
    core.training.timelapse.Timelapse whose frames give, per measured step, RSA / CKA / anisotropy per layer and
    attention change per head against the starting model, dev loss and accuracy. A running or cancelled run gives
    the frames it has so far. ValueError when there is no such run or it was trained without a time-lapse."""
    found = get_run(str(run))
    folder = Path(found.folder) if found is not None else Path(str(run))
    if not folder.is_dir():
        raise ValueError(f"No run named {str(run)!r}: give a run's name (python -m core runs lists them) or its folder.")
    result = read_timelapse(folder)
    if result is None:
        raise ValueError(f"Run {str(run)!r} has no time-lapse: train it with python -m core finetune ... --timelapse N "
                         "(or the form's time-lapse checkbox).")
    return result


def timelapse_charts(run, step: int | None = None) -> list[tuple[alt.TopLevelMixin, str]]:
    """One frame of a run's time-lapse (`timelapse(run)`; a cancelled run's kept frames too), as the fine-tuning
    page's player draws it: [(chart, caption)] for the dev loss/accuracy curve, RSA/CKA per layer, the attention
    change [layer, head] and anisotropy per layer, at `step` (the closest measured step; None: the last).
    ValueError when the run has no time-lapse frames."""
    result = timelapse(run)
    if not result.frames:
        raise ValueError(f"Run {str(run)!r} has no time-lapse frames yet: it has not measured step 0.")
    index = timelapse_charts_module.frame_index(result, step)
    measured = f"frame {index + 1} of {len(result.frames)} measured ({len(result.steps)} planned)"
    captions = {"curve": f"Dev loss and accuracy at every frame; {measured}.",
                "similarity": "RSA and linear CKA of each layer against the starting model on the probe set "
                              f"{result.probe} (1 = unchanged).",
                "attention": "Cosine of each head's attention maps with the starting model's (1 = unchanged).",
                "anisotropy": "Anisotropy per layer: mean cosine of random word pairs from different sentences."}
    return [(chart, captions[part]) for part, (chart, _) in timelapse_charts_module.frame_charts(result, index).items()]


def finetune_runs(runs: Sequence[str] | None = None) -> list[tuple[alt.TopLevelMixin, str]]:
    """The fine-tuning page's comparison of finished runs on this computer (names; None: the newest two, as the page
    picks): per-class F1 and confusion matrices of the classifiers, then the training loss, as [(chart, caption)];
    [] when no run has finished. ValueError for a name that is not a finished run."""
    done = [r for r in list_runs() if r.state == "done"]
    if runs:
        unknown = [name for name in runs if name not in {r.name for r in done}]
        if unknown:
            raise ValueError(f"No finished run named {', '.join(map(repr, unknown))} (python -m core runs lists them).")
    chosen = [r for r in done if r.name in runs] if runs else done[-2:]
    classifiers = [r for r in chosen if r.metrics.get("accuracy") is not None]
    out = []
    if classifiers:
        out += [(finetune_charts.f1_chart(classifiers), "F1 of each class, per run."),
                (finetune_charts.confusion_chart(classifiers), "Confusion matrices (rows: true class, columns: "
                                                               "predicted; colour: share of the row).")]
    losses = pd.concat([finetune_charts.loss_frame(r.metrics, r.name) for r in chosen]) if chosen else pd.DataFrame()
    if len(losses):
        out.append((finetune_charts.loss_chart(losses), "Training loss of each run."))
    return out


def _train(model, task: str, run: str | None, settings, progress, return_data: bool, **inputs):
    """Train a run in this process (core.training.settings.run_training), as `python -m core finetune` /
    `contrastive` do without --background; the chart is its training loss."""
    if not run:
        raise ValueError("give the run a name: run=NAME (its folder under models_cache/runs, then a model name)")

    trained = run_training(_ref(model), task, settings, progress, run_name=run, **inputs)
    (chart, _), = finetune_charts.run_charts(trained)
    return _out(chart, finetune_charts.loss_frame(trained.metrics, trained.name), return_data, trained)


@twin("finetune")
def finetune(model, task: str, run: str, *, settings, train_limit: int | None = None, eval_limit: int | None = None,
             timelapse_corpus: str | None = None, data_source: str = "auto", device: str | None = None,
             cpu_threads: int | None = None, processes: int = 1, progress=None, return_data: bool = False):
    """Fine-tune `model` as a classifier on `task` (a built-in task or a CSV/JSONL file), saved as the run `run`
    (then a model of that name), in this process; blocks until it has finished (`python -m core finetune`).
    Settings a paper protocol fixes (epochs, lr, batch_size, lr_decay, max_length) left as None take the
    protocol's values, else BERT Lens's. Returns the chart of its training loss; with return_data, `(chart,
    frame)` with `.result` the TrainedRun (name, folder, metrics) and `.to_json()` its metrics (metrics.json), what
    `python -m core finetune --json` prints."""
    return _train(model, task, run, settings, progress, return_data, train_limit=train_limit,
                  eval_limit=eval_limit, timelapse_corpus=timelapse_corpus, data_source=data_source, device=device,
                  cpu_threads=cpu_threads, processes=processes)


@twin("contrastive")
def contrastive(model, task: str = "snli", run: str | None = None, *, settings, train_limit: int | None = None,
                eval_limit: int | None = None, data_source: str = "auto", device: str | None = None,
                cpu_threads: int | None = None, processes: int = 1, progress=None, return_data: bool = False):
    """SimCSE contrastive training of `model` on `task` (mode "sup": snli, mrpc or a file with text_b), saved as
    the encoder run `run`, in this process (`python -m core contrastive`). Returns the chart of its training
    loss; with return_data, `.result` is the TrainedRun and `.to_json()` its metrics, what `python -m core
    contrastive --json` prints."""
    return _train(model, task, run, settings, progress, return_data, train_limit=train_limit,
                  eval_limit=eval_limit, data_source=data_source, device=device, cpu_threads=cpu_threads,
                  processes=processes)


@twin("compare")
def compare(model_a, model_b, corpus="builtin", *, settings, limit: int = changes.COMPARE_LIMIT, progress=None,
            return_data: bool = False):
    """RSA and linear CKA per layer between two models (e.g. a pretrained model and a run fine-tuned from it) on
    the first `limit` sentences of a corpus (a spec as `--corpus`, or sentences as in `anisotropy`), as the page's
    "Which layers changed". Chart: the two measures per layer above every layer of A against every layer of B
    (CKA). Frame: core.charts.finetune.similarity_frame. With return_data, `.result` is the Similarity and
    `.to_json()` what `python -m core compare --json` prints."""
    chosen = corpora.corpus_of(corpus, seed=settings.seed, limit=int(limit)).head(int(limit))
    models = (load(model_a), load(model_b))
    found = head_study_runs.study_models(views.analysis("compare"), [models], list(chosen.sentences), settings,
                                         progress=progress)
    for notice in found.notices():
        warnings.warn(notice, stacklevel=2)
    (result,) = found.results
    drawn = finetune_charts.compare_charts(result)
    return _out(_stacked([c for c, _ in drawn]), finetune_charts.similarity_frame([result]), return_data, found)


@twin("probe")
def probe(model, corpus="ud:dev", eval_corpus: str | None = None, *, settings, train_limit: int | None = None,
          eval_limit: int | None = None, use_cache: bool = True, progress=None, return_data: bool = False):
    """Hewitt & Manning's structural probe per layer (the page's "Did syntax survive"): trained on a treebank
    (`corpus`: ud[:SPLIT[:N]] or a .conllu file), scored on `eval_corpus` or a seeded held-out fifth of it.
    Chart: UUAS above DSpr per layer. Frame: core.charts.finetune.probe_frame. With return_data, `.result` is the
    ProbeResult and `.to_json()` what `python -m core probe --json` prints. Probes are cached on disk per (model,
    layer, treebank, settings) unless use_cache=False."""
    changes.probe_layer_numbers(settings.layers)
    data = probes.probe_inputs(corpus, eval_corpus, settings.seed, train_limit, eval_limit)
    result = probes.run_probe(load(model), data, settings, progress=progress, use_cache=use_cache)
    notice = result.truncation_notice()
    if notice:
        warnings.warn(notice, stacklevel=2)
    kind = finetune_charts.CONTROL if settings.random_init else "pretrained"
    drawn = finetune_charts.probe_charts(result, kind)
    frame = finetune_charts.probe_frame([(result.model, kind, result)])
    return _out(_stacked([c for c, _ in drawn]), frame, return_data, result)


# ---- reproduce a paper -------------------------------------------------------------------------------------------

def reproduce(study: str, *, model=None, corpus: str | None = None, seed: int = 0, seeds: Sequence[int] | None = None,
              limit: int | None = None, top_k: int = seed_runs.TOP_K, progress=None, return_data: bool = False, **extra):
    """A published study run the paper's way (Reproduce page; core.studies.NAMES), the paper's numbers beside the
    measured ones. model: a reference (None: the paper's); extra: the study's options (`--set KEY=VALUE`).
    seeds (two or more): the study once per seed; the chart draws the seeds' mean with its 95 % interval beside the
    paper and the frame is core.charts.reproduce.seeds_frame (each number's values per seed, mean, interval,
    verdict). Without: one run with `seed`; frame core.charts.reproduce.comparison_frame."""
    chosen = studies.get(study)
    options = studies.StudyOptions(model=None if model is None else _ref(model), corpus=corpus, seed=int(seed),
                                   limit=limit, extra=extra)
    report = None if progress is None else (lambda done, total, _message=None: progress(done, total))
    if seeds is not None:
        found = seed_runs.run_seeds(chosen, options, seed_runs.parse_seeds(",".join(map(str, seeds)), "seeds", "seed="),
                                    report, None, top_k=int(top_k))
        chart = reproduce_charts.seeds_layer_chart(found) or reproduce_charts.seeds_table_chart(found)
        return _out(chart, reproduce_charts.seeds_frame(found), return_data)
    result = chosen.run(options, report, None)
    chart = (reproduce_charts.layer_comparison_chart(result) or reproduce_charts.table_comparison_chart(result)
             or reproduce_charts.measured_chart(result))
    return _out(chart, reproduce_charts.comparison_frame(result), return_data)


# ---- a lesson step -----------------------------------------------------------------------------------------------

def view(page: str, params: Mapping[str, str] | None = None) -> list[tuple[alt.TopLevelMixin, str]]:
    """The charts of one app view, for a lesson step {"page": url_path, "params": {url param: str}}: a list of
    (chart, caption), drawn by the view's `charts` (core/views/), which calls the functions above. Reads the
    sidebar's model / a / b and the view's own URL params. Long work runs here (an anisotropy pass, a reproduce
    study: minutes on a CPU). A step whose charts need a run trained before class and not here (a finetune step
    before any run has finished, or naming a time-lapse run not on this computer), a view with none (home), or a page
    not registered gives [] and the step is shown by its title and notes. Unknown params are ignored, as in the app."""
    params = dict(params or {})
    if not views.is_view(page or "") or views.get(page or "").charts is None:
        return []
    model = params.get("model") or default_model()
    # This module is handed to the view's charts, so no view module imports core.lens (core.lens imports core.views).
    this = sys.modules[__name__]
    return views.get(page or "").charts(this, model, params.get("a", ""), params.get("b") or None, params)
