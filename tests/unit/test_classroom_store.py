"""The live class's store (core/classroom/store.py): classes, questions, answers and their limits, checked against
plain Python bookkeeping and raw SQL on the same file."""

from __future__ import annotations

import csv
import io
import sqlite3
import threading
from collections import Counter

import pytest

from core.classroom.store import (MAX_ANSWER_CHARS, MAX_NICKNAME_CHARS, AnswerRejected, ClassroomError, ClassStore,
                                  Question, default_path)


class Clock:
    """A clock the test moves by hand (the rate limit reads it)."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    opened = ClassStore(tmp_path / "class.sqlite3", clock=clock)
    yield opened
    opened.close()


def choice(prompt="Which word fills [MASK]?", choices=("cat", "dog", "bank")) -> Question:
    return Question("masked", prompt, choices, page="masked", params={"text": "The [MASK] sat."})


def test_default_file_is_in_the_models_cache(isolated_cache):
    assert default_path() == isolated_cache / "classroom.sqlite3"
    ClassStore().close()
    assert (isolated_cache / "classroom.sqlite3").is_file()


def test_wal_mode_and_full_sync(store):
    with sqlite3.connect(store.path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_classes_codes_and_their_expiry(store):
    first = store.start_class()
    assert first.running and len(first.code) == 5 and store.active_class() == first
    assert store.class_by_code(first.code.lower()) == first
    assert store.class_by_code(f" {first.code[:2]}-{first.code[2:]} ") == first  # as typed on a phone
    second = store.start_class()  # one class at a time: the first is ended
    assert second.code != first.code and store.active_class() == second
    assert store.class_by_code(first.code) is None and not store.get_class(first.id).running
    store.end_class(second.id)
    assert store.active_class() is None and store.class_by_code(second.code) is None
    assert [c.id for c in store.classes()] == [first.id, second.id]


def test_ask_and_current_question(store):
    info = store.start_class()
    assert store.current_question(info.id) is None
    q1 = store.ask(info.id, choice())
    q2 = store.ask(info.id, Question("choice", "Up or down?", ("up", "down")))
    current = store.current_question(info.id)
    assert current.id == q2 and not current.revealed and current.question.choices == ("up", "down")
    first = store.question(q1)
    assert first.question == choice() and first.question.params == {"text": "The [MASK] sat."}
    store.end_class(info.id)
    with pytest.raises(ClassroomError, match="ended"):
        store.ask(info.id, choice())


def test_one_answer_per_device_the_latest_counts(store, clock):
    info = store.start_class()
    qid = store.ask(info.id, choice())
    given = [("phone-1", "cat"), ("phone-2", "dog"), ("phone-3", "cat"), ("phone-1", "bank"), ("phone-2", "cat")]
    for device, text in given:
        store.answer(qid, device, text)
        clock.now += 2
    latest = dict(given)  # the independent bookkeeping: a later answer of a device replaces its earlier one
    assert {a.device_id: a.text for a in store.answers(qid)} == latest
    assert store.counts(qid) == {"cat": 2, "dog": 0, "bank": 1}
    assert sum(store.counts(qid).values()) == len(latest) == store.student_count(info.id)
    assert store.answer_of(qid, "phone-1").text == "bank" and store.answer_of(qid, "nobody") is None


def test_free_text_counts_most_frequent_first(store, clock):
    info = store.start_class()
    qid = store.ask(info.id, Question("masked", "Which word?", free_text=True))
    words = ["river", "money", "river", "water", "river", "money"]
    for i, word in enumerate(words):
        store.answer(qid, f"phone-{i}", f"  {word} ")
    expected = Counter(words)
    counts = store.counts(qid)
    assert counts == dict(expected) and list(counts)[0] == "river"


def test_reveal_closes_the_question(store, clock):
    info = store.start_class()
    qid = store.ask(info.id, choice())
    store.answer(qid, "phone-1", "cat")
    store.reveal(qid, "cat")
    stored = store.question(qid)
    assert stored.revealed and stored.correct == "cat"
    clock.now += 5
    with pytest.raises(AnswerRejected, match="revealed"):
        store.answer(qid, "phone-1", "dog")
    with pytest.raises(AnswerRejected, match="revealed"):
        store.answer(qid, "phone-9", "dog")
    assert store.counts(qid)["cat"] == 1 and store.counts(qid)["dog"] == 0


def test_no_answers_once_the_class_has_ended(store):
    info = store.start_class()
    qid = store.ask(info.id, choice())
    store.end_class(info.id)
    with pytest.raises(AnswerRejected, match="ended"):
        store.answer(qid, "phone-1", "cat")
    with pytest.raises(ClassroomError, match="No class"):
        store.join(info.code, "phone-1")


def test_limits(store, clock):
    info = store.start_class()
    free = store.ask(info.id, Question("choice", "Say it", free_text=True))
    longest = "x" * MAX_ANSWER_CHARS
    store.answer(free, "phone-1", longest)
    clock.now += 2
    with pytest.raises(AnswerRejected, match=f"at most {MAX_ANSWER_CHARS}"):
        store.answer(free, "phone-1", longest + "y")
    with pytest.raises(AnswerRejected, match="empty"):
        store.answer(free, "phone-1", "   ")
    with pytest.raises(AnswerRejected, match="nickname"):
        store.answer(free, "phone-1", "ok", nickname="n" * (MAX_NICKNAME_CHARS + 1))
    with pytest.raises(AnswerRejected, match="device id"):
        store.answer(free, "", "ok")
    with pytest.raises(AnswerRejected, match="device id"):
        store.answer(free, "d" * 65, "ok")
    buttons = store.ask(info.id, choice())
    with pytest.raises(AnswerRejected, match="not one of"):
        store.answer(buttons, "phone-2", "elephant")
    assert store.answer_of(free, "phone-1").text == longest  # the rejected ones changed nothing


def test_rate_limit_per_device(store, clock):
    info = store.start_class()
    qid = store.ask(info.id, choice())
    store.answer(qid, "phone-1", "cat")
    clock.now += 0.5
    with pytest.raises(AnswerRejected, match="Too fast"):
        store.answer(qid, "phone-1", "dog")
    store.answer(qid, "phone-2", "dog")  # another device is not slowed down
    clock.now += 0.5
    store.answer(qid, "phone-1", "dog")
    assert store.counts(qid) == {"cat": 0, "dog": 2, "bank": 0}


def test_question_checks():
    with pytest.raises(ClassroomError, match="kind"):
        Question("poll", "Which?", ("a", "b"))
    with pytest.raises(ClassroomError, match="two choices"):
        Question("choice", "Which?", ("a",))
    with pytest.raises(ClassroomError, match="differ"):
        Question("choice", "Which?", ("a", "a"))
    with pytest.raises(ClassroomError, match="prompt"):
        Question("choice", " ", ("a", "b"))
    assert Question("masked", "Which?", free_text=True).choices == ()


def test_many_devices_answering_at_once_each_stored_once(tmp_path):
    """Sessions are threads of one server, and a second process may write the same file: 48 devices answer at the
    same moment through two stores (two connections); every answer is stored exactly once."""
    path = tmp_path / "class.sqlite3"
    stores = [ClassStore(path), ClassStore(path)]
    info = stores[0].start_class()
    qid = stores[0].ask(info.id, choice())
    devices = [f"phone-{i}" for i in range(48)]
    picks = {device: ("cat", "dog", "bank")[i % 3] for i, device in enumerate(devices)}
    start = threading.Barrier(len(devices))
    errors = []

    def student(i, device):
        start.wait()
        try:
            stores[i % 2].answer(qid, device, picks[device])
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=student, args=(i, d)) for i, d in enumerate(devices)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT device_id, text FROM answers WHERE question_id = ?", (qid,)).fetchall()
    assert sorted(rows) == sorted(picks.items())
    assert stores[1].counts(qid) == dict(Counter(picks.values()))
    for opened in stores:
        opened.close()


def test_answers_survive_reopening(tmp_path, clock):
    path = tmp_path / "class.sqlite3"
    first = ClassStore(path, clock=clock)
    info = first.start_class()
    qid = first.ask(info.id, choice())
    first.answer(qid, "phone-1", "dog")
    first.close()
    again = ClassStore(path)
    assert again.active_class() == info and again.current_question(info.id).id == qid
    assert again.counts(qid)["dog"] == 1
    again.close()


def test_export_csv(store, clock, tmp_path):
    info = store.start_class()
    qid = store.ask(info.id, choice())
    unanswered = store.ask(info.id, Question("choice", "=cmd|' /C calc'!A0", ("yes", "no")))
    store.answer(qid, "phone-1", "cat", nickname="@ana")
    clock.now += 2
    store.answer(qid, "phone-2", "dog")
    store.reveal(qid, "cat")
    rows = list(csv.DictReader(io.StringIO(store.export_csv(info.id))))
    assert [(r["question_id"], r["device"], r["answer"], r["is_correct"]) for r in rows] == [
        (str(qid), "phone-1", "cat", "true"), (str(qid), "phone-2", "dog", "false"), (str(unanswered), "", "", "")]
    assert rows[0]["nickname"] == "'@ana"  # a spreadsheet shows it as text, not a formula
    assert rows[2]["prompt"].startswith("'=") and all(r["class_code"] == info.code for r in rows)
    assert rows[0]["answered_at"].endswith("+00:00")
    out = store.save_csv(info.id, tmp_path / "class.csv")
    assert out.read_bytes() == store.export_csv(info.id).encode()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_forget_removes_everything_from_the_file(store, clock):
    secret = "zebra-unique-answer-7731"
    info = store.start_class()
    kept = store.start_class()
    store.end_class(kept.id)
    forgotten = store.start_class()
    qid = store.ask(forgotten.id, Question("choice", "Say it", free_text=True))
    store.join(forgotten.code, "phone-1", nickname="Kim")
    store.answer(qid, "phone-1", secret)
    store.forget(forgotten.id)
    assert store.get_class(forgotten.id) is None and store.question(qid) is None and store.answers(qid) == []
    assert [c.id for c in store.classes()] == [info.id, kept.id]
    with sqlite3.connect(store.path) as raw:
        for table in ("questions", "answers", "students"):
            assert raw.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    on_disk = b"".join(p.read_bytes() for p in store.path.parent.glob("class.sqlite3*"))
    assert secret.encode() not in on_disk and b"Kim" not in on_disk
