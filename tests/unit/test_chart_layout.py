"""Checks that look: every chart drawn as a person sees it (the spec as Streamlit sends it, rendered to SVG by
vl-convert) for inputs of 5, 14 and 64 tokens, one sentence and a pair, through the notebook API core.lens on a
tiny random BERT. Each chart must draw every token label, keep its title inside the image, give every token row
(and heatmap column) at least MIN_ROW_PX, and carry no empty or NaN series."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core import lens
from core.charts import layout
from tests.chart_geometry import Drawing, as_streamlit_sends, blank_legend_symbols, categorical_schemes, dash_legends, dash_symbols, contrast_on_white, draw, drawn, lab_distance, listed_colours, smallest_gap
from tests.conftest import TINY_VOCAB

WORDS = [w for w in TINY_VOCAB if w.isalpha() and w.islower()]
ROW = layout.MIN_ROW_PX - 0.01


def sentence(n_words: int, offset: int = 0) -> str:
    return " ".join(WORDS[(offset + i) % len(WORDS)] for i in range(n_words))


# (name, sentence A, sentence B): 5, 14 and 64 tokens with [CLS]/[SEP], as one sentence and as a pair (the
# tiny model reads 64 positions at most).
INPUTS = [
    ("5 tokens", sentence(3), None),
    ("14 tokens", sentence(12), None),
    ("64 tokens", sentence(62), None),
    ("pair of 6 tokens", sentence(2), sentence(1, 5)),
    ("pair of 14 tokens", sentence(6), sentence(5, 9)),
    ("pair of 64 tokens", sentence(31), sentence(30, 7)),
]
IDS = [name for name, _, _ in INPUTS]


def assert_titles_inside(drawing: Drawing) -> None:
    """Every title (and subtitle) line lies inside the image (its width estimated, so within 8 % of it)."""
    titles = [t for t in drawing.texts if t.role in ("title-text", "title-subtitle") and t.angle == 0]
    for title in titles:
        left, right = title.span
        slack = 1 + 0.08 * (right - left)
        assert left >= -slack and right <= drawing.width + slack, \
            f"title {title.text!r} spans {left:.0f}..{right:.0f} of {drawing.width:.0f} px"
        assert 0 <= title.y <= drawing.height, f"title {title.text!r} at y={title.y:.0f} outside 0..{drawing.height:.0f}"


def assert_every_label(drawing: Drawing, labels, role: str = "axis-label") -> None:
    strings = drawing.strings(role)
    missing = [label for label in labels if not drawn(label, strings)]
    assert not missing, f"{len(missing)} of {len(labels)} labels not drawn, e.g. {missing[:5]}"


def label_rows(drawing: Drawing, labels, role: str = "axis-label") -> list[float]:
    """y of each token label in a left-hand column (right-aligned, unrotated: a y axis or the head view's queries)."""
    return [t.y for t in drawing.texts
            if t.role == role and t.anchor == "end" and t.angle == 0 and any(drawn(label, [t.text]) for label in labels)]


def assert_no_empty_or_nan(frame: pd.DataFrame, value: str, series: str | None = None) -> None:
    assert len(frame), "the chart has no data"
    groups = frame.groupby(series) if series else [("all", frame)]
    for name, group in groups:
        values = group[value].to_numpy(dtype=float)
        assert len(values) and np.isfinite(values).all(), f"series {name!r} is empty or has NaN"


@pytest.fixture(scope="module")
def tiny(tiny_bert_dir):
    return lens.load(str(tiny_bert_dir), masked_lm=False)


# ---- one sentence: attention heatmap, head view, neuron view, norm-weighted row, word scores -----------------

@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_heatmap_draws_every_token_on_a_full_row(tiny, name, text_a, text_b):
    chart, frame = lens.head_view(tiny, text_a, text_b, layer=1, heads=[0], style="heatmap", return_data=True)
    tokens = list(dict.fromkeys(frame["query"]))
    drawing = draw(chart)
    assert_every_label(drawing, tokens)
    assert smallest_gap(label_rows(drawing, tokens)) >= ROW
    cells = drawing.rects
    assert len(cells) == len(tokens) ** 2
    assert min(h for _, h in cells) >= ROW and min(w for w, _ in cells) >= ROW, "heatmap cells squeezed"
    assert plot_width(drawing) >= layout.MIN_CHART_PX, f"issue 48: a map {plot_width(drawing):.0f} px wide"
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "weight")


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_head_view_lines_draw_every_token(tiny, name, text_a, text_b):
    chart, frame = lens.head_view(tiny, text_a, text_b, layer=0, heads=[1], style="lines", return_data=True)
    tokens = list(dict.fromkeys(frame["query"]))
    drawing = draw(chart)
    assert_every_label(drawing, tokens, role="mark")
    assert smallest_gap(label_rows(drawing, tokens, role="mark")) >= ROW
    assert_titles_inside(drawing)


# A bar per key of one query: bertviz's neuron view (q·k products) and Kobayashi's norm-weighted row.
KEY_BAR_VIEWS = {"neuron view": (lambda model, a, b: lens.neuron_view(model, a, b, layer=1, head=0, query=1, return_data=True),
                                 ("product",)),
                 "norm-weighted row": (lambda model, a, b: lens.attention_norms(model, a, b, layer=1, head=2, query=0,
                                                                                return_data=True), ("share", "measure"))}


@pytest.mark.parametrize("view", list(KEY_BAR_VIEWS))
@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_key_bars_label_every_key(tiny, view, name, text_a, text_b):
    build, columns = KEY_BAR_VIEWS[view]
    chart, frame = build(tiny, text_a, text_b)
    keys = list(dict.fromkeys(frame["key"]))
    drawing = draw(chart)
    assert_every_label(drawing, keys)
    assert smallest_gap(label_rows(drawing, keys)) >= ROW
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, *columns)


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_word_scores_label_every_word(tiny_bert_dir, name, text_a, text_b):
    chart, frame = lens.explain(str(tiny_bert_dir), text_a, text_b, method="rollout", return_data=True)
    drawing = draw(chart)
    assert_every_label(drawing, list(frame["word"]))
    assert smallest_gap(label_rows(drawing, list(frame["word"]))) >= ROW
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "score")


def test_presenter_mode_draws_larger_type_and_rows(tiny):
    chart, frame = lens.head_view(tiny, sentence(12), None, layer=1, heads=[0], style="heatmap", return_data=True)
    tokens = list(dict.fromkeys(frame["query"]))
    plain, presented = draw(chart), draw(layout.for_presentation(chart))
    assert_every_label(presented, tokens)
    label_size = lambda d: max(t.size for t in d.texts if t.role == "axis-label")  # noqa: E731
    title_size = lambda d: max(t.size for t in d.texts if t.role == "title-text")  # noqa: E731
    assert label_size(presented) >= 1.3 * label_size(plain) and title_size(presented) >= 1.3 * title_size(plain)
    assert smallest_gap(label_rows(presented, tokens)) >= round(layout.PRESENTATION_SCALE * layout.MIN_ROW_PX) - 0.01
    assert_titles_inside(presented)


# ---- token charts of the dataset studies: example maps, one pair's aspect row, a probe's trees, the image heatmap

def encoded_tokens(tiny, text_a, text_b) -> list[str]:
    from core.model.encoding import encode

    return list(encode(tiny, (text_a, text_b) if text_b else text_a).tokens)


def label_columns(drawing: Drawing, labels, role: str = "axis-label") -> list[float]:
    """x of each token label drawn along a horizontal axis (or a row of text marks)."""
    return [t.x for t in drawing.texts if t.role == role and any(drawn(label, [t.text]) for label in labels)]


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_aspect_row_labels_every_token_on_its_own_column(tiny, name, text_a, text_b):
    from types import SimpleNamespace

    from core.charts import head_studies

    tokens = encoded_tokens(tiny, text_a, text_b)
    weights = np.random.default_rng(len(tokens)).dirichlet(np.ones(len(tokens)))
    kinds = ["[CLS]", *(["question"] * (len(tokens) - 2)), "[SEP]"]
    row = SimpleNamespace(tokens=tokens, weights=weights, kinds=kinds, layer=3, head=7)
    chart, frame = head_studies.aspect_row_chart(row)
    drawing = draw(chart)
    labels = list(frame["token"])
    assert_every_label(drawing, labels)
    assert smallest_gap(label_columns(drawing, labels)) >= ROW
    assert min(w for w, _ in drawing.rects) >= ROW / 2, "bars squeezed to hairlines"
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "weight")


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_pattern_example_maps_draw_every_cell(tiny, name, text_a, text_b):
    from types import SimpleNamespace

    from core.charts import attention as attention_charts

    tokens = encoded_tokens(tiny, text_a, text_b)
    attention = np.random.default_rng(len(tokens)).dirichlet(np.ones(len(tokens)), len(tokens))
    examples = [SimpleNamespace(tokens=tokens, attention=attention, layer=layer, head=head)
                for layer, head in ((0, 1), (4, 11))]
    drawing = draw(attention_charts.examples_chart(examples))
    assert len(drawing.rects) == 2 * len(tokens) ** 2
    assert min(min(w, h) for w, h in drawing.rects) >= 180 / 64 - 0.01, "map cells below a 64-token map's"
    assert drawing.strings("title-text") == ["L1 H1", "L5 H11"]  # layers shown from 1 (core.numbering)
    assert_titles_inside(drawing)


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_probe_trees_write_every_word_apart(tiny, name, text_a, text_b):
    from types import SimpleNamespace

    from core.charts import finetune

    words = [t for t in encoded_tokens(tiny, text_a, text_b) if t not in ("[CLS]", "[SEP]")]
    gold = {(i, i + 1) for i in range(len(words) - 1)}
    predicted = {(i, i + 2) for i in range(0, len(words) - 2, 2)} | {(0, 1)}
    parse = SimpleNamespace(words=words, upos=["NOUN"] * len(words), gold_edges=gold, predicted_edges=predicted)
    drawing = draw(finetune.arcs_chart(parse, "Gold tree above, the probe's below"))
    marks = [t for t in drawing.texts if t.role == "mark"]
    assert [t.text for t in sorted(marks, key=lambda t: t.x)] == words
    # a long sentence's words are written upright (issue 48): their boxes, not their unrotated spans, must not meet
    spans = sorted((left, right) for left, _, right, _ in (t.box for t in marks))
    assert all(left_end < right_start for (_, left_end), (right_start, _) in zip(spans, spans[1:])), "words overlap"
    assert_titles_inside(drawing)


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_heatmap_image_fills_its_square(tiny, name, text_a, text_b):
    from core.analyses.attention import attention_view
    from core.charts import attention as attention_charts
    from core.model.encoding import encode

    view = attention_view(encode(tiny, (text_a, text_b) if text_b else text_a), 1, [0])
    drawing = draw(attention_charts.attention_heatmap_image(view, "Layer 1, head 0"))
    assert drawing.width >= 640 and drawing.height >= 640
    assert len(drawing.rects) == len(view.query_labels), "one hover band per query row"
    assert {"attends to (key position)", "from (query position)"} <= set(drawing.strings("axis-title"))
    assert_titles_inside(drawing)


# ---- charts of results: classifier, heads over a dataset, anisotropy, PCA, reproduce --------------------------

@pytest.mark.parametrize("runs", [1, 2])
def test_class_probabilities_are_bars_not_a_hairline(runs):
    from core.charts import classification

    names = ["snli-minilm", "/tmp/runs/snli-minilm-longer-run-name"][:runs]
    classes = ["entailment", "neutral", "contradiction"]
    frame = classification.probabilities_frame(names, [classes] * runs, [np.array([0.6, 0.3, 0.1])] * runs)
    drawing = draw(classification.probabilities_chart(frame))
    bars = drawing.rects
    assert len(bars) == 3 * runs and min(h for _, h in bars) >= 20, f"bars {bars}"
    assert_every_label(drawing, classes, role="legend-label")
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "probability", "run")


def test_nli_classes_have_colours_that_read_apart():
    from core.charts import classification

    scale = classification.class_colours(["entailment", "neutral", "contradiction"]).to_dict()
    rgb = [np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)]) for c in scale["range"]]
    assert min(np.abs(a - b).sum() for i, a in enumerate(rgb) for b in rgb[i + 1:]) > 150


def test_confusion_matrix_names_every_class_also_one_never_predicted():
    from core.charts import classification

    labels = ["entailment", "neutral", "contradiction"]
    confusion = np.array([[5, 0, 1], [3, 0, 2], [1, 0, 6]])  # "neutral" is never predicted
    frame = pd.concat([classification.confusion_frame(confusion, labels, "run-a"),
                       classification.confusion_frame(confusion.T, labels, "run-b")])
    drawing = draw(classification.confusion_chart(frame))
    for label in labels:
        assert drawing.strings("axis-label").count(label) == 4, f"{label} not on both axes of both matrices"
    assert min(min(w, h) for w, h in drawing.rects) >= classification.CELL_PX - 0.01
    assert_titles_inside(drawing)


class _Survey:
    """The slice of core.analyses.heads.HeadSurvey the layer-means chart reads."""

    def __init__(self, model: str, layers: int = 6, heads: int = 12):
        self.model, self.protocol = model, "bertlens"
        self._stat = np.random.default_rng(0).uniform(0.05, 0.6, (layers, heads))

    def layer_means(self, name):
        return self._stat.mean(axis=1)


def test_mean_attention_to_cls_draws_both_series_with_a_y_axis():
    from core.charts import attention as attention_charts

    folder = "/work/shared/data/models/all-MiniLM-L6-v2"
    survey = _Survey(folder)
    chart, frame = attention_charts.layer_means_chart(survey, "cls", "Mean attention to [CLS] per layer")
    drawing = draw(chart)
    assert_titles_inside(drawing)
    legend = drawing.strings("legend-label")
    assert "measured: all-MiniLM-L6-v2" in legend and not any(folder in s for s in drawing.strings())
    # Issue 37: Clark's label ended "…; pub…", cutting off whether the two lines are comparable at all
    paper = frame["series"].iloc[-1]
    assert paper.endswith("compare the shape)") and paper in " ".join(legend[1:]), legend
    assert not any(s.endswith("…") for s in legend), legend
    ticks = [t for t in drawing.texts if t.role == "axis-label" and t.x < 60]
    assert len(ticks) >= 3, "no y-axis ticks"
    assert max(t.y for t in ticks) - min(t.y for t in ticks) >= 150, "the plot is squeezed flat"
    assert_no_empty_or_nan(frame, "value", "series")


def test_mean_attention_to_cls_measured_line_is_not_pale():
    """Issue 37: "the measured MiniLM series missing": Streamlit's theme drew it pale blue (#83c9ff, 1.8:1 on
    white, below WCAG's 3:1 for graphics). Both series get their own colours, each at least 3:1 on white."""
    from core.charts import attention as attention_charts

    chart, frame = attention_charts.layer_means_chart(_Survey("all-MiniLM-L6-v2"), "cls", "Mean attention to [CLS] per layer")
    scale = chart.to_dict()["encoding"]["color"].get("scale", {})
    assert scale.get("domain") == list(dict.fromkeys(frame["series"])), "colours left to the theme's palette"
    assert all(contrast_on_white(c) >= 3 for c in scale["range"]), scale["range"]


def test_anisotropy_line_stays_inside_and_names_models_short(tiny_bert_dir):
    from core.charts import anisotropy as anisotropy_charts

    data = lens.anisotropy(str(tiny_bert_dir), "builtin", limit=12, n_pairs=50, min_contexts=2, return_data=True)
    chart, frame = data
    drawing = draw(chart)
    assert_titles_inside(drawing)
    assert drawing.strings("legend-label") == [tiny_bert_dir.name]
    ((declared, caption),) = anisotropy_charts.profile_charts(data.result)  # the analysis's charts(result)
    assert_titles_inside(draw(declared))
    assert "(12 sentences)" in caption
    assert_no_empty_or_nan(frame, "value", "model")
    spec = chart.to_dict()
    assert all(layer.get("encoding", {}).get("x", {}).get("scale", {}).get("padding", 0) > 0
               for layer in spec["layer"]), "the last layer's point sits on the plot's right edge"


def test_pca_variance_title_inside_and_every_layer_labelled(tiny_bert_dir):
    from core.charts import pca

    chart, frame = lens.layerwise_pca(str(tiny_bert_dir), [sentence(12), (sentence(6), sentence(5, 3))],
                                      layer=1, method="per-layer", return_data=True)
    from core.model.encoding import encode
    from core.analyses.projection import collect_tokens, layerwise_projection

    lm = lens.load(str(tiny_bert_dir))
    projection = layerwise_projection(collect_tokens([encode(lm, sentence(12))]), "per-layer")
    drawing = draw(pca.variance_chart(projection, 1))
    assert_titles_inside(drawing)
    assert_every_label(drawing, [str(layer) for layer in projection.layers])
    assert_titles_inside(draw(chart))
    assert tiny_bert_dir.name in chart.to_dict()["title"]["text"] and str(tiny_bert_dir) not in str(chart.to_dict()["title"])


def test_reproduce_small_multiples_fit_the_main_column():
    from core import studies
    from core.charts import reproduce
    from tests import fake_study

    from core.studies import seeds

    options = studies.StudyOptions(model="/some/folder/of/models/fake-bert", limit=1, extra={"seed_shift": 0.01})
    result = fake_study.run(options)
    over_seeds = seeds.run_seeds(fake_study.STUDY, options, (0, 1, 2))
    for chart in (reproduce.layer_comparison_chart(result), reproduce.table_comparison_chart(result),
                  reproduce.measured_chart(result), reproduce.seeds_layer_chart(over_seeds),
                  reproduce.seeds_table_chart(over_seeds)):
        if chart is None:
            continue
        drawing = draw(chart)
        assert drawing.width <= 730, f"{drawing.width:.0f} px: wider than the page's main column"
        assert_titles_inside(drawing)
        assert not any("/some/folder" in s for s in drawing.strings())


def test_reproduce_panel_names_are_wrapped_not_cut():
    """Issue 37: a panel's header was cut at the panel's width, "Ethayarajh 2019: MEV, anisotropy-adjusted — a…"."""
    from types import SimpleNamespace as Result

    from core import studies
    from core.charts import reproduce
    from tests import fake_study

    names = ["Ethayarajh 2019: MEV, anisotropy-adjusted — average over every context of a word", "short one"]
    chart = reproduce.measured_chart(Result(measured={n: {0: 0.1, 1: 0.3, 2: 0.2} for n in names}, model="m"))
    drawing = draw(chart)
    headers = [t for t in drawing.texts if t.role == "title-text" and t.text != "measured (m)"]
    assert not [t.text for t in headers if t.text.endswith("…")]
    for name in names:  # each name whole, its lines stacked at one x
        lines = [t for t in headers if name.startswith(t.text.strip()) or t.text.strip() in name]
        assert " ".join(t.text.strip() for t in lines).replace("- ", "-") == name, [t.text for t in lines]
        assert len({round(t.x) for t in lines}) == 1
    result = fake_study.run(studies.StudyOptions(model="/some/folder/of/models/fake-bert", limit=1))
    for build in (reproduce.layer_comparison_chart, reproduce.table_comparison_chart):
        spec = build(result).to_dict()  # the paper comparisons take the same wrapped panel names
        labels = [row["label"] for rows in spec["datasets"].values() for row in rows]
        assert [p["title"] for p in spec["concat"]] == [reproduce._panel_title(n).to_dict()
                                                        for n in pd.Series(labels).unique()]


def test_reproduce_a_shallower_model_is_drawn_at_relative_depth_with_titled_panels():
    """Issue 48: a 6-layer model's curve was drawn on the 12-layer paper's layer axis, in small panels without y
    titles. Both curves now run over layer / number of layers (the chart says why), every panel names its measure
    on its y axis, and the panels are large enough yet two of them fit the main column."""
    from core import references, studies
    from core.charts import reproduce

    def ref(key, measure):
        return references.Reference(key=key, study="t", measure=measure, label=f"Paper, {measure}", model="bert-base",
                                    corpus="c", unit="token", protocol="ethayarajh", source="here", tolerance=0.01,
                                    values={k: k / 12 for k in range(13)})

    measured = {k: (k / 6) ** 2 for k in range(7)}
    comparisons = tuple(references.compare(ref(f"t.{m}", m), measured, "minilm-6", "ethayarajh", layers=6)
                        for m in ("random_cosine", "self_similarity"))
    result = studies.StudyResult("t", "minilm-6", "c", "ethayarajh", comparisons, {"random_cosine": measured}, ())
    chart = reproduce.layer_comparison_chart(result)
    spec = chart.to_dict()
    rows = spec["datasets"][spec["data"]["name"]]
    for source, layers, keys in (("paper", 12, range(13)), ("measured (minilm-6)", 6, range(7))):
        got = sorted((r["layer"], r["x"]) for r in rows if r["source"] == source and r["measure"] == "random_cosine")
        assert got == [(k, pytest.approx(k / layers)) for k in keys]
    panels = spec["concat"]
    assert len(panels) == 2
    for panel, measure in zip(panels, ("random cosine", "self similarity")):
        encoding = panel["layer"][0]["encoding"]
        assert encoding["x"]["field"] == "x" and encoding["x"]["title"] == reproduce.DEPTH_TITLE
        assert encoding["y"]["title"] == [measure]
        assert panel["width"] >= 260 and panel["height"] >= 220
    assert "12 layers" in " ".join(spec["title"]["subtitle"]) and "minilm-6 has 6" in " ".join(spec["title"]["subtitle"])
    drawing = draw(chart)
    assert drawing.width <= 730, f"{drawing.width:.0f} px: wider than the page's main column"
    assert_titles_inside(drawing)
    titles = drawing.strings("axis-title")
    assert titles.count("random cosine") == 1 and titles.count("self similarity") == 1
    assert titles.count(reproduce.DEPTH_TITLE) == 2


def test_reproduce_measured_line_is_not_pale():
    """Issue 37 (seen on the Reproduce page, as on the [CLS] chart): the measured series took the theme's second
    colour, pale #83c9ff (1.8:1 on white). Paper and measured each get a colour of at least 3:1."""
    from core import studies
    from core.charts import reproduce
    from tests import fake_study

    result = fake_study.run(studies.StudyOptions(model="/some/folder/of/models/fake-bert", limit=1))
    spec = reproduce.layer_comparison_chart(result).to_dict()
    scale = spec["concat"][0]["layer"][0]["encoding"]["color"]["scale"]
    assert len(scale.get("range", [])) == len(scale["domain"]) == 2, "colours left to the theme's palette"
    assert all(contrast_on_white(c) >= 3 for c in scale["range"]), scale["range"]


def test_display_name_shortens_folders_and_keeps_hub_ids(tmp_path):
    from core.model.loading import display_name

    assert display_name("/work/shared/data/models/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert display_name("/work/shared/data/models/all-MiniLM-L6-v2/") == "all-MiniLM-L6-v2"
    assert display_name("google-bert/bert-base-cased") == "google-bert/bert-base-cased"
    assert display_name("bert-base-uncased") == "bert-base-uncased"
    assert display_name("./runs/x") == "x"
    folder = tmp_path / "m"
    folder.mkdir()
    assert display_name(str(folder)) == "m"


def test_every_page_opens_with_its_title():
    """A page a person lands on says what it is (presenter mode shows the step's page, so it has none itself)."""
    from pathlib import Path

    from core import views

    repo = Path(__file__).resolve().parents[2]
    pages = sorted({v.page for v in views.all_views()} - {"app_pages/present.py"})  # the router's navigation
    assert len(pages) > 5
    untitled = [p for p in pages if "st.title(" not in (repo / p).read_text()]
    assert not untitled, f"pages without st.title: {untitled}"


def test_pca_token_labels_never_overlap():
    from core.charts import pca

    rng = np.random.default_rng(0)
    x, y = np.concatenate([rng.normal(0, 0.01, 40), rng.uniform(5, 10, 20)]), np.concatenate([rng.normal(0, 0.01, 40), rng.uniform(5, 10, 20)])
    texts = [f"tok{i}" for i in range(60)]
    first = np.zeros(60, bool)
    first[39] = True
    keep = pca.label_mask(x, y, texts, first=first)
    assert keep[39] and keep[:40].sum() == 1, "a pile of 40 points gets one label, the chosen word's"
    # independent check: no two kept label boxes (as the chart draws them) intersect
    w, h = pca.LABEL_PLOT_PX
    px, py = (x - x.min()) / np.ptp(x) * w, (1 - (y - y.min()) / np.ptp(y)) * h
    boxes = [(px[i] + 7, py[i] - 15, px[i] + 7 + 6.6 * len(texts[i]), py[i] - 4) for i in np.flatnonzero(keep)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], f"{a} overlaps {b}"
    assert keep[40:].sum() >= 10, "spread points keep their labels"


def test_no_page_uses_the_deprecated_use_container_width():
    """One width argument (width="stretch" / "content"): the pages, their widgets/ and shell/ helpers (since the
    move, beside the page scripts: a glob of app_pages/*.py no longer saw them), app.py and core/."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    files = [repo / "app.py", *(repo / "app_pages").rglob("*.py"), *(repo / "core").rglob("*.py")]
    assert len(files) > 60
    users = [str(p.relative_to(repo)) for p in files if "use_container_width" in p.read_text(encoding="utf-8")]
    assert not users, f"use_container_width (deprecated: width=) in {users}"


@pytest.mark.parametrize("k", [5, 14, 40])
def test_nearest_contexts_label_every_match(k):
    from core.charts import explorer
    from core.analyses.vector_index import Neighbour, NeighboursResult

    rng = np.random.default_rng(k)
    matches = tuple(Neighbour(sentence=f"{sentence(8, i)} bank {sentence(6, i + 3)}", word="bank", position=8,
                              similarity=float(s), left=sentence(8, i), right=sentence(6, i + 3), upos="NOUN", deprel="obj")
                    for i, s in enumerate(sorted(rng.uniform(0.2, 0.9, k), reverse=True)))
    result = NeighboursResult({"word": "bank", "layer": 3, "mode": "exact"}, matches, pos=(("NOUN", k),), deprel=(("obj", k),))
    frame = explorer.neighbours_frame(result)
    drawing = draw(explorer.neighbours_chart(result))
    contexts = [f"{r}. …{l[-30:]} [{w}] {rt[:30]}…" for r, l, w, rt in zip(frame["rank"], frame["left"], frame["word"], frame["right"])]
    assert_every_label(drawing, contexts)
    assert smallest_gap(label_rows(drawing, contexts)) >= ROW
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "similarity")


def _neuron_index(n_items: int, k: int):
    """A NeuronIndex of 30 neurons over `n_items` made-up sentences of 12 words, top-k contexts each."""
    from core.analyses.neurons import ItemTokens, NeuronIndex
    from core.analyses.top_contexts import TopContexts

    rng = np.random.default_rng(k)
    items = tuple(ItemTokens(("[CLS]", *sentence(12, i).split(), "[SEP]"), (-1, *range(12), -1),
                             tuple(sentence(12, i).split())) for i in range(n_items))
    values = -np.sort(-rng.uniform(0.1, 3.0, (30, k)), axis=1)
    top = TopContexts(values.astype(np.float32), rng.integers(0, n_items, (30, k)), rng.integers(1, 13, (30, k)),
                      n_items * 12)
    return NeuronIndex("m", "made-up", "d", 3, top, rng.normal(size=30), rng.uniform(0.1, 1, 30),
                       rng.uniform(0, 1, 30), items, (0,) * n_items, 64)


@pytest.mark.parametrize("k", [5, 20])
def test_neuron_lists_and_contexts_label_every_row(k):
    from core.analyses.neurons import NeuronChanges
    from core.charts import neurons as neuron_charts

    index = _neuron_index(40, k)
    changes = NeuronChanges("m", "run", "made-up", 3, np.arange(30)[::-1], np.linspace(-2, 2, 30), index.mean,
                            index.mean + 1, index.firing_rate, index.firing_rate)
    for frame, measure in ((neuron_charts.neurons_frame(index, index.by_max()[:20]), "max activation"),
                           (neuron_charts.neurons_frame(index, changes.order[:20], changes), "change")):
        drawing = draw(neuron_charts.neurons_chart(frame, measure, f"The 20 neurons of layer 3 by {measure}"))
        assert_every_label(drawing, list(frame["label"]))
        assert smallest_gap(label_rows(drawing, list(frame["label"]))) >= ROW
        assert_titles_inside(drawing)
        assert_no_empty_or_nan(frame, measure)
    chart = neuron_charts.contexts_chart(index, 4)
    frame = neuron_charts.contexts_frame(index, 4)
    lines = chart.to_dict()["encoding"]["y"]["sort"]
    assert len(lines) == k and all(f"[{w}]" in line for w, line in zip(frame["word"], lines))
    drawing = draw(chart)
    assert_every_label(drawing, lines)
    assert smallest_gap(label_rows(drawing, lines)) >= ROW
    assert_titles_inside(drawing)
    assert drawing.width <= 730, f"{drawing.width:.0f} px: wider than the page's main column"


@pytest.mark.parametrize("name,text_a,text_b", INPUTS, ids=IDS)
def test_neuron_shading_labels_every_token(tiny, name, text_a, text_b):
    from core.analyses.neurons import neuron_sentence
    from core.charts import neurons as neuron_charts

    result = neuron_sentence(tiny, text_a, 1, text_b)
    frame = neuron_charts.sentence_frame(result, 5)
    drawing = draw(neuron_charts.sentence_chart(result, 5))
    assert_every_label(drawing, list(frame["label"]))
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "activation")


def test_bias_confusion_matrices_name_every_class():
    from core.bias import ARMS
    from core.charts import bias as bias_charts

    labels = ["entailment", "neutral", "contradiction"]
    rows = [{"run": arm, "slice": "overall", "true": t, "predicted": p, "count": int(p == "entailment") * 5,
             "share": float(p == "entailment")} for arm in ARMS for t in labels for p in labels]
    drawing = draw(bias_charts.confusion_chart(pd.DataFrame(rows), labels, "overall"))
    for label in labels:  # on each matrix's x axis and on the shared y axis
        assert drawing.strings("axis-label").count(label) == len(ARMS) + 1, f"{label} missing from an axis"
    assert drawing.width <= 730, f"{drawing.width:.0f} px: wider than the page's main column"
    assert_titles_inside(drawing)


def test_masked_guesses_label_every_guess(tmp_path):
    from tests.tiny_mlm import make_tiny_mlm

    mlm = lens.load(str(make_tiny_mlm(tmp_path / "tiny-mlm")), masked_lm=True)
    chart, frame = lens.fill_mask(mlm, "the [MASK] sat on the [MASK] .", top_k=8, view="top", return_data=True)
    drawing = draw(chart)
    for mask, part in frame.groupby("mask"):
        assert_every_label(drawing, list(part["token"]))
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "probability", "mask")
    chart, frame = lens.fill_mask(mlm, "the [MASK] sat on the mat .", top_k=5, view="layers", mask=0, return_data=True)
    drawing = draw(chart)
    assert_titles_inside(drawing)
    assert min(h for _, h in drawing.rects) >= 20, "guess cells squeezed"
    chart, frame = lens.fill_mask(mlm, "the [MASK] sat on the mat .", top_k=5, view="final", mask=0, return_data=True)
    drawing = draw(chart)
    assert_titles_inside(drawing)
    assert_every_label(drawing, [str(layer) for layer in frame["layer"]])
    assert_no_empty_or_nan(frame, "probability")


@pytest.mark.parametrize("name,text_a,text_b", [INPUTS[2], INPUTS[4]], ids=[IDS[2], IDS[4]])
def test_layer_lens_grid_labels_every_token_and_layer(tmp_path, name, text_a, text_b):
    from core.analyses.logit_lens import Translators
    from core.charts import layer_lens as layer_lens_charts
    from tests.tiny_mlm import make_tiny_mlm

    mlm = lens.load(str(make_tiny_mlm(tmp_path / "tiny-mlm", layers=7)), masked_lm=True)
    chart, frame, result = lens.logit_lens(mlm, text_a, text_b, return_data=True)
    drawing = draw(chart)
    labels = layer_lens_charts.token_labels(result.tokens)
    assert_every_label(drawing, labels)
    assert_every_label(drawing, [str(layer) for layer in range(8)])
    rows = sorted(set(label_rows(drawing, labels)))
    assert len(rows) == len(labels) and smallest_gap(rows) >= ROW, "token rows squeezed"
    assert_titles_inside(drawing)
    assert_no_empty_or_nan(frame, "p")
    cell = layer_lens_charts.cell_chart(result, 7, 1)
    cell_drawing = draw(cell)
    assert_every_label(cell_drawing, list(result.top_tokens[7][1]))
    assert_titles_inside(cell_drawing)
    tuned = lens.logit_lens(mlm, text_a, text_b, kind="tuned", lens=Translators.identity(7, 32), return_data=True)[2]
    kl = layer_lens_charts.kl_chart(result, tuned)
    kl_drawing = draw(kl)
    assert_every_label(kl_drawing, [str(layer) for layer in range(8)])
    assert_titles_inside(kl_drawing)
    assert_no_empty_or_nan(layer_lens_charts.kl_frame(result, tuned), "kl", "lens")


# ---- every other builder: titles inside, every label of a listed (sorted) axis drawn, no empty dataset ----------

def _listed_labels(spec) -> list[str]:
    """Labels of every x/y axis whose order the builder lists (sort=[...]) and draws (axis not null)."""
    found = []
    if isinstance(spec, dict):
        encoding = spec.get("encoding", {})
        for channel in ("x", "y"):
            field = encoding.get(channel, {})
            if isinstance(field, dict) and isinstance(field.get("sort"), list) and field.get("axis", {}) is not None:
                found += [str(v) for v in field["sort"]]
        for value in spec.values():
            found += _listed_labels(value)
    elif isinstance(spec, list):
        for value in spec:
            found += _listed_labels(value)
    return found


def _other_builders(tiny_bert_dir):
    from core.bias import ARMS
    from core.charts import attention as attention_charts
    from core.charts import bias as bias_charts
    from core.charts import classification, explorer, finetune
    from core.charts import explain as explain_charts
    from core.analyses.explain import explain, load_explainer
    from core.analyses.explorer import SliceComparison
    from core.analyses.patching import Patching
    from core.charts import patching as patching_charts

    rng = np.random.default_rng(3)
    tokens = ("[CLS]", *sentence(12).split(), "[SEP]")

    def patching(over: str, width: int) -> Patching:
        return Patching("tiny", over, "exact", "log P(bank) at [MASK] (token 3)", tokens, tokens, -1.0, -3.0,
                        rng.uniform(-3, -1, (6, width)))
    labels = ["entailment", "neutral", "contradiction"]
    explanation = explain(load_explainer(str(tiny_bert_dir)), sentence(12), None, "rollout")
    grid = attention_charts.grid_frame(rng.uniform(0, 1, (6, 12)), "cls")
    accuracy = pd.DataFrame([{"run": arm, "slice": s, "n": 100, "accuracy": 0.6, "ci_low": 0.5, "ci_high": 0.7}
                             for arm in ARMS for s in ("overall", "with_words", "without_words")])
    studies = _study_builders(rng, labels)
    return {
        **studies,
        "patching over heads": lambda: patching_charts.patching_chart(patching("heads", 12), selectable=True),
        "patching over positions": lambda: patching_charts.patching_chart(patching("positions", len(tokens))),
        "model view": lambda: lens.model_view(str(tiny_bert_dir), sentence(12)),
        "token flow": lambda: explain_charts.flow_matrix(explanation, -1),
        "head grid": lambda: attention_charts.grid_chart(grid, "cls", "Mean attention to [CLS] per head"),
        "F1 per class": lambda: classification.f1_chart(pd.DataFrame(
            [{"run": r, "class": c, "F1": 0.5} for r in ("run-a", "run-b") for c in labels])),
        "training loss": lambda: finetune.loss_chart(pd.DataFrame({"run": "run-a", "step": range(10), "loss": np.linspace(1, 0.2, 10)})),
        "bias accuracy": lambda: bias_charts.accuracy_chart(accuracy),
        "bias flips": lambda: bias_charts.flip_chart(pd.DataFrame(
            [{"run": arm, "flip_rate": 0.1, "flips": 10, "swapped": 100} for arm in ARMS])),
        "bias words": lambda: bias_charts.word_count_chart(pd.DataFrame({"word": ["women", "woman", "girl"], "training pairs": [3, 30, 9]})),
        "bias head recovery": lambda: bias_charts.head_recovery_chart(_bias_heads_result(rng)),
        "slice accuracy": lambda: explorer.slice_chart(SliceComparison("negation", 40, 60, 0.55, 0.7)),
        **_timelapse_builders(rng),
    }


def _bias_heads_result(rng):
    """A core.bias.heads result shaped as MiniLM's (6 layers × 12 heads), the top 3 heads disabled."""
    from types import SimpleNamespace

    recovery = rng.uniform(-0.2, 0.8, (6, 12))
    ranking = sorted(((layer, head) for layer in range(6) for head in range(12)), key=lambda h: -recovery[h])
    return SimpleNamespace(run="snli-minilm-biased", top_k=3, recovery=recovery, ranking=ranking)


def _timelapse_builders(rng) -> dict:
    """The time-lapse player's four charts on a cancelled MiniLM-shaped run (3 of 5 frames)."""
    from core.charts import timelapse as charts
    from core.training.timelapse import Timelapse

    frames = [{"step": s, "loss": 1 - s / 40, "dev_accuracy": 0.4 + s / 40, "rsa": rng.uniform(0.5, 1, 7).tolist(),
               "cka": rng.uniform(0.5, 1, 7).tolist(), "anisotropy": rng.uniform(0.1, 0.6, 7).tolist(),
               "attention_change": rng.uniform(0.6, 1, (6, 12)).tolist()} for s in (0, 50, 100)]
    timelapse = Timelapse.from_json({"steps": [0, 50, 100, 150, 200], "probe": "snli", "seed": 0, "frames": frames})
    return {
        "time-lapse similarity": lambda: charts.similarity_chart(timelapse, 1),
        "time-lapse attention change": lambda: charts.attention_chart(timelapse, 1),
        "time-lapse anisotropy": lambda: charts.anisotropy_chart(timelapse, 1),
        "time-lapse curve": lambda: charts.curve_chart(timelapse, 1),
    }


LAYERS, HEADS = 6, 12  # MiniLM's shape: the dataset studies' results are layer x head grids of it
MODELS = ("/work/shared/data/models/all-MiniLM-L6-v2", "/work/runs/snli-minilm")


def _grid(rng, low: float = 0.0, high: float = 1.0, *shape) -> np.ndarray:
    return rng.uniform(low, high, (*shape, LAYERS, HEADS))


def _study_builders(rng, labels) -> dict:
    """The charts of results over a dataset (head surveys, ablation, probes, similarity, bias, pair attention,
    head studies, faithfulness, the explorer), each from a small synthetic result of the real result's shape."""
    from types import SimpleNamespace as Result

    from core.analyses.aspect_heads import ABSENT_PARTS
    from core.bias import ARMS
    from core.charts import attention as attention_charts
    from core.charts import bias as bias_charts
    from core.charts import explain as explain_charts
    from core.charts import explorer, finetune, head_studies, inside_head, layer_knowledge, pair_attention
    from core.analyses.head_features import CLS_FEATURES, FEATURE_TITLES, TOKEN_TYPES
    from core.analyses.heads import PATTERNS
    from core.analyses.heads import PAIR_DIRECTIONS
    from core.analyses.vector_index import NeighboursResult

    counts = rng.integers(0, 20, (LAYERS, HEADS, len(PATTERNS)))
    survey = Result(model=MODELS[0], protocol="clark", stat=lambda name: _grid(rng), n_examples=20,
                    dominant_pattern=counts.argmax(-1), pattern_counts=counts,
                    pattern_share={p: 1 / len(PATTERNS) for p in PATTERNS})
    relations = ["nsubj", "obj", "amod", "det", "case", "advmod"]
    syntax = pd.DataFrame({"relation": relations, "count": [40, 35, 25, 60, 30, 5], "best head": ["3-4"] * 6,
                           "accuracy": rng.uniform(0.3, 0.9, 6), "baseline_accuracy": rng.uniform(0.1, 0.5, 6)})
    heads = Result(relations=relations, accuracy=_grid(rng, 0, 1, len(relations)), protocol="bertlens",
                   baseline_accuracy=rng.uniform(0.1, 0.5, len(relations)))
    run_metrics = {"labels": labels, "per_class_f1": dict(zip(labels, rng.uniform(0.5, 0.9, 3))),
                   "confusion": rng.integers(0, 30, (3, 3)).tolist()}
    runs = [Result(name=name, metrics=run_metrics) for name in ("snli-minilm", "snli-minilm-longer-run")]
    similarity = [Result(model_a=MODELS[0], model_b=f"/work/runs/{name}", layers=list(range(LAYERS + 1)),
                         cka=np.linspace(1, 0.6, LAYERS + 1), rsa=np.linspace(1, 0.5, LAYERS + 1),
                         cka_cross=rng.uniform(0, 1, (LAYERS + 1, LAYERS + 1)),
                         rsa_cross=rng.uniform(0, 1, (LAYERS + 1, LAYERS + 1))) for name in ("snli-minilm", "mnli-minilm")]
    probes = finetune.probe_frame([
        (label, kind, Result(probes=[Result(layer=layer, uuas=float(u), dspr=float(u) - 0.1, eval_loss=1.0,
                                            n_train=400, n_eval=100)
                                     for layer, u in enumerate(rng.uniform(0.3, 0.8, LAYERS + 1))]))
        for label, kind in (("all-MiniLM-L6-v2", "pretrained"), ("snli-minilm", "fine-tuned"),
                            ("control", finetune.CONTROL))])
    bias_f1 = pd.DataFrame([{"run": arm, "slice": part, "class": c, "F1": float(rng.uniform(0.4, 0.9))}
                            for arm in ARMS for part in ("overall", "with_words", "without_words") for c in labels])
    faithfulness = Result(methods=["ig", "gradient × input", "rollout", "random"], fractions=[0.1, 0.2, 0.5],
                          comprehensiveness=rng.uniform(0, 0.5, (4, 3)), sufficiency=rng.uniform(0, 0.5, (4, 3)))
    points = pd.DataFrame({"id": range(50), "x": rng.normal(size=50), "y": rng.normal(size=50),
                           "text": [sentence(6, i) for i in range(50)], "gold label": rng.choice(labels, 50),
                           "sentence length": rng.integers(5, 30, 50)})
    matches = NeighboursResult({"word": "bank", "layer": 3, "mode": "exact"}, (),
                               pos=(("NOUN", 30), ("VERB", 8), ("PROPN", 2)), deprel=(("obj", 20), ("nsubj", 12), ("nmod", 8)))
    features = [Result(model=m, feature=lambda f: _grid(rng)) for m in MODELS]
    cls_shares = [Result(model=m, shares=rng.dirichlet(np.ones(len(TOKEN_TYPES)), HEADS).T) for m in MODELS]
    aspects = [Result(model=m, span_score=_grid(rng), span_baseline=_grid(rng, 0, 0.1),
                      absent_parts=_grid(rng, 0, 1, len(ABSENT_PARTS)), present_parts=_grid(rng, 0, 1, len(ABSENT_PARTS)))
               for m in MODELS]
    cls_features = [Result(model=m, shares=rng.uniform(0, 0.5, (len(CLS_FEATURES), HEADS)),
                           counts=rng.integers(1, 50, len(CLS_FEATURES))) for m in MODELS]
    shares = Result(n_labels=40, n_maps=1440, n_inputs=10, by_rules=dict(zip(PATTERNS, rng.dirichlet(np.ones(5)))),
                    by_classifier=dict(zip(PATTERNS, rng.dirichlet(np.ones(5)))))
    head_maps = [Result(model=m, n_heads=HEADS, points=rng.normal(size=(LAYERS * HEADS, 2)),
                        top_statistic=lambda: [("cls", 0.5)] * (LAYERS * HEADS)) for m in MODELS]
    norm_shares = Result(model=MODELS[0], n_inputs=50, categories=list(TOKEN_TYPES),
                         raw=rng.dirichlet(np.ones(4), LAYERS), norm=rng.dirichlet(np.ones(4), LAYERS))
    label_probes = [_label_probe_result(rng, task) for task in ("upos", "deprel", "morph:Number")]
    pair_labels = ("entailment", "contradiction")
    pairs = Result(labels=pair_labels, words_only=True, auc=_grid(rng, 0, 1, 2), mean=_grid(rng, 0, 0.3, 2, 2),
                   pairs=[(sentence(5, i), sentence(4, i + 2)) for i in range(30)], gold=rng.integers(0, 2, 30),
                   shares=rng.uniform(0, 0.4, (30, len(PAIR_DIRECTIONS), LAYERS, HEADS)))
    return {
        "head statistic": lambda: attention_charts.statistic_chart(survey, "entropy", "Entropy per head")[0],
        "head patterns": lambda: attention_charts.pattern_chart(survey),
        "head ablation": lambda: attention_charts.ablation_chart(
            Result(head_delta=_grid(rng, -0.05, 0.05), layer_delta=rng.uniform(-0.2, 0.05, LAYERS), mode="zero"))[0],
        "attention change": lambda: attention_charts.change_chart(
            Result(cosine=_grid(rng, 0.5, 1), model_a=MODELS[0], model_b=MODELS[1]))[0],
        "syntax heads": lambda: attention_charts.syntax_chart(syntax, "clark"),
        "one relation": lambda: attention_charts.relation_chart(heads, "obj")[0],
        "bias F1": lambda: bias_charts.f1_chart(bias_f1, labels),
        "faithfulness": lambda: explain_charts.faithfulness_chart(faithfulness),
        "explorer scatter": lambda: explorer.scatter(points, "gold label", "SNLI dev, layer 6"),
        "explorer scatter by length": lambda: explorer.scatter(points, "sentence length", "SNLI dev", selectable=False),
        "match histogram": lambda: explorer.histogram_chart(matches),
        "runs F1": lambda: finetune.f1_chart(runs),
        "runs confusion": lambda: finetune.confusion_chart(runs),
        "similarity": lambda: finetune.similarity_chart(finetune.similarity_frame(similarity), "all-MiniLM-L6-v2"),
        "cross similarity": lambda: finetune.cross_chart(finetune.cross_frame(similarity[0], "cka"), similarity[0], "cka"),
        "probe with paper": lambda: finetune.probe_chart(probes, "UUAS", True, model="bert-base-cased", protocol="hewitt-manning"),
        "probe": lambda: finetune.probe_chart(probes, "DSpr", False),
        "probe export": lambda: finetune.probe_export_chart(
            [finetune.probe_chart(probes, metric, True) for metric in finetune.PROBE_REFERENCES]),
        "Kovaleva features": lambda: head_studies.features_chart(features, next(iter(FEATURE_TITLES)))[0],
        "Kovaleva [CLS]": lambda: head_studies.cls_chart(cls_shares)[0],
        "Kovaleva [CLS] by feature": lambda: head_studies.cls_features_chart(cls_features)[0],
        "pattern shares from labels": lambda: head_studies.pattern_shares_chart(shares)[0],
        "aspect heads": lambda: head_studies.aspect_chart(aspects)[0],
        "absent aspect": lambda: head_studies.absent_chart(aspects, "sep")[0],
        "head map": lambda: head_studies.head_map_chart(head_maps)[0],
        "norm shares": lambda: inside_head.shares_chart(norm_shares)[0],
        "pair separation": lambda: pair_attention.separation_chart(pairs)[0],
        "pair shares": lambda: pair_attention.pairs_chart(pairs, PAIR_DIRECTIONS[0], 2, 3)[0],
        "label probes": lambda: layer_knowledge.accuracy_chart(label_probes).properties(width=640),
        "label probes compression": lambda: layer_knowledge.compression_chart(label_probes).properties(width=640),
    }


def _label_probe_result(rng, task):
    from core.analyses.layer_knowledge.probes import LabelProbeResult, LayerScore, expected_layer

    accuracy = np.sort(rng.uniform(0.4, 0.95, LAYERS + 1))
    layers = tuple(LayerScore(k, float(a), float(a) - 0.3, 1000.0 + k, 2.0 + k / 4) for k, a in enumerate(accuracy))
    return LabelProbeResult(MODELS[0], task, "ud:dev / ud:test", 900, 800, ("A", "B", "C"), 0.2, layers,
                            expected_layer(range(LAYERS + 1), accuracy))


def test_every_other_builder_draws_whole(tiny_bert_dir):
    failures = []
    for name, build in _other_builders(tiny_bert_dir).items():
        chart = build()
        spec = chart.to_dict()
        try:
            assert all(len(rows) for rows in spec.get("datasets", {}).values()), "an empty dataset"
            drawing = draw(chart)
            assert_titles_inside(drawing)
            assert_every_label(drawing, list(dict.fromkeys(_listed_labels(spec))))
            folders = [text for text in drawing.strings() if "/work/" in text]
            assert not folders, f"a model's folder drawn instead of its display name: {folders[0]!r}"
        except AssertionError as err:
            failures.append(f"{name}: {str(err).splitlines()[0]}")
    assert not failures, "\n".join(failures)


def test_draw_chart_gives_a_chart_in_panels_its_own_size(monkeypatch):
    """Issue 37: draw_chart gave every single chart `autosize: fit-x`, which cannot size a grid of panels: the bias
    page's per-class F1 chart (panels by a column encoding) was drawn 0 px wide, blank, and so was explain's
    faithfulness chart. A chart in panels is drawn at its own size, as wide as its panels."""
    from app_pages.widgets import common
    from core import bias
    from core.charts import bias as bias_charts

    sent = []
    monkeypatch.setattr(common.st, "altair_chart", lambda chart, **options: sent.append((chart, options)))
    monkeypatch.setattr(common.page_report, "collect", lambda name, chart: None)
    f1 = pd.DataFrame([{"run": arm, "slice": s, "class": c, "F1": 0.5} for arm in bias.ARMS
                       for s in bias.SLICE_ORDER for c in ("entailment", "neutral", "contradiction")])
    common.draw_chart(bias_charts.f1_chart(f1, ["entailment", "neutral", "contradiction"]))
    chart, options = sent[-1]
    assert chart.to_dict()["autosize"] == {"type": "pad", "contains": "padding"} and options.get("width") == "content"
    drawing = draw(chart)
    assert drawing.width >= 3 * 220 and len(drawing.rects) == len(f1), "every panel and bar drawn"


def test_training_loss_of_a_short_run_counts_whole_steps():
    """Issue 37 (seen on the fine-tuning page): a 3-step run's axis read 1.0, 1.1, 1.2, … 3.0, steps that do not exist."""
    from core.charts import finetune

    drawing = draw(finetune.loss_chart(pd.DataFrame({"run": "r", "step": [1, 2, 3], "loss": [0.7, 0.69, 0.71]})))
    labels = [t for t in drawing.texts if t.role == "axis-label"]
    steps = [t.text for t in labels if t.angle == 0 and abs(t.y - max(l.y for l in labels)) < 1]  # the bottom row
    assert steps == ["1", "2", "3"], steps


def test_pca_legend_names_each_sentence_as_far_as_its_name_goes(tiny_bert_dir):
    """Issue 37 (page sweep): the legend read "0: The quick brown fox ju…", the theme's label limit cutting the
    40-character name core.charts.pca.sentence_names gives it."""
    from core.charts.pca import sentence_names

    texts = [sentence(14), sentence(14, 3)]
    chart = lens.layerwise_pca(str(tiny_bert_dir), texts, layer=1, method="per-layer")
    drawing = draw(chart)
    legend = drawing.strings("legend-label")
    assert legend == sentence_names([(t, None) for t in texts]), legend


# ---- issue 48: charts a projector can show (every cell >= 16 px, every plot >= 320 px wide, legends draw their
# symbols, nothing cut) in the app (1440x900) and in presenter mode (larger type) -----------------------------

# The reveal's right-hand column (app_pages/widgets/ask_class.show_reveal: st.columns([3, 2])) at 1440 px with the
# sidebar open, and in presenter mode at 1280 px without it: Streamlit's wide layout less its 5rem paddings.
REVEAL_COLUMN_PX = {"app": round((1440 - 336 - 160 - 16) * 2 / 5), "presenter": round((1280 - 160 - 16) * 2 / 5)}


def as_presented(chart):
    """The chart as draw_chart sends it in presenter mode (the legible palette, then larger type and rows)."""
    return layout.for_presentation(layout.legible_colours(chart))


def plot_width(drawing: Drawing) -> float:
    """The width a heatmap's cells (or a bar chart's bars) span: its distinct columns times the column step."""
    lefts = sorted({round(x, 1) for x, _ in drawing.rect_origins})
    step = min((b - a for a, b in zip(lefts, lefts[1:])), default=min(w for w, _ in drawing.rects))
    return step * len(lefts)  # a band per column, its bar or cell and the padding beside it


def assert_column_labels_apart(drawing: Drawing, labels) -> None:
    """Neighbouring labels of a horizontal axis, slanted or upright, lie at least a line (1.2 em) apart across
    their direction: at -45° and 16 px columns, "8·." was drawn over "9·[SEP]"."""
    import math

    bottom = max(y + h for (_, y), (_, h) in zip(drawing.rect_origins, drawing.rects))  # x labels lie under it
    drawn_labels = sorted((t for t in drawing.texts if t.role == "axis-label" and t.y > bottom
                           and any(drawn(l, [t.text]) for l in labels)), key=lambda t: t.x)
    assert len(drawn_labels) == len(labels), f"{len(drawn_labels)} of {len(labels)} labels drawn"
    for a, b in zip(drawn_labels, drawn_labels[1:]):
        across = (b.x - a.x) * abs(math.sin(math.radians(a.angle))) if a.angle else b.x - a.x
        needed = 1.2 * a.size if a.angle else (a.span[1] - a.span[0] + b.span[1] - b.span[0]) / 2
        assert across >= needed - 0.01, f"{a.text!r} and {b.text!r} {across:.1f} px apart at {a.angle}°, under {needed:.1f}"


def _patching(over: str, tokens: tuple[str, ...], width: int):
    from core.analyses.patching import Patching

    rng = np.random.default_rng(width)
    return Patching("tiny", over, "exact", "log P(she) at [MASK] (token 5)", tokens, tokens, -1.0, -3.0,
                    rng.uniform(-3, -1, (6, width)))


PATCHED_SENTENCE = ("[CLS]", "the", "doctor", "said", "that", "she", "would", "come", ".", "[SEP]")


@pytest.mark.parametrize("presented", [False, True], ids=["app", "presenter"])
@pytest.mark.parametrize("over,tokens", [("heads", PATCHED_SENTENCE), ("positions", PATCHED_SENTENCE),
                                         ("positions", ("[CLS]", *sentence(28).split(), "[SEP]"))],
                         ids=["heads", "10 positions", "30 positions"])
def test_patching_heatmaps_are_wide_and_their_labels_apart(over, tokens, presented):
    """Issue 48: the patching heatmaps were ~130-190 px wide, their slanted token labels overprinting."""
    from core.charts import patching as patching_charts

    result = _patching(over, tokens, 12 if over == "heads" else len(tokens))
    chart = patching_charts.patching_chart(result, selectable=over == "heads")
    drawing = draw(as_presented(chart) if presented else chart)
    assert plot_width(drawing) >= layout.MIN_CHART_PX, f"heatmap {plot_width(drawing):.0f} px wide"
    assert min(min(w, h) for w, h in drawing.rects) >= ROW, "cells under 16 px"
    assert_column_labels_apart(drawing, patching_charts.cell_labels(result))
    assert_titles_inside(drawing)
    assert_legend_inside(drawing)


def assert_legend_inside(drawing: Drawing) -> None:
    """Every legend label and title lies inside the image (a ramp's "0%" was cut off under a short chart)."""
    for t in drawing.texts:
        if t.role in ("legend-label", "legend-title"):
            left, top, right, bottom = t.box
            assert -1 <= left and right <= drawing.width + 1 + 0.08 * (right - left) and top >= -1 \
                and bottom <= drawing.height + 1, f"legend text {t.text!r} at {t.x:.0f},{t.y:.0f} outside " \
                                                  f"{drawing.width:.0f}x{drawing.height:.0f}"


@pytest.mark.parametrize("presented", [False, True], ids=["app", "presenter"])
def test_masked_guesses_are_a_full_width_list_per_mask(tmp_path, presented):
    """Issue 48: the guesses were a 270 x 100 px chart per mask (220 px plots side by side)."""
    from tests.tiny_mlm import make_tiny_mlm

    mlm = lens.load(str(make_tiny_mlm(tmp_path / "tiny-mlm")), masked_lm=True)
    chart, frame = lens.fill_mask(mlm, "the [MASK] sat on the [MASK] .", top_k=5, view="top", return_data=True)
    drawing = draw(as_presented(chart) if presented else chart)
    ticks = [t for t in drawing.texts if t.role == "axis-label" and t.text in ("0%", "100%")]
    for zero, hundred in zip(*[[t for t in ticks if t.text == v] for v in ("0%", "100%")]):
        assert hundred.x - zero.x >= layout.MIN_CHART_PX, f"guess bars span {hundred.x - zero.x:.0f} px"
    assert len(ticks) == 4, "both masks' axes drawn"
    assert min(h for _, h in drawing.rects) >= 20, "guess bars squeezed"
    assert drawing.width <= (1.4 if presented else 1) * 730, f"{drawing.width:.0f} px: wider than the column"
    for mask, part in frame.groupby("mask"):
        assert_every_label(drawing, list(part["token"]))
    assert_titles_inside(drawing)
    # layer by layer: the ramp's ends named in per cent ("0.3" and "0.8" were 0.25 and 0.75 rounded), not cut
    layers = lens.fill_mask(mlm, "the [MASK] sat on the mat .", top_k=5, view="layers", mask=0)
    drawing = draw(as_presented(layers) if presented else layers)
    assert {"0%", "50%", "100%"} <= set(drawing.strings("legend-label")), drawing.strings("legend-label")
    assert_legend_inside(drawing)
    # the final guess's probability and rank: each plot at least MIN_CHART_PX wide (they were 260 px)
    final = lens.fill_mask(mlm, "the [MASK] sat on the mat .", top_k=5, view="final", mask=0)
    spec = final.to_dict()
    assert all(panel["width"] >= layout.MIN_CHART_PX for panel in spec["hconcat"])


TREE_SENTENCE = ("The structural probe finds the tree of this sentence since every word gets a vector at each layer "
                 "of the model .").split()


@pytest.mark.parametrize("presented", [False, True], ids=["app", "presenter"])
@pytest.mark.parametrize("n_words", [6, len(TREE_SENTENCE)])
def test_probe_tree_fits_the_column_and_no_arc_crosses_a_word(n_words, presented):
    """Issue 48: a 22-word tree was 1,300 px wide, cut at "sinc…" by the column, its arcs drawn over the words."""
    from types import SimpleNamespace

    from core.charts import finetune

    words = TREE_SENTENCE[:n_words]
    parse = SimpleNamespace(words=words, upos=["NOUN"] * (n_words - 1) + ["PUNCT"],
                            gold_edges={(i, i + 1) for i in range(n_words - 2)},
                            predicted_edges={(i, i + 2) for i in range(0, n_words - 3, 2)} | {(0, 1), (1, n_words - 2)})
    chart = finetune.arcs_chart(parse, "all-MiniLM-L6-v2, layer 3: gold tree above, probe's tree below (UUAS 0.61)")
    drawing = draw(as_presented(chart) if presented else chart)
    assert drawing.width <= (1.4 if presented else 1) * 730, f"{drawing.width:.0f} px: wider than the main column"
    marks = sorted((t for t in drawing.texts if t.role == "mark"), key=lambda t: t.x)
    assert [t.text.strip("()") for t in marks] == [w.strip("()") for w in words]
    boxes = [t.box for t in marks]
    assert all(a[2] < b[0] for a, b in zip(boxes, boxes[1:])), "words overlap"
    assert all(0 <= b[0] and b[2] <= drawing.width and 0 <= b[1] and b[3] <= drawing.height for b in boxes)
    crossing = [(t.text, x, y) for t, (left, top, right, bottom) in zip(marks, boxes) for x, y in drawing.line_points
                if left - 1 <= x <= right + 1 and top - 2 <= y <= bottom + 2]
    assert not crossing, f"{len(crossing)} arc points over the words, e.g. {crossing[:3]}"
    assert len(drawing.line_points) > 0 and not blank_legend_symbols(drawing)
    assert_titles_inside(drawing)


@pytest.mark.parametrize("where", list(REVEAL_COLUMN_PX))
def test_class_answers_fit_the_reveal_column(where):
    """Issue 48: beside the view's chart, the class's answers (a fixed 300 px plot and 220 px of labels) ran past
    their column and cut the words at the right answer's bar: "1 ✓ the model's answ…"."""
    from core.charts import classroom as class_charts
    from core.classroom.store import Question

    choices = ("the embeddings", "the first layer", "a rather long answer a student might be offered", "none")
    question = Question("choice", "Which layer is the input?", choices, correct="the embeddings")
    frame = class_charts.answers_frame(question, {"the embeddings": 7, "the first layer": 2})
    chart = class_charts.answers_chart(frame)
    column = REVEAL_COLUMN_PX[where]
    drawing = draw(as_presented(chart) if where == "presenter" else chart, column_px=column)
    assert drawing.width <= column + 1, f"{drawing.width:.0f} px in a {column} px column"
    for text in drawing.texts:
        if text.role in ("mark", "legend-label", "title-text", "title-subtitle") and text.angle == 0:
            left, right = text.span
            assert left >= -1 and right <= drawing.width + 1 + 0.08 * (right - left), \
                f"{text.text!r} spans {left:.0f}..{right:.0f} of {drawing.width:.0f} px"
    assert "7 ✓" in drawing.strings("mark"), "the right answer marked at its bar"
    assert_every_label(drawing, list(choices))


def test_layer_lens_colour_legend_is_whole_under_a_short_grid(tmp_path):
    """Issue 48: under a 5-token grid (80 px tall) the ramp legend's "0%" was cut off: Streamlit's fit-x does not
    grow a chart for a legend taller than its plot."""
    from tests.tiny_mlm import make_tiny_mlm

    mlm = lens.load(str(make_tiny_mlm(tmp_path / "tiny-mlm", layers=3)), masked_lm=True)
    chart = lens.logit_lens(mlm, "the cat sat")
    for drawing in (draw(chart), draw(as_presented(chart))):
        assert {"0%", "50%", "100%"} <= set(drawing.strings("legend-label")), drawing.strings("legend-label")
        assert_legend_inside(drawing)
        assert min(min(w, h) for w, h in drawing.rects) >= ROW


def _similarity_and_probe_charts() -> dict:
    from types import SimpleNamespace as Result

    from core.charts import finetune

    rng = np.random.default_rng(5)
    similarity = [Result(model_a=MODELS[0], model_b=f"/work/runs/{name}", layers=list(range(LAYERS + 1)),
                         cka=np.linspace(1, 0.6, LAYERS + 1), rsa=np.linspace(1, 0.5, LAYERS + 1)) for name in ("snli-minilm",)]
    probes = finetune.probe_frame([
        (label, kind, Result(probes=[Result(layer=layer, uuas=float(u), dspr=float(u) - 0.1, eval_loss=1.0, n_train=4, n_eval=1)
                                     for layer, u in enumerate(rng.uniform(0.3, 0.8, LAYERS + 1))]))
        for label, kind in ((MODELS[0], "pretrained"), ("/work/runs/snli-minilm", "fine-tuned"),
                            (f"{MODELS[0]} (random init)", finetune.CONTROL))])  # core.analyses.probe.random_control's ref
    from core.charts import anisotropy

    measured = pd.DataFrame({"model": "all-MiniLM-L6-v2", "measure": "self_similarity", "layer": range(LAYERS + 1),
                             "value": np.linspace(0.9, 0.4, LAYERS + 1)})
    return {"anisotropy with the paper's curve": anisotropy.layer_chart(
                measured, "self_similarity", measured.assign(model="Ethayarajh 2019", value=np.linspace(0.8, 0.2, LAYERS + 1))),
            "CKA/RSA": finetune.similarity_chart(finetune.similarity_frame(similarity), MODELS[0]),
            "probe": finetune.probe_chart(probes, "UUAS", True, model="bert-base-cased", protocol="hewitt-manning"),
            "probe, another model": finetune.probe_chart(probes, "DSpr", True, model="all-MiniLM-L6-v2")}


@pytest.mark.parametrize("name", ["CKA/RSA", "probe", "probe, another model", "anisotropy with the paper's curve"])
def test_dash_legends_draw_each_line(name):
    """Issue 48: the CKA/RSA "measure" legend and the probe's "kind" legend named their dash patterns beside
    nothing (a line mark with points draws a dash legend's symbols filled, with no stroke), so the lines could not
    be told apart; the paper's number, written right-aligned beside its diamond, ran off the plot's left edge."""
    chart = _similarity_and_probe_charts()[name]
    for drawing in (draw(chart), draw(as_presented(chart))):
        assert not blank_legend_symbols(drawing), blank_legend_symbols(drawing)
        assert dash_legends(chart) == 1 and dash_symbols(drawing) >= 2, "each dash pattern drawn as a line"
        assert not [s for s in drawing.strings("legend-label") if s.endswith("…") or "/" in s], drawing.strings("legend-label")
        assert_titles_inside(drawing)
        for text in drawing.texts:
            if text.role == "mark":
                left, right = text.span
                assert left >= 0 and right <= drawing.width, f"{text.text!r} spans {left:.0f}..{right:.0f}"


def test_pca_subtitle_of_a_lone_chart_is_not_a_narrow_column(tiny_bert_dir):
    """Issue 48: wrapped at 48 characters whatever the chart's width, a lone PCA chart's subtitle was a 5-line,
    250 px column; two charts side by side keep the narrow wrap."""
    from core.analyses.projection import collect_tokens, layerwise_projection
    from core.charts import pca
    from core.model.encoding import encode

    lm = lens.load(str(tiny_bert_dir))
    projection = layerwise_projection(collect_tokens([encode(lm, sentence(12))]), "per-layer")
    names = pca.sentence_names([(sentence(12), None)])
    for chart in (pca.scatter(projection, 1, "tiny, layer 1", names=names)[0], pca.variance_chart(projection, 1)):
        for drawing in (draw(chart), draw(as_presented(chart))):
            lines = [t for t in drawing.texts if t.role == "title-subtitle"]
            assert len(lines) <= 3, [t.text for t in lines]
            assert_titles_inside(drawing)
    variance = draw(pca.variance_chart(projection, 1))
    assert plot_width(variance) >= layout.MIN_CHART_PX, f"variance bars span {plot_width(variance):.0f} px"
    side = pca.scatter(projection, 1, "tiny, layer 1", names=names, columns=2)[0]
    assert all(len(line) <= 48 for line in side.to_dict()["title"]["subtitle"])


def test_small_grids_are_still_320_px_wide():
    """Issue 48, seen in the browser sweep: one run's 2-class confusion matrix was 247 px wide, a pattern type's one
    example map 180 px."""
    from types import SimpleNamespace

    from core.charts import attention as attention_charts
    from core.charts import classification

    confusion = classification.confusion_chart(classification.confusion_frame(np.array([[5, 1], [2, 7]]), ["cat", "dog"], "run"))
    example = SimpleNamespace(tokens=["[CLS]", "a", "cat", "[SEP]"], attention=np.full((4, 4), 0.25), layer=0, head=1)
    for chart in (confusion, attention_charts.examples_chart([example])):
        drawing = draw(chart)
        assert drawing.width >= layout.MIN_CHART_PX, f"{drawing.width:.0f} px wide"
        assert_titles_inside(drawing)


def drawings_of_returned_charts(request):
    """(name, chart, drawing) of every chart a test above drew (as draw_chart sends it), a builder's part that is no
    whole chart (a layer's base) left out; skips unless the drawing tests of this file are selected."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    if "test_every_other_builder_draws_whole" not in selected:
        pytest.skip("needs the drawing tests of this file selected")
    assert len(RETURNED_CHARTS) >= 40
    for name, chart in RETURNED_CHARTS.items():
        try:
            drawing = draw(layout.legible_colours(chart))
        except ValueError as err:
            if "config" in str(err) or "top-level" in str(err):
                continue
            raise
        yield name, chart, drawing


def test_every_chart_drawn_is_at_least_320_px_wide(request):
    """Issue 48: every chart a test above drew (as draw_chart sends it) is at least MIN_CHART_PX wide."""
    narrow = {name: round(drawing.width) for name, _, drawing in drawings_of_returned_charts(request)
              if drawing.width < layout.MIN_CHART_PX}
    assert not narrow, "\n".join(f"{k}: {v} px" for k, v in narrow.items())


def test_every_legend_draws_its_symbols(request):
    """Issue 48: every legend of every chart a test above drew shows a symbol beside each name."""
    blank = {}
    for name, chart, drawing in drawings_of_returned_charts(request):
        found = blank_legend_symbols(drawing)
        if dash_symbols(drawing) < 2 * dash_legends(chart):  # a dash legend shows each pattern as a line
            found.append(f"{dash_legends(chart)} dash legends, {dash_symbols(drawing)} lines drawn in them")
        if found:
            blank[name] = found[:2]
    assert not blank, "\n".join(f"{k}: {v}" for k, v in blank.items())


# ---- every builder in core.charts is drawn by a test above --------------------------------------------------------

# Modules of core.charts that build no chart of their own: the sizing helper and the exporters.
NOT_BUILDERS = {"layout", "export"}


def chart_functions(skip=NOT_BUILDERS) -> dict[str, object]:
    """Every public function defined in a module of core.charts ("module.function"), but those of `skip`."""
    import importlib
    import inspect
    import pkgutil

    import core.charts

    found = {}
    for info in pkgutil.iter_modules(core.charts.__path__):
        if info.name in skip:
            continue
        module = importlib.import_module(f"core.charts.{info.name}")
        found.update({f"{info.name}.{name}": function for name, function in inspect.getmembers(module, inspect.isfunction)
                      if function.__module__ == module.__name__ and not name.startswith("_")})
    return found


def chart_builders() -> dict[str, object]:
    """The functions of core.charts whose return annotation names an altair chart."""
    import inspect
    import re

    return {name: function for name, function in chart_functions().items()
            if re.search(r"alt\.\w*Chart\b", str(inspect.signature(function).return_annotation))}


def test_every_chart_function_says_what_it_returns():
    """chart_builders finds a builder by its return annotation: one without an annotation would slip past."""
    import inspect

    unannotated = [name for name, function in chart_functions(skip=()).items()
                   if inspect.signature(function).return_annotation is inspect.Signature.empty]
    assert not unannotated, f"no return annotation: {unannotated}"
    assert len(chart_builders()) >= 50  # the 57 of November 2026: finding them still works


# The first chart each builder returned in this module's tests (builders_called records them).
RETURNED_CHARTS: dict[str, alt.TopLevelMixin] = {}


@pytest.fixture(scope="module", autouse=True)
def builders_called():
    """The builders the tests of this module called: each is wrapped wherever a module holds it (its own module's
    globals, so one builder calling another counts too, and any module that imported it by name)."""
    import functools
    import sys

    called: set[str] = set()
    with pytest.MonkeyPatch.context() as patch:
        for qualified, function in chart_builders().items():
            @functools.wraps(function)
            def recorded(*args, _name=qualified, _function=function, **kwargs):
                called.add(_name)
                result = _function(*args, **kwargs)
                charts = [r for r in (result if isinstance(result, tuple) else (result,)) if isinstance(r, alt.TopLevelMixin)]
                if charts:
                    RETURNED_CHARTS.setdefault(_name, charts[0])
                return result

            for module in list(sys.modules.values()):
                for attribute, value in list(getattr(module, "__dict__", {}).items()):
                    if value is function:
                        patch.setattr(module, attribute, recorded)
        yield called


def illegible_series(chart: alt.TopLevelMixin) -> list[str]:
    """The series colours (palette or listed range, not a heatmap's ramp) drawn in the chart as draw_chart sends it
    that have under 3:1 contrast on white, and any categorical scheme that bypasses the palette."""
    sent = layout.legible_colours(chart)
    spec = as_streamlit_sends(sent)
    pale = sorted(c for c in draw(sent).mark_colours & listed_colours(spec) if contrast_on_white(c) < 3)
    return pale + [f"scheme {name}" for name in sorted(categorical_schemes(spec))]


def test_category_colours_read_on_white_and_apart():
    colours = layout.CATEGORY_COLOURS
    assert len(set(colours)) == len(colours) >= 10
    assert all(contrast_on_white(c) >= 3 for c in colours), [(c, round(contrast_on_white(c), 2)) for c in colours]
    closest = min((lab_distance(a, b), a, b) for i, a in enumerate(colours) for b in colours[i + 1:])
    assert closest[0] >= 25, closest


def test_faithfulness_second_method_is_not_pale():
    """Issue 37: left to Streamlit's palette, explain's faithfulness chart drew its second method (gradient × input)
    in #83c9ff, 1.8:1 on white."""
    from types import SimpleNamespace as Result

    from core.charts import explain as explain_charts

    rng = np.random.default_rng(0)
    result = Result(methods=["ig", "gradient × input", "rollout", "random"], fractions=[0.1, 0.2, 0.5],
                    comprehensiveness=rng.uniform(0, 0.5, (4, 3)), sufficiency=rng.uniform(0, 0.5, (4, 3)))
    chart = explain_charts.faithfulness_chart(result)
    assert "#83c9ff" in draw(chart).mark_colours  # Streamlit's own palette, as the test draws it, is the pale one
    assert not illegible_series(chart)
    assert {layout.CATEGORY_COLOURS[1]} <= draw(layout.legible_colours(chart)).mark_colours


def test_draw_chart_and_exports_use_the_legible_palette(monkeypatch):
    from app_pages.widgets import common
    from core.charts import export

    sent = []
    monkeypatch.setattr(common.st, "altair_chart", lambda chart, **options: sent.append(chart))
    monkeypatch.setattr(common.page_report, "collect", lambda name, chart: None)
    frame = pd.DataFrame({"x": [0, 1, 0, 1], "y": [1, 2, 2, 1], "run": ["a", "a", "b", "b"]})
    chart = alt.Chart(frame).mark_line().encode(x="x:Q", y="y:Q", color="run:N")
    common.draw_chart(chart)
    palette = list(layout.CATEGORY_COLOURS)
    assert sent[-1].to_dict()["config"]["range"]["category"] == palette
    assert export.offline_spec(chart)["config"]["range"]["category"] == palette
    assert layout.CATEGORY_COLOURS[1] in export.chart_svg(chart)
    own = chart.configure_range(category=["#000000", "#444444"])  # a chart naming its palette keeps it
    assert export.offline_spec(own)["config"]["range"]["category"] == ["#000000", "#444444"]


def test_every_series_drawn_reads_on_white(request):
    """Issue 37: every series colour of every chart a test above drew (as draw_chart sends it) is over 3:1."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    if "test_every_other_builder_draws_whole" not in selected:
        pytest.skip("needs the drawing tests of this file selected")
    pale = {}
    for name, chart in RETURNED_CHARTS.items():
        try:
            found = illegible_series(chart)
        except ValueError as err:  # a builder's part that is no whole chart (a layer's base) cannot be drawn alone
            if "config" in str(err) or "top-level" in str(err):
                continue
            raise
        if found:
            pale[name] = found
    assert len(RETURNED_CHARTS) >= 40 and not pale, "\n".join(f"{k}: {v}" for k, v in pale.items())


def test_class_answers_name_every_choice_and_mark_the_right_one_even_at_zero():
    from core.charts import classroom as class_charts
    from core.classroom.store import Question

    choices = ("the embeddings", "the first layer", "a rather long answer a student might be offered", "none")
    question = Question("choice", "Which layer is the input?", choices, correct="none")
    frame = class_charts.answers_frame(question, {"the embeddings": 7, "the first layer": 2,
                                                  "a rather long answer a student might be offered": 1})
    drawing = draw(class_charts.answers_chart(frame))
    assert_every_label(drawing, list(choices))
    assert_titles_inside(drawing)
    assert list(frame["answers"]) == [7, 2, 1, 0] and list(frame["right"]) == [False, False, False, True]
    assert drawing.width <= 730


def test_sparse_feature_charts_label_every_token_feature_and_word(tmp_path):
    from core.analyses import sparse_features as sparse
    from core.charts import sparse_features as sparse_charts
    from tests.tiny_mlm import make_tiny_mlm

    folder = make_tiny_mlm(tmp_path / "mlm")
    lm = lens.load(str(folder), masked_lm=True)
    rng = np.random.default_rng(0)
    d, F = lm.hidden_size, 64
    W_dec = rng.normal(size=(F, d)).astype(np.float32)
    W_dec /= np.linalg.norm(W_dec, axis=1, keepdims=True)
    sae = sparse.SparseAutoencoder(W_enc=W_dec.T.copy(), b_enc=np.zeros(F, np.float32), W_dec=W_dec,
                                   b_dec=np.zeros(d, np.float32), k=4, layer=1, model=str(folder), input_scale=1.0)
    text = "the cat sat on the mat by the river bank and the dog ran in the park ."
    found = sparse.sentence_features(sae, lm, text)
    sentences = ["the cat sat on the mat .", "a dog ran in the park .", "the man sat by the river bank ."] * 4
    atlas = sparse.feature_atlas(sae, lm, sentences, corpus="three sentences", digest="x")
    feature = int(np.argmax(atlas.firing_rate))
    other = sparse.feature_atlas(sae, lens.load(str(make_tiny_mlm(tmp_path / "b", seed=1)), masked_lm=True), sentences,
                                 corpus="three sentences", digest="x", same_model=False)
    drawings = {
        "sentence": (sparse_charts.sentence_chart(found), list(dict.fromkeys(sparse_charts.sentence_frame(found)["label"]))),
        "contexts": (sparse_charts.contexts_chart(atlas, feature), None),
        "histogram": (sparse_charts.histogram_chart(atlas.histogram(feature)), None),
        "lens": (sparse_charts.lens_chart(sparse.lens_tokens(sae, lm, feature)),
                 list(sparse_charts.lens_frame(sparse.lens_tokens(sae, lm, feature))["label"])),
        "change": (sparse_charts.change_chart(sparse.firing_change(atlas, other)), None),
    }
    for name, (chart, labels) in drawings.items():
        drawing = draw(chart)
        assert_titles_inside(drawing)
        assert drawing.width <= 730, (name, drawing.width)
        if labels:
            assert_every_label(drawing, labels)
    sentence = sparse_charts.sentence_frame(found)
    assert_no_empty_or_nan(sentence, sentence.columns[-1])


def test_erase_bars_label_every_condition_inside_the_column():
    """The erase panel's probe and effect bars, and the bias page's flip rate before / after erasing gender."""
    from core.analyses.layer_knowledge.erasure import EraseResult
    from core.bias.erase_gender import ErasedFlips
    from core.charts import bias as bias_charts
    from core.charts import erasure as erasure_charts

    effect = {"kind": "masked_word", "before": 0.41, "after": 0.12, "random_control": 0.39, "n": 812}
    result = EraseResult("x", "/p", "m", 4, "upos", ("ADJ", "NOUN"), 0.17, 0.93, 0.18, 16, effect, 1000, 800, 1.0)
    charts = [c for c, _ in erasure_charts.erase_charts(result)]
    assert len(charts) == 2
    flips = bias_charts.erased_flip_frame("bias-full", ErasedFlips("e", 6, "gender-words", 400, 80, 12))
    for chart, labels in [(charts[0], ["probe before", "probe after", "majority label"]),
                          (charts[1], ["before", "after", "random control"]),
                          (bias_charts.erased_flip_chart(flips), ["as trained", "gender erased"])]:
        drawing = draw(chart)
        assert_titles_inside(drawing)
        assert_every_label(drawing, labels)
        assert drawing.width <= 730, f"{drawing.width:.0f} px: wider than the page's main column"
    no_head = EraseResult("x", "/p", "m", 4, "upos", ("ADJ", "NOUN"), 0.17, 0.93, 0.18, 16,
                          {"kind": "none", "message": "no head"}, 1000, 800, 1.0)
    assert len(erasure_charts.erase_charts(no_head)) == 1  # no effect bars without a head to measure with


def test_every_chart_builder_is_drawn(request, builders_called):
    """Runs last in this module: a builder added to core.charts without a drawing test here fails it."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    every = {name for name in vars(request.module) if name.startswith("test_")}
    if selected != every:
        pytest.skip(f"needs every test of this file selected ({len(every - selected)} deselected)")
    uncovered = sorted(set(chart_builders()) - builders_called)
    assert not uncovered, f"chart builders no test in this file draws: {uncovered}"
