"""The time-lapse file: its steps, its reader (frames kept, clear errors) and its contract keys."""

import json

import numpy as np
import pytest

from core.training.timelapse import (FILE, FRAME_KEYS, Frame, Timelapse, TimelapseWriter, frame_steps, kept_checkpoints,
                                     read_timelapse)


def frame(step: int, layers: int = 3, heads: int = 2) -> Frame:
    rng = np.random.default_rng(step)
    return Frame(step, 1.0 / (step + 1), 0.5, rng.random(layers + 1), rng.random(layers + 1), rng.random(layers + 1),
                 rng.random((layers, heads)), measure_seconds=0.25)


def test_steps_are_evenly_spaced_from_zero_to_the_final_step():
    assert frame_steps(100, 5) == (0, 25, 50, 75, 100)
    assert frame_steps(10, 11) == tuple(range(11))
    steps = frame_steps(37, 10)
    assert steps[0] == 0 and steps[-1] == 37 and len(set(steps)) == 10
    assert np.allclose(np.diff(steps), 37 / 9, atol=1)


@pytest.mark.parametrize("frames, message", [(1, "at least 2 frames"), (12, "at most 11 frames")])
def test_bad_frame_counts_say_what_to_give(frames, message):
    with pytest.raises(ValueError, match=message):
        frame_steps(10, frames)


def test_kept_checkpoints_are_evenly_chosen_and_include_the_final_step():
    steps = frame_steps(90, 10)
    assert kept_checkpoints(steps, 0) == ()
    assert kept_checkpoints(steps, 1) == (90,)
    assert kept_checkpoints(steps, 2) == (0, 90)
    assert kept_checkpoints(steps, 10) == steps
    assert len(kept_checkpoints(steps, 4)) == 4
    with pytest.raises(ValueError, match="0 to 10"):
        kept_checkpoints(steps, 11)


def test_written_frames_read_back_and_a_partial_file_keeps_its_frames(tmp_path):
    tmp_path = tmp_path / "run"
    tmp_path.mkdir()
    assert read_timelapse(tmp_path) is None
    writer = TimelapseWriter(tmp_path, Timelapse(frame_steps(20, 3), "snli:dev:100", 7, dev_examples=100))
    assert read_timelapse(tmp_path).frames == ()
    first = frame(0)
    writer.add(first, train_seconds=0.0)
    writer.add(frame(10), train_seconds=4.0)
    back = read_timelapse(tmp_path)
    assert back.steps == (0, 10, 20) and back.probe == "snli:dev:100" and back.seed == 7
    assert [f.step for f in back.frames] == [0, 10] and not back.complete
    np.testing.assert_array_equal(back.frames[0].attention_change, first.attention_change)
    np.testing.assert_array_equal(back.frames[0].cka, first.cka)
    assert back.measure_seconds == pytest.approx(0.5) and back.measure_share == pytest.approx(0.125)
    assert not list(tmp_path.glob("*.tmp*")) and [p.name for p in tmp_path.iterdir()] == [FILE]


def test_the_file_has_the_contract_keys(tmp_path):
    writer = TimelapseWriter(tmp_path, Timelapse((0, 5), "builtin", 0))
    writer.add(frame(0), train_seconds=0.0)
    values = json.loads((tmp_path / FILE).read_text())
    assert {"steps", "probe", "seed", "frames"} <= set(values)
    assert set(values["frames"][0]) == {*FRAME_KEYS, "measure_seconds"}
    assert np.array(values["frames"][0]["attention_change"]).shape == (3, 2)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not a readable time-lapse"),
    ("[1, 2]", "expected a JSON object"),
    ('{"steps": [0, 5], "probe": "x", "seed": 0}', "missing frames"),
    ('{"steps": [0, 5], "probe": "x", "seed": 0, "frames": [{"step": 0}]}', "frame 0: missing loss"),
    ('{"steps": [0, 5], "probe": "x", "seed": 0, "frames": [{"step": 3, "loss": 1, "dev_accuracy": 1, "rsa": [1], '
     '"cka": [1], "anisotropy": [1], "attention_change": [[1]]}]}', "not among the planned steps"),
    ('{"steps": [0, 5], "probe": "x", "seed": 0, "frames": [{"step": 0, "loss": 1, "dev_accuracy": 1, "rsa": [1], '
     '"cka": [1], "anisotropy": [1], "attention_change": [1]}]}', "list of lists"),
])
def test_a_malformed_file_gets_a_clear_message_naming_it(tmp_path, text, message):
    (tmp_path / FILE).write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        read_timelapse(tmp_path)
    assert FILE in str(err.value)
