"""Presenter mode's state: which lesson and step, and putting a step's view into session state.

prepare() runs from the router BEFORE the sidebar's widgets exist, because a step sets the shared model and
sentences, which Streamlit forbids once their widgets are drawn in the run. The slide itself is app_pages/present.py.
"""

from __future__ import annotations

import streamlit as st

from app_pages.shell import url_state
from app_pages.shell.lesson_bar import current_lesson
from core import lessons

LESSON, STEP, APPLIED = "present.lesson", "present.step", "present.applied"


def lesson_named(name: str | None) -> lessons.Lesson | None:
    """"current" (the session's lesson being edited) or a built-in lesson's file stem; None if unknown."""
    if not name or name == "current":
        return current_lesson()
    return lessons.builtin().get(name)


def position() -> tuple[str, lessons.Lesson | None, int]:
    """(lesson name, lesson, 0-based step index clamped to the lesson)."""
    name = st.session_state.get(LESSON) or "current"
    lesson = lesson_named(name)
    n = len(lesson.steps) if lesson else 0
    index = max(0, min(n - 1, int(st.session_state.get(STEP) or 1) - 1))
    return name, lesson, index


def has_slides() -> bool:
    """Whether presenter mode shows a slide (a lesson with steps); without one its page keeps the sidebar."""
    _, lesson, _ = position()
    return bool(lesson and lesson.steps)


def prepare() -> None:
    """Put the current step's view (page settings, model, sentences) into session state when the step changed."""
    name, lesson, index = position()
    if not lesson or not lesson.steps:
        return
    step = lesson.steps[index]
    marker = (name, index, step)
    if st.session_state.get(APPLIED) != marker:
        st.session_state["present.notices"] = url_state.apply(step.page, step.params)
        st.session_state[APPLIED] = marker


def go(offset: int) -> None:
    """Next/previous button: move by `offset` steps (the URL's step follows through url_state.sync)."""
    _, lesson, index = position()
    if lesson and lesson.steps:
        st.session_state[STEP] = max(0, min(len(lesson.steps) - 1, index + offset)) + 1
