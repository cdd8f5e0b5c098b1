"""reproduce sun-aspect: the blog's heads ranked and judged (synthetic 12 x 12 roles), and its lexicon's provenance."""

from __future__ import annotations

import numpy as np
import pytest

from core import studies
from core.analyses import aspect_sentiment as asp
from core.analyses.aspect_heads import ABSENT_PARTS


def roles(model: str, layers: int = 12, heads: int = 12) -> asp.AspectRoles:
    rng = np.random.default_rng(0)
    score = rng.uniform(0.0, 0.1, (len(asp.MEASURES), layers, heads))
    parts = rng.uniform(0.0, 0.2, (len(ABSENT_PARTS), layers, heads))
    return asp.AspectRoles(model, score, np.full(len(asp.MEASURES), 0.05), np.array([10, 8, 6]), parts.copy(),
                           parts.copy(), 20)


def run_with(monkeypatch, fake: asp.AspectRoles, model: str = "bert-base-uncased") -> studies.StudyResult:
    from core.studies import sun_aspect

    metrics = {"run": "fake-run", "accuracy": 0.8, "train_examples": 32, "eval_examples": 16}
    monkeypatch.setattr(sun_aspect, "_finetune", lambda *a, **k: metrics)
    monkeypatch.setattr(sun_aspect, "load_model", lambda ref: None)
    monkeypatch.setattr(sun_aspect, "semeval_pairs", lambda split, reviews: [])
    monkeypatch.setattr(sun_aspect, "aspect_roles", lambda lm, pairs, **k: fake)
    return sun_aspect.run(studies.StudyOptions(model=model, limit=32))


def test_the_blog_heads_are_ranked_from_0_and_judged_by_the_top_tenth(monkeypatch):
    fake = roles("fake-run")
    term, sentiment, other = (asp.MEASURES.index(m) for m in ("aspect term", "sentiment words", "other aspect's terms"))
    fake.score[term, 9, 8] = 0.9  # first of 144
    higher = [(l, h) for l in range(12) for h in range(12) if (l, h) != (9, 0)][:15]
    for l, h in higher:  # 15 heads above 9-0: rank 16, outside the top 15
        fake.score[sentiment, l, h] = 0.5
    fake.score[sentiment, 9, 0] = 0.4
    fake.score[other, 10, 3] = 0.04  # top of its measure but below the flat baseline 0.05
    fake.score[other][fake.score[other] > 0.04] = 0.03
    sep = ABSENT_PARTS.index("sep")
    fake.absent_parts[sep, 9, 8], fake.present_parts[sep, 9, 8] = 0.6, 0.1
    result = run_with(monkeypatch, fake)
    ranks = result.measured["blog heads: rank among all heads (1 = best)"]
    assert ranks == {"9-8 aspect term": 1.0, "9-0 sentiment words": 16.0, "10-3 other aspect's terms": 1.0}
    assert [h.to_json() for h in result.heads] == [  # what a seeds run follows per seed
        {"claim": "aspect term head", "head": "9-8", "rank": 1, "of": 144},
        {"claim": "sentiment words head", "head": "9-0", "rank": 16, "of": 144},
        {"claim": "other aspect's terms head", "head": "10-3", "rank": 1, "of": 144}]
    claims = {c.reference.key: c.rows[0].measured for c in result.comparisons}
    assert claims == {"sun-aspect-9-8": 1.0, "sun-aspect-9-0": 0.0, "sun-aspect-10-3": 0.0, "sun-aspect-absent-sep": 1.0}
    assert [c.verdict for c in result.comparisons] == ["reproduced", "differs", "differs", "reproduced"]
    assert result.verdict == "differs"
    gain = fake.absent_parts[sep] - fake.present_parts[sep]
    top_gain = result.measured["top heads: [SEP] mass, absent minus present aspects"]
    assert list(top_gain)[0] == "9-8" and top_gain["9-8"] == pytest.approx(0.5)
    assert list(top_gain.values()) == pytest.approx(sorted(gain.ravel(), reverse=True)[:5])
    assert any("counted from 0" in n and "cannot" not in n for n in result.notes)


def test_a_smaller_model_has_no_blog_heads_and_says_so(monkeypatch):
    result = run_with(monkeypatch, roles("fake-run", layers=6), model="all-MiniLM-L6-v2")
    assert [c.verdict for c in result.comparisons] == ["not measured"] * 4
    assert result.measured["blog heads: rank among all heads (1 = best)"] == {}
    assert result.heads == ()
    assert any("do not exist" in n for n in result.notes)
    assert len(result.measured["top heads: aspect term"]) == 5


def test_another_base_model_with_twelve_layers_is_shape_only(monkeypatch):
    result = run_with(monkeypatch, roles("fake-run"), model="roberta-base")
    assert {c.verdict for c in result.comparisons} == {"different model: shape only"}


def test_rank_counts_strictly_higher_heads():
    fake = roles("m", layers=2, heads=3)
    fake.score[0] = [[0.3, 0.1, 0.3], [0.2, 0.0, 0.4]]
    assert [fake.rank("aspect term", 0, h) for h in range(3)] == [2, 5, 2]
    assert fake.rank("aspect term", 1, 2) == 1 and asp.top_count(6) == 1 and asp.top_count(144) == 15


def test_the_shipped_lexicon_names_its_source_and_licence():
    header = [line for line in asp.LEXICON_FILE.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    text = " ".join(header)
    assert "vaderSentiment==3.3.2" in text and "MIT License" in text and "Copyright (c) 2016 C.J. Hutto" in text
    lexicon = asp.sentiment_lexicon()
    assert len(lexicon) == 5578
    assert all(w.isalpha() and w.islower() and abs(v) >= 1.0 for w, v in lexicon.items())
    assert lexicon["great"] > 0 > lexicon["terrible"]
    assert asp.sentiment_words(("The", "Great", "waiter", "was", "rude"), lexicon) == (1, 4)


def test_a_finished_absa_qa_run_is_scored_without_training_and_another_task_is_refused(monkeypatch):
    from types import SimpleNamespace

    from core.studies import sun_aspect

    runs = {"qa": SimpleNamespace(state="done", recipe={"task": "absa_qa", "model": "bert-base-uncased"},
                                  metrics={"run": "qa", "accuracy": 0.7}),
            "nli": SimpleNamespace(state="done", recipe={"task": "snli", "model": "bert-base-uncased"},
                                   metrics={"run": "nli", "accuracy": 0.9})}
    monkeypatch.setattr("core.training.get_run", runs.get)
    monkeypatch.setattr(sun_aspect, "_finetune", lambda *a, **k: pytest.fail("a finished run must not be retrained"))
    loaded = []
    monkeypatch.setattr(sun_aspect, "load_model", loaded.append)
    monkeypatch.setattr(sun_aspect, "semeval_pairs", lambda split, reviews: [])
    monkeypatch.setattr(sun_aspect, "aspect_roles", lambda lm, pairs, **k: roles("qa"))
    result = sun_aspect.run(studies.StudyOptions(extra={"run": "qa"}))
    assert loaded == ["qa"] and result.model == "bert-base-uncased"
    assert {c.verdict for c in result.comparisons} <= {"reproduced", "differs"}  # the paper's model: judged
    with pytest.raises(ValueError, match="trained on 'snli', not absa_qa"):
        sun_aspect.run(studies.StudyOptions(extra={"run": "nli"}))
    with pytest.raises(ValueError, match="'gone' is not a finished run"):
        sun_aspect.run(studies.StudyOptions(extra={"run": "gone"}))
