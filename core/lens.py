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

import dataclasses
import functools
import inspect
import sys
import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from core import contract, numbering, studies, views
from core import bias as bias_data  # not `bias`: that is the bias experiment's notebook twin below
from core.bias import experiment as bias_experiment
from core.bias import erase_gender
from core.bias import heads as bias_heads_analysis
from core.analyses import anisotropy as an
from core.analyses import explain as explanations
from core.analyses import changes
from core.analyses import explorer
from core.analyses import faithfulness as faithful
from core.analyses.layer_knowledge import erasure
from core.analyses import head_studies as head_study_runs
from core.analyses.ablation import load_for_ablation, run_ablation
from core.analyses.head_features import ClsFeatureAttention
from core.analyses.heads import STAT_NAMES, run_attention_change, run_survey, run_syntax_heads
from core.analyses.heads.pairs import mrpc_pairs, pair_heads_of
from core.analyses import inside_head as ih
from core.analyses.layer_knowledge import probes as knowledge_probes
from core.analyses.layer_knowledge import tasks as knowledge_tasks
from core.analyses import logit_lens as layer_lenses
from core.analyses import masked as masked_words
from core.analyses import neurons as nr
from core.analyses import patching as patchings
from core.analyses import probe as probes
from core.analyses import sparse_features as sparse
from core.analyses import vector_index
from core.analyses.attention import head_view_of, layer_in_range
from core.analyses.model_view import model_view_of
from core.analyses.projection import background_vectors, run_pca
from core.charts import anisotropy as anisotropy_charts
from core.charts import attention as attention_charts
from core.charts import bias as bias_charts
from core.charts import finetune as finetune_charts
from core.charts import explain as explain_charts
from core.charts import explorer as explorer_charts
from core.charts import erasure as erasure_charts
from core.charts import head_studies as head_studies_charts
from core.charts import heads_dataset
from core.charts import inside_head as inside_head_charts
from core.charts import layout
from core.charts import layer_knowledge as knowledge_charts
from core.charts import layer_lens as layer_lens_charts
from core.charts import masked as masked_charts
from core.charts import neurons as neuron_charts
from core.charts import pair_attention as pair_attention_charts
from core.charts import patching as patching_charts
from core.charts import timelapse as timelapse_charts_module
from core.charts import reproduce as reproduce_charts
from core.charts import sparse_features as sparse_charts
from core.charts.export import chart_html, drawn_frame
from core.charts.pca import projection_frame, scatter, sentence_names
from core.data import corpus as corpora
from core.model.artefacts import head_warning
from core.model.encoding import encode, run_counting_cuts
from core.model.loading import LoadedModel, display_name, load_model
from core.safe_text import html_text
from core.settings import default_model
from core.training import list_runs, load_classifier
from core.training.runs import get_run
from core.training.mlm_head import run_fit
from core.training.runs import run_eval_sample
from core.training.settings import run_training
from core.training.timelapse import read_timelapse
from core.studies.reproduce import run_study
from core.model.encoding import counting_cuts, read_input
from core.validation import truncation, truncation_notice

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


def _warn(notice: str | None) -> None:
    """A notice (an input cut to the model's length, a result's caveat) as a Python warning attributed to the line
    that called core.lens — the notebook cell — however many helpers of this module and lens.twin's wrapper lie
    between (a fixed stacklevel pointed into this module for some functions and at the cell for others)."""
    if not notice:
        return
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        level, frame = level + 1, frame.f_back
    warnings.warn(notice, stacklevel=level)


def _warn_if_cut(encodings) -> None:
    """The pages' notice of an input cut to the model's length, as a Python warning under the notebook cell."""
    _warn(truncation_notice(encodings))


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
            raise TypeError(f"{fn.__name__} repeats the declared settings {clash}: read them from its settings argument")
        kind = inspect.Parameter.KEYWORD_ONLY
        declared = [inspect.Parameter(f.name, kind, default=list(f.default) if isinstance(f.default, tuple)
                                      else f.default) for f in analysis.fields]
        positional = [p for p in own if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
        keyword = [p for p in own if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]  # **extra last, as Python wants

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

@twin("head-view")
def head_view(model, text: str, text_b: str | None = None, *, settings, style: str = "lines",
              return_data: bool = False):
    """One layer's heads (several are averaged) as lines between tokens (style "lines") or a heatmap ("heatmap"),
    as on the Attention heads page. layer (an array index, drawn as layer + 1) None: the page's default
    (numbering.default_head_layer: index 2, or the last of a shallower model); heads a list or one head;
    pair_filter "A→B" or "a-b" alike. Frame: query, key, weight; with return_data `.result` is the AttentionView,
    `.to_json()` what `python -m core head-view --json` prints."""
    _, encoding = _encoding(model, text, text_b)
    if style not in ("lines", "heatmap"):
        raise ValueError(f"style must be 'lines' or 'heatmap', not {style!r}")
    view = head_view_of(encoding, settings)
    chart = attention_charts.head_view_lines(view, view.title) if style == "lines" else attention_charts.attention_heatmap(view, view.title)
    return _out(chart, attention_charts.view_frame(view)[["query", "key", "weight"]], return_data, view)


def _one_head_as_list(fn):
    """head_view(heads=2): one head as the list [2] (the declaration's heads are a list)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if isinstance(kwargs.get("heads"), (int, np.integer)):
            kwargs["heads"] = [int(kwargs["heads"])]
        return fn(*args, **kwargs)

    return call


head_view = _one_head_as_list(head_view)


@twin("model-view")
def model_view(model, text: str, text_b: str | None = None, *, settings, return_data: bool = False):
    """Every layer × head as a thumbnail of its attention matrix (the page's model view): each pixel the largest
    weight of the cells it covers; scale "head" (each head darkest at its own maximum) or "shared" (one maximum);
    pair_filter as head_view's ("A→B" or "a-b"). Frame: layer, head, query, key, weight (token positions), every
    head's matrix (the pairs the filter keeps); with return_data `.to_json()` is `python -m core model-view --json`'s."""
    _, encoding = _encoding(model, text, text_b)
    a = encoding.attentions
    view = model_view_of(encoding, settings)
    chart = attention_charts.model_view_grid(view)
    if not return_data:
        return chart
    rows, columns = np.asarray(view.query_positions), np.asarray(view.key_positions)
    layer, head, query, key = np.indices((*a.shape[:2], len(rows), len(columns))).reshape(4, -1)
    frame = pd.DataFrame({"layer": numbering.shown(0) + layer, "head": head, "query": rows[query], "key": columns[key],
                          "weight": a[layer, head, rows[query], columns[key]]})
    return _out(chart, frame, return_data, view)


@twin("neuron")
def neuron_view(model, text: str, text_b: str | None = None, *, settings, return_data: bool = False):
    """Inside one head for one query token: q, k, q⊙k, the scores and their softmax (Attention heads page, "Inside
    a head"); pair_filter "A→B" (or "a-b"): a query of sentence A against the keys of sentence B, as bertviz's
    neuron view filters. Frame: core.charts.inside_head.neuron_table, per key and dimension k, q, q⊙k with the
    key's score, attention (softmax) and position bias; `.to_json()` is `python -m core neuron --json`'s."""
    lm = load(model)
    view = ih.neuron_of(lm, (text, text_b), settings)
    _warn_if_cut(read_input(lm, text, text_b))
    return _out(inside_head_charts.neuron_chart(view), inside_head_charts.neuron_table(view), return_data, view)


@twin("attention-norms")
def attention_norms(model, text: str, text_b: str | None = None, *, settings, layer: int | None = None,
                    head: int | None = None, query: int | None = None, return_data: bool = False):
    """One query's attention row, raw vs norm-weighted ‖α f(x)‖ (Kobayashi et al. 2020), rescaled to sum to 1.
    Every layer, head and query is measured; layer, head and query pick the row drawn, with the neuron view's
    defaults and bounds (core.analyses.inside_head.NeuronSettings) where left out. Frame: key, key_order,
    measure, share, ‖f(x)‖; `.to_json()` is `python -m core attention-norms --json`'s (every norm)."""
    lm = load(model)
    where = views.analysis("neuron").make({k: v for k, v in dict(layer=layer, head=head, query=query).items()
                                           if v is not None})
    norms = ih.norms_of(lm, (text, text_b), settings)
    _warn_if_cut(read_input(lm, text, text_b))
    index = layer_in_range(where.layer, norms.norms.shape[0])
    for name, value, size in (("head", where.head, norms.norms.shape[1]), ("query", where.query, len(norms.tokens))):
        if value >= size:
            raise ValueError(f"{name} {value} does not exist; pick {name} 0..{size - 1}")
    frame = inside_head_charts.row_frame(norms, index, where.head, where.query)
    chart = inside_head_charts.row_chart(frame, f"Layer {numbering.shown(index)}, head {where.head}, query {where.query}")
    return _out(chart, frame, return_data, norms)


@twin("attention-norm-shares")
def attention_norm_shares(model, corpus="builtin", *, settings, limit: int = 200, progress=None,
                          return_data: bool = False):
    """Raw vs norm-weighted attention to [CLS], [SEP], punctuation and other tokens per layer, over the first
    `limit` inputs of a corpus (a spec such as "snli:dev:200", or sentences; seeded sample: `seed`). Frame:
    core.charts.inside_head.shares_frame; `.to_json()` is `python -m core attention-norm-shares --json`'s."""
    name = corpus if isinstance(corpus, str) else "sentences"
    inputs = corpora.corpus_of(corpus, seed=settings.seed).take(int(limit)).inputs
    shares = ih.shares_of(load(model), inputs, settings, progress=progress, corpus=name)
    chart, frame = inside_head_charts.shares_chart(shares)
    return _out(chart, frame, return_data, shares)


@twin("pair-attention")
def pair_attention(model, corpus: str = "mrpc:test", *, settings, limit: int = 200, progress=None,
                   return_data: bool = False):
    """Paraphrase heads (the bertviz MRPC report, measured): every head's A→B and B→A attention share over the
    first `limit` labelled pairs of a corpus spec (default MRPC test), split by gold label, and the AUC with which
    it separates paraphrases from non-paraphrases. Frame: core.charts.pair_attention.separation_frame; `.to_json()`
    is `python -m core pair-attention --json`'s (top_heads: the `top` most separating)."""
    pairs, gold, _ = mrpc_pairs(corpus, settings.seed, int(limit))
    result = pair_heads_of(load(model), (pairs, gold), settings, progress=progress, corpus=corpus)
    chart, frame = pair_attention_charts.separation_chart(result)
    return _out(chart, frame, return_data, result)


attention_neuron = neuron_view  # the name the list uses for the same view


# ---- masked words ------------------------------------------------------------------------------------------------

class _Noted:
    """A result with the notes its command's --json adds beside it ("truncated"): `to_json()` is that JSON; every
    other attribute is the result's."""

    def __init__(self, result, **notes):
        self.result, self.notes = result, notes

    def __getattr__(self, name):
        return getattr(self.result, name)

    def to_json(self) -> dict:
        return {**self.result.to_json(), **self.notes}


def _trained(chart, frame, return_data: bool, result):
    """What a training twin returns: the saved thing's result (its `to_json()` the command's --json, `path` where it
    was saved); with return_data, `Data(chart, frame)` whose `.result` is that result."""
    return Data(chart, frame, result) if return_data else result


@twin("fill-mask")
def fill_mask(model, text: str, text_b: str | None = None, *, settings, view: str = "top", mask: int = 0,
              return_data: bool = False):
    """The model's guesses at each [MASK] (a checkpoint with an MLM head). view "top": the final guesses;
    "layers": the MLM head on every layer's vector at mask number `mask` (logit lens); "final": that mask's
    final top-k. Frames: core.charts.masked top_frame / lens_frame / final_frame. With return_data, `.to_json()` is
    what `python -m core fill-mask --json` prints."""
    lm = load(model)
    _warn(head_warning(lm.path))  # a fitted head under 1.5× the best constant guess
    pred = masked_words.run_fill_mask(lm, (text, text_b), settings)
    read = read_input(lm, masked_words.prepare_text(lm, text), masked_words.prepare_text(lm, text_b) if text_b else None)
    _warn_if_cut(read)
    result = _Noted(pred, truncated=truncation(read))
    if view == "top":
        frame = masked_charts.top_frame(pred)
        return _out(masked_charts.top_chart(pred, frame), frame, return_data, result)
    if not 0 <= int(mask) < len(pred.positions):
        raise ValueError(f"mask must be 0…{len(pred.positions) - 1}")
    if view == "layers":
        frame = masked_charts.lens_frame(pred, int(mask))
        return _out(masked_charts.lens_chart(pred, int(mask), frame), frame, return_data, result)
    if view == "final":
        frame = masked_charts.final_frame(pred, int(mask))
        return _out(masked_charts.final_chart(pred, int(mask), frame), frame, return_data, result)
    raise ValueError(f"view must be 'top', 'layers' or 'final', not {view!r}")


@twin("fit-mlm-head")
def fit_mlm_head(model, corpus: str, out: str, *, settings, limit: int | None = None, overwrite: bool = False,
                 progress=None, return_data: bool = False):
    """Fit a masked-word head on a frozen encoder without one (`python -m core fit-mlm-head`) over the corpus spec
    `corpus` (core.data.corpus grammar), `limit` sentences at most, and save it as `out` (models_cache/heads/out,
    loadable by that name; `overwrite` replaces a saved head of that name). Returns the HeadFit (`.path`,
    `.to_json()` what the command's --json prints); with return_data, `Data(None, frame)` (frame: that summary as
    one row) whose `.result` is the HeadFit."""

    fit = run_fit(_ref(model), (corpus, out, limit), settings, progress=progress, overwrite=overwrite)
    _warn(fit.warning)  # a head under 1.5× the best constant guess
    return _trained(None, pd.DataFrame([fit.to_json()]), return_data, fit)


@twin("erase")
def erase(model, task: str, corpus: str, eval_corpus: str, *, settings, out: str | None = None, progress=None,
          return_data: bool = False):
    """Erase a concept (LEACE) from one layer's word vectors ("What each layer knows", "Erase a concept";
    `python -m core erase`): fitted on the treebank `corpus` (ud[:SPLIT[:N]] or a .conllu file) for `task` (upos,
    xpos, deprel, morph:FEAT), checked with fresh linear probes on `eval_corpus`, saved as `out`
    (models_cache/erasers/out; None: a free default name), and run through the rest of the model (masked words, or
    a classification run's accuracy, with a random subspace of the same rank). layer is an array index (layer + 1
    as shown). Chart: the probe bars above the effect bars. Frame: one row per bar. With return_data, `.result`
    is the EraseResult and `.to_json()` what the command's --json prints."""
    erasure_inputs = erasure.erase_inputs(task, corpus, str(eval_corpus), out, settings.seed)
    result = erasure.ANALYSIS.run_function()(load(model), erasure_inputs, settings, progress=progress)
    drawn = erasure_charts.erase_charts(result)
    frame = pd.concat([erasure_charts.probe_frame(result).rename(columns={"accuracy": "value"}).assign(chart="probe"),
                       erasure_charts.effect_frame(result).rename(columns={"score": "value"}).assign(chart="effect")],
                      ignore_index=True)
    return _out(_stacked([c for c, _ in drawn]), frame, return_data, result)


class _Triple(tuple):
    """logit_lens's `(chart, frame, result)` (three, as it always returned), with `.result` and `.to_json()` as
    Data's: what the command's --json prints."""

    def __new__(cls, chart, frame, result):
        made = super().__new__(cls, (chart, frame, result))
        made.result = result
        return made

    def to_json(self) -> dict:
        return self.result.to_json()


@twin("lens")
def logit_lens(model, text: str, text_b: str | None = None, *, settings, lens=None, view: str = "grid",
               return_data: bool = False):
    """Every layer read in words: the MLM head on each layer's vector at every token (kind "logit"), or through
    a fitted tuned lens (kind "tuned", lens=NAME; python -m core fit-tuned-lens). view "grid": top guess per
    layer and token; "kl": KL to the final layer per layer. Frames: core.charts.layer_lens grid_frame /
    kl_frame; with return_data the LayerLens result comes third (`.to_json()`: what `python -m core lens --json`
    prints)."""
    lm = load(model)
    _warn(head_warning(lm.path))  # a fitted head under 1.5× the best constant guess
    result = layer_lenses.run_lens(lm, (text, text_b, lens), settings)
    _warn_if_cut(read_input(lm, text, text_b))
    if view == "grid":
        frame = layer_lens_charts.grid_frame(result)
        chart = layer_lens_charts.grid_chart(result, frame)
    elif view == "kl":
        frame = layer_lens_charts.kl_frame(result)
        chart = layer_lens_charts.kl_chart(result, frame=frame)
    else:
        raise ValueError(f"view must be 'grid' or 'kl', not {view!r}")
    return _Triple(chart, frame, result) if return_data else chart


@twin("fit-tuned-lens")
def fit_tuned_lens(model, corpus, name: str, *, settings, limit: int | None = None, text_column: str | None = None,
                   overwrite: bool = False, progress=None, return_data: bool = False):
    """Fit a tuned lens for `model` over `corpus` (as in `anisotropy`; `limit` sentences at most) and save it as
    `name` (`python -m core fit-tuned-lens`; `overwrite` replaces a saved lens of that name). Returns the FittedLens
    (`.path`, `.to_json()` what the command's --json prints); with return_data, `Data(chart, frame)`: the held-out
    KL to the final layer of both lenses per layer (core.charts.layer_lens.fitted_frame), `.result` the FittedLens."""
    chosen = corpora.corpus_of(corpus, text_column=text_column, seed=settings.seed, limit=limit).head(limit)
    lm = load(model)
    fitted = layer_lenses.fit_tuned_lens(lm, chosen.sentences, name, corpus=chosen.name, steps=settings.steps,
                                         batch_tokens=settings.batch_tokens, seed=settings.seed, progress=progress,
                                         overwrite=overwrite)
    ((chart, _),) = layer_lens_charts.fitted_charts(fitted)
    return _trained(chart, layer_lens_charts.fitted_frame(fitted), return_data, fitted)


# ---- heads over a dataset ---------------------------------------------------------------------------------------

class _CountedData(Data):
    """A corpus pass's Data: `to_json()` is the CLI twin's JSON, its "truncated" field (inputs cut to the model's
    length) included."""

    truncated = None

    def to_json(self) -> dict:
        return {**super().to_json(), "truncated": self.truncated}


def _counted_out(chart, frame, return_data: bool, result, cuts):
    """_out for a corpus pass: the notice of inputs cut to the model's length as a Python warning, the count in
    the Data's JSON (cuts: a core.validation.CorpusCuts)."""
    _warn(cuts.truncation_notice())
    if not return_data:
        return chart
    made = _CountedData(chart, frame, result)
    made.truncated = cuts.truncation()
    return made


def _sample(corpus, limit, seed: int, text_column: str | None):
    """The inputs of a corpus pass, as the CLI's --corpus/--limit/--seed pick them; and the corpus's name for the
    result (the spec itself when one is given, as the CLI writes it)."""
    chosen = corpora.corpus_of(corpus, text_column=text_column, seed=int(seed), limit=limit).take(limit)
    return chosen, corpus if isinstance(corpus, str) else chosen.name


@twin("heads")
def heads(model, corpus="snli", *, settings, limit: int | None = 200, seed: int = 0, show: str = "sep",
          text_column: str | None = None, progress=None, return_data: bool = False):
    """Clark et al.'s statistics and Kovaleva et al.'s pattern types of every head over a corpus (Attention heads
    page, Heads over a dataset; corpus as in `anisotropy`, its first `limit` inputs, `seed` picking a dataset's
    sample). show: a statistic (core.analyses.heads.STAT_NAMES, default "sep") or "patterns". Frame: every
    statistic per head (show a statistic) or each head's dominant pattern type. With return_data, `.result` is the
    HeadSurvey and `.to_json()` what `python -m core heads --json` prints."""

    if show not in (*STAT_NAMES, "patterns"):
        raise ValueError(f"show must be one of {', '.join(STAT_NAMES)}, patterns")
    chosen, name = _sample(corpus, limit, seed, text_column)
    lm = load(model)
    counted = run_counting_cuts(lambda: run_survey(lm, chosen.inputs, settings, progress=progress))
    survey = dataclasses.replace(counted.value, corpus=name)
    if show == "patterns":
        chart, frame = attention_charts.pattern_chart(survey), attention_charts.pattern_frame(survey)
    else:
        chart, _ = attention_charts.statistic_chart(survey, show, f"Mean {heads_dataset.statistic_title(survey, show)} per head")
        frame = heads_dataset.statistics_table(survey)
    return _counted_out(chart, frame, return_data, survey, counted)


@twin("ablate")
def ablate(run, *, settings, limit: int | None = None, seed: int = 0, device: str | None = None, progress=None,
           return_data: bool = False):
    """Accuracy of a fine-tuned classification run (its name or folder) with each head, then each whole layer,
    disabled (Heads over a dataset, Ablation), on its own evaluation set (`limit`: a subset seeded by `seed`).
    Frame: the accuracy change per head. With return_data, `.result` is the AblationResult and `.to_json()` what
    `python -m core ablate --json` prints."""

    clf = load_for_ablation(_ref(run), device=device)
    sample = run_eval_sample(clf, limit, int(seed))
    result = dataclasses.replace(run_ablation(clf, sample.examples, settings, progress=progress), task=sample.task,
                                 eval_split=sample.eval_split, run_accuracy=sample.run_accuracy)
    if result.degenerate is not None and result.degenerate.flagged:
        _warn(f"{clf.encoder.ref}: {result.degenerate.message}")
    chart, frame = attention_charts.ablation_chart(result)
    return _counted_out(chart, frame, return_data, result, result)


@twin("attention-change")
def attention_change(model_a, model_b, corpus="snli", *, settings, limit: int | None = 200, seed: int = 0,
                     text_column: str | None = None, progress=None, return_data: bool = False):
    """Per-head cosine between two models' attention maps on the same inputs (Heads over a dataset, Change after
    fine-tuning; a run and the model it was trained from; corpus as in `heads`). Frame: the cosine per head. With
    return_data, `.result` is the AttentionChange and `.to_json()` what `python -m core attention-change --json`
    prints."""

    chosen, _ = _sample(corpus, limit, seed, text_column)
    models = (load(model_a), load(model_b))
    counted = run_counting_cuts(lambda: run_attention_change(models, chosen.inputs, settings, progress=progress))
    chart, frame = attention_charts.change_chart(counted.value)
    return _counted_out(chart, frame, return_data, counted.value, counted)


@twin("syntax-heads")
def syntax_heads(model, corpus="ud:dev:all", *, settings, limit: int | None = None, seed: int = 0,
                 relation: str | None = None, progress=None, return_data: bool = False):
    """The best head per dependency relation on a treebank (Heads over a dataset, Syntactic heads; corpus: "ud",
    "ud:SPLIT:N" or a .conllu file, its first `limit` sentences). relation: every head's accuracy for that one
    relation instead of the best head per relation. Frame: the per-relation table (or that relation's grid). With
    return_data, `.result` is the SyntaxHeads and `.to_json()` what `python -m core syntax-heads --json` prints."""

    chosen, name = _sample(corpus, limit, seed, None)
    trees = corpora.require_trees(chosen)
    lm = load(model)
    counted = run_counting_cuts(lambda: run_syntax_heads(lm, trees, settings, progress=progress))
    result = dataclasses.replace(counted.value, treebank=name)
    if relation is None:
        frame = heads_dataset.syntax_table(result)
        chart = attention_charts.syntax_chart(frame, result.protocol)
    elif relation not in result.relations:
        raise ValueError(f"relation must be one of {', '.join(result.relations)}")
    else:
        chart, frame = attention_charts.relation_chart(result, relation)
    return _counted_out(chart, frame, return_data, result, counted)


# ---- what causes the output -------------------------------------------------------------------------------------

class _PatchData(Data):
    """lens.patch's return_data: `(chart, frame, result)` as it always was, and a Data (`.result`, `.to_json()`:
    what `python -m core patch --json` prints)."""

    def __new__(cls, chart, frame, result):
        made = tuple.__new__(cls, (chart, frame, result))
        made.result = result
        return made


@twin("patch")
def patch(model, clean, corrupt, *, settings, target=None, label=None, path=None, return_data: bool = False):
    """Activation patching (core.analyses.patching): each head (over="heads") or each layer x token cell
    ("positions", "attn", "mlp") copied from the clean input into the corrupted one (same number of word pieces).
    target: a word scored at the clean input's [MASK] (a model with an MLM head); label: a class of a
    classification run (its name or folder as `model`), or two classes for their logit difference. method
    "attribution": Nanda's gradient estimate of every cell at once. path ((layer, head), (layer, head)): the
    sender's effect through the receiver only (result.path_metric; exact method only). Frame:
    core.charts.patching.patching_frame; with return_data the Patching result comes third, and `.to_json()` is what
    `python -m core patch --json` prints. A grid that is noise (result.warnings: a clean - corrupt gap under
    core.analyses.patching.SMALL_GAP, or a clean input that does not give the target) is drawn with a Python
    warning per reason, which a notebook shows under the cell."""
    if (target is None) == (label is None):
        raise ValueError("give target=WORD (a model with an MLM head) or label=CLASS (a classification run)")
    if label is not None:
        subject, goal = (model if hasattr(model, "labels") else load_classifier(_ref(model))), label
    else:
        subject, goal = load(model), target
    if path is not None:
        if settings.method != "exact":
            raise ValueError("path patching is exact: leave method at \"exact\"")
        result = patchings.patch(subject, clean, corrupt, goal, settings.over, path=path)
    else:
        result = patchings.run_patch(subject, (clean, corrupt, goal), settings)
    for warning in result.warnings:
        _warn(f"{warning.code}: {warning.message}")
    frame = patching_charts.patching_frame(result)
    chart = patching_charts.patching_chart(result, frame)
    return _PatchData(chart, frame, result) if return_data else chart


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
            _warn(f"{profile.model}: {warning}")
    frame = anisotropy_charts.profile_frame(profiles)
    if measure not in set(frame["measure"]):
        raise ValueError(f"{measure} was not measured with protocol {settings.protocol!r}")
    chart = anisotropy_charts.layer_chart(frame, measure, protocol=settings.protocol)
    return _out(chart, frame, return_data, profiles[0] if len(profiles) == 1 else _Results(profiles))


class _Results(list):
    """Several models' results: `to_json()` a list of each one's."""

    def to_json(self) -> list:
        return [r.to_json() for r in self]


@twin("pca")
def layerwise_pca(model, texts: str | Sequence[str | tuple[str, str | None]], *, settings, layer: int = 0,
                  colour: str = "sentence", word: str | None = None, show_labels: bool = True,
                  background: str | None = None, background_size: int = 100, return_data: bool = False):
    """Every word piece of the sentences at one layer, projected to 2-D (Layerwise PCA page). texts: one sentence,
    or a list of sentences / (a, b) pairs; colour "sentence", "segment" or "word" (with `word` highlighted);
    background: a corpus spec to fit the PCA on (its first `background_size` sentences), as `pca --background`.
    Frame: the page's CSV, every layer's coordinates. With return_data, `.result` is the LayerProjection and
    `.to_json()` what `python -m core pca --json` prints (less its notes "truncated", "background_truncated")."""
    items = [(texts, None)] if isinstance(texts, str) else [(t, None) if isinstance(t, str) else tuple(t) for t in texts]
    if not items:
        raise ValueError("give at least one sentence")
    lm = load(model)
    backdrop = None
    if background is not None:
        sentences = corpora.resolve(background, settings.seed).take(int(background_size)).sentences
        backdrop = background_vectors(lm, sentences, keep_special=not settings.hide_special,
                                      keep_punct=not settings.hide_punct)
    projection, encodings = run_pca(lm, [(a, b) if b else a for a, b in items], settings, background=backdrop)
    projection = dataclasses.replace(projection, background_name=background)
    _warn_if_cut(encodings)
    layer = int(layer)
    if not 0 <= layer < len(projection.layers):
        raise ValueError(f"layer must be 0…{len(projection.layers) - 1}")
    name = display_name(_ref(model))
    chart, _ = scatter(projection, layer, f"{name}, layer {layer}", names=sentence_names(items), colour=colour,
                       chosen_word=word, show_labels=show_labels)
    return _out(chart, projection_frame(projection), return_data, projection)


@twin("project")
def project(model, corpus: str, *, settings, colour: str | None = None, words: Sequence[str] = (), progress=None,
            return_data: bool = False):
    """One vector per example of a corpus ([CLS] or mean-pooled) at a layer, projected to 2-D (Dataset explorer,
    Projector tab). corpus: a corpus spec (sampled with `seed`). colour: a colouring of the page (default: the
    gold label, else the sentence length); words: what "contains words" looks for. Frame:
    core.charts.explorer.points_frame. With return_data, `.to_json()` is what `python -m core project --json`
    prints."""
    examples = explorer.load_examples(corpus, settings.seed)
    result = explorer.run_project(_explainer(model), examples, settings, progress)
    _warn(result.truncation_notice())
    frame = explorer_charts.points_frame(result, examples, words)
    colour = colour or ("gold label" if result.labels is not None else "sentence length")
    if colour not in frame.columns:
        raise ValueError(f"colour must be one of {', '.join(c for c in frame.columns if c not in ('id', 'x', 'y', 'text'))}")
    title = f"{display_name(_ref(model))}, layer {result.layer}, {result.pooling} vectors, {result.method}"
    return _out(explorer_charts.scatter(frame, colour, title, selectable=False), frame, return_data, result)


@twin("neighbours")
def neighbours(model, text: str, word: str, corpus: str, *, settings, progress=None, return_data: bool = False):
    """The k token occurrences of a corpus most similar (cosine) to `word` of `text` at a layer (Dataset explorer,
    Nearest contexts tab). corpus: a corpus spec (sampled with `seed`); its index is built once and kept under
    models_cache/explorer_index. Frame: core.charts.explorer.neighbours_frame. With return_data, `.to_json()` is
    what `python -m core neighbours --json` prints (less its notes "truncated" and "corpus_truncated")."""
    result, encoding, index = vector_index.find_neighbours(load(model), text, word, corpora.resolve(corpus, settings.seed),
                                                           settings, progress)
    _warn_if_cut([encoding])
    _warn(index.info.truncation_notice())
    return _out(explorer_charts.neighbours_chart(result), explorer_charts.neighbours_frame(result), return_data, result)


@twin("neurons")
def neurons(model, corpus="builtin", *, settings, neuron: int | None = None, text: str | None = None,
            text_b: str | None = None, compare=None, top: int = 20, text_column: str | None = None, progress=None,
            return_data: bool = False):
    """Feed-forward neurons of `layer` (1..L: layer l's neurons write into hidden_states[l]; default the last) over a
    corpus (Read the layers page, Neurons tab; corpus as in `anisotropy`). Without `neuron`: the `top` neurons by
    highest activation, or, with `compare` (a model fine-tuned from `model`, read over the same corpus; see also
    `neurons_diff`), by how much they changed (Cohen's d). With `neuron`: its top-k contexts, and with `text` its
    activation shaded over that sentence below. The index is kept under models_cache/neuron_index and reused.
    Frame: the chart's table. With return_data, `.to_json()` is what `python -m core neurons --json` prints for the
    same neurons (`--neuron N`, or `--neurons TOP`; with `text`, their activations over it)."""
    chosen = corpora.corpus_of(corpus, text_column=text_column, seed=settings.seed)
    lm = load(model)
    index = nr.run_index(lm, chosen, settings, progress=progress)
    _warn(index.truncation_notice())
    shown = nr.shown_neurons(index, None if neuron is None else [neuron], int(top))
    sentence = nr.neuron_sentence(lm, text, index.layer, text_b) if text else None
    if neuron is None:
        changes = None
        if compare is not None:
            changes = nr.neuron_changes(index, nr.build_neuron_index(load(compare), chosen, index.layer, k=settings.k,
                                                                     progress=progress))
        order = index.by_max() if changes is None else changes.order
        frame = neuron_charts.neurons_frame(index, order[:int(top)], changes)
        measure = "max activation" if changes is None else "change"
        title = (f"Neurons of layer {index.layer}, highest activation first" if changes is None else
                 f"Neurons of layer {index.layer} that changed most in {display_name(_ref(compare))}")
        result = (nr.NeuronsShown(index, shown, sentence) if changes is None else
                  nr.ChangesShown(changes, int(top), index))
        return _out(neuron_charts.neurons_chart(frame, measure, title), frame, return_data, result)
    chart = neuron_charts.contexts_chart(index, int(neuron), settings.k)
    frame = neuron_charts.contexts_frame(index, int(neuron), settings.k)
    if sentence is not None:
        shaded = neuron_charts.sentence_chart(sentence, int(neuron), reach=float(index.max_activation[int(neuron)]))
        chart = _stacked([chart, shaded])
    return _out(chart, frame, return_data, nr.NeuronsShown(index, shown, sentence))


@twin("neurons-diff")
def neurons_diff(model_a, model_b, corpus="builtin", *, settings, text_column: str | None = None, progress=None,
                 return_data: bool = False):
    """The feed-forward neurons of `layer` that change most from model A to model B (a run fine-tuned from A) over
    the same corpus, by Cohen's d (`python -m core neurons-diff`); `top` of them. Frame: core.charts.neurons
    neurons_frame with the change columns. With return_data, `.to_json()` is what the command's --json prints."""
    chosen = corpora.corpus_of(corpus, text_column=text_column, seed=settings.seed)
    shown = nr.run_diff([load(model_a), load(model_b)], chosen, settings, progress=progress)
    _warn(shown.index_a.truncation_notice())
    frame = neuron_charts.neurons_frame(shown.index_a, shown.shown, shown.changes)
    ((chart, _),) = neuron_charts.changes_charts(shown)
    return _out(chart, frame, return_data, shown)


@twin("sae-features")
def features(sae, text: str, text_b: str | None = None, *, settings, model=None, feature: int | None = None,
             corpus="builtin", compare=None, top: int = 15, text_column: str | None = None, progress=None,
             return_data: bool = False):
    """Sparse features (Read the layers page, Sparse features tab) of a saved SAE (its name, or a
    SparseAutoencoder) on `text` (model: default the SAE's own). With `feature`: that feature's top contexts over
    `corpus`, its activation histogram and (when the model has a masked-word head) its lens words. With `compare`
    (a run fine-tuned from the SAE's model): the features whose firing rate over `corpus` changed most.
    Frame: the first chart's table. With return_data, `.to_json()` is what `python -m core sae-features --json`
    prints."""
    sae = sae if isinstance(sae, sparse.SparseAutoencoder) else sparse.load_sae(str(sae))
    lm = load(model if model is not None else sae.model)
    found = sparse.run_features(lm, (sae, text, text_b), settings)
    chart, frame = sparse_charts.sentence_chart(found, top), sparse_charts.sentence_frame(found, top)
    if feature is None and compare is None:
        return _out(chart, frame, return_data, found)
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
    return _out(_stacked(charts), frame, return_data, found)


@twin("sae-train")
def sae_train(model, corpus, layer: int, name: str, *, settings, limit: int | None = None,
              text_column: str | None = None, overwrite: bool = False, progress=None, return_data: bool = False):
    """Train a TopK sparse autoencoder on hidden_states[layer] (0 = the embeddings .. L) of `model` over `corpus`
    (as in `anisotropy`; `limit` inputs at most) and save it as `name` (`python -m core sae-train`; `overwrite`
    replaces a saved SAE of that name; a stopped training of the same name and settings resumes). Returns the
    TrainedSae with the corpus's "truncated" note (`.path`, `.to_json()` what the command's --json prints); with
    return_data, `Data(chart, frame)`: the training loss (core.charts.sparse_features.loss_frame)."""

    settings.check()
    sparse.check_name(name)
    sparse.check_free_name(name, overwrite)  # before the corpus is read and the model loads, as the command
    chosen = corpora.corpus_of(corpus, text_column=text_column, seed=settings.seed,
                               default_n=sparse.DEFAULT_PAIRS).take(limit)
    spec = (corpus if isinstance(corpus, str) else chosen.name) + (f" (first {limit})" if limit else "")
    lm = load(model)
    with counting_cuts() as cuts:
        trained = sparse.train_sae(lm, chosen.sentences, int(layer), settings, name, corpus=spec, progress=progress,
                                   overwrite=overwrite)
    _warn(cuts.over_ranks().truncation_notice())
    _warn(trained.quality.warning)  # an FVE under 0.8
    result = _Noted(trained, truncated=cuts.over_ranks().truncation())
    ((chart, _),) = sparse_charts.trained_charts(trained)
    return _trained(chart, sparse_charts.loss_frame(trained), return_data, result)


@twin("explain")
def explain(model, text: str, text_b: str | None = None, *, settings, return_data: bool = False):
    """Why this prediction: one method's word scores (Why this prediction? page). method: one of
    core.analyses.explain.METHODS; gradient and perturbation methods need a classifier head. Frame:
    core.charts.explain.word_frame. With return_data, `.result` is the Explanation and `.to_json()` what
    `python -m core explain --json` prints (less its notes "truncated" and "degenerate")."""
    explainer = _explainer(model)
    result = explanations.run_explain(explainer, (text, text_b), settings)
    _warn_if_cut(read_input(explainer.lm, text, text_b))
    return _out(explain_charts.word_bars(result), explain_charts.word_frame(result), return_data, result)


@twin("explain-faithfulness")
def explain_faithfulness(model, corpus=f"snli:dev:{faithful.QUICK_EXAMPLES}", *, settings, progress=None,
                         return_data: bool = False):
    """How faithful each explanation method is over a corpus (the page's faithfulness section): comprehensiveness
    and sufficiency (AOPC) beside a random control. model: a classification run; corpus: a corpus spec (sampled
    with `seed`). Frame: core.charts.explain.faithfulness_frame. With return_data, `.to_json()` is what
    `python -m core explain-faithfulness --json` prints (less its note "degenerate")."""
    items = corpora.resolve(corpus, settings.seed).items
    result = faithful.run_faithfulness(_explainer(model), items, settings, progress, corpus=corpus)
    _warn(result.truncation_notice())
    return _out(explain_charts.faithfulness_chart(result), explain_charts.faithfulness_frame(result), return_data,
                result)


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
    chosen = bias_data.parse_words(words or bias_data.DEFAULT_WORDS, keep_case=protocol == "slides")
    train = bias_data.load_split(task, "train", int(train_limit or 0) or None, int(seed))
    frame = bias_data.word_count_frame(bias_data.word_matches(train, chosen, protocol))
    return _out(bias_charts.word_count_chart(frame, protocol), frame, return_data)


@twin("bias")
def bias(model=None, corpus: str | None = None, *, settings, name: str | None = None, show: str | None = None,
         device: str | None = None, threads: int | None = None, erase: str | None = None, progress=None,
         return_data: bool = False):
    """The bias experiment (Bias experiment page; `python -m core bias`): trains full / biased / control runs of
    `model` with the settings and scores them (hours on a CPU: its progress is progress(done, total) per stage).
    show: a finished experiment's name, read instead of training. corpus (a corpus spec, sampled with `seed`) with
    model a finished classification run: no training, the run's flip rate on the corpus's swapped copies (`bias
    --corpus`); erase (with corpus): a saved eraser's name, the flip rate scored again with it applied at its layer
    (`bias --corpus --erase`; the JSON's "erased"; then the chart and frame are the two flip rates). Chart: accuracy per run and slice (the
    flip rate for a corpus); frame: core.bias.accuracy_frame (one row of flips for a corpus). With return_data,
    `.to_json()` is what `bias --json` prints."""
    if show is None and model is None:
        raise ValueError("give model: a finished classification run (with corpus) or the model to train")
    if show is not None:
        result = bias_data.load_result(show)
        if result is None:
            raise ValueError(f"experiment '{show}' has no results yet")
    elif corpus is not None and erase is not None:
        result = erase_gender.corpus_flips_erased(corpora.resolve(corpus, settings.seed), _ref(model), erase,
                                                  device=device)
        _warn(result.truncation_notice())
        frame = bias_charts.erased_flip_frame(result.flips.run, result.erased)
        return _out(bias_charts.erased_flip_chart(frame), frame, return_data, result)
    elif corpus is not None:
        result = bias_data.corpus_flips(corpora.resolve(corpus, settings.seed), _ref(model), device=device)
        _warn(result.truncation_notice())
        frame = pd.DataFrame([{"run": result.run, "flip_rate": result.flip_rate, "flips": result.flips,
                               "swapped": result.swappable}])
        return _out(bias_charts.flip_chart(frame), frame, return_data, result)
    elif erase is not None:
        raise ValueError("erase needs corpus: the swaps are scored on the corpus with and without the eraser")
    else:
        report = None if progress is None else (lambda _stage, done, total: progress(done, total))
        result = bias_experiment.run_settings(_ref(model), name, settings, report, device=device, threads=threads)
    frame = bias_data.accuracy_frame(result)
    return _out(bias_charts.accuracy_chart(frame, result.protocol), frame, return_data, result)


@twin("bias-heads")
def bias_heads(run, corpus: str, *, settings, device: str | None = None, progress=None, return_data: bool = False):
    """The heads behind a finished classification run's bias flips on a corpus (the bias page's "Which heads carry
    the flips?"; `python -m core bias-heads`): each flipping swap patched head by head, heads ranked by mean
    recovery, the top k disabled to score the flip rate again. Chart: the recovery of every head; frame:
    core.charts.bias.head_ranking_frame. With return_data, `.to_json()` is what `bias-heads --json` prints."""
    result = bias_heads_analysis.run_bias_heads(_ref(run), corpora.resolve(corpus), settings, progress, device=device)
    return _out(bias_charts.head_recovery_chart(result), bias_charts.head_ranking_frame(result), return_data, result)


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
        _warn(notice)
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
        _warn(notice)
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
    _warn(result.truncation_notice())
    kind = finetune_charts.CONTROL if settings.random_init else "pretrained"
    drawn = finetune_charts.probe_charts(result, kind)
    frame = finetune_charts.probe_frame([(result.model, kind, result)])
    return _out(_stacked([c for c, _ in drawn]), frame, return_data, result)


@twin("probe-labels")
def probe_labels(model, corpus="ud:dev", eval_corpus="ud:test", *, settings, train_limit: int | None = None,
                 eval_limit: int | None = None, progress=None, return_data: bool = False):
    """What each layer knows (issue 49): a multinomial logistic-regression probe per layer (0 = embeddings) for
    `task` (upos, xpos, deprel or morph:FEAT; a word's vector is the mean of its word pieces), trained on the
    treebank `corpus` (ud[:SPLIT[:N]] or a .conllu file) and scored on `eval_corpus`; with control=True Hewitt &
    Liang's control task and selectivity, with mdl=True Voita & Titov's online codelength and compression.
    Chart: accuracy, control accuracy and selectivity per layer with the majority line and the expected layer
    (above the compression per layer with mdl). Frame: core.charts.layer_knowledge.probe_frame. With return_data,
    `.result` is the LabelProbeResult and `.to_json()` what `python -m core probe-labels --json` prints."""
    knowledge_tasks.check_task(settings.task)
    changes.probe_layer_numbers(settings.layers)
    data = probes.probe_inputs(corpus, eval_corpus, settings.seed, train_limit, eval_limit)
    result = knowledge_probes.run_label_probes(load(model), data, settings, progress=progress)
    if result.n_sentences_skipped:
        _warn(f"{result.n_sentences_skipped} sentences longer than the model reads were left out")
    _warn(result.below_majority_notice())
    drawn = [chart for chart, _ in knowledge_charts.probe_charts(result)]
    chart = drawn[0] if len(drawn) == 1 else _stacked(drawn)
    return _out(chart, knowledge_charts.probe_frame([result]), return_data, result)


# ---- reproduce a paper -------------------------------------------------------------------------------------------

@twin("reproduce")
def reproduce(study: str, *, settings, model=None, corpus: str | None = None, limit: int | None = None, progress=None,
              return_data: bool = False, **extra):
    """A published study run the paper's way (Reproduce page; core.studies.NAMES), the paper's numbers beside the
    measured ones. model: a reference (None: the paper's); extra: the study's options (`--set KEY=VALUE`).
    seeds (two or more): the study once per seed; the chart draws the seeds' mean with its 95 % interval beside the
    paper and the frame is core.charts.reproduce.seeds_frame (each number's values per seed, mean, interval,
    verdict). Without: one run with `seed`; frame core.charts.reproduce.comparison_frame. With return_data,
    `.to_json()` is what `python -m core reproduce --json` prints."""
    chosen = studies.get(study)
    options = studies.StudyOptions(model=None if model is None else _ref(model), corpus=corpus, limit=limit,
                                   extra=extra)
    report = None if progress is None else (lambda done, total, _message=None: progress(done, total))
    found = run_study(chosen, options, settings, report, None)
    if settings.seeds is not None:
        chart = reproduce_charts.seeds_layer_chart(found) or reproduce_charts.seeds_table_chart(found)
        return _out(chart, reproduce_charts.seeds_frame(found), return_data, found)
    chart = (reproduce_charts.layer_comparison_chart(found) or reproduce_charts.table_comparison_chart(found)
             or reproduce_charts.measured_chart(found))
    return _out(chart, reproduce_charts.comparison_frame(found), return_data, found)


# ---- analyses declared with their inputs: the notebook function made from the declaration ------------------------

_DECLARED: dict[str, object] = {}


def __getattr__(name: str):
    """`lens.NAME` for an analysis declared with its inputs and no function written here (core.contract): made
    from its declaration on first use, so a new analysis needs no line in this module."""
    if name.startswith("__"):
        raise AttributeError(name)
    if name not in _DECLARED:
        found = [a for a in views.all_analyses() if a.lens == name and a.inputs]
        if not found:
            raise AttributeError(f"module 'core.lens' has no attribute {name!r}")
        _DECLARED[name] = _declared_twin(found[0])
    return _DECLARED[name]


def _declared_twin(analysis):
    """The notebook function of a declared analysis: (model, text, text_b=None) or (model, corpus="builtin",
    limit=0), its settings as keyword arguments, progress, return_data; draws its `charts(result)`."""

    def draw(lm, inputs, settings, progress, return_data):
        result = analysis.run_function()(lm, inputs, settings, progress=progress)
        charts = analysis.charts_function()(result) if analysis.charts is not None else []
        chart = charts[0][0] if len(charts) == 1 else _stacked([c for c, _ in charts]) if charts else None
        frame = drawn_frame(chart)
        return _out(chart, pd.DataFrame() if frame is None else frame, return_data, result)

    if analysis.inputs == ("text",):
        def on_text(model, text: str, text_b: str | None = None, *, settings, progress=None, return_data: bool = False):
            return draw(load(model), contract.Sentences(text, text_b or None), settings, progress, return_data)
        function = on_text
    else:
        def on_corpus(model, corpus="builtin", *, settings, text_column: str | None = None, limit: int = 0,
                      progress=None, return_data: bool = False):
            chosen = corpora.corpus_of(corpus, text_column=text_column, limit=int(limit) or None).head(int(limit) or None)
            return draw(load(model), chosen, settings, progress, return_data)
        function = on_corpus
    function.__name__ = function.__qualname__ = analysis.lens
    function.__doc__ = (f"{analysis.title}: {analysis.summary}. The CLI twin is `python -m core {analysis.command}`; "
                        f"with return_data, `(chart, frame)` whose `.to_json()` is what its --json prints.")
    return twin(analysis.name)(function)


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
