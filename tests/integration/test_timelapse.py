"""The time-lapse of a fine-tuning run (issue 35), on a tiny random BERT and a tiny labelled file: frames measured in
the training loop equal the command-line twins run afterwards (`compare`, `attention-change`, `probe`), frame 0 is
the starting model against itself, a cancelled run keeps its frames, kept checkpoints load as NAME@STEP with the
weights of that step, measuring changes nothing in the training, and bad values get clear messages."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from core.__main__ import main
from core.model.loading import ModelUnavailable, available_models, load_model
from core.progress import Cancelled
from core.training import finetune, load_classifier
from core.training.runs import ended_dir, final_dir, partial_dir
from core.training.timelapse import FILE, FRAME_KEYS, frame_steps, kept_checkpoints, read_timelapse
from tests.integration.test_cli_json import _our_progress
from tests.integration.test_training import ANIMALS, FILLER, animal_file, tiny_recipe  # noqa: F401 (fixture)

FRAMES = 4
EPOCHS = 2
BATCH = 16


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    """A CoNLL-U probe set in the tiny model's vocabulary: a chain of words hanging off a root (a tree to probe)."""
    rng = random.Random(1)
    blocks = []
    for _ in range(30):
        words = rng.sample(FILLER, 5) + [rng.choice(ANIMALS)]
        root = rng.randrange(len(words)) + 1
        heads = [0 if i == root else (i + 1 if i < root else i - 1) for i in range(1, len(words) + 1)]
        blocks.append("".join(f"{i}\t{w}\t{w}\tNOUN\tNN\t_\t{h}\t{'root' if h == 0 else 'dep'}\t_\t_\n"
                              for i, (w, h) in enumerate(zip(words, heads), start=1)))
    path = tmp_path_factory.mktemp("probe") / "probe.conllu"
    path.write_text("\n".join(blocks) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("models_cache")


@pytest.fixture
def shared_cache(cache, monkeypatch):
    """One models_cache for the module: the run trained once is read by every test."""
    monkeypatch.setenv("BERTLENS_CACHE", str(cache))
    return cache


def recipe(tiny_bert_dir, animal_file, treebank, name, **changes):
    values = dict(epochs=EPOCHS, batch_size=BATCH, timelapse=FRAMES, timelapse_corpus=treebank, keep_checkpoints=2)
    return tiny_recipe(tiny_bert_dir, animal_file, name, **{**values, **changes})


@pytest.fixture
def run(tiny_bert_dir, animal_file, treebank, shared_cache):
    """The run with a time-lapse of 4 frames and 2 checkpoints, trained once, and its metrics."""
    folder = final_dir("tl-run")
    if not folder.is_dir():
        finetune(recipe(tiny_bert_dir, animal_file, treebank, "tl-run"))
    return "tl-run", json.loads((folder / "metrics.json").read_text())


def cli_json(capsys, *argv) -> dict:
    """One JSON object on stdout, and under --quiet no progress ("12/40") on stderr."""
    assert main([*argv, "--json", "--quiet"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert _our_progress(captured.err) == [], captured.err
    return json.loads(captured.out)


def test_frames_are_written_with_the_contract_keys(run):
    name, metrics = run
    steps = frame_steps(EPOCHS * -(-320 // BATCH), FRAMES)  # 400 examples, a fifth held out
    assert metrics["timelapse"] == {"steps": list(steps), "frames": FRAMES}
    values = json.loads((final_dir(name) / FILE).read_text())
    assert {"steps", "probe", "seed", "frames"} <= set(values) and values["steps"] == list(steps)
    assert set(values["frames"][0]) == {*FRAME_KEYS, "uuas", "measure_seconds"}  # uuas: the probe is a treebank
    timelapse = read_timelapse(final_dir(name))
    assert timelapse.complete and [f.step for f in timelapse.frames] == list(steps) and timelapse.steps[-1] == metrics["steps"]
    # The cost is reported: per frame, in all, and against the training time metrics.json reports.
    assert all(f.measure_seconds > 0 for f in timelapse.frames)
    assert timelapse.measure_seconds == pytest.approx(sum(f.measure_seconds for f in timelapse.frames))
    assert metrics["timelapse_seconds"]["measuring"] == pytest.approx(timelapse.measure_seconds)
    assert timelapse.train_seconds == pytest.approx(metrics["train_seconds"], rel=0.05, abs=0.05)


def test_frame_zero_is_the_starting_model_against_itself(run):
    first = read_timelapse(final_dir(run[0])).frames[0]
    assert first.step == 0
    np.testing.assert_allclose(first.rsa, 1.0, atol=1e-6)
    np.testing.assert_allclose(first.cka, 1.0, atol=1e-6)
    np.testing.assert_allclose(first.attention_change, 1.0, atol=1e-6)  # a cosine: 1 = unchanged (attention-change)
    later = read_timelapse(final_dir(run[0])).frames[-1]
    assert later.cka.min() < 0.99 and later.attention_change.min() < 0.999  # training moved the model


def test_the_last_frame_equals_the_commands_on_the_finished_run(run, tiny_bert_dir, treebank, capsys):
    name, metrics = run
    last = read_timelapse(final_dir(name)).frames[-1]
    base = str(tiny_bert_dir)
    compared = cli_json(capsys, "compare", "--a", base, "--b", name, "--corpus", treebank, "--seed", "0")
    np.testing.assert_allclose(last.rsa, compared["rsa"], atol=1e-4)
    np.testing.assert_allclose(last.cka, compared["cka"], atol=1e-4)
    changed = cli_json(capsys, "attention-change", "--a", base, "--b", name, "--corpus", treebank, "--seed", "0")
    np.testing.assert_allclose(last.attention_change, changed["cosine"], atol=1e-4)
    probed = cli_json(capsys, "probe", "--model", name, "--corpus", treebank, "--seed", "0", "--no-cache")
    np.testing.assert_allclose(last.uuas, probed["uuas"], atol=1e-4)

    # Dev loss and accuracy: the finished classifier's probabilities on the same examples (all 80 held out here).
    from core.training.tasks import load_task

    examples = load_task(metrics["task"]).eval
    clf = load_classifier(name)
    probs = clf.predict_proba([(e.text, e.text_b) for e in examples], max_length=32)
    targets = np.array([clf.labels.index(e.label) for e in examples])
    assert last.dev_accuracy == pytest.approx(np.mean(probs.argmax(1) == targets), abs=1e-6)
    assert last.dev_accuracy == pytest.approx(metrics["accuracy"], abs=1e-6)
    assert last.loss == pytest.approx(-np.mean(np.log(probs[np.arange(len(targets)), targets])), abs=1e-4)

    # Anisotropy: mean cosine of the frame's seeded cross-sentence word pairs, recomputed from the run's own vectors.
    from core.analyses.anisotropy.measures import draw_cross_sentence_pairs
    from core.analyses.similarity import Reference
    from core.data.corpus import resolve

    vectors = Reference.of(load_model(name), list(resolve(treebank, 0).head(500).sentences)).vectors
    pairs = draw_cross_sentence_pairs(vectors.sentence, 1000, 0)
    a, b = vectors.vectors[:, pairs[:, 0]], vectors.vectors[:, pairs[:, 1]]
    cosines = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    np.testing.assert_allclose(last.anisotropy, cosines.mean(axis=1), atol=1e-5)


def test_kept_checkpoints_load_as_name_at_step_with_that_steps_weights(run, tiny_bert_dir):
    name, metrics = run
    timelapse = read_timelapse(final_dir(name))
    first, final = kept_checkpoints(timelapse.steps, 2)
    assert (first, final) == (0, metrics["steps"]) and timelapse.checkpoints == (first, final)
    listed = {e.name: e.source for e in available_models()}
    assert listed[f"{name}@{final}"] == "checkpoint" and listed[f"{name}@0"] == "checkpoint"

    def weights(folder):
        return load_file(f"{folder}/model.safetensors")

    at_final, run_weights = weights(load_model(f"{name}@{final}").path), weights(final_dir(name))
    assert at_final.keys() == run_weights.keys()
    assert all(torch.equal(at_final[k], run_weights[k]) for k in run_weights)
    at_start, base = weights(load_model(f"{name}@0").path), weights(tiny_bert_dir)
    shared = [k for k in base if k in at_start]
    assert shared and all(torch.equal(at_start[k], base[k]) for k in shared)  # step 0: not trained yet
    assert load_classifier(f"{name}@{final}").labels == tuple(ANIMALS)

    with pytest.raises(ModelUnavailable, match=rf"no checkpoint at step '3'.*kept steps 0, {final} \({name}@0"):
        load_model(f"{name}@3")


def test_measuring_does_not_change_what_is_trained(run, tiny_bert_dir, animal_file, treebank, shared_cache):
    plain = recipe(tiny_bert_dir, animal_file, treebank, "tl-plain").replace(timelapse=0, keep_checkpoints=0)
    finetune(plain)
    assert read_timelapse(final_dir("tl-plain")) is None
    assert not (final_dir("tl-plain") / "checkpoints").exists()
    watched, unwatched = load_file(str(final_dir(run[0]) / "model.safetensors")), load_file(str(final_dir("tl-plain") / "model.safetensors"))
    assert all(torch.equal(watched[k], unwatched[k]) for k in unwatched)


def test_a_cancelled_run_keeps_the_frames_it_had(tiny_bert_dir, animal_file, treebank):
    def two_frames() -> bool:
        timelapse = read_timelapse(partial_dir("tl-cancel"))
        return timelapse is not None and len(timelapse.frames) >= 2

    with pytest.raises(Cancelled):
        finetune(recipe(tiny_bert_dir, animal_file, treebank, "tl-cancel", keep_checkpoints=0), should_stop=two_frames)
    kept = read_timelapse(ended_dir("tl-cancel", "cancelled"))
    assert [f.step for f in kept.frames] == list(kept.steps[:2]) and not kept.complete
    assert not list(ended_dir("tl-cancel", "cancelled").glob(".*.tmp"))


@pytest.mark.parametrize("extra, message", [
    (["--timelapse", "-1"], "--timelapse: timelapse must be within 0…, got -1"),  # the declaration's own check
    (["--timelapse", "1"], "timelapse 1: give 0 (off) or at least 2 frames"),
    (["--timelapse", "3", "--keep-checkpoints", "4"], "keep_checkpoints 4: keep 0 to 3"),
    (["--keep-checkpoints", "1"], "add timelapse N"),
    (["--timelapse", "3"], "give timelapse_corpus"),  # a task file has no dev split to sample the probe from
    (["--timelapse", "500", "--timelapse-corpus", "builtin"], "ask for at most 21 frames"),
])
def test_bad_values_get_clear_messages(tiny_bert_dir, animal_file, capsys, extra, message):
    argv = ["finetune", "--model", str(tiny_bert_dir), "--task", animal_file, "--run", "tl-bad", "--epochs", "1",
            "--batch-size", str(BATCH), "--max-length", "16", "--threads", "1", "--quiet", *extra]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own type check
        code = exit_.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_finetune_json_prints_the_timelapse_key_and_quiet_means_quiet(tiny_bert_dir, animal_file, capsys):
    metrics = cli_json(capsys, "finetune", "--model", str(tiny_bert_dir), "--task", animal_file, "--run", "tl-cli",
                       "--epochs", "1", "--batch-size", str(BATCH), "--max-length", "16", "--threads", "1",
                       "--timelapse", "3", "--timelapse-corpus", "builtin")
    assert metrics["timelapse"] == {"steps": [0, 10, 20], "frames": 3}
    assert {"accuracy", "loss_curve", "train_seconds", "recipe"} <= set(metrics)  # today's keys stay
    assert metrics["recipe"]["timelapse"] == 3 and metrics["recipe"]["timelapse_corpus"] == "builtin"
    timelapse = read_timelapse(final_dir("tl-cli"))
    assert timelapse.probe == "builtin" and timelapse.complete and timelapse.frames[0].uuas is None


def test_the_notebook_reads_the_timelapse_by_run_name(run):
    from core import lens

    name, metrics = run
    timelapse = lens.timelapse(name)
    assert timelapse.steps == read_timelapse(final_dir(name)).steps and len(timelapse.frames) == FRAMES
    with pytest.raises(ValueError, match="no time-lapse"):
        lens.timelapse(str(final_dir(name) / "checkpoints" / "step-0"))
    with pytest.raises(ValueError, match="No run named 'nope'"):
        lens.timelapse("nope")
