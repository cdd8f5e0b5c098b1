"""Every view is a link (issue 20, point 1): a page's settings go into the URL, and opening that URL in a fresh
session gives the same settings and the same chart data. Also the lesson bar and presenter mode in AppTest."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core import studies, views
from core.safe_text import markdown_text
from tests.app.conftest import APP_FILE
from tests.tiny_mlm import make_tiny_mlm

PAIR = {"a": "the cat sat on the mat", "b": "the dog ran in the park"}


def open_link(page: str, query: dict[str, str]) -> AppTest:
    """A fresh session opened on /<page>?<query>, as a pasted link would."""
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.query_params.update(query)
    at.switch_page(views.page_file(page)).run()
    assert not at.exception, at.exception
    # Streamlit warns when a widget with an explicit default also gets its value from session state.
    assert not [w for w in at.warning if "Session State API" in w.value]
    return at


def all_chart_rows(at: AppTest) -> list[list[dict]]:
    import pyarrow as pa

    charts = []
    for element in at.get("vega_lite_chart"):
        rows = []
        for named in element.proto.datasets:
            rows.extend(pa.ipc.open_stream(named.data.data).read_all().to_pylist())
        charts.append(rows)
    return charts


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm"))


def _cases(tiny: str, mlm: str) -> dict[str, tuple[dict, bool]]:
    """Per page: a link with non-default settings, and whether the page draws a chart from them."""
    return {
        "": ({"model": tiny}, False),
        "attention": ({"model": tiny, **PAIR, "layer": "2", "heads": "0,2", "style": "Heatmap", "filter": "A→B",
                       "hide_special": "true"}, True),
        "masked": ({"model": mlm, "a": "the [MASK] sat on the mat .", "top_k": "3", "layer": "1", "heads": "1"}, True),
        "pca": ({"model": tiny, **PAIR, "colour": "segment", "hide_special": "true", "labels": "false", "layer": "1"},
                True),
        "anisotropy": ({"model": tiny, "models": tiny, "corpus": "Paste text", "k": "3", "baseline": "exact",
                        "seed": "3"}, False),
        "finetune": ({"model": tiny, "protocol": "true"}, False),
        "explain": ({"model": tiny, **PAIR, "methods": "rollout", "layer": "1"}, True),
        "bias": ({"model": tiny, "task": "mrpc", "seed": "7", "train_limit": "500"}, True),
        "reproduce": ({"model": tiny, "study": list(studies.NAMES)[-1], "seeds": "0,1,2"}, False),
        "explorer": ({"model": tiny, "corpus": "builtin", "layer": "1", "pooling": "mean", "method": "tsne",
                      "k": "5"}, False),
        "lessons": ({}, False),
        "layer_knowledge": ({"model": tiny, "tasks": "upos,deprel", "corpus": "ud:dev:30", "eval_corpus": "ud:test:30",
                             "control": "true", "mdl": "true"}, False),
        "layers": ({"model": mlm, "a": "the cat sat on the mat .", "lens_top_k": "3", "lens_layer": "1",
                    "lens_token": "2", "tab": "Neurons", "neuron_layer": "1", "neuron": "3", "neuron_by": "change",
                    "neuron_corpus": "Built-in sentences"}, True),
    }


def test_every_page_is_covered_here():
    assert set(_cases("", "")) == {v.url_path for v in views.all_views()} - {"present"}  # presenter mode: tests below


@pytest.mark.parametrize("page", [v.url_path for v in views.all_views() if v.url_path != "present"])
def test_a_view_link_round_trips(page, tiny_bert_dir, tiny_mlm_dir):
    link, draws = _cases(str(tiny_bert_dir), str(tiny_mlm_dir))[page]
    first = open_link(page, link)
    restored = views.parse(page, link)
    assert restored.notices == ()
    for key, value in restored.values.items():
        assert first.session_state[key] == value, key  # the widget took the link's value
    written = dict(first.query_params)
    for name, value in link.items():
        assert written.get(name) == value, name  # and the URL still says so
    charts = all_chart_rows(first)
    assert bool(charts) == draws

    again = open_link(page, written)  # the copied link, in a fresh session
    assert dict(again.query_params) == written
    for param in views.params_of(page):
        if param.key in first.session_state:
            assert again.session_state[param.key] == first.session_state[param.key], param.key
    assert all_chart_rows(again) == charts


def test_changing_a_widget_writes_the_url(tiny_bert_dir):
    at = open_link("attention", {"model": str(tiny_bert_dir), **PAIR})
    at.selectbox(key="attention.layer").set_value(0).run()
    at.multiselect(key="attention.heads").set_value([1, 3]).run()
    at.radio(key="attention.style").set_value("Heatmap").run()
    # the widget holds array index 0; the URL says layer 1, as the page shows it (core.numbering)
    assert {k: at.query_params[k] for k in ("layer", "heads", "style")} == {"layer": "1", "heads": "1,3",
                                                                          "style": "Heatmap"}
    again = open_link("attention", dict(at.query_params))
    assert all_chart_rows(again) == all_chart_rows(at)


def test_stale_link_shows_a_notice_not_an_error(tiny_bert_dir):
    at = open_link("attention", {"model": str(tiny_bert_dir), **PAIR, "layer": "2", "zoom": "2", "style": "Wavy"})
    notice = " ".join(c.value for c in at.caption)
    assert markdown_text("“zoom”") in notice and markdown_text("“style=Wavy”") in notice  # shown as text, escaped
    assert at.session_state["attention.layer"] == 1
    assert "zoom" not in at.query_params  # the ignored setting is dropped from the URL


def test_add_this_view_to_the_lesson_then_edit(tiny_bert_dir):
    from app_pages.shell.lesson_bar import LESSON_KEY

    at = open_link("attention", {"model": str(tiny_bert_dir), **PAIR, "layer": "1", "heads": "2"})
    at.sidebar.button(key="lesson.add").click().run()
    at.radio(key="attention.style").set_value("Heatmap").run()
    at.sidebar.button(key="lesson.add").click().run()
    steps = at.session_state[LESSON_KEY].steps
    assert [s.page for s in steps] == ["attention", "attention"]
    expected = {"model": str(tiny_bert_dir), **PAIR, "layer": "1", "heads": "2"}
    assert {k: steps[0].params.get(k) for k in expected} == expected
    assert "style" not in steps[0].params  # at its default, so not in the link
    assert steps[1].params["style"] == "Heatmap"

    at.switch_page("app_pages/lessons.py").run()
    assert not at.exception
    at.text_input(key="lessons.step.0.title").set_value("Layer one").run()
    at.text_area(key="lessons.step.1.notes").set_value("Now as squares.").run()
    at.button(key="lessons.down.0").click().run()
    steps = at.session_state[LESSON_KEY].steps
    assert [s.title for s in steps] == ["Attention heads", "Layer one"]
    assert steps[0].notes == "Now as squares." and steps[0].params["style"] == "Heatmap"
    assert at.text_input(key="lessons.step.1.title").value == "Layer one"  # edit boxes follow the move


def test_presenter_steps_apply_each_view_as_its_link_would():
    from core import lessons

    lesson = lessons.builtin()["bert-in-ten-views"]
    at = open_link("present", {"lesson": "bert-in-ten-views", "step": "1"})
    for index in range(3):  # the first three steps: attention views that the local MiniLM draws
        step = lesson.steps[index]
        assert f"step {index + 1} of {len(lesson.steps)}" in " ".join(m.value for m in at.markdown)
        assert at.query_params["step"] == str(index + 1)
        direct = open_link(step.page, step.params)
        for key, value in views.parse(step.page, step.params).values.items():
            assert at.session_state[key] == value
        assert all_chart_rows(at) == all_chart_rows(direct)
        assert (at.session_state["sentence_b"], at.query_params.get("b")) == (step.params.get("b", ""), step.params.get("b"))
        assert at.expander[-1].label.startswith("Speaker notes")
        at.button(key="present.next").click().run()
        assert not at.exception
    assert at.session_state["sentence_b"] == lesson.steps[3].params["b"]
    at.button(key="present.prev").click().run()
    assert at.query_params["step"] == "3"
    assert at.session_state["attention.mode"] == "Model view"
    assert at.session_state["sentence_b"] == "" and "b" not in at.query_params  # step 4's pair does not linger


def test_presenter_names_unknown_lessons():
    at = open_link("present", {"lesson": "no-such-lesson"})
    assert markdown_text("no-such-lesson") in at.error[0].value and "bert-in-ten-views" in at.error[0].value


def test_a_value_the_page_cannot_use_now_gets_a_notice(tiny_bert_dir):
    """A parsed value the page cannot use: a layer the tiny 2-layer model lacks."""
    at = open_link("attention", {"model": str(tiny_bert_dir), **PAIR, "layer": "9", "style": "Heatmap"})
    assert at.session_state["attention.layer"] == 1  # the page keeps the layer in range
    assert "`layer=9`" in " ".join(c.value for c in at.caption)


def test_a_page_that_stops_early_still_writes_its_url(tiny_bert_dir):
    """The anisotropy page stops before Run (st.stop()); a changed setting must reach the URL all the same."""
    at = open_link("anisotropy", {"model": str(tiny_bert_dir), "models": str(tiny_bert_dir), "seed": "3"})
    at.number_input(key="anisotropy.seed").set_value(11).run()
    assert at.query_params["seed"] == "11"


WIDGET_TYPES = ("selectbox", "radio", "multiselect", "checkbox", "toggle", "slider", "number_input", "text_input",
                "text_area", "select_slider", "button_group")


def _browser_disagrees(at, shown: dict) -> list[str]:
    """Update `shown` ({widget id: value the browser shows}) after a run as Streamlit's frontend does (it keeps the
    value it holds for a widget id unless the run sent `set_value`: a value assigned through st.session_state), and
    list the keyed widgets whose shown value is not the value the page ran with."""
    wrong = []
    for kind in WIDGET_TYPES:
        for widget in at.get(kind):
            if not getattr(widget, "key", None) or widget.key.startswith("$$"):
                continue
            value = widget.value
            if widget.proto.set_value or widget.id not in shown:
                shown[widget.id] = value
            elif shown[widget.id] != value:
                wrong.append(f"{widget.key}: shows {shown[widget.id]!r}, drawn with {value!r}")
    return wrong


def test_presenter_every_widget_shows_what_its_step_draws():
    """Issue 37: step 1 draws a heatmap; step 2 (no style in its link), reached with →, drew lines while the radio
    still showed "Heatmap" (apply() dropped the key: the server fell back to the default, the browser kept its
    value). Every keyed widget of the attention steps, forwards and back: the browser's value is the one drawn."""
    at = open_link("present", {"lesson": "bert-in-ten-views", "step": "1"})
    shown: dict = {}
    assert _browser_disagrees(at, shown) == [] and at.session_state["attention.style"] == "Heatmap"
    for button, step in (("next", 2), ("next", 3), ("next", 4), ("prev", 3), ("prev", 2), ("prev", 1)):
        at.button(key=f"present.{button}").click().run()
        assert not at.exception, at.exception
        assert at.query_params["step"] == str(step)
        assert _browser_disagrees(at, shown) == [], f"step {step}"
        if step == 2:
            assert at.session_state["attention.style"] == "Lines"
