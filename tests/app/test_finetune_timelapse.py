"""The fine-tuning page's time-lapse player (issue 35): a cancelled run's hand-written timelapse.json (3 frames of 5
planned) is played frame by frame, each chart's data equal to the file's numbers; the slider, Play and a link's
`frame` move frames; a run without a time-lapse shows no player; a malformed file gets a clear message; a link to
a run not on this computer says the one command that makes it."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from core import settings
from core.training import Recipe
from core.training.timelapse import FILE
from core.views.finetune import timelapse_command
from tests.app.conftest import chart_rows_titled

PAGE = "app_pages/finetune.py"
RUN = "tl-cancelled"
LAYERS, HEADS = 2, 4


def frame(step: int, rng) -> dict:
    """One frame as the contract writes it: rsa/cka/anisotropy [layers + 1], attention_change [layers][heads]."""
    return {"step": step, "loss": float(rng.uniform(0.3, 1.1)), "dev_accuracy": float(rng.uniform(0.3, 0.9)),
            "rsa": rng.uniform(0.5, 1, LAYERS + 1).tolist(), "cka": rng.uniform(0.5, 1, LAYERS + 1).tolist(),
            "anisotropy": rng.uniform(0.1, 0.6, LAYERS + 1).tolist(),
            "attention_change": rng.uniform(0.6, 1, (LAYERS, HEADS)).tolist(), "measure_seconds": 1.0}


def cancelled_run(name: str, content: str | None) -> None:
    """A cancelled run folder as core.training.runs leaves one, with `content` as its timelapse.json (None: none)."""
    folder = settings.runs_dir() / f".{name}.cancelled"
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps(Recipe(model="tiny", task="snli", run_name=name).to_dict()))
    (folder / "status.json").write_text(json.dumps({"state": "cancelled", "phase": "cancelled", "queued_at": time.time(),
                                                    "error": "cancelled by the user", "losses": []}))
    if content is not None:
        (folder / FILE).write_text(content)


@pytest.fixture
def timelapse_file():
    """3 of 5 planned frames, as a run cancelled after its third frame keeps them."""
    rng = np.random.default_rng(0)
    data = {"steps": [0, 5, 10, 15, 20], "probe": "snli:validation:100", "seed": 0,
            "frames": [frame(s, rng) for s in (0, 5, 10)], "dev_examples": 64,
            "measure_seconds": 3.0, "train_seconds": 12.0}
    cancelled_run(RUN, json.dumps(data))
    return data


@pytest.fixture
def page(make_app, tiny_bert_dir):
    def opened(**query):
        at = make_app(str(tiny_bert_dir))
        for name, value in query.items():
            at.query_params[name] = value
        at.switch_page(PAGE)
        return at.run()

    return opened


def assert_frame_shown(at, data: dict, step: int) -> None:
    """Each chart's data equals the file's numbers for the frame at `step`."""
    expected = next(f for f in data["frames"] if f["step"] == step)
    rows = chart_rows_titled(at, f"Similarity to the starting model at step {step}")
    for measure, title in (("rsa", "RSA"), ("cka", "linear CKA")):
        shown = sorted((r["layer"], r["value"]) for r in rows if r["measure"] == title)
        np.testing.assert_allclose([v for _, v in shown], expected[measure], rtol=1e-12)
    rows = chart_rows_titled(at, f"Anisotropy per layer at step {step}")
    np.testing.assert_allclose([r["anisotropy"] for r in sorted(rows, key=lambda r: r["layer"])], expected["anisotropy"])
    rows = chart_rows_titled(at, f"Attention change per head at step {step}")
    grid = np.full(np.shape(expected["attention_change"]), np.nan)
    for r in rows:
        grid[r["layer"] - 1, r["head"]] = r["cosine"]  # layers shown 1..L, as the line charts (issue 48)
    np.testing.assert_allclose(grid, expected["attention_change"])
    rows = chart_rows_titled(at, f"the dashed line is step {step}")
    curve = [r for r in rows if "measure" in r]
    assert sorted((r["step"], r["value"]) for r in curve if r["measure"] == "dev loss") == \
        [(f["step"], pytest.approx(f["loss"])) for f in data["frames"]]
    assert sorted((r["step"], r["value"]) for r in curve if r["measure"] == "dev accuracy") == \
        [(f["step"], pytest.approx(f["dev_accuracy"])) for f in data["frames"]]
    assert [r["step"] for r in rows if "measure" not in r] == [step]  # the marker


def similarity_y_domain(at, step: int) -> list:
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        if f"at step {step} (1 = unchanged)" in json.dumps(spec.get("title")):
            return spec["encoding"]["y"]["scale"]["domain"]
    raise AssertionError("no similarity chart")


def test_a_cancelled_runs_frames_play_with_the_files_numbers(page, timelapse_file):
    at = page()
    assert not at.exception
    assert at.selectbox(key="finetune.timelapse").value == RUN
    slider = at.select_slider(key="finetune.frame")
    assert slider.options == ["step 0", "step 5", "step 10"]  # the frames it kept, not the 5 planned
    assert slider.value == 10  # opens on the last frame measured
    assert_frame_shown(at, timelapse_file, 10)
    cost = next(c.value for c in at.caption if c.value.startswith("Measuring took"))
    assert "Measuring took 3.0 s of 12.0 s training (25%)" in cost and "it kept 3 of its 5 frames" in cost
    domain = similarity_y_domain(at, 10)
    low = min(min(f["rsa"] + f["cka"]) for f in timelapse_file["frames"])
    assert domain[1] == 1 and domain[0] <= low < domain[0] + 0.05  # over every frame, on a 0.05 grid

    at.select_slider(key="finetune.frame").set_value(5).run()
    assert not at.exception
    assert_frame_shown(at, timelapse_file, 5)
    assert similarity_y_domain(at, 5) == domain  # the axis does not jump between frames
    assert at.query_params["frame"] == "5" and at.query_params["timelapse"] == RUN


def test_play_steps_through_the_frames_and_stops_at_the_last(page, timelapse_file):
    at = page()
    at.button(key="finetune.timelapse_play").click().run()
    assert at.session_state["finetune.timelapse_playing"] and at.session_state["finetune.frame"] == 0  # from the start
    for step in (5, 10):
        at.run()  # what each timed rerun of the fragment does
        assert at.session_state["finetune.frame"] == step
        assert_frame_shown(at, timelapse_file, step)
    at.run()
    assert not at.session_state["finetune.timelapse_playing"] and at.session_state["finetune.frame"] == 10
    assert not at.exception


def test_a_link_reopens_the_player_at_its_frame(page, timelapse_file):
    at = page(timelapse=RUN, frame="5")
    assert not at.exception
    assert at.select_slider(key="finetune.frame").value == 5
    assert_frame_shown(at, timelapse_file, 5)
    at = page(timelapse=RUN, frame="7")  # not a measured step: the closest one
    assert at.select_slider(key="finetune.frame").value == 5


def test_a_run_still_training_shows_its_frames_so_far_and_picks_up_new_ones(page, timelapse_file):
    """The frames are measured inside the training job; the page only reads the file, again on each rerun."""
    import os

    from core.training.runs import partial_dir

    folder = partial_dir("tl-running")
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps(Recipe(model="tiny", task="snli", run_name="tl-running").to_dict()))
    (folder / "status.json").write_text(json.dumps({"state": "running", "phase": "training", "pid": os.getpid(),
                                                    "queued_at": time.time(), "step": 6, "total_steps": 20, "losses": []}))
    growing = {**timelapse_file, "frames": timelapse_file["frames"][:2]}
    (folder / FILE).write_text(json.dumps(growing))
    at = page(timelapse="tl-running")
    assert not at.exception
    assert at.select_slider(key="finetune.frame").options == ["step 0", "step 5"]
    assert "still training" in next(c.value for c in at.caption if c.value.startswith("Measuring took"))
    assert_frame_shown(at, growing, 5)
    (folder / FILE).write_text(json.dumps(timelapse_file))  # the job measured its third frame
    at.run()
    assert at.select_slider(key="finetune.frame").options == ["step 0", "step 5", "step 10"]
    at.select_slider(key="finetune.frame").set_value(10).run()
    assert_frame_shown(at, timelapse_file, 10)


def test_a_run_without_a_timelapse_shows_no_player(page):
    cancelled_run("no-timelapse", None)
    at = page()
    assert not at.exception
    assert not at.get("select_slider")
    assert not [e for e in at.selectbox if e.key == "finetune.timelapse"]
    assert any(c.value.startswith("No run has a time-lapse yet") for c in at.caption)


def test_a_malformed_timelapse_gets_a_clear_message(page):
    cancelled_run("broken", json.dumps({"steps": [0, 5], "probe": "builtin", "seed": 0}))
    at = page()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "time-lapse cannot be read" in errors[0] and "missing frames" in errors[0]
    assert not at.get("select_slider")


def test_a_link_to_a_run_not_here_says_the_command_that_makes_it(page, tiny_bert_dir, timelapse_file):
    at = page(timelapse="lesson-run")
    assert not at.exception
    command = timelapse_command("lesson-run", str(tiny_bert_dir))
    assert any(command in i.value and "not on this computer" in i.value for i in at.info)
    assert at.selectbox(key="finetune.timelapse").value is None  # another run is not shown in its place
    assert not at.get("select_slider")
    at.selectbox(key="finetune.timelapse").set_value(RUN).run()
    assert at.select_slider(key="finetune.frame").value == 10
    assert not any("not on this computer" in i.value for i in at.info)


def test_a_real_run_cancelled_after_two_frames_keeps_them_and_the_page_plays_them(page, tiny_bert_dir, tmp_path):
    """Issue 35: "a cancelled time-lapse run keeps its frames and the page plays them", on a tiny run trained here
    with a time-lapse of 4 frames and stopped once 2 were written."""
    import random

    from core.progress import Cancelled
    from core.training import finetune
    from core.training.runs import ended_dir, partial_dir
    from core.training.timelapse import read_timelapse

    rng = random.Random(0)
    filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
    data, probe = tmp_path / "animals.jsonl", tmp_path / "probe.txt"
    rows = [(" ".join(rng.sample(filler, 5) + [animal]), animal) for animal in rng.choices(["cat", "dog"], k=160)]
    data.write_text("".join(json.dumps({"text": text, "label": label}) + "\n" for text, label in rows))
    probe.write_text("\n".join(text for text, _ in rows[:12]) + "\n")
    recipe = Recipe(model=str(tiny_bert_dir), task=str(data), run_name="tl-real", epochs=1, lr=1e-3, batch_size=16,
                    max_length=16, cpu_threads=1, timelapse=4, timelapse_corpus=str(probe))

    def two_frames() -> bool:
        written = read_timelapse(partial_dir("tl-real"))
        return written is not None and len(written.frames) >= 2

    with pytest.raises(Cancelled):
        finetune(recipe, should_stop=two_frames)
    written = json.loads((ended_dir("tl-real", "cancelled") / FILE).read_text())
    assert len(written["frames"]) == 2 < len(written["steps"]) == 4

    at = page()
    assert not at.exception
    assert at.selectbox(key="finetune.timelapse").value == "tl-real"
    assert at.select_slider(key="finetune.frame").options == [f"step {f['step']}" for f in written["frames"]]
    cost = next(c.value for c in at.caption if c.value.startswith("Measuring took"))
    assert "it kept 2 of its 4 frames" in cost
    for step in reversed([f["step"] for f in written["frames"]]):
        at.select_slider(key="finetune.frame").set_value(step).run()
        assert not at.exception
        assert_frame_shown(at, written, step)
    first = chart_rows_titled(at, "Similarity to the starting model at step 0")
    assert all(r["value"] == pytest.approx(1, abs=1e-6) for r in first)  # frame 0: the model against itself


def test_the_lessons_step_says_the_command_when_its_run_is_not_here():
    """The built-in lesson's "Watch the top layers move", in presenter mode on a computer without its run."""
    from streamlit.testing.v1 import AppTest

    from core import lessons
    from tests.app.conftest import APP_FILE

    lesson = lessons.builtin()["bert-in-ten-views"]
    number, step = next((i + 1, s) for i, s in enumerate(lesson.steps) if s.title == "Watch the top layers move")
    at = AppTest.from_file(APP_FILE, default_timeout=180)
    at.query_params.update({"lesson": "bert-in-ten-views", "step": str(number)})
    at.switch_page("app_pages/present.py").run()
    assert not at.exception, at.exception
    command = timelapse_command(step.params["timelapse"], step.params["model"])
    assert command == ("python -m core finetune --model all-MiniLM-L6-v2 --task snli --run minilm-snli-timelapse "
                       "--train-limit 2000 --epochs 1 --timelapse 10")
    # Issue 48: first on the slide, without the run's id (an internal name); the command is in the speaker notes
    assert "not on this computer" in at.info[0].value and step.params["timelapse"] not in at.info[0].value
    assert any(command in caption.value for caption in at.caption)


def test_the_forms_time_lapse_box_goes_into_the_recipe(page, monkeypatch):
    """The form's "Time-lapse" box, frame count and probe corpus become the queued recipe's timelapse and
    timelapse_corpus; unticked, the recipe has none. No real worker: the runs stay queued."""
    from core.training import list_runs
    from tests.app.conftest import FakeProcess

    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: FakeProcess())
    at = page()
    at.text_input(key="finetune.run_name").input("plain")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    at.text_input(key="finetune.run_name").input("watched")
    at.checkbox(key="finetune.timelapse_on").check()
    at.number_input(key="finetune.timelapse_frames").set_value(6)
    at.text_input(key="finetune.timelapse_corpus").input("builtin")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception and not at.error
    recipes = {r.name: r.recipe for r in list_runs()}
    assert (recipes["plain"]["timelapse"], recipes["plain"]["timelapse_corpus"]) == (0, None)
    assert (recipes["watched"]["timelapse"], recipes["watched"]["timelapse_corpus"]) == (6, "builtin")
