"""Ask the class (issue 36): predict, then reveal. Drawn on the masked-words, attention, anisotropy and fine-tuning
pages and in presenter mode, only when class mode is on and this session is the teacher.

A page calls `render(page, questions, chart)` where the answer would first show and returns when it says True:
while a question asked from that page is open, the screen (a projector) shows only the question and the live
count, not the chart that gives the answer away; after "Reveal" it shows the view's chart with the model's answer
and the class's answers as a histogram beside it, until "Next question" (in presenter mode: the next lesson step).
The question lives in the class's SQLite store, so a teacher's reload finds it where it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import altair as alt
import streamlit as st

from app_pages.shell import classroom, presenter
from app_pages.widgets.common import PRESENTING, draw_chart, export_buttons
from core import numbering
from core.analyses.masked import masked_predictions
from core.charts import classroom as class_charts
from core.classroom import access
from core.classroom import questions as q
from core.classroom.store import ClassInfo, ClassroomError, ClassStore, Question, StorageError, shared_store
from core.model.loading import display_name
from core.safe_text import markdown_text

P = "ask."
PAGES = ("masked", "attention", "anisotropy", "finetune")  # the views that build their own questions
TYPED = "A question of your own"


@dataclass(frozen=True)
class WithInputs:
    """A question with inputs of its own (which word, which head; the typed question's text), drawn only when it
    is picked: draw() draws them and returns the question's builder."""

    draw: Callable[[], Callable[[], Question]]


# What a page offers: question label -> its builder (called only when the teacher presses "Ask the class") or
# WithInputs.
Questions = Mapping[str, Callable[[], Question] | WithInputs]


def class_store() -> ClassStore:
    return shared_store()


def teacher_class() -> ClassInfo | None:
    """The running class when class mode is on and this session is the teacher; None otherwise."""
    if not access.class_mode() or not classroom.is_teacher():
        return None
    return class_store().active_class()


def render(page: str, questions: Questions, chart: alt.TopLevelMixin | None = None) -> bool:
    """The "Ask the class" section for `page`. True while a question from this page is on screen (asked or
    revealed): the caller then stops drawing its own charts, which would give the answer away or draw twice."""
    try:
        info = teacher_class()
        if info is None:
            return False
        store = class_store()
        current = store.current_question(info.id)
    except StorageError as err:  # the class's file (a full disk): said with its path, and the page goes on
        st.error(markdown_text(err.for_teacher))
        return False
    if current is not None and current.question.page == page and st.session_state.get(P + "done") != current.id:
        if current.revealed:
            show_reveal(store, current, chart)
        else:
            show_open(store, current)
        return True
    with st.expander("Ask the class", icon=":material/how_to_vote:"):
        offered = {**questions, TYPED: WithInputs(lambda: typed_inputs(page))}
        label = st.selectbox("Question", list(offered), key=P + "type")
        build = offered[label].draw() if isinstance(offered[label], WithInputs) else offered[label]
        if st.button("Ask the class", key=P + "ask", type="primary"):
            try:
                store.ask(info.id, build())
            except StorageError as err:
                st.error(markdown_text(err.for_teacher))
            except (q.QuestionError, ClassroomError) as err:
                st.error(markdown_text(err))
            else:
                st.rerun()
    return False


def typed_inputs(page: str) -> Callable[[], Question]:
    """The teacher's own multiple-choice question: its inputs, and the builder that checks them."""
    prompt = st.text_input("Your question", key=P + "typed.prompt",
                           max_chars=q.MAX_PROMPT_CHARS)
    lines = st.text_area(f"Choices, one per line ({q.MIN_CHOICES} to {q.MAX_CHOICES})", key=P + "typed.choices")
    choices = [line for line in lines.splitlines() if line.strip()]
    right = st.selectbox("Right answer", ["(none: a poll)", *choices], key=P + "typed.right")
    return lambda: q.typed_question(prompt, choices, None if right not in choices else right, page=page)


def show_open(store: ClassStore, current) -> None:
    """The question as the class sees it, the live count, and Reveal."""
    st.subheader(markdown_text(current.question.prompt))
    if current.question.choices:
        st.markdown("  \n".join(f"**{chr(65 + i)}.** {markdown_text(c)}" for i, c in enumerate(current.question.choices)))
    else:
        st.caption("Students type their answer.")
    live_count(store, current.id)
    columns = st.columns([1, 1, 3])
    columns[0].button("Reveal", key=P + "reveal", type="primary", on_click=reveal, args=(store, current), width="stretch")
    columns[1].button("Drop this question", key=P + "drop", on_click=drop, args=(store, current.id), width="stretch",
                      help="Close it to answers without showing the answer, and go back to the page.")


# Twice a second: the count is complete within a second of the last answer (issue 36's target), and each redraw is
# one indexed query of the class's SQLite file, not a rerun of the page.
COUNT_EVERY_S = 0.5


@st.fragment(run_every=COUNT_EVERY_S)
def live_count(store: ClassStore, question_id: int) -> None:
    """How many students have answered, redrawn without rerunning the page."""
    n = len(store.answers(question_id))
    st.metric("Answers received", n)


def reveal(store: ClassStore, current) -> None:
    store.reveal(current.id, current.question.correct)


def drop(store: ClassStore, question_id: int) -> None:
    store.reveal(question_id, None)  # closed, with no right answer: the students' phones say "Answers are closed"
    finish(question_id, False)


def finish(question_id: int, next_step: bool) -> None:
    """Back to the page (this question stays in the store for the export); in presenter mode on to the next step."""
    st.session_state[P + "done"] = question_id
    if next_step:
        presenter.go(1)


def show_reveal(store: ClassStore, current, chart: alt.TopLevelMixin | None) -> None:
    """The view's chart, the model's answer and the class's answers beside it."""
    question = current.question
    st.subheader(markdown_text(question.prompt))
    frame = class_charts.answers_frame(question, store.counts(current.id))
    histogram = class_charts.answers_chart(frame)
    right = (f"The model's answer: **{markdown_text(current.correct)}**" if current.correct
             else "This question has no right answer: here is what the class thinks.")
    if chart is not None:
        left, beside = st.columns([3, 2])
        with left:
            draw_chart(chart, key=P + "view_chart")
    else:
        beside = st.container()
    with beside:
        st.markdown(right)
        draw_chart(histogram, key=P + "histogram")
    export_buttons(histogram, frame, "class_answers", key=P + "export")  # full width: a narrow column cuts its labels
    presenting = PRESENTING.get()
    st.button("Next question" + (" (next step)" if presenting else ""), key=P + "next", type="primary",
              on_click=finish, args=(current.id, presenting))


# ---- what each page can ask ----------------------------------------------------------------------------------------


MASKED_GUESSES = 12  # the distractors are drawn from the model's guesses 2..12


def masked_questions(lm, encoding, mask: int = 0) -> Questions:
    """Masked words: the model's top guess at the mask, among its own next guesses, or typed by the students."""
    def asked(free_text: bool) -> Question:
        pred = masked_predictions(lm, encoding, top_k=MASKED_GUESSES, layers="last")
        return q.masked_word_question(pred, mask=mask, free_text=free_text, spell=lm.tokenizer.convert_tokens_to_string)

    return {"Which word will fill the blank? (4 choices)": lambda: asked(False),
            "Which word will fill the blank? (students type it)": lambda: asked(True)}


def attention_questions(encoding, layer: int, heads, attentions=None) -> Questions:
    """Attention: which word a word attends to most in this layer and head (the word, and the head when several
    are averaged on the page, picked here), in the weights the page draws (`attentions`; None: raw)."""
    def draw() -> Callable[[], Question]:
        words = q.word_labels(encoding)
        word = st.selectbox("Whose attention?", range(len(words)), format_func=lambda i: words[i],
                            key=P + "attention.word")
        head = st.selectbox("Head", list(heads), key=P + "attention.head") if len(heads) > 1 else heads[0]
        return lambda: q.attention_question(encoding, layer, head, word, attentions=attentions)

    return {f"Which word does a word attend to most in layer {numbering.shown(layer)}?": WithInputs(draw)}


def direction_questions(profiles, measure: str, measure_name: str) -> Questions:
    """Anisotropy: does the measure shown go up or down with depth, for each model measured."""
    return {f"Up or down with depth: {measure_name} ({display_name(p.model)})?":
            (lambda p=p: q.direction_question(p.layers, getattr(p, measure), f"{measure_name} of {display_name(p.model)}"))
            for p in profiles if getattr(p, measure, None) is not None}


def changed_layer_questions(results) -> Questions:
    """Fine-tuning: which layer changed most (lowest CKA with the base model), for each model compared."""
    return {f"Which layer changes most after fine-tuning ({display_name(r.model_b)})?":
            (lambda r=r: q.changed_layer_question(r, "cka")) for r in results}
