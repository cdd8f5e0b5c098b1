"""Charts of the Read-the-layers page's Sparse features tab (core.analyses.sparse_features): the features firing on
a sentence, one feature's top contexts, activation histogram and lens words, and the features whose firing rate
changed most after fine-tuning."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.analyses.sparse_features import FeatureAtlas, FiringChange, Histogram, LensTokens, SentenceFeatures
from core.charts import layout
from core.charts.neurons import contexts_frame
from core.model.loading import display_name


def feature_label(feature: int) -> str:
    return f"feature {int(feature)}"


def sentence_frame(found: SentenceFeatures, top: int = 15) -> pd.DataFrame:
    """One row per (feature, token) for the `top` features with the largest activation on the sentence: token
    label (position·piece, unique), feature, activation (0 where it does not fire)."""
    rows = []
    for column, feature in enumerate(found.features[:top]):
        for t, (position, token) in enumerate(zip(found.positions, found.tokens)):
            rows.append({"feature": int(feature), "feature label": feature_label(feature), "position": int(position),
                         "token": token, "label": f"{int(position)}·{token}",
                         "activation": float(found.activations[t, column])})
    return pd.DataFrame(rows, columns=["feature", "feature label", "position", "token", "label", "activation"])


def sentence_chart(found: SentenceFeatures, top: int = 15) -> alt.Chart:
    """Tokens down (a long sentence grows the chart down the page, never past the column's width), the features
    with the largest activation across (largest first), shaded by activation."""
    frame = sentence_frame(found, top)
    return layout.fixed_size(alt.Chart(
        frame, title=f"Features of {found.sae or 'the SAE'} (layer {found.layer}) firing on your sentence").mark_rect(
        stroke="white").encode(
        y=alt.Y("label:N", sort=list(dict.fromkeys(frame["label"])), title=None, axis=layout.token_axis()),
        x=alt.X("feature label:N", sort=list(dict.fromkeys(frame["feature label"])), title=None,
                axis=layout.token_axis(angle=-45)),
        color=alt.Color("activation:Q", scale=alt.Scale(scheme="oranges"), legend=alt.Legend(title="activation")),
        tooltip=["feature", "position", "token", alt.Tooltip("activation:Q", format=".3f")],
    ).properties(width=alt.Step(32), height=layout.token_step()))


def contexts_chart(atlas: FeatureAtlas, feature: int, k: int = 10) -> alt.Chart:
    """The feature's top contexts over the corpus: the word in brackets between the words around it, with a bar of
    the feature's activation there (the Neurons tab's context rows, core.charts.neurons.contexts_frame)."""
    frame = contexts_frame(atlas, feature, k)
    frame["context"] = [f"{rank}. {left} [{word}] {right}".replace("  ", " ")
                        for rank, left, word, right in zip(frame["rank"], frame["left"], frame["word"], frame["right"])]
    return layout.fixed_size(alt.Chart(
        frame, title=f"Top contexts of {feature_label(feature)} ({atlas.corpus})").mark_bar(
        color=layout.CATEGORY_COLOURS[1]).encode(
        x=alt.X("activation:Q", title="feature activation"),
        y=alt.Y("context:N", sort=list(frame["context"]), title=None, axis=layout.token_axis(labelLimit=560)),
        tooltip=["rank", alt.Tooltip("activation:Q", format=".4f"), "word", "token", "example", "position"],
    ).properties(width=240, height=alt.Step(22)))


def histogram_frame(histogram: Histogram) -> pd.DataFrame:
    """One row per bin of the non-zero activations: its edges and count."""
    edges = histogram.edges
    return pd.DataFrame({"from": edges[:-1].astype(float), "to": edges[1:].astype(float),
                         "tokens": histogram.counts.astype(int)}, columns=["from", "to", "tokens"])


def histogram_chart(histogram: Histogram) -> alt.Chart:
    frame = histogram_frame(histogram)
    fired = int(histogram.counts.sum())
    return layout.fixed_size(alt.Chart(
        frame, title=alt.Title(f"Activations of {feature_label(histogram.feature)} where it fires",
                               subtitle=f"{fired} tokens fire, {histogram.zeros} do not")).mark_bar().encode(
        x=alt.X("from:Q", bin="binned", title="activation"), x2="to:Q",
        y=alt.Y("tokens:Q", title="tokens"),
        tooltip=[alt.Tooltip("from:Q", format=".3f"), alt.Tooltip("to:Q", format=".3f"), "tokens"],
    ).properties(width=320, height=180))


def lens_frame(lens: LensTokens) -> pd.DataFrame:
    return pd.DataFrame({"rank": np.arange(1, len(lens.tokens) + 1), "token": list(lens.tokens),
                         "label": [f"{i + 1}·{t}" for i, t in enumerate(lens.tokens)],
                         "logit change": lens.logit_change.astype(float)})


def lens_chart(lens: LensTokens) -> alt.Chart:
    """The words the masked-word head raises most when only this feature is on."""
    frame = lens_frame(lens)
    return layout.fixed_size(alt.Chart(
        frame, title=alt.Title(f"Lens words of {feature_label(lens.feature)}",
                               subtitle=f"masked-word head of {display_name(lens.head_model)}, feature at "
                                        f"{lens.activation:.1f}")).mark_bar(color=layout.CATEGORY_COLOURS[2]).encode(
        x=alt.X("logit change:Q", title="rise in the word's logit"),
        y=alt.Y("label:N", sort=list(frame["label"]), title=None, axis=layout.token_axis()),
        tooltip=["token", alt.Tooltip("logit change:Q", format=".3f")],
    ).properties(width=260, height=layout.token_step()))


def change_frame(change: FiringChange, top: int = 20) -> pd.DataFrame:
    """The `top` features whose firing rate changed most, largest |change| first: rate in A and in B."""
    rows = change.top(top)
    return pd.DataFrame([{**row, "label": feature_label(row["feature"])} for row in rows],
                        columns=["feature", "rate_a", "rate_b", "change", "label"])


def change_chart(change: FiringChange, top: int = 20) -> alt.LayerChart:
    """Per feature, its firing rate under model A (dot) and model B (diamond) joined by a line: the features that
    changed most after fine-tuning, largest change first."""
    frame = change_frame(change, top)
    a, b = display_name(change.model_a), display_name(change.model_b)
    long = frame.melt(id_vars=["feature", "label", "change"], value_vars=["rate_a", "rate_b"], var_name="which",
                      value_name="firing rate")
    long["model"] = long["which"].map({"rate_a": f"A: {a}", "rate_b": f"B: {b}"})
    y = alt.Y("label:N", sort=list(frame["label"]), title=None, axis=layout.token_axis())
    line = alt.Chart(long).mark_line(color="#999").encode(x="firing rate:Q", y=y, detail="feature:N")
    dots = alt.Chart(long).mark_point(filled=True, size=70).encode(
        x=alt.X("firing rate:Q", title="share of tokens where the feature fires", axis=alt.Axis(format="%")),
        y=y, color=alt.Color("model:N", sort=[f"A: {a}", f"B: {b}"], legend=alt.Legend(title=None, orient="top")),
        shape=alt.Shape("model:N", sort=[f"A: {a}", f"B: {b}"], legend=None),  # the colour legend names both
        tooltip=["feature", "model", alt.Tooltip("firing rate:Q", format=".2%"), alt.Tooltip("change:Q", format="+.2%")])
    return layout.fixed_size(alt.layer(line, dots, title=f"Features whose firing rate changed most ({change.corpus})")
                             .properties(width=320, height=layout.token_step()))


def features_charts(found: SentenceFeatures) -> list:
    """The sae-features analysis's chart (core.contract): the features firing on the sentence."""
    return [(sentence_chart(found), f"The features of {found.sae} with the largest activation on the sentence.")]


def loss_frame(trained) -> pd.DataFrame:
    """A trained SAE's normalised MSE every `loss_every` steps: step (1-based: the loss of the batch of step 1,
    1 + loss_every, ..., as training records it), loss."""
    return pd.DataFrame({"step": [1 + i * trained.loss_every for i in range(len(trained.losses))],
                         "loss": [float(v) for v in trained.losses]})


def trained_charts(trained) -> list:
    """The sae-train analysis's chart: its training loss (core.analyses.sparse_features.TrainedSae)."""
    chart = alt.Chart(loss_frame(trained), title=f"{trained.name}: normalised MSE while training").mark_line().encode(
        x=alt.X("step:Q", title="step"), y=alt.Y("loss:Q", title="normalised MSE"),
        tooltip=["step", alt.Tooltip("loss:Q", format=".4f")]).properties(width=420, height=220)
    return [(chart, f"Held-out fraction of variance explained {trained.quality.fve:.3f}, dead features "
                    f"{100 * trained.quality.dead_fraction:.1f} %.")]
