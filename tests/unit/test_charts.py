"""Chart builders: the data they carry, token order kept, offline export works."""

from __future__ import annotations

import numpy as np

from core import charts
from core.charts import attention as attention_charts
from core.analyses.attention import AttentionView, visible_pairs
from core.analyses.model_view import model_view


def view_with_repeated_tokens():
    labels = ("0·the", "1·cat", "2·sat", "3·on", "4·the", "5·mat")
    weights = np.random.default_rng(0).random((6, 6)).astype(np.float32)
    return AttentionView(weights / weights.sum(1, keepdims=True), labels, labels, 0, (0,), False, False, "all")


def test_heatmap_keeps_token_order_and_both_thes():
    view = view_with_repeated_tokens()
    spec = attention_charts.attention_heatmap(view).to_dict()
    assert spec["encoding"]["y"]["sort"] == list(view.query_labels)
    assert spec["encoding"]["x"]["sort"] == list(view.key_labels)
    frame = attention_charts.view_frame(view)
    assert len(frame) == 36 and frame["query"].nunique() == 6
    np.testing.assert_allclose(frame.pivot(index="query_order", columns="key_order", values="weight").to_numpy(), view.weights, rtol=1e-6)


def test_model_view_has_one_cell_per_head_and_renders_offline():
    rng = np.random.default_rng(1)
    attentions = rng.random((3, 2, 5, 5)).astype(np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    chart = attention_charts.model_view_grid(model_view(attentions, list("abcde"), np.zeros(5, int), pixels=10))
    rows = list(chart.data.itertuples())  # altair hoists the shared data to the layer chart
    # layers shown 1..L as on every chart (core.numbering)
    assert {(r.layer, r.head) for r in rows} == {(layer + 1, head) for layer in range(3) for head in range(2)}
    assert all(r.url.startswith("data:image/png;base64,") for r in rows)
    svg = charts.chart_svg(chart)
    assert svg.startswith("<svg") and svg.count("<image") == 6
    assert charts.chart_png(chart)[:8] == b"\x89PNG\r\n\x1a\n"


def test_thumbnail_darkest_at_the_heads_maximum():
    import base64
    import io

    from PIL import Image

    matrix = np.zeros((1, 1, 4, 4), dtype=np.float32)
    matrix[0, 0, 2, 3] = 0.5
    view = model_view(matrix, list("abcd"), np.zeros(4, int), pixels=4)
    uri = attention_charts.thumbnail_data_uri(view.colour_fraction()[0, 0])
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
    assert tuple(image[2, 3]) == tuple(attention_charts.BLUES_HIGH) and tuple(image[0, 0]) == tuple(attention_charts.BLUES_LOW)


def test_head_view_lines_carry_every_pair():
    view = view_with_repeated_tokens()
    chart = attention_charts.head_view_lines(view, threshold=0.0, top_k=None)  # "show all"
    lines = chart.layer[0].data
    assert len(lines) == 36
    np.testing.assert_allclose(lines["weight"].to_numpy().reshape(6, 6), view.weights, rtol=1e-6)


def test_head_view_lines_thin_out_past_the_long_input_limit():
    """Short inputs: 2 px lines on 18 px rows; long ones: 1 px on 14 px rows, every visible pair still drawn."""
    for n, width, row in ((8, 2, 18), (attention_charts.LONG_INPUT_TOKENS + 1, 1, 14)):
        rng = np.random.default_rng(n)
        weights = rng.dirichlet(np.full(n, 0.05), size=n).astype(np.float32)
        labels = tuple(f"{i}·w" for i in range(n))
        view = AttentionView(weights, labels, labels, 0, (0,), False, False, "all")
        spec = attention_charts.head_view_lines(view).to_dict()
        assert spec["layer"][0]["mark"]["strokeWidth"] == width
        assert spec["height"] == max(200, row * n)
        lines = attention_charts.head_view_lines(view).layer[0].data
        assert len(lines) == int(visible_pairs(weights).sum()) > 0


# ---- the moved builders: each chart carries exactly its input --------------------------------------------------


def _rows(chart) -> list[dict]:
    """Every data row of a chart spec, whichever datasets altair hoisted them into."""
    spec = chart.to_dict()
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_grid_frame_has_one_row_per_head_with_its_value():
    values = np.arange(12, dtype=float).reshape(3, 4) / 10
    frame = attention_charts.grid_frame(values, "v")
    assert len(frame) == 3 * 4
    for row in frame.itertuples():
        assert row.v == values[row.layer - 1, row.head]  # layers shown 1..L (core.numbering)
    chart = attention_charts.grid_chart(frame, "v", "title", diverging=True)
    assert sorted((r["layer"], r["head"], r["v"]) for r in _rows(chart)) == sorted(
        (l + 1, h, values[l, h]) for (l, h) in np.ndindex(3, 4))
    assert chart.to_dict()["encoding"]["color"]["scale"]["domain"] == [-1.1, 1.1]  # symmetric around 0


def test_pattern_and_ablation_and_change_charts_carry_the_result():
    from types import SimpleNamespace

    from core.analyses.heads import PATTERNS, HeadSurvey

    counts = np.zeros((2, 3, len(PATTERNS)), dtype=int)
    counts[0, 0, 1], counts[1, 2, 4], counts[..., 0] = 5, 7, 2
    survey = HeadSurvey("m", np.zeros((5, 2, 3)), counts, (), 10, 0, 0)
    frame = attention_charts.pattern_frame(survey)
    # (layer, head): layers shown 1..L (core.numbering), so array row 0 is layer 1
    assert frame.set_index(["layer", "head"]).loc[(1, 0), "pattern"] == PATTERNS[1]
    assert frame.set_index(["layer", "head"]).loc[(2, 2), "share of inputs"] == 0.7
    assert frame.set_index(["layer", "head"]).loc[(1, 1), "pattern"] == PATTERNS[0]
    bars = [r for r in _rows(attention_charts.pattern_chart(survey)) if "share" in r]
    assert {r["pattern"]: r["share"] for r in bars} == survey.pattern_share

    result = SimpleNamespace(head_delta=np.array([[0.1, -0.2], [0.0, 0.05]]), layer_delta=np.array([-0.3, 0.2]), mode="mask")
    chart, frame = attention_charts.ablation_chart(result)
    np.testing.assert_allclose(frame.pivot(index="layer", columns="head", values="accuracy change").to_numpy(), result.head_delta)
    marked = chart.hconcat[0].layer[1].data
    assert sorted(zip(marked["layer"], marked["head"])) == [(1, 0), (2, 1)]  # ▲ only where removal helped
    np.testing.assert_allclose(chart.hconcat[1].data["accuracy change"], result.layer_delta)

    change = SimpleNamespace(cosine=np.array([[1.0, 0.5, 0.25]]), model_a="a", model_b="b")
    chart, frame = attention_charts.change_chart(change)
    assert frame["cosine"].tolist() == [1.0, 0.5, 0.25] and "a vs b" in chart.to_dict()["title"]


def test_syntax_frame_charts_frequent_relations_and_both_predictors():
    import pandas as pd

    table = pd.DataFrame({"relation": ["nsubj", "det", "rare", "all"], "count": [30, 25, 3, 58], "best head": ["L0 H0"] * 4,
                          "accuracy": [0.8, 0.9, 1.0, 0.7], "baseline_accuracy": [0.4, 0.5, 0.0, 0.3]})
    shown, long = attention_charts.syntax_frame(table)
    assert list(shown["relation"]) == ["nsubj", "det", "all"]
    assert len(long) == 6
    pivot = long.pivot(index="relation", columns="predictor", values="share correct")
    assert pivot.loc["det", "best head"] == 0.9 and pivot.loc["det", "fixed offset"] == 0.5


def test_confusion_frame_counts_equal_sklearn():
    from sklearn.metrics import confusion_matrix

    from core.charts import classification

    labels = ["cat", "dog", "eel"]
    rng = np.random.default_rng(3)
    truth, predicted = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
    expected = confusion_matrix(truth, predicted, labels=[0, 1, 2])
    frame = classification.confusion_frame(expected, labels, "run-1")
    assert len(frame) == 9 and set(frame["run"]) == {"run-1"}
    shown = frame.pivot(index="true", columns="predicted", values="count").loc[labels, labels].to_numpy()
    np.testing.assert_array_equal(shown, expected)
    np.testing.assert_allclose(frame.groupby("true")["share"].sum(), 1.0)
    empty = classification.confusion_frame(np.zeros((2, 2)), ["a", "b"])
    assert (empty["share"] == 0).all()  # an empty row is not divided by zero

    two = pd_concat([frame, classification.confusion_frame(expected.T, labels, "run-2")])
    chart = classification.confusion_chart(two)
    spec = chart.to_dict()
    assert [c["layer"][0]["title"] for c in spec["hconcat"]] == ["run-1", "run-2"]
    second = spec["datasets"][spec["hconcat"][1]["data"]["name"]]
    np.testing.assert_array_equal([r["count"] for r in second], expected.T.ravel())


def pd_concat(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def test_f1_and_probability_charts_of_runs():
    from sklearn.metrics import f1_score

    from core.charts import classification
    from core.charts import finetune as finetune_charts
    from core.training.runs import RunInfo

    truth, predicted = [0, 0, 1, 1, 1], [0, 1, 1, 1, 0]
    f1 = f1_score(truth, predicted, average=None)
    run = RunInfo("r", "done", "/x", {}, {}, {"per_class_f1": {"cat": f1[0], "dog": f1[1]}, "labels": ["cat", "dog"],
                                              "confusion": [[1, 1], [1, 2]], "loss_curve": [[1, 0.9], [2, 0.5]]}, "")
    rows = _rows(finetune_charts.f1_chart([run]))
    assert {r["class"]: r["F1"] for r in rows} == {"cat": f1[0], "dog": f1[1]}
    confusion = finetune_charts.confusion_frame(run)
    assert confusion["count"].tolist() == [1, 1, 1, 2] and confusion["share"].tolist() == [0.5, 0.5, 1 / 3, 2 / 3]
    loss = finetune_charts.loss_frame(run.metrics, "r")
    assert loss["step"].tolist() == [1, 2] and loss["loss"].tolist() == [0.9, 0.5]

    frame = classification.probabilities_frame(["intact", "L0 H1 disabled"], [("cat", "dog")] * 2,
                                               [np.array([0.25, 0.75]), np.array([0.6, 0.4])], series="model")
    assert list(frame.columns) == ["model", "class", "probability"]
    chart = classification.probabilities_chart(frame, series="model", title="t")
    assert {(r["model"], r["class"]): r["probability"] for r in _rows(chart)} == {
        ("intact", "cat"): 0.25, ("intact", "dog"): 0.75, ("L0 H1 disabled", "cat"): 0.6, ("L0 H1 disabled", "dog"): 0.4}


def test_similarity_cross_and_probe_frames():
    from core.charts import finetune as finetune_charts
    from core.analyses.similarity import Similarity

    rsa = np.array([[1.0, 0.2, 0.1], [0.3, 0.9, 0.4]])
    result = Similarity("a", "b", rsa, rsa / 2, n_words=10, n_sentences=2)
    frame = finetune_charts.similarity_frame([result])
    lines = frame.pivot(index="layer", columns="measure", values="value")
    np.testing.assert_allclose(lines["RSA"], result.rsa)
    np.testing.assert_allclose(lines["linear CKA"], result.cka)
    cross = finetune_charts.cross_frame(result, "cka")
    np.testing.assert_allclose(cross.pivot(index="layer_a", columns="layer_b", values="value").to_numpy(), rsa / 2)

    probe = finetune_charts.probe_frame([])
    chart = finetune_charts.probe_chart(probe.assign(model=[], kind=[], layer=[], UUAS=[]), "UUAS", show_reference=True)
    marker = [r for r in _rows(chart) if "label" in r]
    # H&M's BERT-base 'layer 7' is BERT Lens layer 8; for no model given it is a landmark, not a target
    assert marker and marker[0]["value"] == 0.798 and marker[0]["layer"] == 8 and marker[0]["kind"] == "shape"


def test_arcs_put_gold_above_and_probe_below():
    from types import SimpleNamespace

    from core.charts import finetune as finetune_charts

    parse = SimpleNamespace(words=("a", "b", "c"), upos=("X", "X", "PUNCT"), gold_edges=frozenset({(0, 1), (1, 2)}),
                            predicted_edges=frozenset({(0, 1), (0, 2)}))
    frame = finetune_charts.arcs_frame(parse)
    status = frame.groupby("edge")["status"].first().to_dict()
    assert status == {"gold 0-1": "gold edge", "gold 1-2": "gold edge", "probe 0-1": "correct", "probe 0-2": "wrong"}
    assert (frame[frame["tree"] == "gold"]["y"] >= 0).all() and (frame[frame["tree"] == "probe"]["y"] <= 1e-12).all()


def test_pca_points_and_variance_frames():
    from types import SimpleNamespace

    from core.charts import pca

    coords = np.arange(2 * 3 * 2, dtype=float).reshape(2, 3, 2)
    projection = SimpleNamespace(
        layers=np.arange(2), labels=("s0·0·[CLS]", "s0·1·bank", "s1·1·Bank"), tokens=("[CLS]", "bank", "bank"),
        word=("", "bank", "Bank"), sentence=np.array([0, 0, 1]), position=np.array([0, 1, 1]), segment=np.array([0, 0, 0]),
        is_special=np.array([True, False, False]), is_punct=np.zeros(3, bool), coords=coords, method="per-layer",
        explained_variance_ratio=np.array([[0.5, 0.2], [0.6, 0.1]]), protocol="visbert",
    )
    names = pca.sentence_names([("the bank", None), ("a" * 50, "b")])
    assert names[0] == "0: the bank" and names[1].endswith("…") and len(names[1]) == len("1: ") + 41
    chart, frame = pca.scatter(projection, 1, "t", names=names, colour="word", chosen_word="bank")
    np.testing.assert_array_equal(frame[["x", "y"]].to_numpy(), coords[1])
    assert frame["highlight"].tolist() == [pca.OTHER, "bank", "bank"]  # any case
    assert frame["sentence_name"].tolist() == [names[0], names[0], names[1]]
    assert len(chart.layer) == 2
    assert "VisBERT" in " ".join(chart.to_dict()["title"]["subtitle"])  # the chart says which fit and protocol
    variance = pca.variance_frame(projection, 1)
    assert variance["share"].tolist() == [0.5, 0.2, 0.6, 0.1] and variance["current"].tolist() == [False, False, True, True]


def test_anisotropy_word_frame_sits_beside_the_average_word():
    from types import SimpleNamespace

    import pandas as pd

    from core.charts import anisotropy as anisotropy_charts

    profile = SimpleNamespace(model="m", layers=np.arange(3))
    frame = pd.DataFrame({"model": ["m"] * 3 + ["n"] * 3, "measure": "self_similarity", "layer": [0, 1, 2] * 2,
                          "value": [0.9, 0.8, 0.7, 0.1, 0.1, 0.1]})
    drill = SimpleNamespace(word="bank", self_similarity=np.array([1.0, 0.6, 0.3]))
    words = anisotropy_charts.word_frame(drill, profile, frame)
    series = {m: g["value"].tolist() for m, g in words.groupby("model")}
    assert series == {"“bank”": [1.0, 0.6, 0.3], "average word": [0.9, 0.8, 0.7]}
