"""The time-lapse player's charts (core/charts/timelapse.py): each chart's data is its frame's numbers, and every
scale is fixed over all frames (checked against numpy over the file's values), so nothing jumps while playing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.charts import timelapse as charts
from core.training.timelapse import Timelapse

LAYERS, HEADS = 3, 4


def make(steps=(0, 10, 20, 30), measured=3, seed=0) -> tuple[Timelapse, dict]:
    rng = np.random.default_rng(seed)
    frames = [{"step": s, "loss": float(rng.uniform(0.2, 1.3)), "dev_accuracy": float(rng.uniform(0.3, 0.9)),
               "rsa": rng.uniform(0.4, 1, LAYERS + 1).tolist(), "cka": rng.uniform(0.6, 1, LAYERS + 1).tolist(),
               "anisotropy": rng.uniform(0.12, 0.73, LAYERS + 1).tolist(),
               "attention_change": rng.uniform(0.55, 1, (LAYERS, HEADS)).tolist()} for s in steps[:measured]]
    data = {"steps": list(steps), "probe": "builtin", "seed": 0, "frames": frames}
    return Timelapse.from_json(data), data


def test_each_charts_data_is_its_frames_numbers():
    timelapse, data = make()
    for index, expected in enumerate(data["frames"]):
        similarity = charts.similarity_frame(timelapse, index)
        for measure, title in charts.MEASURES.items():
            np.testing.assert_array_equal(similarity[similarity.measure == title].sort_values("layer")["value"],
                                          expected[measure])
        attention = charts.attention_frame(timelapse, index).pivot(index="layer", columns="head", values="cosine")
        np.testing.assert_array_equal(attention.to_numpy(), expected["attention_change"])
        np.testing.assert_array_equal(charts.anisotropy_frame(timelapse, index)["anisotropy"], expected["anisotropy"])
    curve = charts.curve_frame(timelapse)
    assert curve[curve.measure == "dev loss"][["step", "value"]].values.tolist() == \
        [[f["step"], f["loss"]] for f in data["frames"]]
    assert curve[curve.measure == "dev accuracy"][["step", "value"]].values.tolist() == \
        [[f["step"], f["dev_accuracy"]] for f in data["frames"]]


def test_scales_cover_every_frame_on_a_grid_and_do_not_move_between_frames():
    timelapse, data = make()
    fixed = charts.scales(timelapse)
    frames = data["frames"]
    similarity = np.concatenate([np.r_[f["rsa"], f["cka"]] for f in frames])
    attention = np.concatenate([np.ravel(f["attention_change"]) for f in frames])
    anisotropy = np.concatenate([f["anisotropy"] for f in frames])
    assert fixed.similarity == (pytest.approx(math.floor(similarity.min() * 20) / 20), 1.0)
    assert fixed.attention == (pytest.approx(math.floor(attention.min() * 20) / 20), 1.0)
    assert fixed.anisotropy == (pytest.approx(math.floor(anisotropy.min() * 20) / 20),
                                pytest.approx(math.ceil(anisotropy.max() * 20) / 20))
    assert fixed.loss == (0.0, pytest.approx(math.ceil(max(f["loss"] for f in frames) * 20) / 20))
    assert fixed.steps == (0, 30)  # the planned last step, though the run was cancelled at step 20

    def domains(index: int) -> list:
        specs = [c.to_dict() for c in (charts.similarity_chart(timelapse, index), charts.attention_chart(timelapse, index),
                                        charts.anisotropy_chart(timelapse, index))]
        curve = charts.curve_chart(timelapse, index).to_dict()
        return ([specs[0]["encoding"]["y"]["scale"]["domain"], specs[1]["encoding"]["color"]["scale"]["domain"],
                 specs[2]["encoding"]["y"]["scale"]["domain"]] + [layer["encoding"]["x"]["scale"]["domain"]
                                                                  for layer in curve["layer"]])

    assert domains(0) == domains(1) == domains(2)
    assert domains(0)[:3] == [list(fixed.similarity), list(fixed.attention), list(fixed.anisotropy)]


def test_the_curves_marker_is_at_the_frames_step():
    timelapse, _ = make()
    for index, step in enumerate((0, 10, 20)):
        marker = charts.curve_chart(timelapse, index).to_dict()["layer"][-1]
        assert marker["mark"]["type"] == "rule"
        spec = charts.curve_chart(timelapse, index).to_dict()
        assert spec["datasets"][marker["data"]["name"]] == [{"step": step}]


def test_frame_zero_alone_still_has_a_span():
    """A model compared with itself: every similarity and cosine is 1; the scale still spans 0.9 to 1."""
    timelapse = Timelapse.from_json({"steps": [0, 10], "probe": "builtin", "seed": 0, "frames": [
        {"step": 0, "loss": 1.1, "dev_accuracy": 0.33, "rsa": [1.0] * 4, "cka": [1.0] * 4, "anisotropy": [0.3] * 4,
         "attention_change": [[1.0] * HEADS] * LAYERS}]})
    fixed = charts.scales(timelapse)
    assert fixed.similarity == (0.9, 1.0) and fixed.attention == (0.9, 1.0)
    assert fixed.anisotropy[0] < fixed.anisotropy[1]


def test_hidden_state_layers_count_the_embeddings():
    timelapse, _ = make()
    spec = charts.similarity_chart(timelapse, 0).to_dict()
    assert spec["encoding"]["x"]["title"] == "layer (0 = embeddings)"
    assert spec["encoding"]["x"]["scale"]["domain"] == [0, LAYERS]


def test_notebook_and_lesson_step_draw_a_runs_frame(tmp_path):
    """lens.timelapse_charts reads a run's file (by name, from the runs folder) and draws the closest frame; a lesson
    step naming the run draws the same, and [] when the run is not here."""
    import json

    from core import lens, settings

    timelapse, data = make()
    folder = settings.runs_dir() / ".tl-notebook.cancelled"
    folder.mkdir(parents=True)
    (folder / "status.json").write_text(json.dumps({"state": "cancelled"}))
    (folder / "timelapse.json").write_text(json.dumps(data))
    drawn = lens.timelapse_charts("tl-notebook", step=12)  # closest measured step: 10
    assert len(drawn) == 4
    similarity = drawn[1][0].to_dict()
    rows = similarity["datasets"][similarity["data"]["name"]]
    assert sorted(r["value"] for r in rows if r["measure"] == "RSA") == sorted(data["frames"][1]["rsa"])
    step = {"model": "all-MiniLM-L6-v2", "timelapse": "tl-notebook", "frame": "12"}
    assert [c.to_dict()["title"] for c, _ in lens.view("finetune", step)] == [c.to_dict()["title"] for c, _ in drawn]
    assert lens.view("finetune", {**step, "timelapse": "not-here"}) == []
    with pytest.raises(ValueError, match="No run named"):
        lens.timelapse_charts("not-here")


def test_frame_index_picks_the_closest_measured_step():
    timelapse, _ = make()  # frames at 0, 10, 20
    assert [charts.frame_index(timelapse, s) for s in (None, 0, 4, 5, 6, 14, 15, 99, -3)] == [2, 0, 0, 0, 1, 1, 1, 2, 0]
