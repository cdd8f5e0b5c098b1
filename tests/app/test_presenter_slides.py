"""Issue 48: presenter mode is self-sufficient. Every step of every built-in lesson opens as a slide: its title, then
its chart first (above the page's folded settings), never a word about a sidebar (presenter mode has none), no
cache path or run id outside the speaker notes; a step whose model cannot load offers the local models that can
(one click draws the step with one), and a time-lapse step whose run is not here offers the time-lapse runs that are."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core import jobs, lessons
from tests.app.conftest import APP_FILE
from tests.app.test_finetune_timelapse import cancelled_run, frame
from tests.integration.test_lesson_every_front import quick_run
from tests.tiny_mlm import make_tiny_mlm

HEAD = "tiny-mlm-head"  # a fitted masked-word head on this computer: what a step needing an MLM head is offered
HERE_RUN = "run-20261128-0912-x7"  # an internal-looking run id: the slide must call it by what it is instead


def walk(node, skip_notes: bool = True):
    """Every element under `node`, the speaker notes' expander left out when skip_notes."""
    children = getattr(node, "children", None)
    if children is None:
        yield node
        return
    if skip_notes and "Speaker notes" in str(node.proto):
        return
    for child in children.values():
        yield from walk(child, skip_notes)


def slide_area(at: AppTest):
    """The slide's own block (its charts and what the class must see), above the page's settings."""
    blocks = [node for node in at.main.children.values() if "present.slide" in str(getattr(node, "proto", ""))]
    assert len(blocks) == 1, "no slide area"
    return blocks[0]


def text_of(node) -> str:
    """What the element says (body, label, help, options), Markdown escapes removed; style elements say nothing."""
    parts = []
    for attr in ("value", "label", "help", "placeholder", "options"):
        try:
            value = getattr(node, attr)
        except (AttributeError, NotImplementedError, TypeError, ValueError):
            continue
        parts += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] \
            if isinstance(value, (list, tuple)) else []
    text = " ".join(parts)
    return "" if text.startswith("<style") else text.replace("\\", "")


def charts_on_slide(at: AppTest) -> int:
    return sum(1 for node in walk(slide_area(at)) if node.type == "vega_lite_chart")


@pytest.fixture
def here(isolated_cache, tiny_bert_dir, tmp_path):
    """A fitted MLM head, a finished fine-tuning run and a time-lapse run (hand-written, 3 frames) on this computer."""
    make_tiny_mlm(isolated_cache / "heads" / HEAD)
    quick_run(tiny_bert_dir, tmp_path)
    rng = np.random.default_rng(1)
    cancelled_run(HERE_RUN, json.dumps({"steps": [0, 5, 10], "probe": "snli:validation:100", "seed": 0,
                                        "frames": [frame(s, rng) for s in (0, 5, 10)], "dev_examples": 64,
                                        "measure_seconds": 3.0, "train_seconds": 12.0}))
    return isolated_cache


def open_step(name: str, number: int) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.query_params.update({"lesson": name, "step": str(number)})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception, at.exception
    return at


def found(text: str, needle: str) -> str:
    i = text.find(needle)
    return "" if i < 0 else text[max(0, i - 150):i + 80]


def check_slide(at: AppTest, step: lessons.Step, cache) -> None:
    """No sidebar anywhere (speaker notes included); no cache path outside the speaker notes; no run id on the
    slide itself (title and chart area: the page's folded settings list runs by name); the step's title first."""
    everything = " ".join(text_of(n) for n in walk(at.main, skip_notes=False))
    assert "sidebar" not in everything.lower(), (step.title, found(everything.lower(), "sidebar"))
    assert "sidebar" not in step.notes.lower()
    outside_notes = " ".join(text_of(n) for n in walk(at.main))
    assert str(cache) not in outside_notes, (step.title, found(outside_notes, str(cache)))
    slide = " ".join(text_of(n) for n in [*at.header, *walk(slide_area(at))])
    assert HERE_RUN not in slide, (step.title, found(slide, HERE_RUN))
    assert [h.value for h in at.header][0].replace("\\", "") == step.title


@pytest.mark.parametrize("name", list(lessons.builtin()))
def test_every_builtin_step_is_a_slide_with_its_chart_first(name, here, minilm_dir):
    lesson = lessons.builtin()[name]
    at = open_step(name, 1)
    entries = at.session_state["present.prefetch"]["entries"]
    # every long step is prepared: a job now, or a result an earlier session of this process measured (the
    # anisotropy profile is shared by all sessions)
    assert {e["page"] for e in entries} >= {"anisotropy", "reproduce"} and not [e for e in entries if e.get("error")]
    prepared = [e for e in entries if e.get("job_id")]
    for entry in prepared:  # the long jobs prepared when the lesson opened: their slides draw without a click
        assert jobs.wait(entry["job_id"], timeout=600).state == "done", entry
    for index, step in enumerate(lesson.steps):
        if index:
            at.button(key="present.next").click().run()
            assert not at.exception, (step.title, at.exception)
        check_slide(at, step, here)
        offers = [b for b in at.button if (b.key or "").startswith(("present.use_model.", "finetune.timelapse.offer."))]
        if offers:  # the step's model or run is not here: one click shows the step with one that is
            labels = [b.label for b in offers]
            assert HERE_RUN not in " ".join(labels)
            pick = next((b for b in offers if b.label == HEAD), offers[0])
            assert pick.label in (HEAD, "tiny fine-tuned on SNLI"), labels
            pick.click().run()
            assert not at.exception, (step.title, at.exception)
            check_slide(at, step, here)
        assert charts_on_slide(at) >= 1, f"step {index + 1} ({step.title}): no chart on the slide"
    assert index == len(lesson.steps) - 1


def test_a_step_whose_model_cannot_load_offers_the_local_models(here, tmp_path):
    """The reason (with the cache path) is in the speaker notes; the slide names the model and offers the head."""
    lesson = lessons.Lesson("Masked", (lessons.Step("Guess", "masked", {"model": "bert-base-uncased",
                                                                        "a": "the cat [MASK] on the mat ."}),))
    path = lessons.save(lesson, tmp_path / "masked.json")
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["lesson.current"] = lessons.load(path)
    at.query_params.update({"lesson": "current", "step": "1"})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception, at.exception
    slide = " ".join(text_of(n) for n in walk(slide_area(at)))
    assert "bert-base-uncased" in slide and "cannot be loaded" in slide and charts_on_slide(at) == 0
    notes = " ".join(text_of(n) for n in walk(at.main, skip_notes=False))
    assert "python -m core download bert-base-uncased" in notes.replace("\\", "")
    (offer,) = [b for b in at.button if b.key and b.key.startswith("present.use_model.") and b.label == HEAD]
    offer.click().run()
    assert not at.exception, at.exception
    assert at.session_state["model"] == HEAD and charts_on_slide(at) >= 1
    assert not [b for b in at.button if b.key and b.key.startswith("present.use_model.")]


@pytest.mark.parametrize("name", list(lessons.builtin()))
def test_every_builtin_step_draws_in_the_app(name, here, minilm_dir):
    """Each step opened as its link (`/<page>?<params>`) in the app itself, with the sidebar: a chart, once the
    page's own Run button is pressed where it has one (a corpus pass, the reproduce study). A model that needs a
    download is swapped for the local masked-word head, as the slide's offer would."""
    from core import views

    for step in lessons.builtin()[name].steps:
        params = {**step.params, **({"model": HEAD} if step.params.get("model") == "bert-base-uncased" else {})}
        at = AppTest.from_file(APP_FILE, default_timeout=300)
        at.query_params.update(params)
        at.switch_page(views.page_file(step.page)).run()
        assert not at.exception, (step.title, at.exception)
        run = [b for b in at.button if (b.key or "").endswith(".run")]
        if not at.get("vega_lite_chart") and run:
            run[0].click().run()
            job = at.session_state[run[0].key[:-len(".run")] + ".jobstate"]["last_id"]
            assert jobs.wait(job, timeout=600).state == "done", step.title
            at.run()
            assert not at.exception, (step.title, at.exception)
        assert at.get("vega_lite_chart"), f"{step.title}: no chart in the app"
