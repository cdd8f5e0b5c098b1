"""Issue 45, parity: every subcommand of the Masked words and Read the layers views (fill-mask, fit-mlm-head, lens,
fit-tuned-lens, neurons, neurons-diff, sae-train, sae-features) has a core.lens twin taking the same settings, whose
`return_data=True` `.to_json()` is what the command's `--json` prints (same keys, same numbers; a training's
`seconds` is its own clock), on tiny random models. The declared bounds hold on both fronts alike."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from core import lens
from core.__main__ import main
from core.analyses import sparse_features as sf
from core.data.sources import TEXT
from core.model.loading import load_model
from tests.cli_json import cli_json
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

WORDS = "the a cat dog man woman girl boy sat ran on in at to of mat river bank park house tree".split()


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return str(make_tiny_mlm(tmp_path_factory.mktemp("twins-mlm"), layers=3))


@pytest.fixture()
def corpus_file(tmp_path):
    rng = np.random.default_rng(5)
    lines = sorted({" ".join(rng.choice(WORDS, size=int(rng.integers(4, 9)))) + " ." for _ in range(120)})
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def exit_status(argv) -> int:
    """main's status, a refusal by the argument parser (SystemExit) included."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


def same(a, b):
    """The same JSON, but for a training's own clock (`seconds`, `encode_seconds`): same keys, same values."""
    assert sorted(a) == sorted(b)
    for key in (k for k in a if not k.endswith("seconds")):
        np.testing.assert_equal(json.loads(json.dumps(a[key])), json.loads(json.dumps(b[key])), err_msg=key)


def test_fill_mask_twin_gives_the_cli_json_with_the_same_settings(mlm_dir, capsys):
    text = "the [MASK] sat on the [MASK] ."
    printed = cli_json(capsys, "fill-mask", "--model", mlm_dir, "--text", text, "--top-k", "3", "--layers", "0,2")
    data = lens.fill_mask(mlm_dir, text, top_k=3, layers="0,2", return_data=True)
    same(printed, data.to_json())
    layers = printed["masks"][0]["layers"]
    assert [row["layer"] for row in layers] == [0, 2, 3] and len(layers[0]["top"]) == 3
    # the declared bound, on both fronts: one line naming the setting, exit status 2
    assert exit_status(["fill-mask", "--model", mlm_dir, "--text", text, "--top-k", "51"]) == 2
    assert "top_k must be within 1…50" in capsys.readouterr().err
    with pytest.raises(ValueError, match="top_k must be within 1…50"):
        lens.fill_mask(mlm_dir, text, top_k=51)


def test_lens_twin_gives_the_cli_json(mlm_dir, capsys):
    printed = cli_json(capsys, "lens", "--model", mlm_dir, "--text", "the cat sat .", "--top-k", "2")
    chart, frame, result = data = lens.logit_lens(mlm_dir, "the cat sat .", top_k=2, return_data=True)
    same(printed, data.to_json())
    assert result.to_json() == data.to_json() and printed["layers"] == [0, 1, 2, 3]
    assert len(printed["top"][0][0]) == 2


def test_fit_tuned_lens_twin_saves_what_the_cli_saves(mlm_dir, corpus_file, capsys):
    printed = cli_json(capsys, "fit-tuned-lens", "--model", mlm_dir, "--corpus", corpus_file, "--limit", "40",
                       "--steps", "4", "--batch-tokens", "32", "--out", "twin-lens")
    data = lens.fit_tuned_lens(mlm_dir, corpus_file, "twin-lens", limit=40, steps=4, batch_tokens=32, overwrite=True,
                               return_data=True)
    same(printed, data.to_json())
    assert data.result.path == printed["path"]
    kl = data[1]  # the chart's frame: held-out KL of both lenses per layer, as the JSON has them
    np.testing.assert_allclose(kl[kl["lens"] == "tuned lens"]["kl"], printed["kl_tuned_held_out"], rtol=1e-6)


def test_fit_mlm_head_twin_saves_what_the_cli_saves(tmp_path, corpus_file, capsys):
    encoder = str(make_tiny_bert(tmp_path / "encoder"))
    printed = cli_json(capsys, "fit-mlm-head", "--model", encoder, "--corpus", corpus_file, "--steps", "5", "--out",
                       "twin-head")
    fit = lens.fit_mlm_head(encoder, corpus_file, "twin-head", steps=5, overwrite=True)
    same(printed, fit.to_json())
    assert fit.path == printed["path"]
    assert exit_status(["fit-mlm-head", "--model", encoder, "--corpus", corpus_file, "--steps", "0", "--out", "x"]) == 2
    assert "steps must be within 1…" in capsys.readouterr().err


def test_neurons_twins_give_the_cli_json(tmp_path, tiny_bert_dir, corpus_file, capsys):
    model = str(tiny_bert_dir)
    printed = cli_json(capsys, "neurons", "--model", model, "--layer", "2", "--corpus", corpus_file, "--top", "3",
                       "--neurons", "5", "--text", "the cat sat .")
    data = lens.neurons(model, corpus_file, layer=2, k=3, top=5, text="the cat sat .", return_data=True)
    same(printed, data.to_json())
    assert len(printed["neurons"]) == 5 and printed["k"] == 3 and set(printed["sentence"]["activations"]) == {
        str(n["neuron"]) for n in printed["neurons"]}
    one = cli_json(capsys, "neurons", "--model", model, "--corpus", corpus_file, "--neuron", "7")
    same(one, lens.neurons(model, corpus_file, neuron=7, return_data=True).to_json())
    assert one["layer"] == 2  # no --layer / layer=: the last layer, on both fronts

    other = str(make_tiny_bert(tmp_path / "other", seed=1))
    printed = cli_json(capsys, "neurons-diff", "--model", model, "--model", other, "--layer", "1", "--corpus",
                       corpus_file, "--top", "4")
    data = lens.neurons_diff(model, other, corpus_file, layer=1, top=4, return_data=True)
    same(printed, data.to_json())
    assert list(data[1]["neuron"]) == [n["neuron"] for n in printed["neurons"]]


def test_sae_twins_give_the_cli_json(tiny_bert_dir, corpus_file, capsys):
    model = str(tiny_bert_dir)
    argv = ["sae-train", "--model", model, "--corpus", corpus_file, "--limit", "80", "--layer", "1", "--out",
            "twin-sae", "--features", "32", "--k", "4", "--steps", "20", "--batch", "64"]
    printed = cli_json(capsys, *argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = lens.sae_train(model, corpus_file, 1, "twin-sae", limit=80, features=32, k=4, steps=20, batch=64,
                              overwrite=True, return_data=True)
    same(printed, data.to_json())
    assert printed["truncated"] == {"tokens_dropped": 0} and data.result.path == printed["path"]
    assert len(data[1]) == len(printed["losses"])

    printed = cli_json(capsys, "sae-features", "--sae", "twin-sae", "--text", "the cat sat on the mat .")
    data = lens.features("twin-sae", "the cat sat on the mat .", return_data=True)
    same(printed, data.to_json())
    assert printed["features"] and printed["layer"] == 1

    # F and k stay required on the command line; the notebook names them when left out
    assert exit_status(["sae-train", "--model", model, "--corpus", corpus_file, "--layer", "1", "--out", "x",
                        "--k", "4"]) == 2
    with pytest.raises(sf.SaeError, match="give the number of features and k"):
        lens.sae_train(model, corpus_file, 1, "x", k=4)


def test_the_lens_twins_are_made_from_the_declarations():
    from core import views

    for name, function in [("fill-mask", lens.fill_mask), ("fit-mlm-head", lens.fit_mlm_head),
                           ("lens", lens.logit_lens), ("fit-tuned-lens", lens.fit_tuned_lens),
                           ("neurons", lens.neurons), ("neurons-diff", lens.neurons_diff),
                           ("sae-train", lens.sae_train), ("sae-features", lens.features)]:
        assert function.analysis is views.analysis(name)


def _data_of(chart):
    """The rows an altair chart draws (its top-level data, else its first part's)."""
    spec = chart.to_dict()
    values = spec.get("datasets", {})
    return [row for rows in values.values() for row in rows]


def test_a_lesson_step_on_the_neurons_or_features_tab_draws_that_tab(tiny_bert_dir):
    """Before: lens.view drew the Lens tab's charts for every step of the page (tab=Neurons too), which a model
    without a masked-word head cannot even draw."""
    model = str(tiny_bert_dir)
    step = {"model": model, "a": "the cat sat .", "tab": "Neurons", "neuron_layer": "1", "neuron": "3",
            "neuron_corpus": "Built-in sentences"}
    (listed, caption), (contexts, _) = lens.view("layers", step)
    _, frame = lens.neurons(model, "builtin", layer=1, return_data=True)
    drawn = {row["neuron"]: row["max activation"] for row in _data_of(listed) if "max activation" in row}
    assert drawn == dict(zip(frame["neuron"], frame["max activation"])) and "layer 1" in caption
    _, one = lens.neurons(model, "builtin", layer=1, neuron=3, return_data=True)
    assert sorted(r["activation"] for r in _data_of(contexts) if "activation" in r and "rank" in r) == sorted(
        one["activation"])
    with pytest.raises(ValueError, match="cannot be read from the link"):
        lens.view("layers", {**step, "neuron_corpus": TEXT})

    sf.train_sae(load_model(model), ["the cat sat on the mat .", "a dog ran to the park ."] * 20, 1,
                 sf.TrainSettings(features=16, k=2, batch=32, steps=5, checkpoint_every=1e9), "lesson-sae")
    ((chart, caption),) = lens.view("layers", {"model": model, "a": "the cat sat .", "tab": "Sparse features",
                                               "sae": "lesson-sae"})
    found = lens.features("lesson-sae", "the cat sat .", return_data=True).result
    assert {r["feature"] for r in _data_of(chart)} == {int(f) for f in found.features[:15]}
