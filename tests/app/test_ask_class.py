"""AppTest of "Ask the class" on the Masked words page (a tiny random BertForMaskedLM, the class store in a temporary
folder): ask -> the answer is held back -> students answer -> live count -> reveal -> the histogram holds exactly the
answers stored, beside the model's own guesses."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from app_pages.widgets import ask_class
from core.classroom.store import ClassStore
from core.safe_text import markdown_text
from tests.app.conftest import chart_rows_titled
from tests.tiny_mlm import make_tiny_mlm

PAGE = "app_pages/masked.py"
TEXT = "the girl sat on the [MASK] of the river ."


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-ask"))


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A running class in a temporary store, this session its teacher."""
    store = ClassStore(tmp_path / "classroom.sqlite3", rate_limit_seconds=0)
    store.start_class()
    monkeypatch.setattr(ask_class, "class_store", lambda: store)
    monkeypatch.setattr(ask_class, "teacher_class", store.active_class)
    return store


def models_top_guess(folder) -> str:
    from transformers import BertForMaskedLM, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(folder))
    model = BertForMaskedLM.from_pretrained(str(folder)).eval()
    feed = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        logits = model(**feed).logits[0]
    at = int(np.flatnonzero(feed["input_ids"][0].numpy() == tokenizer.mask_token_id)[0])
    return tokenizer.convert_ids_to_tokens(int(logits[at].argmax()))


def button(at, label):
    return next(b for b in at.button if b.label == label)


def test_ask_count_reveal_histogram_equals_the_stored_answers(mlm_dir, store, make_app):
    at = make_app(str(mlm_dir), TEXT)
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any(e.label == "Ask the class" for e in at.expander)
    guesses_drawn = len(at.get("vega_lite_chart"))
    assert guesses_drawn >= 3

    at.selectbox(key="ask.type").set_value("Which word will fill the blank? (4 choices)")
    button(at, "Ask the class").click().run()
    assert not at.exception
    class_id = store.active_class().id
    asked = store.current_question(class_id)
    assert asked.question.kind == "masked" and asked.question.page == "masked"
    assert asked.question.correct == models_top_guess(mlm_dir)
    # the projector shows the question, not the chart that answers it
    assert len(at.get("vega_lite_chart")) == 0
    assert at.subheader[0].value == markdown_text(asked.question.prompt) and "___" in asked.question.prompt

    choices = asked.question.choices
    given = [choices[i % len(choices)] for i in (0, 1, 1, 2, 1)]  # five students; one choice picked by nobody
    for device, text in enumerate(given):
        store.answer(asked.id, f"student-{device}", text)
    store.answer(asked.id, "student-0", choices[1])  # a student changes their mind before the reveal
    given[0] = choices[1]
    at.run()
    assert at.metric[0].value == "5"

    button(at, "Reveal").click().run()
    assert not at.exception
    rows = chart_rows_titled(at, "The class's answers")
    assert {r["choice"]: r["answers"] for r in rows} == {c: Counter(given)[c] for c in choices}
    assert [r["choice"] for r in rows if r["right"]] == [asked.question.correct]
    assert len(at.get("vega_lite_chart")) == 2  # the model's guesses beside the histogram
    assert any(markdown_text(asked.question.correct) in m.value for m in at.markdown)
    assert store.question(asked.id).revealed

    button(at, "Next question").click().run()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == guesses_drawn  # the page as before, ready for another question
    assert any(e.label == "Ask the class" for e in at.expander)


def test_typed_question_is_checked_on_ask(mlm_dir, store, make_app):
    at = make_app(str(mlm_dir), TEXT)
    at.switch_page(PAGE).run()
    at.selectbox(key="ask.type").set_value(ask_class.TYPED).run()  # its inputs are drawn once it is picked
    at.text_input(key="ask.typed.prompt").set_value("Is this <b>bold</b>?")
    at.text_area(key="ask.typed.choices").set_value("only one")
    button(at, "Ask the class").click().run()
    assert "2 to 8 choices" in at.error[0].value
    assert store.current_question(store.active_class().id) is None


def test_no_class_no_button(mlm_dir, make_app, monkeypatch):
    monkeypatch.setattr(ask_class, "teacher_class", lambda: None)
    at = make_app(str(mlm_dir), TEXT)
    at.switch_page(PAGE).run()
    assert not at.exception
    assert not any(e.label == "Ask the class" for e in at.expander)


def test_attention_question_uses_the_page_layer_and_the_picked_word_and_head(mlm_dir, store, make_app):
    from core.classroom.questions import attention_question
    from core.model.encoding import encode
    from core.model.loading import load_model

    at = make_app(str(mlm_dir), "the unhappy girl sat on the bank .")
    at.session_state["attention.layer"] = 1
    at.session_state["attention.heads"] = [1, 3]
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    at.selectbox(key="ask.attention.word").set_value(6)
    at.selectbox(key="ask.attention.head").set_value(3)
    button(at, "Ask the class").click().run()
    assert not at.exception
    asked = store.current_question(store.active_class().id).question
    expected = attention_question(encode(load_model(str(mlm_dir)), "the unhappy girl sat on the bank ."), 1, 3, 6,
                                  page="attention")
    # array index 1 is layer 2 as the page shows it (core.numbering)
    assert asked == expected and "“bank” attend to most in layer 2, head 3" in asked.prompt


def test_presenter_step_of_another_page_can_take_a_typed_question(store):
    from streamlit.testing.v1 import AppTest

    from tests.app.conftest import APP_FILE

    at = AppTest.from_file(APP_FILE, default_timeout=120)
    from core.lessons import builtin

    steps = builtin()["bert-in-ten-views"].steps
    pca_step = 1 + next(i for i, step in enumerate(steps) if step.page == "pca")  # no question of its own
    at.query_params.update({"lesson": "bert-in-ten-views", "step": str(pca_step)})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception
    at.selectbox(key="ask.type").set_value(ask_class.TYPED).run()
    at.text_input(key="ask.typed.prompt").set_value("Which layer is the input?")
    at.text_area(key="ask.typed.choices").set_value("the embeddings\nthe last layer").run()
    at.selectbox(key="ask.typed.right").set_value("the embeddings")
    button(at, "Ask the class").click().run()
    assert not at.exception
    asked = store.current_question(store.active_class().id)
    assert asked.question.kind == "choice" and asked.question.page == "present"
    assert asked.question.choices == ("the embeddings", "the last layer")
    store.answer(asked.id, "phone", "the last layer")
    button(at, "Reveal").click().run()
    rows = chart_rows_titled(at, "The class's answers")
    assert [(r["choice"], r["answers"], r["right"]) for r in rows] == [("the embeddings", 0, True),
                                                                      ("the last layer", 1, False)]
    button(at, "Next question (next step)").click().run()
    assert not at.exception
    assert at.session_state["present.step"] == pca_step + 1  # on to the lesson's next step


def test_anisotropy_question_is_the_measured_curves_direction(tiny_bert_dir, store, make_app):
    from core.analyses import anisotropy as an
    from core.data import corpus as corpora
    from core.model.loading import load_model
    from tests.app.test_anisotropy_page import open_page, run_until

    at = open_page(make_app, str(tiny_bert_dir), 20)
    at.button(key="anisotropy.run").click()
    run_until(at, lambda a: any(e.label == "Ask the class" for e in a.expander))
    charts_drawn = len(at.get("vega_lite_chart"))
    button(at, "Ask the class").click().run()  # the first question: up or down, for the measure shown
    assert not at.exception
    asked = store.current_question(store.active_class().id)
    expected = an.measure_corpus(load_model(str(tiny_bert_dir)), corpora.builtin(limit=20),
                                 an.AnisotropySettings(n_pairs=500)).random_cosine
    assert asked.question.kind == "direction" and asked.question.page == "anisotropy"
    assert asked.question.correct == ("Up" if expected[-1] > expected[0] else "Down")
    assert len(at.get("vega_lite_chart")) == 0  # the curve waits for the reveal
    store.answer(asked.id, "phone", "Up")
    button(at, "Reveal").click().run()
    assert not at.exception
    assert [(r["choice"], r["answers"]) for r in chart_rows_titled(at, "The class's answers")] == [("Up", 1), ("Down", 0)]
    button(at, "Next question").click().run()
    assert len(at.get("vega_lite_chart")) == charts_drawn


def test_finetune_question_is_the_layer_of_lowest_cka(tmp_path, store):
    from core import settings
    from core.analyses.similarity import compare_models
    from core.classroom.questions import layer_label
    from core.data.corpus import builtin
    from core.model.loading import load_model
    from tests.app.test_finetune_changes import finish, open_app
    from tests.conftest import make_tiny_bert

    base = str(make_tiny_bert(tmp_path / "tiny-base", seed=0))
    run = str(make_tiny_bert(settings.runs_dir() / "tiny-run", seed=1))
    at = open_app(base)
    at.number_input(key="changes.limit").set_value(12).run()
    at.button(key="changes.similarity.run").click().run()
    at = finish(at, "similarity")
    assert not at.exception
    button(at, "Ask the class").click().run()
    assert not at.exception
    asked = store.current_question(store.active_class().id).question
    cka = compare_models(load_model(base), load_model(run), list(builtin(12).sentences)).cka
    assert asked.kind == "layer" and asked.choices == tuple(layer_label(layer) for layer in range(3))
    assert asked.correct == layer_label(int(np.argmin(cka)))


def test_dropping_a_question_closes_it_without_an_answer(mlm_dir, store, make_app):
    at = make_app(str(mlm_dir), TEXT)
    at.switch_page(PAGE).run()
    button(at, "Ask the class").click().run()
    asked = store.current_question(store.active_class().id)
    button(at, "Drop this question").click().run()
    assert not at.exception
    dropped = store.question(asked.id)
    assert dropped.revealed and dropped.correct is None
    assert any(e.label == "Ask the class" for e in at.expander) and len(at.get("vega_lite_chart")) >= 3


def test_only_the_teacher_in_class_mode_with_a_running_class_gets_the_button(mlm_dir, make_app, monkeypatch):
    from app_pages.shell import classroom
    from core.classroom import shared_store

    def has_button() -> bool:
        at = make_app(str(mlm_dir), TEXT)
        at.switch_page(PAGE).run()
        assert not at.exception
        return any(e.label == "Ask the class" for e in at.expander)

    shared_store().start_class()
    assert not has_button()  # class mode off: the page as always
    monkeypatch.setenv("BERTLENS_CLASS", "1")
    assert has_button()  # AppTest has no connection: the teacher's session, as before class mode existed
    teacher = classroom.is_teacher
    monkeypatch.setattr(classroom, "is_teacher", lambda: False)
    assert ask_class.teacher_class() is None  # a student never gets it (the router shows them the student view)
    monkeypatch.setattr(classroom, "is_teacher", teacher)
    shared_store().end_class(shared_store().active_class().id)
    assert not has_button()  # no running class
