"""Freezing any set of layers: the frozen layers of a saved run are bit-identical to the base model's, the others
moved; the CLI's layer-set syntax; the "remove layer 12" preset's third arm."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.conftest import make_tiny_bert
from core.training import Recipe, finetune
from core.training.recipe import format_layer_set, parse_layer_set
from core.training.runs import final_dir


@pytest.fixture(scope="module")
def three_layer_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny3"), layers=3)


@pytest.fixture(scope="module")
def word_file(tmp_path_factory):
    rng = random.Random(1)
    path = tmp_path_factory.mktemp("data") / "words.jsonl"
    filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
    with open(path, "w") as handle:
        for _ in range(120):
            label = rng.choice(["cat", "dog"])
            handle.write(json.dumps({"text": " ".join(rng.sample(filler, 4) + [label]), "label": label}) + "\n")
    return str(path)


def _weights(folder) -> dict[str, np.ndarray]:
    # Read straight from the safetensors files, not through the app's loader, so the check is independent of it.
    return {k.removeprefix("bert."): v for k, v in load_file(str(folder / "model.safetensors")).items()}


def test_parse_layer_set():
    assert parse_layer_set("11") == (11,)
    assert parse_layer_set("0-5,11") == (0, 1, 2, 3, 4, 5, 11)
    assert parse_layer_set(" 3 - 4 , 1 ") == (1, 3, 4)
    assert parse_layer_set("") == () and parse_layer_set(None) == ()
    assert format_layer_set((0, 1, 2, 3, 4, 5, 11)) == "0-5,11"
    for bad in ("x", "5-2", "1,,2", "-1"):
        with pytest.raises(ValueError):
            parse_layer_set(bad)


def test_recipe_keeps_frozen_layers_through_json():
    recipe = Recipe(model="m", task="snli", run_name="r", frozen_layers=[11, 0, 0])
    assert recipe.frozen_layers == (0, 11)
    assert Recipe.from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe
    with pytest.raises(ValueError, match="negative"):
        Recipe(model="m", task="snli", run_name="r", frozen_layers=(-1,))


@pytest.mark.parametrize("frozen, embeddings", [((2,), False), ((0, 2), True)])
def test_frozen_layers_are_bit_identical_to_the_base_model(three_layer_bert, word_file, frozen, embeddings):
    name = f"freeze-{'-'.join(map(str, frozen))}-{int(embeddings)}"
    recipe = Recipe(model=str(three_layer_bert), task=word_file, run_name=name, epochs=2, lr=1e-2, batch_size=16,
                    max_length=16, cpu_threads=1, frozen_layers=frozen, freeze_embeddings=embeddings)
    metrics = finetune(recipe)
    assert list(metrics["recipe"]["frozen_layers"]) == list(frozen)
    base, trained = _weights(three_layer_bert), _weights(final_dir(name))
    for layer in range(3):
        keys = [k for k in base if k.startswith(f"encoder.layer.{layer}.")]
        assert keys
        same = [np.array_equal(base[k], trained[k]) for k in keys]
        if layer in frozen:
            assert all(same), f"layer {layer} was frozen but changed"
        else:
            assert not all(same), f"layer {layer} was trained but did not change"
    embedding_keys = [k for k in base if k.startswith("embeddings.")]
    assert all(np.array_equal(base[k], trained[k]) for k in embedding_keys) == embeddings


def test_freezing_a_layer_the_model_lacks_fails(three_layer_bert, word_file):
    recipe = Recipe(model=str(three_layer_bert), task=word_file, run_name="freeze-bad", frozen_layers=(3,),
                    epochs=1, cpu_threads=1)
    with pytest.raises(ValueError, match="layers 1-3"):  # numbered as on every chart (core.numbering)
        finetune(recipe)


def test_cli_freeze_layers_is_numbered_as_the_charts(three_layer_bert, word_file, capsys):
    """--freeze-layers 1-2: layers 1 and 2 as every chart numbers them, array indices 0 and 1 (core.numbering)."""
    from core.__main__ import main

    assert main(["finetune", "--model", str(three_layer_bert), "--task", word_file, "--run", "cli-freeze",
                 "--freeze-layers", "1-2", "--epochs", "1", "--max-length", "16", "--threads", "1", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["recipe"]["frozen_layers"] == [0, 1] and "freeze_layers" not in metrics["recipe"]
    base, trained = _weights(three_layer_bert), _weights(final_dir("cli-freeze"))
    assert all(np.array_equal(base[k], trained[k]) for k in base if k.startswith(("encoder.layer.0.", "encoder.layer.1.")))


def test_slides_preset_has_a_freeze_last_arm(three_layer_bert, word_file, monkeypatch):
    """The study's third run freezes the model's last layer (index 2 of 3) and reports its time beside the others."""
    from core.studies import StudyOptions
    from core.studies import slides_layer12

    monkeypatch.setitem(slides_layer12.TASKS, word_file, "slides-layer12-snli")
    result = slides_layer12.run(StudyOptions(model=str(three_layer_bert), corpus=word_file, limit=60,
                                             extra={"eval_limit": 30}))
    assert set(result.measured["test accuracy"]) == {"12 layers, linear head", "11 layers (layer 12 removed), MLP head",
                                                     "12 layers, layer 12 frozen, linear head"}
    seconds = result.measured["train seconds"]
    ratio = seconds["12 layers, layer 12 frozen, linear head"] / seconds["12 layers, linear head"]
    assert result.measured["train time, freeze last / all layers"]["measured"] == pytest.approx(ratio)
    claim = [c for c in result.comparisons if c.reference.key == "slides-freeze12-faster"][0]
    assert claim.rows[0].measured == float(ratio < 1)
    assert result.measured["layers"]["12 layers, layer 12 frozen, linear head"] == 3
