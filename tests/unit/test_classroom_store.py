"""The live class's store (core/classroom/store.py): classes, questions, answers and their limits, checked against
plain Python bookkeeping and raw SQL on the same file."""

from __future__ import annotations

import csv
import io
import sqlite3
import threading
from collections import Counter

import pytest

from core.classroom.store import (DISK_FULL, JOIN_ATTEMPTS, JOIN_WINDOW_SECONDS, MAX_ANSWER_CHARS, MAX_NICKNAME_CHARS,
                                  AnswerRejected, ClassroomError, ClassStore, Question, StorageError, default_path)


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


# --- issue 44: one vote per device, no guessing of codes, no reuse of a forgotten class, clean text, full disk ---


def test_class_and_question_ids_are_never_reused(tmp_path, clock):
    """Issue 44: after "Forget this class" the next class got id 1 again, and a phone still joined to the forgotten
    class (its session keeps the id) answered in the new one without its code. Question ids were reused as well (a
    teacher's page that had closed question 1 would hide the new question 1)."""
    path = tmp_path / "class.sqlite3"
    store = ClassStore(path, clock=clock)
    first = store.start_class()
    old_question = store.ask(first.id, choice())
    store.join(first.code, "phone-1")
    store.forget(first.id)
    second = store.start_class()
    assert second.id > first.id and store.get_class(first.id) is None
    store.close()
    reopened = ClassStore(path, clock=clock)  # the high-water mark is in the file, not in this process
    reopened.forget(second.id)
    third = reopened.start_class()
    assert third.id > second.id
    qid = reopened.ask(third.id, choice())
    assert qid > old_question
    # The session binding: an answer sent with the code it joined with is refused in another class.
    with pytest.raises(AnswerRejected, match="not the class you joined"):
        reopened.answer(qid, "phone-1", "cat", class_code=first.code)
    reopened.answer(qid, "phone-1", "cat", class_code=third.code.lower())  # as typed: case does not matter
    assert reopened.counts(qid)["cat"] == 1
    reopened.close()


def test_wrong_codes_are_throttled_per_address(store, clock):
    """Issue 44: join codes could be guessed at ~25 a second. JOIN_ATTEMPTS wrong codes a minute per address, then
    that address waits, even with the right code; other addresses and right codes are not slowed down."""
    info = store.start_class()
    for i in range(10):  # right codes do not count: a room behind one address joins
        store.join(info.code, f"phone-{i}", address="192.0.2.7")
    wrong = "AAAAA" if info.code != "AAAAA" else "BBBBB"
    for _ in range(JOIN_ATTEMPTS):
        with pytest.raises(ClassroomError, match="No class is running"):
            store.join(wrong, "guesser", address="192.0.2.66")
        clock.now += 1
    with pytest.raises(ClassroomError, match=r"Too many wrong codes from this device: wait 5\d s"):
        store.join(info.code, "guesser", address="192.0.2.66")  # not even the right code tells
    assert store.join(info.code, "phone-x", address="192.0.2.67") == info  # another address
    clock.now += JOIN_WINDOW_SECONDS
    assert store.join(info.code, "guesser", address="192.0.2.66") == info  # a minute later


def test_a_device_named_by_its_address(tmp_path):
    """One address, one device id in every session and after a restart; the id shows no address."""
    path = tmp_path / "class.sqlite3"
    store = ClassStore(path)
    phone = store.address_device("192.168.1.20")
    assert phone == store.address_device("192.168.1.20") != store.address_device("192.168.1.21")
    assert "192" not in phone and len(phone) <= 64
    store.close()
    again = ClassStore(path)
    other = ClassStore(tmp_path / "other.sqlite3")
    assert again.address_device("192.168.1.20") == phone
    assert other.address_device("192.168.1.20") != phone  # each file its own key
    again.close()
    other.close()


PAYLOADS = {"\x00ri\x1bver\u202e": "river", "\ufeffriver\u200b": "river", "riv\u2066er\u2069": "river",
            "\u202e\ufeff=cmd|' /C calc'!A0": "=cmd|' /C calc'!A0", "a\tb\nc\r\nd": "a b c d"}


@pytest.mark.parametrize("sent,kept", list(PAYLOADS.items()))
def test_answers_and_nicknames_lose_invisible_characters(store, sent, kept):
    """Issue 44: NUL, ESC, U+202E and a BOM before "=" were stored and exported raw. They are stripped from answers
    and nicknames (joiners kept: emoji and some scripts need them), and a formula after them is still written as
    text in the export."""
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Say it", free_text=True))
    store.answer(qid, "phone-1", sent, nickname=sent[:MAX_NICKNAME_CHARS])
    stored = store.answer_of(qid, "phone-1")
    assert stored.text == kept and stored.nickname == kept[:MAX_NICKNAME_CHARS].strip()
    with sqlite3.connect(store.path) as raw:  # what is in the file, read without the store
        assert raw.execute("SELECT text FROM answers").fetchone() == (kept,)
    row = next(csv.DictReader(io.StringIO(store.export_csv(info.id))))
    assert row["answer"] == ("'" + kept if kept.startswith("=") else kept)


def test_a_choice_with_invisible_characters_is_still_picked(store):
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"  # joined by U+200D: kept
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Which?", ("ca\u200bt", "dog", family), correct="ca\u200bt"))
    assert store.question(qid).question.choices == ("cat", "dog", family)
    store.answer(qid, "phone-1", store.question(qid).question.choices[0])
    store.answer(qid, "phone-2", family)
    assert store.counts(qid) == {"cat": 1, "dog": 0, family: 1} and store.question(qid).correct == "cat"


def test_spreadsheet_cell_after_invisible_characters():
    from core.safe_text import spreadsheet_cell

    for cell in ("\ufeff=cmd", "\u202e=1+1", "\x00@SUM(A1)", " =1", "\u200b+1", "\t=1", "-2"):
        assert spreadsheet_cell(cell) == "'" + cell, repr(cell)
    for cell in ("cat", "a=b", "", "\ufeffcat"):
        assert spreadsheet_cell(cell) == cell, repr(cell)


def fill_the_disk(store) -> None:
    """SQLite's own "database or disk is full" (SQLITE_FULL), as on a full disk: the file may not grow a page."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_one_sentence_without_a_path(store, clock):
    """Issue 44: on a full disk the student's phone showed SQLite's traceback with the server's paths. The store
    raises StorageError: a ClassroomError (the app shows its message as it shows a rejected answer) that says the
    disk is full and names no path; the path is for the teacher. The store works again once there is room."""
    info = store.start_class()
    qid = store.ask(info.id, Question("choice", "Say it", free_text=True))
    fill_the_disk(store)
    with pytest.raises(StorageError) as caught:
        for i in range(2000):
            store.answer(qid, f"phone-{i}", "x" * MAX_ANSWER_CHARS, nickname="n" * MAX_NICKNAME_CHARS)
            clock.now += 2
    failure = caught.value
    assert isinstance(failure, ClassroomError) and str(failure) == DISK_FULL and "disk is full" in str(failure)
    assert str(store.path) not in str(failure) and "/" not in str(failure)
    assert str(store.path) in failure.for_teacher
    stored = len(store.answers(qid))
    assert 0 < stored < 2000  # the failed write left the others, and the store answers reads
    store._db.execute("PRAGMA max_page_count = 1073741823")
    store.answer(qid, "late-phone", "ok")
    assert len(store.answers(qid)) == stored + 1


def test_enospc_from_the_file_system_is_a_full_disk(tmp_path, monkeypatch):
    """The same when the operating system says ENOSPC: opening the store on a full disk (it creates its folder)."""
    import errno
    from pathlib import Path

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "full"))

    monkeypatch.setattr(Path, "mkdir", no_space)
    with pytest.raises(StorageError) as caught:
        ClassStore(tmp_path / "full" / "class.sqlite3")
    assert str(caught.value) == DISK_FULL and str(tmp_path) not in str(caught.value)
