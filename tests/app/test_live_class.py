"""Live class in AppTest (issue 36): a student's session gets only the student view whatever page it opens, joins by
link or code, answers, changes its answer, sees the reveal; the teacher's class panel (class mode) shows the code,
the live number of students, and ends, exports and forgets the class. AppTest cannot set a connection's address,
so a student is made by replacing app_pages.shell.classroom.is_teacher (the address rule itself is unit-tested in
tests/unit/test_class_access.py and in a real server by tests/browser/test_live_class.py)."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shell import classroom
from core import views
from core.classroom import Question, shared_store
from core.safe_text import markdown_text
from tests.app.conftest import APP_FILE


@pytest.fixture
def student(monkeypatch):
    monkeypatch.setattr(classroom, "is_teacher", lambda: False)


def student_app(page: str = "finetune", query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=60)
    at.query_params.update(query or {})
    at.switch_page(views.page_file(page)).run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    return " ".join([*(m.value for m in at.markdown), *(m.value for m in at.info), *(m.value for m in at.success),
                     *(m.value for m in at.subheader), *(m.value for m in at.warning), *(t.value for t in at.title)])


def test_student_on_finetune_gets_only_the_student_view(student):
    at = student_app("finetune")
    assert [t.value for t in at.title] == ["BERT Lens class"]
    assert [t.label for t in at.text_input] == ["Class code"]
    assert len(at.sidebar.children) == 0  # no sidebar: no model box, no sentences, no navigation
    assert "Fine-tun" not in texts(at) and not at.get("vega_lite_chart")


def test_student_joins_by_link_answers_changes_and_sees_the_reveal(student):
    store = shared_store()
    info = store.start_class()
    qid = store.ask(info.id, Question("masked", "Which word fills [MASK]?", ("cat", "dog"), page="masked"))
    at = student_app("home", {"class": info.code.lower()})
    assert markdown_text("Which word fills [MASK]?") in texts(at)
    at.button(key=f"class.choice.{qid}.1").click().run()
    device = at.session_state[classroom.DEVICE_KEY]
    assert store.answer_of(qid, device).text == "dog"
    assert "Answer received" in texts(at) and store.student_count(info.id) == 1
    store.rate_limit_seconds = 0  # changing an answer at once is the rate limit's test, not this one's
    at.button(key=f"class.choice.{qid}.0").click().run()
    assert store.counts(qid) == {"cat": 1, "dog": 0}
    store.reveal(qid, "cat")
    at.run()
    assert "The answer: **cat**" in texts(at) and "right!" in texts(at)
    assert not at.button  # closed: no buttons left


def test_rejected_answer_is_said_plainly(student):
    store = shared_store()
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    at = student_app("home", {"class": info.code})
    at.button(key=f"class.choice.{qid}.0").click().run()
    at.button(key=f"class.choice.{qid}.1").click().run()  # at once: too fast
    assert "Too fast" in texts(at) and store.counts(qid) == {"up": 1, "down": 0}


def test_student_joins_by_typed_code_and_free_text(student):
    store = shared_store()
    info = store.start_class()
    at = student_app("attention")
    at.text_input(key=classroom.CODE_INPUT_KEY).input("nope1")
    at.button[0].click().run()
    assert "No class is running" in texts(at)
    at.text_input(key=classroom.CODE_INPUT_KEY).input(info.code)
    at.button[0].click().run()
    assert "Waiting for the teacher" in texts(at)
    qid = store.ask(info.id, Question("masked", "Which word?", free_text=True))
    at.run()
    at.text_input(key=f"class.text.{qid}").input("river")
    at.button[0].click().run()
    assert store.counts(qid) == {"river": 1} and "Answer received: **river**" in texts(at)
    store.end_class(info.id)
    at.run()
    assert "The class has ended" in texts(at)


def teacher_app(tiny_bert_dir) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=120)
    at.session_state["model"] = str(tiny_bert_dir)
    at.switch_page(views.page_file("home")).run()
    assert not at.exception, at.exception
    return at


def test_no_class_panel_without_class_mode(tiny_bert_dir, monkeypatch):
    monkeypatch.delenv("BERTLENS_CLASS", raising=False)
    at = teacher_app(tiny_bert_dir)
    assert at.sidebar.selectbox(key="model")  # the teacher's full sidebar is there
    assert not [e for e in at.sidebar.get("expander") if "Live class" in e.proto.label]


def test_teacher_panel(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("BERTLENS_CLASS", "1")
    store = shared_store()
    at = teacher_app(tiny_bert_dir)
    assert [e for e in at.sidebar.get("expander") if "Live class" in e.proto.label]
    at.button(key="class.start").click().run()
    info = store.active_class()
    assert info is not None and f"Class code: **{info.code}**" in " ".join(m.value for m in at.sidebar.markdown)
    assert at.sidebar.get("image")  # the QR code
    assert any(f"?class={info.code}" in c.value for c in at.sidebar.code)
    # issue 48: the link, wrapped to the sidebar's width, broke inside its port number: it is drawn on one line,
    # and the address a student types (short enough for the sidebar) is written out above it
    assert not [c for c in at.sidebar.code if c.proto.wrap_lines], "the join link is wrapped"
    assert any(re.search(r"Students open \*\*http://[^*\s]+:\d+\*\* and type the code", m.value.replace("\\", ""))
               for m in at.sidebar.markdown)  # markdown_text escapes the address's punctuation
    assert at.sidebar.metric[0].value == "0"
    qid = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    for device in ("phone-1", "phone-2", "phone-3"):
        store.answer(qid, device, "up")
    at.run()
    assert at.sidebar.metric[0].value == "3"
    at.button(key="class.end").click().run()
    assert store.active_class() is None and not store.get_class(info.id).running
    assert store.class_by_code(info.code) is None  # the code has expired
    at.button(key=f"class.forget.{info.id}").click().run()
    assert store.classes() == [] and store.answers(qid) == []
