"""AppTest of the "Head studies" tab (render() in a small script): a tiny pretrained model and a tiny "run" side
by side; each study started by its button in a worker thread; the charts hold the core functions' numbers."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core import jobs, settings
from core.data.corpus import builtin
from core.model.loading import load_model
from tests.app.conftest import _chart_rows
from tests.conftest import make_tiny_bert


def script():
    from app_pages.widgets.head_studies import render

    render()


@pytest.fixture
def models(tmp_path):
    base = make_tiny_bert(tmp_path / "tiny-base", seed=0)
    make_tiny_bert(settings.runs_dir() / "tiny-run", seed=1)
    return str(base), "tiny-run"


def open_app(base: str, part: str) -> AppTest:
    at = AppTest.from_function(script, default_timeout=180)
    at.session_state["model"] = base
    at.session_state["studies.part"] = part
    at.session_state["studies.source"] = "Built-in sentences"
    return at.run()


def finish(at: AppTest, key: str) -> AppTest:
    record = jobs.wait(at.session_state[f"studies.{key}.jobstate"]["last_id"], timeout=240)
    assert record.state == "done", record.error
    return at.run()


def test_cls_by_token_type_side_by_side(models):
    from core.analyses.head_features import TOKEN_TYPES, cls_attention
    from core.charts.head_studies import TYPE_TITLES

    base, run = models
    at = open_app(base, "[CLS] by token type")
    assert not at.exception
    assert at.selectbox(key="studies.other").value == run
    at.button(key="studies.cls.run").click().run()
    at = finish(at, "cls")
    assert not at.exception
    rows = _chart_rows(at, 0)
    inputs = builtin().inputs
    for ref, name in ((base, "tiny-base"), (run, "tiny-run")):
        expected = cls_attention(load_model(ref), inputs)
        for k, t in enumerate(TOKEN_TYPES):
            got = sorted((r["head"], r["share"]) for r in rows if r["model"] == name and r["token type"] == TYPE_TITLES[t])
            assert np.allclose([v for _, v in got], expected.shares[k], atol=1e-6)
    labels = [b.proto.label for b in at.get("download_button")]
    assert [label for label in labels if label in ("PNG", "SVG", "CSV")] == ["PNG", "SVG", "CSV"]


def test_head_map_hover_holds_top_statistic(models):
    from core.analyses.head_clustering import head_map

    base, _ = models
    at = open_app(base, "Head map")
    at.selectbox(key="studies.other").set_value("(none)").run()
    at.button(key="studies.map.run").click().run()
    at = finish(at, "map")
    assert not at.exception
    rows = _chart_rows(at, 0)
    expected = head_map(load_model(base), builtin().inputs)
    assert len(rows) == 8
    for r in rows:
        name, value = expected.top_statistic()[(r["layer"] - 1) * 4 + r["head"]]  # layers shown 1..L
        assert r["top statistic"] == name and r["value"] == pytest.approx(value, abs=1e-6)


def test_linguistic_features_on_ud(models, data_dir):
    from core.data.corpus import require_trees, resolve
    from core.analyses.head_features import feature_attention

    base, _ = models
    at = open_app(base, "Linguistic features")
    at.number_input(key="studies.tb_limit").set_value(20).run()
    at.button(key="studies.features.run").click().run()
    at = finish(at, "features")
    assert not at.exception
    at.selectbox(key="studies.feature").set_value("verb").run()
    rows = [r for r in _chart_rows(at, 0) if r["model"] == "tiny-base"]
    expected = feature_attention(load_model(base), require_trees(resolve("ud:dev:20"))).feature("verb")
    got = np.array([r["score"] for r in sorted(rows, key=lambda r: (r["layer"], r["head"]))]).reshape(expected.shape)
    assert np.allclose(got, expected, atol=1e-6)


def test_aspect_heads_side_by_side(models, data_dir):
    from core.analyses.aspect_heads import aspect_heads, semeval_pairs

    base, run = models
    at = open_app(base, "Aspect heads")
    at.number_input(key="studies.reviews").set_value(10).run()
    at.button(key="studies.aspects.run").click().run()
    at = finish(at, "aspects")
    assert not at.exception
    rows = _chart_rows(at, 0)
    for ref, name in ((base, "tiny-base"), (run, "tiny-run")):
        expected = aspect_heads(load_model(ref), semeval_pairs("test", 10))
        mine = sorted((r["layer"], r["head"], r["span score"], r["absent to sep"]) for r in rows if r["model"] == name)
        assert np.allclose([m[2] for m in mine], expected.span_score.ravel(), atol=1e-6)
        assert np.allclose([m[3] for m in mine], expected.absent_parts[1].ravel(), atol=1e-6)
    # the one-example view: the aspect word's row of the chosen head, from the core call
    from core.analyses.aspect_heads import aspect_row

    pairs = semeval_pairs("test", 10)
    index = at.selectbox(key="studies.pair").value
    assert at.selectbox(key="studies.pair_model").options == ["tiny-base", "tiny-run"]  # display names, not folders
    box = at.selectbox(key="studies.base")
    assert box.options[box.index] == "tiny-base" and box.value == base
    layer, head = at.number_input(key="studies.pair_layer").value, at.number_input(key="studies.pair_head").value
    expected = aspect_row(load_model(base), pairs[index], layer - 1, head)  # the box shows layers 1..L
    example = _chart_rows(at, 2)
    assert np.allclose([r["weight"] for r in example], expected.weights, atol=1e-6)
    assert [r["kind"] for r in example] == list(expected.kinds)


def test_each_model_gets_its_own_notice_of_cut_examples(tmp_path):
    """Issue 32: the studies cut long examples to the model's length without a word. Side by side, a model reading
    12 tokens cuts some built-in sentences (its named notice, counted against the tokenizer's own lengths) and a
    run reading 512 cuts none (no notice for it)."""
    from core.model.loading import display_name
    from core.safe_text import markdown_text
    from tests.app.cuts import cut_warnings, expected_corpus_notice

    short = make_tiny_bert(tmp_path / "short-base", positions=12)
    long = make_tiny_bert(settings.runs_dir() / "long-run", positions=512)
    inputs = builtin().inputs
    assert expected_corpus_notice(long, inputs, 512) is None
    expected = expected_corpus_notice(short, inputs, 12)
    assert expected
    at = open_app(str(short), "[CLS] by token type")
    at.selectbox(key="studies.other").set_value("long-run").run()
    at.button(key="studies.cls.run").click().run()
    at = finish(at, "cls")
    assert not at.exception
    assert cut_warnings(at) == [f"{markdown_text(display_name(str(short)))}: {expected}"]  # as Markdown


def test_cls_by_feature_side_by_side(models, data_dir):
    """Kovaleva Fig. 7 by the §4.3 features: the heat map holds cls_feature_attention's shares for both models."""
    from core.analyses.head_features import CLS_FEATURE_TITLES, CLS_FEATURES, cls_feature_attention
    from core.data.corpus import require_trees, resolve

    base, run = models
    at = open_app(base, "[CLS] by feature")
    at.number_input(key="studies.tb_limit").set_value(12).run()
    at.button(key="studies.cls_features.run").click().run()
    at = finish(at, "cls_features")
    assert not at.exception
    rows = _chart_rows(at, 0)
    trees = require_trees(resolve("ud:dev:12"))
    for ref, name in ((base, "tiny-base"), (run, "tiny-run")):
        expected = cls_feature_attention(load_model(ref), trees)
        for k, f in enumerate(CLS_FEATURES):
            got = sorted((r["head"], r["share"], r["sentences"]) for r in rows
                         if r["model"] == name and r["definition"] == CLS_FEATURE_TITLES[f])
            assert [g[2] for g in got] == [expected.counts[k]] * 4
            want = expected.shares[k]
            assert np.allclose([np.nan if g[1] is None else g[1] for g in got], want, atol=1e-6, equal_nan=True)


def test_label_three_maps_train_and_see_the_shares(models):
    """The labelling mode: three maps labelled with the type buttons land in the labels file (with the map shown),
    the classifier trains on them and its shares appear beside the threshold rules', on the same maps."""
    from core.analyses import pattern_labels as pl
    from core.analyses.heads import survey_heads

    base, _ = models
    at = open_app(base, "Label patterns")
    assert not at.exception
    path = pl.labels_path()
    assert not path.exists()  # no labels ship: the file is only what the user labels
    inputs = builtin().inputs
    queue = pl.map_queue(len(inputs), 2, 4)
    for i, pattern in enumerate(("vertical", "diagonal", "vertical")):
        at.button(key=f"studies.lab.type.{pattern}").click().run()
        assert not at.exception
        saved = pl.read_labels(path)
        assert len(saved) == i + 1 and saved[-1].pattern == pattern
        example, layer, head = queue[i]
        text, text_b = (inputs[example], None) if isinstance(inputs[example], str) else inputs[example]
        assert saved[-1].key == (base, text, text_b, layer, head)
        att = load_model(base).model(**load_model(base).tokenizer(text, text_b, return_tensors="pt"),
                                     output_attentions=True).attentions[layer][0, head].detach().numpy()
        np.testing.assert_allclose(saved[-1].map, pl.downsample(att), atol=2e-3)  # the app's map is float16
    at.button(key="studies.lab.shares.run").click().run()
    record = jobs.wait(at.session_state["studies.lab.shares.jobstate"]["last_id"], timeout=240)
    assert record.state == "done", record.error
    at = at.run()
    assert not at.exception
    rows = _chart_rows(at, 1)  # after the map being labelled
    expected = pl.pattern_shares(load_model(base), inputs, pl.train_classifier(pl.read_labels(path)))
    by_method = {(r["method"], r["pattern"]): r["share"] for r in rows}
    assert by_method == pytest.approx({**{("threshold rules", p): s for p, s in survey_heads(load_model(base), inputs).pattern_share.items()},
                                       **{("classifier (3 labelled maps)", p): s for p, s in expected.by_classifier.items()}})
    assert {r["maps"] for r in rows} == {len(inputs) * 8}
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "3 labelled maps" in text and "not comparable with Kovaleva" in text and "≈30 % vertical" in text
    assert "label at least two maps of every type" in text  # one diagonal: no cross-validation yet
