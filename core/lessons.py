"""Lessons: an ordered list of views (page + URL params) with a title and speaker notes per step.

A lesson file is small JSON (YAML also read and written):

    {"version": 1, "title": "BERT in ten views",
     "steps": [{"title": "One head", "page": "attention", "params": {"model": "…", "a": "…", "layer": "2"},
                "notes": "What to say while this view is on screen."}]}

`page` is the page's url_path ("" for Home) and `params` are exactly the URL params of that view (core/views/),
all strings, so a step opens as the link `/<page>?<params>`. Built-in lessons live in core/data/lessons/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

import yaml

from core import views
from core.files import write_text_atomic
from core.model.loading import ModelUnavailable, availability, resolve
from core.validation import TextFileError, load_yaml_text, nesting_problem, type_problem

VERSION = 1
BUILTIN_DIR = Path(__file__).resolve().parent / "data" / "lessons"


class LessonError(ValueError):
    """A lesson file that cannot be used; the message says where (e.g. `steps[2].page`) and why."""


@dataclass(frozen=True)
class Step:
    """One view of a lesson: `page` url_path, `params` {URL param: str}, `notes` for the speaker only."""

    title: str
    page: str
    params: dict = field(default_factory=dict)
    notes: str = ""

    def link(self) -> str:
        """The app-relative link that opens this view, e.g. `attention?model=…&layer=2`; percent-encoded throughout,
        so it can sit in a Markdown link or an href as it is."""
        page, query = quote(self.page, safe="/"), urlencode(self.params)
        return f"{page}?{query}" if query else page

    def to_json(self) -> dict:
        return {"title": self.title, "page": self.page, "params": dict(self.params), "notes": self.notes}


@dataclass(frozen=True)
class Lesson:
    """A titled, ordered tuple of Steps."""

    title: str
    steps: tuple[Step, ...] = ()

    def to_json(self) -> dict:
        return {"version": VERSION, "title": self.title, "steps": [s.to_json() for s in self.steps]}


def _fail(where: str, why: str) -> None:
    raise LessonError(f"{where}: {why}")


def _typed(value, expected, where: str):
    problem = type_problem(value, expected)
    if problem:
        _fail(where, problem)
    return value


def _text(value, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    return _typed(value, str, where)


def from_json(data) -> Lesson:
    """A Lesson from parsed JSON/YAML; LessonError naming the first thing wrong."""
    if not isinstance(data, dict):
        _fail("lesson", "must be an object with version, title and steps")
    unknown = set(data) - {"version", "title", "steps"}
    if unknown:
        _fail("lesson", f"unknown field(s) {', '.join(sorted(unknown))}")
    if _typed(data.get("version"), int, "version") != VERSION:  # typed first: `true` equals 1 in Python
        _fail("version", f"must be {VERSION}, got {data.get('version')!r}")
    title = _text(data.get("title"), "title")
    if not title.strip():
        _fail("title", "is empty")
    steps = data.get("steps")
    if not isinstance(steps, list):
        _fail("steps", "must be a list")
    parsed = []
    for i, raw in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(raw, dict):
            _fail(where, "must be an object with title, page, params and notes")
        unknown = set(raw) - {"title", "page", "params", "notes"}
        if unknown:
            _fail(where, f"unknown field(s) {', '.join(sorted(unknown))}")
        page = _text(raw.get("page"), f"{where}.page").strip("/")
        if page not in views.step_pages():
            _fail(f"{where}.page", f"unknown page {page!r} (pages: {', '.join(repr(p) for p in views.step_pages())})")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            _fail(f"{where}.params", "must be an object of URL parameters")
        for name, value in params.items():
            _typed(value, str, f"{where}.params.{name}")  # URL parameters are text; YAML keys may be numbers
            if not isinstance(name, str):
                _fail(f"{where}.params.{name}", "names and values must be text (as in a URL)")
        parsed.append(Step(_text(raw.get("title"), f"{where}.title"), page, dict(params),
                           _text(raw.get("notes"), f"{where}.notes", required=False)))
    return Lesson(title, tuple(parsed))


def loads(text: str, where: str = "this file") -> Lesson:
    """Parse a lesson file's text: JSON, or YAML when it is not JSON. `where` (the file's name) starts every error.
    Depth and number size are checked before either parser runs (core.validation.nesting_problem)."""
    problem = nesting_problem(text)
    if problem:
        raise LessonError(f"{where}: {problem}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as json_err:
        try:
            data = load_yaml_text(text, where)
        except TextFileError as yaml_err:
            if yaml_err.reason.startswith("nested"):
                raise LessonError(str(yaml_err)) from None
            yaml_reason = yaml_err.reason.removeprefix("not YAML (")[:-1]
            raise LessonError(f"{where}: neither JSON ({json_err}) nor YAML ({yaml_reason})") from None
    try:
        return from_json(data)
    except LessonError as err:
        raise LessonError(f"{where}: {err}") from None


def dumps(lesson: Lesson, fmt: str = "json") -> str:
    if fmt == "yaml":
        return yaml.safe_dump(lesson.to_json(), sort_keys=False, allow_unicode=True)
    if fmt != "json":
        raise ValueError(f"format must be json or yaml, not {fmt!r}")
    return json.dumps(lesson.to_json(), indent=2, ensure_ascii=False) + "\n"


def load(path: str | Path) -> Lesson:
    return loads(Path(path).read_text(encoding="utf-8"), Path(path).name)


def save(lesson: Lesson, path: str | Path) -> Path:
    path = Path(path)
    write_text_atomic(path, dumps(lesson, "yaml" if path.suffix in (".yaml", ".yml") else "json"))
    return path


def builtin() -> dict[str, Lesson]:
    """The lessons shipped with the app, by file stem (e.g. "bert-in-ten-views")."""
    return {p.stem: load(p) for p in sorted(BUILTIN_DIR.glob("*.json"))}


def notices(lesson: Lesson) -> list[str]:
    """Settings the app would ignore when opening each step (stale or mistyped params), one line each."""
    return [f"Step {i + 1} ({step.title}): {n}" for i, step in enumerate(lesson.steps)
            for n in views.parse(step.page, step.params).notices]


def models(lesson: Lesson) -> list[str]:
    """Every model a lesson's steps name (their `model` param), in order of first use."""
    return list(dict.fromkeys(s.params["model"] for s in lesson.steps if s.params.get("model")))


def missing_models(lesson: Lesson) -> list[str]:
    """Models of the lesson that are not on this computer (they need `python -m core download` before class)."""
    missing = []
    for ref in models(lesson):
        try:
            source, _ = resolve(ref)
        except ModelUnavailable:
            source = "hub"
        if source == "hub":
            missing.append(ref)
    return missing


def missing_model_notes(lesson: Lesson, hub_up=None) -> list[str]:
    """One line per model of the lesson that is not on this computer: why it cannot load now (the download command
    for a hub id, "No such folder" for a path), or, when the hub answers, that it downloads when first used."""
    notes = []
    for ref in missing_models(lesson):
        checked = availability(ref, hub_up)
        notes.append(checked.reason if not checked.loadable else
                     f"'{ref}' is not on this computer: it downloads when first used; to present offline, run "
                     f"'python -m core download {ref}' before class.")
    return notes


def add_step(lesson: Lesson, step: Step) -> Lesson:
    return Lesson(lesson.title, (*lesson.steps, step))


def move_step(lesson: Lesson, index: int, offset: int) -> Lesson:
    """The step at `index` moved by `offset` places (clamped to the ends)."""
    steps = list(lesson.steps)
    target = max(0, min(len(steps) - 1, index + offset))
    steps.insert(target, steps.pop(index))
    return Lesson(lesson.title, tuple(steps))


def remove_step(lesson: Lesson, index: int) -> Lesson:
    return Lesson(lesson.title, tuple(s for i, s in enumerate(lesson.steps) if i != index))


def replace_step(lesson: Lesson, index: int, step: Step) -> Lesson:
    return Lesson(lesson.title, tuple(step if i == index else s for i, s in enumerate(lesson.steps)))
