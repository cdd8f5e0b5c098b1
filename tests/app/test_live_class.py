"""Live class in AppTest (issue 36): a student's session gets only the student view whatever page it opens, joins by
link or code, answers, changes its answer, sees the reveal; the teacher's class panel (class mode) shows the code,
the live number of students, and ends, exports and forgets the class. AppTest cannot set a connection's address,
so a student is made by replacing app_pages.shell.classroom.is_teacher (the address rule itself is unit-tested in
tests/unit/test_class_access.py and in a real server by tests/browser/test_live_class.py)."""

from __future__ import annotations

import re
import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shell import classroom
from core import views
from core.classroom import Question, access, shared_store
from core.classroom.store import DISK_FULL
from core.safe_text import markdown_text
from tests.markdown_text import plain
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
    assert any(re.search(r"Students open \*\*http://[^*\s]+:\d+\*\* and type the code", plain(m.value))
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


# --- issue 44: one vote per device, wrong codes throttled, a session bound to its class, a full disk ---


def phone_at(monkeypatch, address: str | None):
    """Sessions from now on come from `address` (a student's: not loopback), as the server's socket would say."""
    monkeypatch.setattr(classroom, "connection", lambda: None if address is None else (address, [("host", "x")]))


def answer_from(address_or_none, monkeypatch, code: str, qid: int, pick: int) -> AppTest:
    phone_at(monkeypatch, address_or_none)
    at = student_app("home", {"class": code})
    at.button(key=f"class.choice.{qid}.{pick}").click().run()
    assert not at.exception, at.exception
    return at


def test_one_answer_per_address_whatever_the_sessions(monkeypatch):
    """Issue 44: each new websocket was a new phone (200 extra votes from one address in 6 s). Three sessions from
    one address are one device (the last answer counts, as a changed answer); another address is another device."""
    monkeypatch.delenv(access.DEVICE_ENV, raising=False)
    store = shared_store()
    store.rate_limit_seconds = 0  # the sessions answer back to back; the rate limit has its own test
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    for pick in (0, 0, 1):
        at = answer_from("192.0.2.7", monkeypatch, info.code, qid, pick)
    answer_from("192.0.2.8", monkeypatch, info.code, qid, 0)
    assert store.counts(qid) == {"up": 1, "down": 1} and store.student_count(info.id) == 2
    assert at.session_state[classroom.DEVICE_KEY] == store.address_device("192.0.2.7")
    answer_from("::ffff:192.0.2.8", monkeypatch, info.code, qid, 1)  # the same address seen through IPv6
    assert store.counts(qid) == {"up": 0, "down": 2}


def test_one_answer_per_browser_session_when_configured(monkeypatch):
    """BERTLENS_CLASS_DEVICE=browser: a teacher trying the class with several tabs on one computer."""
    monkeypatch.setenv(access.DEVICE_ENV, "browser")
    store = shared_store()
    store.rate_limit_seconds = 0
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    for pick in (0, 0, 1):
        answer_from("192.0.2.7", monkeypatch, info.code, qid, pick)
    assert store.counts(qid) == {"up": 2, "down": 1}


def test_a_bad_device_setting_is_named(monkeypatch, student):
    monkeypatch.setenv(access.DEVICE_ENV, "phone")
    at = AppTest.from_file(APP_FILE, default_timeout=60).run()
    said = markdown_text("BERTLENS_CLASS_DEVICE: 'phone' is not one of address, browser")
    assert not at.exception and said in at.error[0].value and not at.button


def test_wrong_codes_are_throttled_per_address(monkeypatch):
    """Issue 44: codes could be guessed at ~25 a second. The sixth wrong code in a minute from one address is
    refused, and so is the right one after it; another address joins."""
    store = shared_store()
    info = store.start_class()
    phone_at(monkeypatch, "192.0.2.66")
    at = student_app("home")
    wrong = "AAAAA" if info.code != "AAAAA" else "BBBBB"
    for _ in range(5):
        at.text_input(key=classroom.CODE_INPUT_KEY).input(wrong)
        at.button[0].click().run()
        assert "No class is running" in texts(at)
    at.text_input(key=classroom.CODE_INPUT_KEY).input(info.code)
    at.button[0].click().run()
    assert "Too many wrong codes from this device" in texts(at) and "Waiting for the teacher" not in texts(at)
    other = student_app("home")  # a new session from the same address is no way round it
    other.text_input(key=classroom.CODE_INPUT_KEY).input(info.code)
    other.button[0].click().run()
    assert "Too many wrong codes" in texts(other)
    phone_at(monkeypatch, "192.0.2.67")
    third = student_app("home")
    third.text_input(key=classroom.CODE_INPUT_KEY).input(info.code)
    third.button[0].click().run()
    assert "Waiting for the teacher" in texts(third)


def test_a_phone_joined_to_a_forgotten_class_is_not_in_the_next(monkeypatch):
    """Issue 44: after "Forget this class" the next class reused id 1, and a phone still joined to the forgotten
    class answered in the new one without its code. It is sent back to the join form."""
    phone_at(monkeypatch, "192.0.2.7")
    store = shared_store()
    first = store.start_class()
    at = student_app("home", {"class": first.code})
    assert "Waiting for the teacher" in texts(at)
    store.end_class(first.id)
    store.forget(first.id)
    second = store.start_class()
    qid = store.ask(second.id, Question("choice", "Up or down?", ("up", "down")))
    at.run()
    assert "Up or down?" not in texts(at)
    assert [t.label for t in at.text_input] == ["Class code"]  # the join form again
    assert store.counts(qid) == {"up": 0, "down": 0}


class FullDisk:
    """The store's connection on a full disk: every write fails as SQLite says it then; reads work."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_a_full_disk_is_one_plain_sentence_on_the_phone(monkeypatch, isolated_cache):
    """Issue 44: on a full disk the student's phone showed the traceback with the server's paths. It shows one
    sentence saying the disk is full, and no path; the teacher's panel says where."""
    phone_at(monkeypatch, "192.0.2.7")
    store = shared_store()
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    at = student_app("home", {"class": info.code})
    monkeypatch.setattr(store, "_db", FullDisk(store._db))
    at.button(key=f"class.choice.{qid}.0").click().run()
    assert not at.exception, at.exception
    shown = texts(at) + " ".join(e.value for e in at.error)
    assert markdown_text(DISK_FULL) in shown and str(isolated_cache) not in shown and "Traceback" not in shown
    assert "sqlite" not in shown.lower() and store.counts(qid) == {"up": 0, "down": 0}
    late = student_app("home", {"class": info.code})  # a phone joining now: the same sentence
    assert not late.exception and markdown_text(DISK_FULL) in texts(late) + " ".join(e.value for e in late.error)
    assert str(isolated_cache) not in texts(late)
