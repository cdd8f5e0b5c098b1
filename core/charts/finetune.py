"""Fine-tuning charts: runs (loss, per-class F1, confusion, class probabilities, through core.charts.classification)
and what fine-tuning changes (similarity per layer and across layers, structural probe, one sentence's trees).
No streamlit here."""

from __future__ import annotations

import textwrap
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core import references
from core.charts import classification, layout
from core.model.loading import display_name
from core.analyses.probe import ProbeResult
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.protocols import describe
from core.analyses.similarity import Similarity
from core.training.runs import RunInfo

CONTROL = "random-initialised control"
PROBE_REFERENCES = {"UUAS": "hewitt-manning.uuas", "DSpr": "hewitt-manning.dspr"}
MEASURES = {"cka": "linear CKA", "rsa": "RSA"}


# ---- runs --------------------------------------------------------------------------------------------------


def f1_frame(runs: list[RunInfo]) -> pd.DataFrame:
    """run, class, F1 from each run's metrics.json (runs without per-class F1 add no rows)."""
    return pd.DataFrame(
        [
            {"run": r.name, "class": label, "F1": float(f1)}
            for r in runs
            for label, f1 in ((r.metrics or {}).get("per_class_f1") or {}).items()
        ]
    )


def f1_chart(runs: list[RunInfo]) -> alt.Chart:
    return classification.f1_chart(f1_frame(runs), runs=[r.name for r in runs])


def confusion_frame(run: RunInfo) -> pd.DataFrame:
    """One run's confusion matrix as classification.confusion_frame rows."""
    m = run.metrics or {}
    labels = m.get("labels") or []
    return classification.confusion_frame(np.array(m.get("confusion") or [], dtype=float).reshape(len(labels), len(labels)),
                                          labels, run.name)


def confusion_chart(runs: list[RunInfo]) -> alt.HConcatChart:
    return classification.confusion_chart(pd.concat([confusion_frame(r) for r in runs]))


def loss_frame(status_or_metrics: dict, run: str) -> pd.DataFrame:
    """run, step, loss from a live status (losses) or a finished run's metrics (loss_curve)."""
    points = status_or_metrics.get("losses") or status_or_metrics.get("loss_curve") or []
    return pd.DataFrame({"run": run, "step": [p[0] for p in points], "loss": [p[1] for p in points]})


def _whole_ticks(values: pd.Series, most: int = 8) -> int:
    """How many ticks an axis of whole numbers gets: no more than there are whole numbers across its range."""
    span = int(values.max() - values.min()) if len(values) else 0
    return max(1, min(most, span))


def loss_chart(frame: pd.DataFrame, title: str = "Training loss") -> alt.Chart:
    return (
        alt.Chart(frame, title=title)
        .mark_line()
        # a step is a whole number: a short run's axis said 1.1, 1.2, … between its 3 steps
        .encode(x=alt.X("step:Q", axis=alt.Axis(format="d", tickCount=_whole_ticks(frame["step"]))), y=alt.Y("loss:Q"), color="run:N", tooltip=["run", "step", alt.Tooltip("loss:Q", format=".4f")])
        .properties(height=220)
    )


probabilities_frame = classification.probabilities_frame
probabilities_chart = classification.probabilities_chart


# ---- what fine-tuning changes ------------------------------------------------------------------------------


def similarity_frame(results: list[Similarity]) -> pd.DataFrame:
    """model (B), measure (its title), layer, value: RSA and CKA of each result, layer by layer."""
    rows = []
    for r in results:
        for measure in MEASURES:
            values = getattr(r, measure)
            rows.extend({"model": display_name(r.model_b), "measure": MEASURES[measure], "layer": int(layer), "value": float(v)}
                        for layer, v in zip(r.layers, values))
    return pd.DataFrame(rows)


def similarity_chart(frame: pd.DataFrame, base: str, protocol: str = DEFAULT_PROTOCOL) -> alt.LayerChart:
    title = alt.TitleParams(f"Similarity to {display_name(base)}, layer by layer (1 = unchanged)",
                            subtitle=textwrap.wrap(describe(protocol), 90), anchor="start")  # as probe_chart's
    lines = alt.Chart(frame).encode(
        x=alt.X("layer:Q", axis=alt.Axis(tickMinStep=1, format="d"), title="layer (0 = embeddings)"),
        y=alt.Y("value:Q", scale=alt.Scale(zero=False, domainMax=1), title="similarity"),
        color=alt.Color("model:N", title="compared model", legend=alt.Legend(labelLimit=layout.LEGEND_LABEL_PX)),
        tooltip=["model", "measure", "layer", alt.Tooltip("value:Q", format=".3f")],
    )
    dash = alt.StrokeDash("measure:N", title="measure", sort=list(MEASURES.values()))
    return alt.layer(*layout.dashed_lines(lines, dash)).properties(width="container", height=320, title=title)


def cross_frame(result: Similarity, measure: str) -> pd.DataFrame:
    """layer_a, layer_b, value: every layer of A against every layer of B for one measure ("cka" or "rsa")."""
    matrix = result.cka_cross if measure == "cka" else result.rsa_cross
    a, b = np.meshgrid(np.arange(matrix.shape[0]), np.arange(matrix.shape[1]), indexing="ij")
    return pd.DataFrame({"layer_a": a.ravel(), "layer_b": b.ravel(), "value": matrix.ravel().astype(float)})


def cross_chart(frame: pd.DataFrame, result: Similarity, measure: str) -> alt.LayerChart:
    model_a, model_b = display_name(result.model_a), display_name(result.model_b)
    base = alt.Chart(frame, title=f"{MEASURES[measure]}: every layer of {model_a} vs every layer of {model_b}").encode(
        x=alt.X("layer_b:O", title=f"layer of {model_b}"),
        y=alt.Y("layer_a:O", title=f"layer of {model_a}", sort="descending"),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("value:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), title=MEASURES[measure]),
        tooltip=["layer_a", "layer_b", alt.Tooltip("value:Q", format=".3f")],
    )
    labels = base.mark_text(fontSize=10).encode(
        text=alt.Text("value:Q", format=".2f"),
        color=alt.condition(alt.datum.value > 0.6, alt.value("black"), alt.value("white")),
    )
    size = max(320, min(640, 44 * frame["layer_a"].nunique() + 120))  # axis titles and labels take ~120 px
    return alt.layer(cells, labels).properties(width="container", height=size)


def probe_frame(results: list[tuple[str, str, ProbeResult]]) -> pd.DataFrame:
    """One row per (model, kind, layer): UUAS, DSpr, eval loss and the sentence counts. model: the display name
    (a folder's path in the legend was cut, "/work/shared/data/mod…")."""
    rows = []
    for label, kind, result in results:
        for p in result.probes:
            rows.append({"model": display_name(label), "kind": kind, "layer": p.layer, "UUAS": p.uuas, "DSpr": p.dspr,
                         "eval loss": p.eval_loss, "training sentences": p.n_train, "evaluation sentences": p.n_eval})
    return pd.DataFrame(rows)


def probe_reference_frame(metric: str, model: str, protocol: str) -> pd.DataFrame:
    """The published H&M number for `metric` ("UUAS" or "DSpr") as rows layer, value, kind ("same" only when
    `model` and `protocol` are the paper's, else "shape") and label (who, model, corpus, how to compare)."""
    ref = references.get(PROBE_REFERENCES[metric])
    kind = references.overlay_kind(ref, model, protocol)
    label = references.overlay_label(ref, model, protocol)
    return pd.DataFrame([{"layer": int(layer), "value": float(value), "kind": kind, "label": f"{label}: {value:.3g}"}
                         for layer, value in ref.values.items()])


def probe_chart(frame: pd.DataFrame, metric: str, show_reference: bool, *, model: str = "",
                protocol: str = DEFAULT_PROTOCOL) -> alt.LayerChart:
    """UUAS or DSpr per layer; with show_reference, H&M's published point, drawn as a target (filled, with a rule)
    only when `model` (the pretrained model probed) and `protocol` match the paper's, else as a hollow grey
    landmark labelled "compare the shape"."""
    lines = alt.Chart(frame).encode(
        x=alt.X("layer:Q", axis=alt.Axis(tickMinStep=1, format="d"), title="layer (0 = embeddings)"),
        y=alt.Y(f"{metric}:Q", scale=alt.Scale(domain=[0, 1]), title=metric),
        color=alt.Color("model:N", title="model", legend=alt.Legend(labelLimit=layout.LEGEND_LABEL_PX)),
        tooltip=["model", "kind", "layer", alt.Tooltip(f"{metric}:Q", format=".3f")],
    )
    layers = layout.dashed_lines(lines, alt.StrokeDash("kind:N", title="kind", sort=["pretrained", "fine-tuned", CONTROL]))
    subtitle = textwrap.wrap(describe(protocol), 90)
    if show_reference:
        ref = probe_reference_frame(metric, model, protocol)
        same = bool((ref["kind"] == "same").all())
        colour = "black" if same else "grey"
        if same:
            layers.append(alt.Chart(ref).mark_rule(strokeDash=[6, 4], color=colour).encode(y="value:Q"))
        layers.append(alt.Chart(ref).mark_point(shape="diamond", size=120, filled=same, color=colour).encode(
            x="layer:Q", y="value:Q", tooltip=["label"]))
        # named under the title, not written beside the diamond: right-aligned at the paper's layer, its 120
        # characters ran off the plot's left edge ("…e layer 7 (bert-base-cased, …")
        subtitle += textwrap.wrap("◆ " + "; ".join(ref["label"]), 90)
    # left-aligned: centred on a plot narrower than its 90-character lines (a wide legend beside it), the
    # subtitle ran off the chart's left edge
    title = alt.TitleParams(f"{metric} per layer (evaluation sentences)", subtitle=subtitle, anchor="start")
    return alt.layer(*layers).properties(width="container", height=300, title=title)


def probe_export_chart(charts: Sequence[alt.LayerChart]) -> alt.HConcatChart:
    """The probe charts side by side for export: a fixed width, since "container" means nothing in a file."""
    return alt.hconcat(*[c.properties(width=360) for c in charts])


def arcs_frame(parse, gap: float = 0.0) -> pd.DataFrame:
    """Points along a half-circle per edge: gold arcs above the words, predicted arcs below, each starting `gap`
    (in the y scale's units) off the words' line so that no arc is drawn across a word."""
    rows = []
    steps = np.linspace(0, np.pi, 17)
    for tree, edges, sign in (("gold", parse.gold_edges, 1), ("probe", parse.predicted_edges, -1)):
        for i, j in sorted(edges):
            status = "gold edge" if tree == "gold" else ("correct" if (i, j) in parse.gold_edges else "wrong")
            centre, radius = (i + j) / 2, (j - i) / 2
            for k, t in enumerate(steps):
                rows.append({"edge": f"{tree} {i}-{j}", "tree": tree, "status": status, "order": k,
                             "x": centre - radius * np.cos(t), "y": sign * (gap + radius * np.sin(t)),
                             "pair": f"{parse.words[i]} — {parse.words[j]}"})
    return pd.DataFrame(rows)


# The tree's plot is at most this wide (the main column less the axis-free margins): wider, the words past the
# column's edge were cut ("sinc…") and the arcs ran off it.
ARCS_MAX_PX = 660
WORD_SLOT_PX = 60  # a word's column when the sentence is short enough
ARCS_HEIGHT_PX = 320
WORD_FONT_PX = 12


def arcs_chart(parse, title: str) -> alt.LayerChart:
    """The gold tree's arcs above the sentence and the probe's below, every word written on the line between them.
    A sentence too long for WORD_SLOT_PX a word in ARCS_MAX_PX gets narrower columns (MIN_ROW_PX at the least,
    wider than the column beyond ~40 words) and its words written upright, the arcs leaving room for the longest."""
    n = len(parse.words)
    shown = [w if u != "PUNCT" else f"({w})" for w, u in zip(parse.words, parse.upos)]
    slot = max(layout.MIN_ROW_PX, min(WORD_SLOT_PX, ARCS_MAX_PX // max(n, 1)))
    width = max(layout.MIN_CHART_PX, slot * n)
    longest = max((len(w) for w in shown), default=1) * 0.6 * WORD_FONT_PX  # px, at ~0.6 em a glyph
    upright = longest + 6 > slot
    gap_px = (longest / 2 if upright else WORD_FONT_PX / 2) + 6  # from the words' line to an arc's foot
    height = max(ARCS_HEIGHT_PX, round(2 * gap_px) + 200)
    reach = max([(j - i) / 2 for i, j in (*parse.gold_edges, *parse.predicted_edges)] or [0.5])
    # y in units of word columns: the scale spans ±(gap + reach) over `height` px, so gap_px is gap in units
    gap = gap_px * 2 * reach / (height - 2 * gap_px)
    frame = arcs_frame(parse, gap)
    arcs = alt.Chart(frame).mark_line(strokeWidth=2).encode(
        x=alt.X("x:Q", axis=None, scale=alt.Scale(domain=[-0.5, n - 0.5])),
        y=alt.Y("y:Q", axis=None, scale=alt.Scale(domain=[-(gap + reach), gap + reach], nice=False, zero=False)),
        detail="edge:N",
        order="order:Q",
        color=alt.Color("status:N", scale=alt.Scale(domain=["gold edge", "correct", "wrong"], range=["#4c78a8", "#54a24b", "#e45756"]),
                        title="edge", legend=alt.Legend(orient="bottom")),
        tooltip=["tree", "pair", "status"],
    )
    words = pd.DataFrame({"x": np.arange(n), "y": 0.0, "word": shown})
    text = alt.Chart(words).mark_text(fontSize=WORD_FONT_PX, angle=270 if upright else 0, baseline="middle",
                                      align="center").encode(x="x:Q", y="y:Q", text="word:N")
    return layout.fixed_size(alt.layer(arcs, text).properties(width=width, height=height, title=title))


# ---- the declared analyses' charts (core.analyses.changes): [(chart, caption)] from one result -----------------

def compare_charts(result: Similarity) -> list:
    """compare: RSA and CKA per layer, then every layer of A against every layer of B (CKA)."""
    lines = similarity_chart(similarity_frame([result]), result.model_a, result.protocol)
    cross = cross_chart(cross_frame(result, "cka"), result, "cka")
    return [(lines, f"{display_name(result.model_b)} against {display_name(result.model_a)}: "
                    f"{result.n_words} words of {result.n_sentences} sentences."),
            (cross, "A bright diagonal means each layer kept its place.")]


def probe_charts(result: ProbeResult, kind: str = "pretrained") -> list:
    """probe: UUAS and DSpr per layer of one probed model (`kind`: its line's dash, e.g. the random control)."""
    frame = probe_frame([(result.model, kind, result)])
    return [(probe_chart(frame, metric, False, model=result.model, protocol=result.protocol),
             f"{metric} of the probe per layer.") for metric in ("UUAS", "DSpr")]


def run_charts(run) -> list:
    """finetune / contrastive: the finished run's training loss (core.training.settings.TrainedRun)."""
    metrics = run.metrics
    score = (f"accuracy {metrics['accuracy']:.3f} on {metrics.get('eval_examples')} {metrics.get('eval_split')} "
             "examples" if metrics.get("accuracy") is not None else "an encoder (no accuracy)")
    return [(loss_chart(loss_frame(metrics, run.name), f"Training loss of {run.name}"), f"{run.name}: {score}.")]
