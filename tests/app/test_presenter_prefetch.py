"""Presenter mode prepares corpus passes ahead (issue 20, point 3): opening a lesson submits the anisotropy step's
pass; the slide then draws that pass's chart with no Run click, and the numbers equal core.analyses.anisotropy's own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from streamlit.testing.v1 import AppTest

from core.analyses import anisotropy as an
from core.data import corpus as corpora
from core import jobs, lessons
from core.model.loading import load_model
from tests.app.conftest import APP_FILE, _chart_rows, chart_rows_titled

SEED = 17  # a seed no other test measures with, so the shared store cannot already hold this profile


def lesson_file(tmp_path, minilm_dir, **extra) -> lessons.Lesson:
    """The built-in lesson, its anisotropy step on the local MiniLM and a few built-in sentences, via a file."""
    lesson = lessons.builtin()["bert-in-ten-views"]
    index = next(i for i, s in enumerate(lesson.steps) if s.page == "anisotropy")
    step = lesson.steps[index]
    params = {**step.params, "model": str(minilm_dir), "models": str(minilm_dir), "corpus": "Built-in sentences",
              "seed": str(SEED), **extra}
    path = lessons.save(lessons.replace_step(lesson, index, replace(step, params=params)), tmp_path / "lesson.json")
    return lessons.load(path)


def open_presenter(lesson: lessons.Lesson) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["lesson.current"] = lesson
    at.query_params.update({"lesson": "current", "step": "1"})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception, at.exception
    return at


def anisotropy_entry(at: AppTest) -> dict:
    (entry,) = [e for e in at.session_state["present.prefetch"]["entries"] if e["page"] == "anisotropy"]
    return entry


def step_to(at: AppTest, number: int) -> None:
    while at.query_params["step"] != str(number):
        at.button(key="present.next").click().run()
        assert not at.exception, at.exception


def test_the_slide_draws_the_prefetched_pass_without_a_click(tmp_path, minilm_dir):
    lesson = lesson_file(tmp_path, minilm_dir, limit="40", pairs="300")
    at = open_presenter(lesson)
    entry = anisotropy_entry(at)
    assert entry.get("job_id"), entry  # submitted when the lesson opened, before any step showed the page
    record = jobs.wait(entry["job_id"], timeout=240)
    assert record.state == "done", record
    at.run()
    listed = " ".join(m.value for m in at.markdown)
    assert f"Step {entry['step'] + 1}" in listed and "ready" in listed

    step_to(at, entry["step"] + 1)
    assert not [b for b in at.button if b.key == "anisotropy.run"]  # nothing to press: the chart is there
    expected = an.measure_corpus(load_model(str(minilm_dir)), corpora.builtin(limit=40),
                                 an.AnisotropySettings(n_pairs=300, seed=SEED))
    rows = _chart_rows(at)
    assert {r["series"] for r in rows} == {minilm_dir.name}  # the display name, not the folder path
    shown = [r["value"] for r in sorted(rows, key=lambda r: r["layer"])]
    np.testing.assert_allclose(shown, expected.random_cosine, atol=1e-6)


def test_a_cancelled_prefetch_leaves_no_result_and_the_slide_offers_run(tmp_path, minilm_dir):
    lesson = lesson_file(tmp_path, minilm_dir, pairs="10000", seed=str(SEED + 1))
    at = open_presenter(lesson)
    entry = anisotropy_entry(at)
    at.button(key="present.prefetch.cancel").click().run()  # the start-of-lesson list's Cancel
    record = jobs.wait(entry["job_id"], timeout=240)
    assert record.state == "cancelled", record
    at.run()
    assert "cancelled" in " ".join(m.value for m in at.markdown)

    step_to(at, entry["step"] + 1)
    assert not at.get("vega_lite_chart")  # no half profile drawn as if complete
    assert [b for b in at.button if b.key == "anisotropy.run"]


def test_a_step_opening_heads_over_a_dataset_gets_its_survey_prepared(tmp_path, tiny_bert_dir, data_dir):
    from core.analyses import heads as hd

    view = {"model": str(tiny_bert_dir), "a": "The cat sat on the mat.", "tab": "Heads over a dataset",
            "part": "Statistics", "heads_corpus": "SNLI", "heads_split": "dev", "heads_n": "12"}
    lesson = lessons.Lesson("Heads", (lessons.Step("Intro", "attention", {"model": str(tiny_bert_dir), "a": "hi"}),
                                      lessons.Step("Where heads look", "attention", view)))
    lesson = lessons.load(lessons.save(lesson, tmp_path / "heads.json"))
    at = open_presenter(lesson)
    (entry,) = at.session_state["present.prefetch"]["entries"]  # the one-sentence step needs no pass
    assert entry["step"] == 1 and entry.get("job_id"), entry
    assert jobs.wait(entry["job_id"], timeout=240).state == "done"

    step_to(at, 2)
    slot = at.session_state["heads.survey.jobstate"]
    assert slot["last_id"] == entry["job_id"] and "result" in slot  # the prefetched job, no click
    expected = hd.survey_heads(load_model(str(tiny_bert_dir)), corpora.resolve("snli:dev:12").inputs)
    rows = chart_rows_titled(at, "per head")
    shown = np.zeros(expected.stat("cls").shape)
    for row in rows:
        shown[row["layer"] - 1, row["head"]] = row["cls"]  # layers shown 1..L (core.numbering)
    np.testing.assert_allclose(shown, expected.stat("cls"), rtol=1e-6)


def test_a_slide_shown_mid_pass_follows_the_prefetched_job(tmp_path, minilm_dir):
    """The anisotropy step first: its slide runs right after the pass is submitted, so it finds the job running."""
    full = lesson_file(tmp_path, minilm_dir, limit="150", pairs="400", seed=str(SEED + 2))
    lesson = replace(full, steps=tuple(s for s in full.steps if s.page == "anisotropy"))
    at = open_presenter(lesson)
    (entry,) = at.session_state["present.prefetch"]["entries"]
    slot = at.session_state["anisotropy.jobstate"]
    if jobs.status(entry["job_id"]).active:  # almost always: the slide runs milliseconds after the submit
        assert slot["id"] == entry["job_id"]  # the page follows the prefetched job: its progress and Cancel
        assert [b for b in at.button if b.key == "anisotropy.cancel"]
    assert slot["last_id"] == entry["job_id"]
    assert jobs.wait(entry["job_id"], timeout=240).state == "done"
    at.run()
    expected = an.measure_corpus(load_model(str(minilm_dir)), corpora.builtin(limit=150),
                                 an.AnisotropySettings(n_pairs=400, seed=SEED + 2))
    shown = [r["value"] for r in sorted(_chart_rows(at), key=lambda r: r["layer"])]
    np.testing.assert_allclose(shown, expected.random_cosine, atol=1e-6)


def test_switching_lesson_cancels_the_previous_lessons_passes(tmp_path, minilm_dir, tiny_bert_dir):
    full = lesson_file(tmp_path, minilm_dir, pairs="10000", seed=str(SEED + 3))
    at = open_presenter(full)
    entry = anisotropy_entry(at)
    key = (str(minilm_dir), corpora.builtin().digest, an.AnisotropySettings(n_pairs=10000, seed=SEED + 3))
    assert entry["params"] == ((key[0],), key[1], key[2])  # the pass submitted is the one keyed below
    at.session_state["lesson.current"] = lessons.Lesson("Other", (lessons.Step("One head", "attention",
                                                                              {"model": str(tiny_bert_dir), "a": "hi"}),))
    at.run()
    assert not at.exception, at.exception
    assert jobs.wait(entry["job_id"], timeout=240).state == "cancelled"
    from app_pages.widgets.common import shared_results

    assert key not in shared_results("anisotropy")  # the half-done pass left nothing that could pass for a result
