"""A live class in real browsers (issue 36): the teacher asks a masked-word question on a tiny random
BertForMaskedLM, six students answer on their own pages, the teacher reveals, and the histogram's data (its CSV)
equals the answers the students gave and the store holds.

Two server processes share one models_cache (so one SQLite file): the teacher's, where loopback is the teacher
(the default), and the students', started with BERTLENS_TEACHER_ADDRESSES=192.0.2.1 (a documentation address no
connection comes from), so every loopback browser there gets the student view, whatever URL it opens.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from urllib.parse import urlencode

import pytest

from core.classroom.store import FILE_NAME, ClassStore
from tests.browser.conftest import StreamlitServer, assert_no_streamlit_exception, screenshot, wait_for_app
from tests.tiny_mlm import make_tiny_mlm

TEXT = "the girl sat on the [MASK] of the river ."
STUDENTS = 6
# The open question's count (the sidebar's class panel has a "Students" metric too)
ANSWERS = ("() => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
           ".filter(m => m.innerText.includes('Answers received'))"
           ".map(m => m.querySelector('[data-testid=\"stMetricValue\"]').innerText.trim())[0] || null")


@pytest.fixture
def servers(tmp_path):
    folder = make_tiny_mlm(tmp_path / "tiny-mlm")
    cache = tmp_path / "cache"
    cache.mkdir()
    teacher = StreamlitServer(str(folder), cache, env={"BERTLENS_CLASS": "1"})
    try:
        # Six students from this one machine: one device per browser session, not per address (issue 44).
        students = StreamlitServer(str(folder), cache, env={"BERTLENS_CLASS": "1", "BERTLENS_CLASS_DEVICE": "browser",
                                                            "BERTLENS_TEACHER_ADDRESSES": "192.0.2.1"})
    except Exception:
        teacher.stop()
        raise
    yield folder, cache, teacher, students
    students.stop()
    teacher.stop()


def wait_for_student(page) -> None:
    """Until the student view has finished its run (it has no sidebar to wait for)."""
    page.wait_for_selector("h1:has-text('BERT Lens class')")
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                           " && !document.querySelector('[data-stale=\"true\"]')", timeout=120_000)


def test_teacher_asks_students_answer_reveal_matches(servers, browser):
    folder, cache, teacher_server, student_server = servers
    teacher = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    teacher.set_default_timeout(120_000)
    teacher.goto(f"{teacher_server.url}/masked?{urlencode({'model': str(folder), 'a': TEXT})}")
    wait_for_app(teacher)
    teacher.get_by_text("Ask the class").first.click()
    teacher.get_by_role("button", name="Ask the class").click()
    teacher.wait_for_function(f"() => ({ANSWERS})() === '0'")
    assert_no_streamlit_exception(teacher)

    store = ClassStore(cache / FILE_NAME)
    info = store.active_class()
    asked = store.current_question(info.id)
    choices = asked.question.choices
    assert asked.question.kind == "masked" and len(choices) == 4

    given = []
    pages = []
    for i in range(STUDENTS):
        student = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True).new_page()
        student.set_default_timeout(120_000)
        # one student follows a link to a teacher's page: the student view all the same
        path = "/finetune" if i == 0 else "/"
        student.goto(f"{student_server.url}{path}?{urlencode({'class': info.code})}")
        wait_for_student(student)
        assert student.locator('[data-testid="stSidebar"]').count() == 0
        choice = choices[[0, 1, 1, 2, 1, 0][i]]  # choice 3 picked by nobody: a bar of 0
        student.get_by_role("button", name=choice, exact=True).click()
        student.get_by_text("Answer received").wait_for()
        given.append(choice)
        pages.append(student)
    assert_no_streamlit_exception(pages[-1])
    screenshot(pages[-1], "live_class_student")

    teacher.wait_for_function(f"() => ({ANSWERS})() === '{STUDENTS}'")
    assert teacher.locator('[data-testid="stVegaLiteChart"]').count() == 0  # the guesses wait for the reveal
    screenshot(teacher, "live_class_teacher_open")
    teacher.get_by_role("button", name="Reveal").click()
    wait_for_app(teacher)
    teacher.get_by_text("The model's answer:").first.wait_for()
    assert teacher.locator('[data-testid="stVegaLiteChart"]').count() == 2  # the guesses and the histogram
    assert_no_streamlit_exception(teacher)
    teacher.wait_for_timeout(500)
    screenshot(teacher, "live_class_teacher_reveal")
    # issue 48: beside the view's chart, the answers ran past their column ("1 ✓ the model's answ…" cut)
    from tests.browser.test_chart_layout import assert_whole, measure

    assert_whole(measure(teacher), "class reveal")

    with teacher.expect_download() as download:
        teacher.get_by_role("button", name="CSV").last.click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert [r["choice"] for r in rows] == list(choices)
    assert {r["choice"]: int(r["answers"]) for r in rows} == {c: Counter(given)[c] for c in choices}
    assert [r["choice"] for r in rows if r["right"] == "True"] == [asked.question.correct]
    assert Counter(a.text for a in store.answers(asked.id)) == Counter(given)

    pages[1].get_by_text("The answer:").wait_for()  # the students see the right answer after the reveal
    screenshot(pages[1], "live_class_student_revealed")
