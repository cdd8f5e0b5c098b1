"""Lessons: the editor of the lesson built with "Add this view to the lesson" (reorder, retitle, annotate,
export/import), the built-in lessons, and the way into presenter mode."""

import streamlit as st

from app_pages.widgets.common import intro
from app_pages.shell.lesson_bar import current_lesson, lesson_steps, set_lesson
from core import lessons, report
from core.safe_text import markdown_code, markdown_text

P = "lessons."

st.title("Lessons")
intro(
    "A lesson is an ordered list of views, each with a title and speaker notes, that you can present full screen "
    "or hand out as a small JSON file.",
    "Add views with the sidebar's “Add this view to the lesson” on any page, or start from a built-in lesson; "
    "then reorder, retitle and annotate them here.",
)

builtin = lessons.builtin()


def use_builtin(name: str) -> None:
    set_lesson(builtin[name])
    clear_widgets()


def clear_widgets() -> None:
    """Edit boxes are keyed by position: after a move they must reread the lesson, not keep old text."""
    for key in [k for k in st.session_state if str(k).startswith(P + "step.")]:
        del st.session_state[key]


def move(index: int, offset: int) -> None:
    set_lesson(lessons.move_step(current_lesson(), index, offset))
    clear_widgets()


def remove(index: int) -> None:
    set_lesson(lessons.remove_step(current_lesson(), index))
    clear_widgets()


def edit(index: int) -> None:
    lesson = current_lesson()
    step = lesson.steps[index]
    title = st.session_state.get(f"{P}step.{index}.title", step.title)
    notes = st.session_state.get(f"{P}step.{index}.notes", step.notes)
    set_lesson(lessons.replace_step(lesson, index, lessons.Step(title, step.page, step.params, notes)))


def retitle() -> None:
    lesson = current_lesson()
    set_lesson(lessons.Lesson(st.session_state[P + "title"] or lesson.title, lesson.steps))


cols = st.columns(len(builtin) + 1)
for column, (name, lesson) in zip(cols, builtin.items()):
    column.button(f"Start from “{lesson.title}”", key=f"{P}builtin.{name}", on_click=use_builtin, args=(name,),
                  width="stretch")
def new_lesson() -> None:
    set_lesson(lessons.Lesson("My lesson"))
    clear_widgets()


cols[-1].button("New empty lesson", key=P + "new", on_click=new_lesson, width="stretch")

upload = st.file_uploader("Import a lesson file (.json, .yaml)", type=["json", "yaml", "yml"], key=P + "upload")
if upload is not None and st.session_state.get(P + "imported") != upload.file_id:
    try:
        set_lesson(lessons.loads(upload.getvalue().decode("utf-8"), upload.name))
        st.session_state[P + "imported"] = upload.file_id
        clear_widgets()
        st.success(f"Imported “{markdown_text(current_lesson().title)}”.")
    except lessons.LessonError as err:  # "NAME: what is wrong"
        st.error(f"Not a lesson: {markdown_text(err)}")
    except UnicodeDecodeError:
        st.error(f"Not a lesson: {markdown_text(upload.name)} is not UTF-8 text.")

lesson = current_lesson()
st.session_state[P + "title"] = lesson.title
st.text_input("Lesson title", key=P + "title", on_change=retitle)
for line in lessons.notices(lesson):
    st.caption(markdown_text(line))
for note in lessons.missing_model_notes(lesson):
    st.warning(markdown_text(note))

if not lesson.steps:
    st.info("No steps yet: open a page, set up the view and press “Add this view to the lesson” in the sidebar, "
            "or start from a built-in lesson above.")
for i, step in enumerate(lesson.steps):
    with st.container(border=True):
        top = st.columns([6, 1, 1, 1])
        st.session_state.setdefault(f"{P}step.{i}.title", step.title)
        top[0].text_input(f"Step {i + 1}", key=f"{P}step.{i}.title", on_change=edit, args=(i,))
        top[1].button("Up", key=f"{P}up.{i}", on_click=move, args=(i, -1), disabled=i == 0, width="stretch")
        top[2].button("Down", key=f"{P}down.{i}", on_click=move, args=(i, 1), disabled=i == len(lesson.steps) - 1,
                      width="stretch")
        top[3].button("Remove", key=f"{P}remove.{i}", on_click=remove, args=(i,), width="stretch")
        st.markdown(f"[Open this view](/{step.link()}) · page {markdown_code(step.page or 'home')} · "
                    + markdown_text(", ".join(f"{k}={v[:40]}" for k, v in step.params.items())))
        st.session_state.setdefault(f"{P}step.{i}.notes", step.notes)
        st.text_area("Speaker notes (not shown on the slide)", key=f"{P}step.{i}.notes", on_change=edit, args=(i,),
                     height=80)

if lesson.steps:
    st.page_link("app_pages/present.py", label="Present this lesson", query_params={"lesson": "current", "step": "1"})
    cols = st.columns(2)
    cols[0].download_button("Export lesson (JSON)", lessons.dumps(lesson), file_name="lesson.json",
                            mime="application/json", key=P + "export.json", width="stretch")
    cols[1].download_button("Export lesson (YAML)", lessons.dumps(lesson, "yaml"), file_name="lesson.yaml",
                            mime="application/yaml", key=P + "export.yaml", width="stretch")
    # Drawn only when clicked (each step's view is computed through core.lens); on_click="ignore": no rerun
    # retires the file mid-click.
    cols = st.columns(2)
    cols[0].download_button(
        "Lesson as one HTML deck (offline)", lambda: report.deck_html(report.lesson_steps(lesson_steps()), title=lesson.title),
        file_name="lesson.html", mime="text/html", key=P + "export.deck", width="stretch", on_click="ignore",
        icon=":material/slideshow:", help="Arrow keys step through the slides, N shows the speaker notes; opens with no network.")
    cols[1].download_button(
        "Lesson as a PDF handout", lambda: report.report_pdf(report.lesson_steps(lesson_steps()), title=lesson.title),
        file_name="lesson.pdf", mime="application/pdf", key=P + "export.pdf", width="stretch", on_click="ignore",
        icon=":material/picture_as_pdf:", help="One page per chart with its caption; speaker notes are left out.")
    st.caption(f"{len(lesson_steps())} steps.")
