"""The "Heads over a dataset" and "What causes it?" analyses declared once (core.contract): each lens twin
(lens.heads, lens.attention_change, lens.syntax_heads, lens.patch; lens.ablate in test_ablation.py) returns with
return_data=True the very JSON its CLI twin's --json prints, given the same settings; the settings spelled as the
CLI spells them (--no-subtypes, --method) reach the analysis; a lesson step of the dataset tab draws through the
twins."""

from __future__ import annotations

import numpy as np
import pytest

from core import lens
from core.__main__ import main
from core.analyses import heads as hd
from core.analyses import patching
from core.data import corpus as corpora
from core.model.loading import load_model
from core.views import attention as attention_view
from tests.cli_json import cli_json
from tests.tiny_mlm import make_tiny_mlm


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-twins"))


def test_lens_heads_is_the_heads_command(tiny_bert_dir, data_dir, capsys):
    model = str(tiny_bert_dir)
    out = cli_json(capsys, "heads", "--model", model, "--corpus", "snli:dev:20", "--limit", "7", "--seed", "3",
                   "--protocol", "clark", "--batch-size", "3")
    data = lens.heads(model, "snli:dev:20", limit=7, seed=3, protocol="clark", batch_size=3, return_data=True)
    assert data.to_json() == out
    assert out["protocol"] == "clark" and out["n_examples"] == 7 and out["corpus"] == "snli:dev:20"
    # The frame is every statistic per head, from the survey itself (heads numbered from 1 under clark).
    chart, frame = data
    survey = data.result
    for name in hd.STAT_NAMES:
        np.testing.assert_allclose(frame[name].to_numpy(), survey.stat(name).ravel())
    assert frame["head"].min() == 1 and frame["layer"].min() == 1
    # the same survey, run without the twin: the declaration changes no number
    direct = hd.survey_heads(load_model(model), corpora.resolve("snli:dev:20", 3).take(7).inputs, batch_size=3,
                             protocol="clark")
    np.testing.assert_allclose(survey.stats, direct.stats)
    with pytest.raises(ValueError, match="protocol must be one of bertlens, clark"):
        lens.heads(model, "builtin", protocol="paper")


def test_lens_attention_change_is_the_attention_change_command(tiny_bert_dir, mlm_dir, capsys):
    a, b = str(tiny_bert_dir), str(tiny_bert_dir)
    out = cli_json(capsys, "attention-change", "--a", a, "--b", b, "--corpus", "builtin", "--limit", "5",
                   "--batch-size", "2")
    data = lens.attention_change(a, b, "builtin", limit=5, batch_size=2, return_data=True)
    assert data.to_json() == out
    np.testing.assert_allclose(out["cosine"], 1.0, atol=1e-6)  # a model against itself


def test_lens_syntax_heads_is_the_syntax_heads_command(tiny_bert_dir, data_dir, capsys):
    model = str(tiny_bert_dir)
    out = cli_json(capsys, "syntax-heads", "--model", model, "--corpus", "ud:dev:12", "--subtypes")
    data = lens.syntax_heads(model, "ud:dev:12", subtypes=True, return_data=True)
    assert data.to_json() == out and out["treebank"] == "ud:dev:12"
    assert any(":" in r["relation"] for r in out["relations"])  # subtypes kept apart, as asked
    # Under clark, subtypes default to kept; --no-subtypes (new with the declaration) merges them.
    kept = cli_json(capsys, "syntax-heads", "--model", model, "--corpus", "ud:dev:12", "--protocol", "clark")
    merged = cli_json(capsys, "syntax-heads", "--model", model, "--corpus", "ud:dev:12", "--protocol", "clark",
                      "--no-subtypes")
    assert any(":" in r["relation"] for r in kept["relations"])
    assert not any(":" in r["relation"] for r in merged["relations"])
    assert lens.syntax_heads(model, "ud:dev:12", protocol="clark", subtypes=False, return_data=True).to_json() == merged
    chart, frame = lens.syntax_heads(model, "ud:dev:12", relation="all", return_data=True)
    all_row = next(r for r in lens.syntax_heads(model, "ud:dev:12", return_data=True).to_json()["relations"]
                   if r["relation"] == "all")
    assert np.isclose(frame["accuracy"].max(), all_row["accuracy"])  # the best head's accuracy is the grid's top


@pytest.mark.parametrize("method", patching.METHODS)
def test_lens_patch_is_the_patch_command(mlm_dir, capsys, method):
    model, clean, corrupt = str(mlm_dir), "the man sat on the [MASK] .", "the woman sat on the [MASK] ."
    out = cli_json(capsys, "patch", "--model", model, "--clean", clean, "--corrupt", corrupt, "--target", "mat",
                   "--over", "positions", "--method", method)
    with pytest.warns(UserWarning):  # the tiny model's gap is small: said under the cell
        data = lens.patch(model, clean, corrupt, target="mat", over="positions", method=method, return_data=True)
    assert data.to_json() == out and out["method"] == method and out["over"] == "positions"
    chart, frame, result = data  # three, as lens.patch always returned
    assert result is data.result
    expected = (patching.attribution_patch if method == "attribution" else patching.patch)(
        lens.load(model), clean, corrupt, "mat", "positions")
    np.testing.assert_allclose(frame["recovered"].to_numpy(), expected.recovered.ravel(), equal_nan=True)


def test_patch_method_is_checked_by_its_declaration(mlm_dir, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["patch", "--model", str(mlm_dir), "--clean", "a", "--corrupt", "b", "--target", "mat", "--method", "guess"])
    assert stopped.value.code == 2
    assert "method must be one of exact, attribution" in capsys.readouterr().err
    with pytest.raises(ValueError, match="path patching is exact"):
        lens.patch(str(mlm_dir), "a [MASK]", "b [MASK]", target="mat", method="attribution", path=((0, 0), (1, 0)))


def test_a_lesson_step_of_the_dataset_tab_draws_the_survey(tiny_bert_dir, data_dir):
    model = str(tiny_bert_dir)
    step = {"tab": "Heads over a dataset", "part": "Statistics", "heads_corpus": "SNLI", "heads_n": "6",
            "stat": "cls", "heads_protocol": "1"}
    [(chart, caption)] = attention_view.charts(lens, model, "", None, step)
    _, frame = lens.heads(model, "snli:dev:6", limit=None, protocol="clark", return_data=True)
    drawn = chart.to_dict()
    values = next(iter(drawn["datasets"].values())) if "datasets" in drawn else drawn["data"]["values"]
    np.testing.assert_allclose(sorted(v["cls"] for v in values), sorted(frame["cls"]), rtol=1e-6)
    assert "Clark" in caption
    patterns = attention_view.charts(lens, model, "", None, {**step, "part": "Pattern types"})
    assert len(patterns) == 1
    syntax = attention_view.charts(lens, model, "", None, {"tab": "Heads over a dataset", "part": "Change after fine-tuning"})
    assert syntax == []  # a second model is not in a link
