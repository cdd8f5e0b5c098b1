"""A live class's questions and answers, kept in one SQLite file (issue 36): they survive a server restart and a
teacher's page reload, and `forget` removes a class for good.

    store = ClassStore()                       # settings.cache_dir() / "classroom.sqlite3"
    info = store.start_class()                 # ClassInfo(id, code, started, ended)
    qid = store.ask(info.id, Question("choice", "Which word?", ("cat", "dog")))
    store.answer(qid, device_id, "cat")        # one per device; a later one replaces it until the reveal
    store.counts(qid)                          # {"cat": 1, "dog": 0}
    store.reveal(qid, "cat")

Sessions of the app are threads of one server process, and a command-line tool or a test may open the same file
from another process: one connection per store guarded by a lock serves the threads (Streamlit runs each rerun in
a fresh thread, so per-thread connections would pile up), and WAL mode with a busy timeout lets processes share the
file. Every write is one transaction committed with `synchronous=FULL`, so an answer acknowledged to a student is
on disk even if the server is killed the next moment. `secure_delete` overwrites what `forget` deletes.

Limits (a class is a room of phones, some of them playful): one answer per device per question, `MAX_ANSWER_CHARS`
characters, `MAX_NICKNAME_CHARS` for a nickname, one answer per device every `RATE_LIMIT_SECONDS`, and no answer
after the reveal or once the class has ended (its code then expires: `class_by_code` no longer finds it).
What a device is, the app decides (app_pages/shell/classroom.py): by default its network address, as
`address_device` names it, so new browser sessions from one phone are still one vote. `JOIN_ATTEMPTS` wrong codes a
minute per address, then that address waits (31^5 codes are not guessed at 5 a minute). Class and question ids are
never used twice (a high-water mark in `meta`), so a phone still joined to a forgotten class is not in the next one,
and an answer sent with its class code (`answer(..., class_code=)`) is refused unless the question's class has it.
Answers and nicknames are stored without control, bidi and other invisible characters (core.safe_text.strip_invisible).
A file that cannot be written (disk full) raises StorageError, a ClassroomError whose message names no path.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import hmac
import io
import json
import logging
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from core import settings
from core.files import write_text_atomic
from core.safe_text import spreadsheet_cell, strip_invisible

KINDS = ("masked", "attention", "direction", "layer", "choice")
MAX_ANSWER_CHARS = 80
MAX_NICKNAME_CHARS = 24
MAX_DEVICE_ID_CHARS = 64
MAX_PROMPT_CHARS = 500
MAX_CHOICES = 12
RATE_LIMIT_SECONDS = 1.0
JOIN_ATTEMPTS = 5  # wrong class codes per address per JOIN_WINDOW_SECONDS
JOIN_WINDOW_SECONDS = 60.0
JOIN_TRACKED_ADDRESSES = 4096  # the wrong-code bookkeeping, bounded: the oldest address is forgotten first
# No 0/O, 1/I/L: a code read off a projector and typed on a phone.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 5
FILE_NAME = "classroom.sqlite3"
CSV_COLUMNS = ("class_code", "question_id", "kind", "prompt", "page", "asked_at", "revealed_at", "correct",
               "device", "nickname", "answer", "answered_at", "is_correct")

SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (
    id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    started REAL NOT NULL,
    ended REAL
);
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY,
    class_id INTEGER NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    prompt TEXT NOT NULL,
    choices TEXT NOT NULL,
    free_text INTEGER NOT NULL,
    page TEXT NOT NULL,
    params TEXT NOT NULL,
    asked_at REAL NOT NULL,
    revealed_at REAL,
    correct TEXT
);
CREATE TABLE IF NOT EXISTS answers (
    question_id INTEGER NOT NULL REFERENCES questions(id) ON DELETE CASCADE,
    device_id TEXT NOT NULL,
    text TEXT NOT NULL,
    nickname TEXT,
    answered_at REAL NOT NULL,
    PRIMARY KEY (question_id, device_id)
);
CREATE TABLE IF NOT EXISTS students (
    class_id INTEGER NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
    device_id TEXT NOT NULL,
    nickname TEXT,
    joined_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    PRIMARY KEY (class_id, device_id)
);
-- last_classes_id, last_questions_id: the highest id ever given (never reused, also after a forget);
-- device_key: the secret address_device keys its names with.
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS questions_by_class ON questions(class_id, id);
CREATE INDEX IF NOT EXISTS answers_by_device ON answers(device_id, answered_at);
"""


class ClassroomError(ValueError):
    """A request the class cannot take; the message is a plain sentence to show as it is."""


class AnswerRejected(ClassroomError):
    """An answer not stored: after the reveal, for an ended class, too long, too fast, not one of the choices."""


class StorageError(ClassroomError):
    """The class's file could not be read or written (a full disk, a broken file). The message is for anyone, a
    student's phone included, so it names no path; `path` and `cause` are for the teacher and the server's log."""

    def __init__(self, message: str, path: Path, cause: BaseException):
        super().__init__(message)
        self.path = path
        self.cause = cause

    @property
    def for_teacher(self) -> str:
        return f"{self} ({self.path}: {self.cause})"


DISK_FULL = "The teacher's computer could not save this: its disk is full. Tell the teacher."
STORAGE_FAILED = "The teacher's computer could not read or save the class just now. Tell the teacher."
_log = logging.getLogger("bertlens.classroom")


def _storage_error(err: BaseException, path: Path) -> StorageError:
    full = getattr(err, "errno", None) == errno.ENOSPC or getattr(err, "sqlite_errorcode", None) == 13 or (
        "disk is full" in str(err) or "No space left" in str(err))  # 13: SQLITE_FULL
    failure = StorageError(DISK_FULL if full else STORAGE_FAILED, path, err)
    _log.error("class store: %s", failure.for_teacher)
    return failure


def clean_text(text) -> str:
    """An answer or nickname as stored: no invisible characters (core.safe_text.strip_invisible), runs of whitespace
    as one space, no space at either end."""
    return " ".join(strip_invisible(text).split())


@dataclass(frozen=True)
class Question:
    """What the class is asked. `kind`: one of KINDS (the view it came from, or "choice" for the teacher's own);
    `choices`: the buttons a student gets (empty for free text only); `free_text`: a text box instead of, or as
    well as, buttons; `correct`: the right answer when known before the reveal (else given to `reveal`); `page`
    and `params`: the view on screen when it was asked (its URL params), so the reveal can redraw it."""

    kind: str
    prompt: str
    choices: tuple[str, ...] = ()
    free_text: bool = False
    correct: str | None = None
    page: str = ""
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ClassroomError(f"A question's kind is one of {', '.join(KINDS)}, not {self.kind!r}.")
        if not self.prompt.strip():
            raise ClassroomError("A question needs a prompt.")
        if len(self.prompt) > MAX_PROMPT_CHARS:
            raise ClassroomError(f"A question's prompt is at most {MAX_PROMPT_CHARS} characters.")
        # Stored as answers are (clean_text), so a student's pick of a choice matches it.
        object.__setattr__(self, "choices", tuple(clean_text(c) for c in self.choices))
        if self.correct is not None:
            object.__setattr__(self, "correct", clean_text(self.correct))
        if len(set(self.choices)) != len(self.choices):
            raise ClassroomError("A question's choices must differ from each other.")
        if len(self.choices) > MAX_CHOICES:
            raise ClassroomError(f"A question has at most {MAX_CHOICES} choices.")
        if not self.free_text and len(self.choices) < 2:
            raise ClassroomError("A multiple-choice question needs at least two choices (or free_text=True).")
        if any(not c.strip() or len(c) > MAX_ANSWER_CHARS for c in self.choices):
            raise ClassroomError(f"Each choice is 1 to {MAX_ANSWER_CHARS} characters.")

    def to_json(self) -> dict:
        return {"kind": self.kind, "prompt": self.prompt, "choices": list(self.choices), "free_text": self.free_text,
                "correct": self.correct, "page": self.page, "params": dict(self.params)}


@dataclass(frozen=True)
class ClassInfo:
    """A class: `code` is what students type to join; `started` / `ended` are Unix times (ended None: running)."""

    id: int
    code: str
    started: float
    ended: float | None

    @property
    def running(self) -> bool:
        return self.ended is None


@dataclass(frozen=True)
class StoredQuestion:
    """A question as asked: `correct` is the question's own until the reveal sets it."""

    id: int
    class_id: int
    question: Question
    asked_at: float
    revealed: bool
    correct: str | None


@dataclass(frozen=True)
class StoredAnswer:
    device_id: str
    text: str
    nickname: str | None
    answered_at: float


def default_path() -> Path:
    return settings.cache_dir() / FILE_NAME


def normalise_code(code: str) -> str:
    """What a student typed -> the stored form: case and spaces or dashes do not matter."""
    return "".join(ch for ch in str(code).upper() if ch.isalnum())


def _iso(timestamp: float | None) -> str:
    return "" if timestamp is None else datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


class ClassStore:
    """The classroom database at `path` (default: settings.cache_dir() / "classroom.sqlite3", created on first
    use). Safe to share between threads; several processes may open the same file. `clock` (Unix seconds) is
    there for tests of the rate limit."""

    def __init__(self, path: Path | None = None, *, rate_limit_seconds: float = RATE_LIMIT_SECONDS, clock=time.time):
        self.path = Path(path) if path is not None else default_path()
        self.rate_limit_seconds = rate_limit_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._wrong_codes: OrderedDict[str, list[float]] = OrderedDict()  # address -> times of its wrong codes
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; each write below opens its own BEGIN IMMEDIATE.
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            with self._lock:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.execute("PRAGMA foreign_keys=ON")
                self._db.execute("PRAGMA secure_delete=ON")
                self._db.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as err:
            raise _storage_error(err, self.path) from err
        self._device_key = self._write(lambda db: _meta(db, "device_key", secrets.token_hex(32)))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- one place for reads and transactions ---

    def _rows(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except (sqlite3.OperationalError, sqlite3.DatabaseError, OSError) as err:
                raise _storage_error(err, self.path) from err

    def _write(self, steps):
        """Run `steps(db)` in one immediate transaction (it takes the file's write lock first, so a check and the
        write after it see the same data, also against another process); commit, or roll back on any error. The
        file failing (full disk: SQLite's "database or disk is full", or ENOSPC) raises StorageError."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = steps(self._db)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:  # also when COMMIT itself failed: the next write starts clean
                        self._db.execute("ROLLBACK")
                    raise
            except ClassroomError:
                raise
            except (sqlite3.OperationalError, sqlite3.DatabaseError, OSError) as err:
                raise _storage_error(err, self.path) from err
            return result

    # --- classes ---

    def start_class(self) -> ClassInfo:
        """A new class with a fresh code. One class runs at a time: any running class is ended first."""
        now = self._clock()

        def steps(db):
            db.execute("UPDATE classes SET ended = ? WHERE ended IS NULL", (now,))
            class_id = _new_id(db, "classes")
            for _ in range(100):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                try:
                    db.execute("INSERT INTO classes (id, code, started) VALUES (?, ?, ?)", (class_id, code, now))
                except sqlite3.IntegrityError:  # the code was used before (kept until forgotten): draw again
                    continue
                return ClassInfo(class_id, code, now, None)
            raise ClassroomError("No free class code left; forget some old classes.")

        return self._write(steps)

    def end_class(self, class_id: int) -> None:
        """End the class: its code expires and no more answers are taken. Its data stays until `forget`."""
        self._write(lambda db: db.execute("UPDATE classes SET ended = ? WHERE id = ? AND ended IS NULL",
                                          (self._clock(), class_id)))

    def _class(self, where: str, args: tuple) -> ClassInfo | None:
        rows = self._rows(f"SELECT id, code, started, ended FROM classes WHERE {where} ORDER BY id DESC LIMIT 1", args)
        return ClassInfo(*rows[0]) if rows else None

    def get_class(self, class_id: int) -> ClassInfo | None:
        return self._class("id = ?", (class_id,))

    def active_class(self) -> ClassInfo | None:
        """The running class, or None."""
        return self._class("ended IS NULL", ())

    def class_by_code(self, code: str) -> ClassInfo | None:
        """The running class with this code (case, spaces and dashes ignored); None for an ended class: its code
        has expired."""
        return self._class("code = ? AND ended IS NULL", (normalise_code(code),))

    def classes(self) -> list[ClassInfo]:
        return [ClassInfo(*row) for row in self._rows("SELECT id, code, started, ended FROM classes ORDER BY id")]

    def forget(self, class_id: int) -> None:
        """Delete the class, its questions, its answers and its students; the deleted pages are overwritten and
        the write-ahead log emptied, so nothing of it stays in the file."""
        self._write(lambda db: db.execute("DELETE FROM classes WHERE id = ?", (class_id,)))
        with self._lock:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except (sqlite3.Error, OSError) as err:
                raise _storage_error(err, self.path) from err

    # --- students ---

    def join(self, code: str, device_id: str, nickname: str | None = None, *, address: str | None = None) -> ClassInfo:
        """A device joins the running class with this code (again: its last-seen time is updated). `address`: the
        network address the attempt came from; after JOIN_ATTEMPTS wrong codes in JOIN_WINDOW_SECONDS from one
        address, every attempt from it is refused until the oldest of them is a window old. Only wrong codes count:
        a room whose phones share an address still joins."""
        device_id, nickname = _check_device(device_id), _check_nickname(nickname)
        now = self._clock()
        if address is not None:
            self._check_join_attempts(address, now)
        info = self.class_by_code(code)
        if info is None:
            if address is not None:
                self._count_wrong_code(address, now)
            raise ClassroomError("No class is running with that code. Check the code on the teacher's screen.")
        self._write(lambda db: db.execute(
            "INSERT INTO students (class_id, device_id, nickname, joined_at, last_seen) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (class_id, device_id) DO UPDATE SET last_seen = excluded.last_seen, "
            "nickname = coalesce(excluded.nickname, students.nickname)", (info.id, device_id, nickname, now, now)))
        return info

    def _check_join_attempts(self, address: str, now: float) -> None:
        with self._lock:
            recent = [t for t in self._wrong_codes.get(address, ()) if now - t < JOIN_WINDOW_SECONDS]
            if recent:
                self._wrong_codes[address] = recent
            else:
                self._wrong_codes.pop(address, None)
        if len(recent) >= JOIN_ATTEMPTS:
            wait = max(1, round(JOIN_WINDOW_SECONDS - (now - recent[0])))
            raise ClassroomError(f"Too many wrong codes from this device: wait {wait} s, then try again.")

    def _count_wrong_code(self, address: str, now: float) -> None:
        with self._lock:
            self._wrong_codes.setdefault(address, []).append(now)
            self._wrong_codes.move_to_end(address)
            while len(self._wrong_codes) > JOIN_TRACKED_ADDRESSES:
                self._wrong_codes.popitem(last=False)

    def address_device(self, address: str) -> str:
        """The device id of a phone known by its network address: a keyed hash (HMAC-SHA256 with this file's own
        secret), so one address is one device in every session, yet the export shows no address."""
        return "a-" + hmac.new(bytes.fromhex(self._device_key), address.encode(), hashlib.sha256).hexdigest()[:24]

    def student_count(self, class_id: int) -> int:
        """Devices that joined the class or answered one of its questions."""
        rows = self._rows("SELECT count(*) FROM (SELECT device_id FROM students WHERE class_id = ? UNION "
                          "SELECT a.device_id FROM answers a JOIN questions q ON q.id = a.question_id "
                          "WHERE q.class_id = ?)", (class_id, class_id))
        return rows[0][0]

    # --- questions ---

    def ask(self, class_id: int, question: Question) -> int:
        """Put `question` to the running class; it becomes the class's current question. Returns its id."""
        def steps(db):
            row = db.execute("SELECT ended FROM classes WHERE id = ?", (class_id,)).fetchone()
            if row is None:
                raise ClassroomError("That class does not exist (it may have been forgotten).")
            if row[0] is not None:
                raise ClassroomError("That class has ended; start a new one to ask a question.")
            question_id = _new_id(db, "questions")
            db.execute(
                "INSERT INTO questions (id, class_id, kind, prompt, choices, free_text, page, params, asked_at, "
                "correct) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (question_id, class_id, question.kind, question.prompt, json.dumps(list(question.choices)),
                 int(question.free_text),
                 question.page, json.dumps(question.params, sort_keys=True, default=str), self._clock(),
                 question.correct))
            return question_id

        return self._write(steps)

    def _question(self, where: str, args: tuple) -> StoredQuestion | None:
        rows = self._rows("SELECT * FROM questions WHERE " + where + " ORDER BY id DESC LIMIT 1", args)
        if not rows:
            return None
        row = rows[0]
        question = Question(row["kind"], row["prompt"], tuple(json.loads(row["choices"])), bool(row["free_text"]),
                            row["correct"], row["page"], json.loads(row["params"]))
        return StoredQuestion(row["id"], row["class_id"], question, row["asked_at"], row["revealed_at"] is not None,
                              row["correct"])

    def question(self, question_id: int) -> StoredQuestion | None:
        return self._question("id = ?", (question_id,))

    def current_question(self, class_id: int) -> StoredQuestion | None:
        """The class's latest question (revealed or not), or None before the first."""
        return self._question("class_id = ?", (class_id,))

    def reveal(self, question_id: int, correct: str | None) -> None:
        """Close the question to answers and record the right answer (None: a question without one)."""
        def steps(db):
            cursor = db.execute("UPDATE questions SET revealed_at = coalesce(revealed_at, ?), correct = ? WHERE id = ?",
                                (self._clock(), None if correct is None else clean_text(correct), question_id))
            if cursor.rowcount == 0:
                raise ClassroomError("That question does not exist (its class may have been forgotten).")

        self._write(steps)

    # --- answers ---

    def answer(self, question_id: int, device_id: str, text: str, nickname: str | None = None, *,
               class_code: str | None = None) -> None:
        """Store this device's answer, replacing its earlier one; AnswerRejected says why when it is not taken.
        `class_code`: the code the device joined with; the answer is refused unless the question's class has it."""
        device_id, nickname = _check_device(device_id), _check_nickname(nickname)
        text = clean_text(text)
        if not text:
            raise AnswerRejected("The answer is empty.")
        if len(text) > MAX_ANSWER_CHARS:
            raise AnswerRejected(f"An answer is at most {MAX_ANSWER_CHARS} characters (this one has {len(text)}).")
        now = self._clock()

        def steps(db):
            row = db.execute("SELECT q.choices, q.free_text, q.revealed_at, c.ended, c.id, c.code FROM questions q "
                             "JOIN classes c ON c.id = q.class_id WHERE q.id = ?", (question_id,)).fetchone()
            if row is None:
                raise AnswerRejected("That question is gone (the class may have been forgotten).")
            choices, free_text, revealed_at, ended, class_id, code = row
            if class_code is not None and normalise_code(class_code) != code:
                raise AnswerRejected("This is not the class you joined (it has ended): join again with the code on "
                                     "the teacher's screen.")
            if ended is not None:
                raise AnswerRejected("The class has ended; answers are closed.")
            if revealed_at is not None:
                raise AnswerRejected("The answer has been revealed; this question is closed.")
            if not free_text and text not in json.loads(choices):
                raise AnswerRejected("That is not one of the question's choices.")
            last = db.execute("SELECT max(answered_at) FROM answers WHERE device_id = ?", (device_id,)).fetchone()[0]
            if last is not None and now - last < self.rate_limit_seconds:
                raise AnswerRejected("Too fast: wait a second before answering again.")
            db.execute("INSERT INTO answers (question_id, device_id, text, nickname, answered_at) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT (question_id, device_id) DO UPDATE SET text = excluded.text, "
                       "nickname = excluded.nickname, answered_at = excluded.answered_at",
                       (question_id, device_id, text, nickname, now))
            db.execute("INSERT INTO students (class_id, device_id, nickname, joined_at, last_seen) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT (class_id, device_id) DO UPDATE SET last_seen = excluded.last_seen",
                       (class_id, device_id, nickname, now, now))

        self._write(steps)

    def answer_of(self, question_id: int, device_id: str) -> StoredAnswer | None:
        rows = self._rows("SELECT device_id, text, nickname, answered_at FROM answers "
                          "WHERE question_id = ? AND device_id = ?", (question_id, device_id))
        return StoredAnswer(*rows[0]) if rows else None

    def answers(self, question_id: int) -> list[StoredAnswer]:
        """Every device's answer, oldest first."""
        return [StoredAnswer(*row) for row in self._rows(
            "SELECT device_id, text, nickname, answered_at FROM answers WHERE question_id = ? "
            "ORDER BY answered_at, device_id", (question_id,))]

    def counts(self, question_id: int) -> dict[str, int]:
        """Answers per text: every choice first, in the question's order (0 when nobody picked it), then free-text
        answers, most frequent first."""
        stored = self.question(question_id)
        if stored is None:
            return {}
        counts = {choice: 0 for choice in stored.question.choices}
        rows = self._rows("SELECT text, count(*) AS n FROM answers WHERE question_id = ? GROUP BY text "
                          "ORDER BY n DESC, text", (question_id,))
        for text, n in rows:
            counts[text] = n
        return counts

    # --- export ---

    def export_csv(self, class_id: int) -> str:
        """The class as CSV (CSV_COLUMNS): one row per answer, and one per question nobody answered. Times are UTC
        ISO 8601; `device` is the browser session's random id, not a name; a cell a spreadsheet would read as a formula
        is written as text (core.safe_text.spreadsheet_cell)."""
        info = self.get_class(class_id)
        if info is None:
            raise ClassroomError("That class does not exist (it may have been forgotten).")
        rows = self._rows(
            "SELECT q.id, q.kind, q.prompt, q.page, q.asked_at, q.revealed_at, q.correct, a.device_id, a.nickname, "
            "a.text, a.answered_at FROM questions q LEFT JOIN answers a ON a.question_id = q.id "
            "WHERE q.class_id = ? ORDER BY q.id, a.answered_at, a.device_id", (class_id,))
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for (qid, kind, prompt, page, asked, revealed, correct, device, nickname, text, answered) in rows:
            is_correct = "" if text is None or correct is None else str(text == correct).lower()
            writer.writerow([spreadsheet_cell(cell) for cell in (
                info.code, qid, kind, prompt, page, _iso(asked), _iso(revealed), correct, device, nickname, text,
                _iso(answered), is_correct)])
        return out.getvalue()

    def save_csv(self, class_id: int, path: Path) -> Path:
        """export_csv written to `path` whole or not at all."""
        return write_text_atomic(Path(path), self.export_csv(class_id))


def _check_device(device_id: str) -> str:
    device_id = str(device_id or "").strip()
    if not device_id or len(device_id) > MAX_DEVICE_ID_CHARS:
        raise AnswerRejected("This browser has no valid device id; reload the page.")
    return device_id


def _meta(db, key: str, default: str) -> str:
    """The `meta` value of `key`, written as `default` first when missing (inside the caller's transaction)."""
    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, default))
    return db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]


def _new_id(db, table: str) -> int:
    """The next id for `table` ("classes" or "questions"), above every id it ever had, not only those still in the
    file: SQLite's own choice (max(id) + 1) gives a forgotten class's id to the next class, and a phone whose session
    still holds it (or a teacher's page that closed that question) would take the new one for it."""
    key = f"last_{table}_id"
    last = max(int(_meta(db, key, "0")), db.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0])
    db.execute("UPDATE meta SET value = ? WHERE key = ?", (str(last + 1), key))
    return last + 1


def _check_nickname(nickname: str | None) -> str | None:
    if nickname is None:
        return None
    nickname = clean_text(nickname)
    if len(nickname) > MAX_NICKNAME_CHARS:
        raise AnswerRejected(f"A nickname is at most {MAX_NICKNAME_CHARS} characters.")
    return nickname or None


_shared: dict[Path, ClassStore] = {}
_shared_lock = threading.Lock()


def shared_store(path: Path | None = None) -> ClassStore:
    """The one open ClassStore of this process for `path` (default: default_path(), read each time, so a test
    that moves BERTLENS_CACHE gets its own): the app's sessions are threads and share it."""
    path = (Path(path) if path is not None else default_path()).resolve()
    with _shared_lock:
        if path not in _shared:
            _shared[path] = ClassStore(path)
        return _shared[path]
