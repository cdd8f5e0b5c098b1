"""Live class (issue 36): students answer the teacher's questions on their phones; everything stays on this
machine. `store` keeps classes, questions and answers in SQLite; `access` decides who is the teacher and how
students reach the class."""

from core.classroom.store import (AnswerRejected, ClassInfo, ClassroomError, ClassStore, Question, StoredAnswer,
                                  StoredQuestion, shared_store)

__all__ = ["AnswerRejected", "ClassInfo", "ClassroomError", "ClassStore", "Question", "StoredAnswer",
           "StoredQuestion", "shared_store"]
