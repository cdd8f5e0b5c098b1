"""Live class questions without a model: up or down with depth, the layer fine-tuning changed most (against a
linear CKA / RSA written here), the teacher's typed question, and the answers histogram's data."""

from __future__ import annotations

import numpy as np
import pytest

from core.analyses.similarity import similarity_from_vectors
from core.charts.classroom import OTHER_ANSWERS, answers_chart, answers_frame
from core.classroom.questions import (DOWN, UP, QuestionError, changed_layer_question, direction_question,
                                      typed_question)
from core.classroom.store import Question


def test_direction_is_the_sign_of_the_last_measured_layer_minus_the_first():
    rising = direction_question([0, 1, 2, 3], [0.1, 0.5, 0.4, 0.3], "random-word cosine")
    assert rising.choices == (UP, DOWN) and rising.correct == UP and rising.kind == "direction"
    assert "From layer 0 to layer 3" in rising.prompt and "random-word cosine" in rising.prompt
    # NaN layers (self-similarity with too few contexts) are skipped, not compared
    falling = direction_question([0, 1, 2, 3], [np.nan, 0.9, 0.2, np.nan], "self-similarity")
    assert falling.correct == DOWN and "From layer 1 to layer 2" in falling.prompt
    with pytest.raises(QuestionError, match="fewer than two layers"):
        direction_question([0, 1], [np.nan, 0.3], "x")
    with pytest.raises(QuestionError, match="neither up nor down"):
        direction_question([0, 1], [0.3, 0.3], "x")


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s feature-space form: ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)."""
    x, y = x - x.mean(0), y - y.mean(0)
    return float(np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    def cosines(v):
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        return (v @ v.T)[np.triu_indices(len(v), 1)]

    return float(np.corrcoef(cosines(x), cosines(y))[0, 1])


@pytest.mark.parametrize("measure, independent", [("cka", linear_cka), ("rsa", rsa)])
def test_changed_layer_is_the_least_similar_layer(measure, independent):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(5, 40, 8))  # 4 layers + embeddings, 40 words
    tuned = base + rng.normal(scale=[[[0.1]], [[0.2]], [[0.3]], [[2.0]], [[0.5]]], size=base.shape)
    similarity = similarity_from_vectors(base.astype(np.float32), tuned.astype(np.float32))
    scores = [independent(base[layer], tuned[layer]) for layer in range(5)]
    question = changed_layer_question(similarity, measure)
    assert question.kind == "layer"
    assert question.choices == ("Embeddings (layer 0)", "Layer 1", "Layer 2", "Layer 3", "Layer 4")
    assert question.correct == question.choices[int(np.argmin(scores))] == "Layer 3"
    with pytest.raises(QuestionError, match="use cka or rsa"):
        changed_layer_question(similarity, "cosine")


def test_typed_question_is_checked_and_kept_as_text():
    hostile = "<img src=x onerror=alert(1)> **bold** [link](http://x)"
    question = typed_question("Which is\n a noun?", ["cat", " ", hostile, "ran  fast"], correct="cat")
    assert question.prompt == "Which is a noun?"  # one line: it sits on a button's line
    assert question.choices == ("cat", hostile, "ran fast") and question.correct == "cat"
    assert typed_question("Poll?", ["yes", "no"]).correct is None
    with pytest.raises(QuestionError, match="2 to 8 choices"):
        typed_question("Q?", ["only one"])
    with pytest.raises(QuestionError, match="2 to 8 choices"):
        typed_question("Q?", [str(i) for i in range(9)])
    with pytest.raises(QuestionError, match="repeated: Cat"):
        typed_question("Q?", ["Cat", "cat ", "dog"])
    with pytest.raises(QuestionError, match="keep it to 80"):
        typed_question("Q?", ["x" * 81, "y"])
    with pytest.raises(QuestionError, match="keep it to 300"):
        typed_question("Q" * 301, ["a", "b"])
    with pytest.raises(QuestionError, match="must be one of the choices"):
        typed_question("Q?", ["a", "b"], correct="c")
    with pytest.raises(QuestionError, match="question is empty"):
        typed_question("  \n ", ["a", "b"])


def test_histogram_shows_every_choice_zeros_included_and_marks_the_right_one():
    question = Question("choice", "Which?", ("b", "a", "c"), correct="a")
    frame = answers_frame(question, {"b": 3, "a": 1})
    assert list(frame["choice"]) == ["b", "a", "c"]  # the order the students saw
    assert list(frame["answers"]) == [3, 1, 0]
    assert list(frame["right"]) == [False, True, False]
    assert frame["share"].tolist() == pytest.approx([0.75, 0.25, 0.0])
    spec = answers_chart(frame).to_dict()
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["b", "a", "c"]
    # issue 48: as wide as the reveal's column (draw_chart stretches it), not a fixed 300 px plot that ran past it
    assert spec["width"] == "container" and "autosize" not in spec
    with pytest.raises(ValueError, match="not among the question's choices"):
        answers_frame(question, {"z": 1})
    assert answers_frame(question, {})["share"].tolist() == [0.0, 0.0, 0.0]


def test_typed_answers_are_grouped_ignoring_case_with_the_right_one_first():
    question = Question("masked", "Fill the blank", (), free_text=True, correct="bank")
    counts = {"river": 2, "Bank": 3, "bank": 1, "River ": 1, **{f"w{i}": 1 for i in range(14)}}
    frame = answers_frame(question, counts)
    assert frame.iloc[0]["choice"] == "bank" and frame.iloc[0]["answers"] == 4
    assert frame.iloc[0]["right"] and frame.iloc[1]["choice"] == "river" and frame.iloc[1]["answers"] == 3
    assert frame.iloc[-1]["choice"] == OTHER_ANSWERS and frame["answers"].sum() == sum(counts.values())
    assert len(frame) == 1 + 12 + 1
