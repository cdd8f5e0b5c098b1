"""core.lessons: the lesson file round-trips, bad files fail with a message that says where (issue 20, point 2)."""

from __future__ import annotations

import json
import re

import pytest

from core import lessons, views

STEP = {"title": "One head", "page": "attention", "params": {"model": "m", "a": "The cat.", "layer": "2"},
        "notes": "Say: look at 'it'."}


def _lesson() -> lessons.Lesson:
    return lessons.from_json({"version": 1, "title": "Mine", "steps": [STEP, {**STEP, "title": "Two", "page": ""}]})


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_lesson_file_round_trips(tmp_path, suffix):
    lesson = _lesson()
    path = lessons.save(lesson, tmp_path / f"l{suffix}")
    assert lessons.load(path) == lesson
    assert lessons.load(path).to_json() == {"version": 1, "title": "Mine",
                                            "steps": [STEP, {**STEP, "title": "Two", "page": ""}]}
    if suffix == ".json":
        assert json.loads(path.read_text())["steps"][0] == STEP  # the exact step format, as written


@pytest.mark.parametrize("data, where", [
    ({"version": 2, "title": "x", "steps": []}, "version"),
    ({"version": 1, "title": "", "steps": []}, "title"),
    ({"version": 1, "title": "x", "steps": {}}, "steps"),
    ({"version": 1, "title": "x", "steps": [{**STEP, "page": "nowhere"}]}, "steps[0].page"),
    ({"version": 1, "title": "x", "steps": [STEP, {**STEP, "page": "present"}]}, "steps[1].page"),
    ({"version": 1, "title": "x", "steps": [{**STEP, "params": {"layer": 2}}]}, "steps[0].params.layer"),
    ({"version": 1, "title": "x", "steps": [{**STEP, "title": None}]}, "steps[0].title"),
    ({"version": 1, "title": "x", "steps": [{**STEP, "colour": "red"}]}, "steps[0]"),
    ([1, 2], "lesson"),
])
def test_bad_lessons_fail_saying_where(data, where):
    with pytest.raises(lessons.LessonError, match="^" + re.escape(where) + ": "):
        lessons.from_json(data)


def test_text_that_is_neither_json_nor_yaml_is_a_lesson_error():
    with pytest.raises(lessons.LessonError):
        lessons.loads("{not: [json")
    with pytest.raises(lessons.LessonError):
        lessons.loads("just a sentence")  # YAML parses it as a string: not a lesson object


def test_builtin_ten_views_lesson():
    lesson = lessons.builtin()["bert-in-ten-views"]
    assert lesson.title == "BERT in ten views"
    titles = [s.title.lower() for s in lesson.steps]
    for topic in ("word pieces", "one head", "all heads", "[sep]", "masked", "anisotropy", "bank",
                  "fine-tuning", "top layers move", "biased", "why a prediction"):
        assert sum(topic in t for t in titles) == 1, topic
    assert lessons.notices(lesson) == []  # every param is one its page knows
    for step in lesson.steps:
        assert step.notes and step.page in views.step_pages()
        if step.params.get("model") == "bert-base-uncased":
            assert "MLM" in step.notes  # says why the local MiniLM will not do
    assert lessons.models(lesson) == ["all-MiniLM-L6-v2", "bert-base-uncased"]


def test_missing_models_are_those_not_on_this_computer(tmp_path, tiny_bert_dir):
    lesson = lessons.from_json({"version": 1, "title": "x", "steps": [
        {**STEP, "params": {"model": str(tiny_bert_dir)}},
        {**STEP, "params": {"model": "no-such-org/no-such-model"}},
        {**STEP, "params": {"model": str(tmp_path)}},  # a folder without config.json
    ]})
    assert lessons.missing_models(lesson) == ["no-such-org/no-such-model", str(tmp_path)]


def test_step_link_and_editing():
    lesson = _lesson()
    assert lesson.steps[0].link() == "attention?model=m&a=The+cat.&layer=2"
    assert lessons.move_step(lesson, 0, 1).steps == lesson.steps[::-1]
    assert lessons.move_step(lesson, 0, -5).steps == lesson.steps
    assert lessons.remove_step(lesson, 0).steps == lesson.steps[1:]
    new = lessons.Step("New", "pca", {}, "")
    assert lessons.replace_step(lesson, 1, new).steps == (lesson.steps[0], new)
    assert lessons.add_step(lesson, new).steps[-1] == new
