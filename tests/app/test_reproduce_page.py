"""The Reproduce page: study card, Run through the job runner, paper vs measured in the chart, verdict, URL."""

from __future__ import annotations

import time

import numpy as np
import pytest

from core import jobs, studies
from tests import fake_study
from tests.markdown_text import plain


def _open(make_app, monkeypatch, model="fake-bert", **state):
    fake_study.install(monkeypatch)
    at = make_app(model)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page("app_pages/reproduce.py")
    return at.run()


def _run(at):
    at.button(key="reproduce.fake.run").click().run()
    job_id = at.session_state["reproduce.fake.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=60).state == "done"
    return at.run()


def start_slow(at) -> str:
    """Press Run on a study slowed down to 0.05 s a step and wait until it has reported progress; its job id."""
    at.button(key="reproduce.fake.run").click().run()
    job_id = at.session_state["reproduce.fake.jobstate"]["last_id"]
    deadline = time.time() + 30
    while jobs.status(job_id).done == 0:
        assert time.time() < deadline, "the study never reported progress"
        time.sleep(0.02)
    return job_id


def test_study_card_and_default_model(make_app, monkeypatch):
    at = _open(make_app, monkeypatch)
    assert not at.exception, at.exception
    assert at.selectbox(key="reproduce.study").value == "fake"
    assert at.selectbox(key="reproduce.fake.model").value == "fake-bert"  # the paper's model first
    assert any("Fake et al. (2000)" in m.value for m in at.markdown)
    assert any("Press **Run the study**" in i.value for i in at.info)
    assert at.query_params["study"] in ("fake", ["fake"])


def test_run_shows_paper_beside_measured_and_the_verdict(make_app, monkeypatch, chart_rows):
    at = _run(_open(make_app, monkeypatch))
    assert not at.exception, at.exception
    assert any(s.value.startswith("**Reproduced**") for s in at.success)
    rows = chart_rows(at, 0)
    paper = {r["layer"]: r["value"] for r in rows if r["source"] == "paper"}
    measured = {r["layer"]: r["value"] for r in rows if r["source"] == "measured (fake-bert)"}
    assert paper == fake_study.PAPER_CURVE
    assert measured == fake_study.PAPER_CURVE
    bars = chart_rows(at, 1)
    assert {r["key"] for r in bars} == set(fake_study.PAPER_TABLE)


def test_another_model_is_shape_only(make_app, monkeypatch, minilm_dir):
    at = _open(make_app, monkeypatch, model="all-MiniLM-L6-v2", **{"reproduce.fake.model": "all-MiniLM-L6-v2"})
    assert any("Different model: shape only" in i.value for i in at.info)  # said before Run
    at = _run(at)
    assert any("Different model: shape only" in i.value for i in at.info)
    # issue 48: r over the fake paper's 4 layers is said to rest on too few points to mean much
    assert any("shape correlation r = 1.00 over 4 shared points; too few points for r to mean much" in c.value
               for c in at.caption)


def test_url_reopens_the_study(make_app, monkeypatch):
    fake_study.install(monkeypatch)
    at = make_app("fake-bert")
    at.query_params["study"] = "clark"
    at.switch_page("app_pages/reproduce.py")
    at.run()
    assert at.selectbox(key="reproduce.study").value == "clark"


def test_cancel_keeps_nothing(make_app, monkeypatch):
    monkeypatch.setattr(fake_study, "STEP_SECONDS", 0.05)
    at = _open(make_app, monkeypatch, **{"reproduce.fake.limit": 400})
    job_id = start_slow(at)
    at.run()
    assert at.get("progress"), "no progress bar while the study runs"
    at.button(key="reproduce.fake.cancel").click().run()
    assert jobs.wait(job_id, timeout=30).state == "cancelled"
    at.run()
    assert any("Cancelled" in w.value for w in at.warning)
    assert not at.get("vega_lite_chart")


def test_offline_the_paper_model_gives_way_to_a_local_one_said_shape_only_before_run(make_app, monkeypatch, minilm_dir):
    """Before: every study defaulted to its paper model, which offline failed at Run with "ModelUnavailable: …"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = make_app("all-MiniLM-L6-v2")
    at.switch_page("app_pages/reproduce.py").run()
    assert not at.exception, at.exception
    study = at.selectbox(key="reproduce.study").value
    paper_model = studies.get(study).model
    box = at.selectbox(key=f"reproduce.{study}.model")
    assert box.value == "all-MiniLM-L6-v2"
    assert f"{paper_model} (cannot load now)" in box.options
    assert any("Different model: shape only" in i.value for i in at.info)
    assert not at.button(key=f"reproduce.{study}.run").disabled
    box.set_value(paper_model).run()  # chosen anyway: Run is disabled and the page says why
    assert not at.exception
    assert any("needs a download" in w.value for w in at.warning)
    assert at.button(key=f"reproduce.{study}.run").disabled
    assert not any("Press **Run the study**" in i.value for i in at.info)  # the warning is the next step
    assert not any("ModelUnavailable" in e.value for e in [*at.warning, *at.error, *at.info])


def test_the_study_dropdown_takes_the_first_change(make_app, monkeypatch):
    """Issue 37: the first change of the dropdown was undone. The page ends in st.stop() before Run, so the
    router's after-run URL sync never ran; the URL the page wrote itself was then taken for a new link."""
    at = _open(make_app, monkeypatch)
    at.selectbox(key="reproduce.study").set_value("clark").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="reproduce.study").value == "clark"
    assert at.query_params["study"] in ("clark", ["clark"])
    assert any(studies.get("clark").title in m.value for m in at.markdown)


def test_no_stale_fallback_notice_after_a_link_and_a_change(make_app, monkeypatch):
    """A link's value checked after a later run said "Not available now, so the page chose instead: study=…"
    for a study the user had simply moved away from."""
    fake_study.install(monkeypatch)
    at = make_app("fake-bert")
    at.query_params["study"] = "clark"
    at.switch_page("app_pages/reproduce.py")
    at.run()
    at.selectbox(key="reproduce.study").set_value("fake").run()
    at = _run(at)
    assert at.selectbox(key="reproduce.study").value == "fake"
    assert not [c.value for c in at.caption if "Not available now" in c.value]


def test_the_sun_aspect_card(make_app, monkeypatch):
    """Seed 002's study has its card: title, summary, the paper's model and data; it takes no corpus."""
    from core.studies import sun_aspect

    at = make_app("fake-bert")
    at.query_params["study"] = "sun-aspect"
    at.switch_page("app_pages/reproduce.py")
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="reproduce.study").value == "sun-aspect"
    card = " ".join(m.value for m in at.markdown)
    assert sun_aspect.STUDY.title in card and "9-8, 9-0 and 10-3" in card and "QA-M" in card
    assert at.text_input(key="reproduce.sun-aspect.corpus").disabled


def test_a_sun_aspect_result_shows_the_claims_and_the_blog_heads(make_app, monkeypatch, chart_rows):
    """The study run from the page (its training and scoring replaced by 12 x 12 roles where the blog's heads
    lead): the verdict, the claim rows and the measured series reach the page."""
    from core.studies import sun_aspect
    from tests.unit.test_sun_aspect import roles

    fake = roles("fake-run")
    fake.score[:, 9, 8] = fake.score[:, 9, 0] = fake.score[:, 10, 3] = 0.9
    metrics = {"run": "fake-run", "accuracy": 0.8, "train_examples": 32, "eval_examples": 16}
    monkeypatch.setattr(sun_aspect, "_finetune", lambda *a, **k: metrics)
    monkeypatch.setattr(sun_aspect, "load_model", lambda ref: None)
    monkeypatch.setattr(sun_aspect, "semeval_pairs", lambda split, reviews: [])
    monkeypatch.setattr(sun_aspect, "aspect_roles", lambda lm, pairs, **k: fake)
    from core import settings

    folder = settings.runs_dir() / "bert-base-uncased"  # the paper's model "on disk": Run is offered (as fake_study)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"")
    at = make_app("bert-base-uncased")
    at.query_params["study"] = "sun-aspect"
    at.switch_page("app_pages/reproduce.py")
    at.run()
    at.session_state["reproduce.sun-aspect.model"] = "bert-base-uncased"
    at.run()
    at.button(key="reproduce.sun-aspect.run").click().run()
    job_id = at.session_state["reproduce.sun-aspect.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=60).state == "done"
    at.run()
    assert not at.exception, at.exception
    shown = " ".join(x.value for x in [*at.success, *at.error, *at.info, *at.warning, *at.caption, *at.markdown])
    assert "head 9-8 is an aspect head" in shown and "head 10-3 attends to the other aspect" in shown
    rows = [r for r in chart_rows(at, 0) if r.get("source", "").startswith("measured")]
    assert rows and {r["value"] for r in rows} <= {0.0, 1.0}


def test_seeds_field_runs_every_seed_and_draws_the_interval(make_app, monkeypatch, chart_rows):
    from scipy import stats

    monkeypatch.setattr(fake_study, "SEED_SHIFT", 0.004)
    at = _open(make_app, monkeypatch, **{"reproduce.seeds": "0,1,2"})
    assert at.number_input(key="reproduce.fake.seed").disabled  # the seeds field replaces it
    at = _run(at)
    assert not at.exception, at.exception
    assert any(w.value.startswith("**Inconclusive** over seeds 0, 1, 2") for w in at.warning)
    assert at.query_params["seeds"] in ("0,1,2", ["0,1,2"])
    rows = chart_rows(at, 0)
    paper = {r["layer"]: r["value"] for r in rows if r["source"] == "paper"}
    mean = {r["layer"]: r for r in rows if r["source"] == "mean of 3 seeds (fake-bert)"}
    assert paper == fake_study.PAPER_CURVE and set(mean) == set(paper)
    for layer, row in mean.items():
        values = [fake_study.PAPER_CURVE[layer] + 0.004 * s for s in (0, 1, 2)]
        low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
        assert (row["value"], row["low"], row["high"]) == pytest.approx((np.mean(values), low, high))
        assert row["verdict"] == "reproduced"  # 0.004 ± 0.0099 off the paper: inside its ±0.02
    bars = chart_rows(at, 1)
    assert {r["verdict"] for r in bars if r["source"] != "paper"} == {"inconclusive"}  # ±0.01 band: straddled
    numbers, heads = at.dataframe[0].value, at.dataframe[1].value
    assert list(numbers["values"])[0] == "0.100, 0.104, 0.108"
    assert heads.iloc[0]["head"] == "1-2" and [heads.iloc[0][f"seed {s}"] for s in (0, 1, 2)] == [1, 4, 7]
    assert heads.iloc[0]["in top 5"] == "2 of 3"


@pytest.mark.parametrize("text, message", [("1,1", "1 is given twice"), ("a", "'a' is not a whole number"),
                                           ("4", "one seed (4) gives no interval")])
def test_bad_seeds_are_said_and_run_is_disabled(make_app, monkeypatch, text, message):
    at = _open(make_app, monkeypatch, **{"reproduce.seeds": text})
    assert not at.exception, at.exception
    assert any(message in plain(e.value) and plain(e.value).startswith("Seeds:") for e in at.error)
    assert at.button(key="reproduce.fake.run").disabled


def test_the_lesson_step_over_seeds_keeps_the_presenter_url(make_app):
    """The built-in lesson's "Does it survive another seed?" step: the Reproduce page on a slide wrote its own URL
    (write_now, before a possible st.stop()) and dropped the presenter's lesson and step, so the slide lost its place."""
    from core import lessons

    lesson = lessons.builtin()["bert-in-ten-views"]
    index = next(i for i, s in enumerate(lesson.steps) if s.page == "reproduce")
    assert lesson.steps[index].params["seeds"] == "0,1,2"
    at = make_app("all-MiniLM-L6-v2")
    at.query_params.update({"lesson": "bert-in-ten-views", "step": str(index + 1)})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception, at.exception
    assert at.session_state["reproduce.seeds"] == "0,1,2" and at.session_state["reproduce.study"] == "clark"
    assert at.query_params["lesson"] in ("bert-in-ten-views", ["bert-in-ten-views"])
    assert at.query_params["step"] in (str(index + 1), [str(index + 1)])
