"""probe-labels (issue 49) declared once: the CLI's --json has the issue's keys exactly, the lens twin gives the
same JSON, and a bad task or treebank is one line and exit status 2 before any model loads."""

from __future__ import annotations

import pytest

from core import lens
from core.__main__ import main
from tests.cli_json import as_printed, cli_json

ARGV = ["--corpus", "ud:dev:24", "--eval-corpus", "ud:test:16", "--layers", "all", "--control", "--mdl",
        "--seed", "2", "--max-iter", "30"]


def test_cli_json_keys_and_the_lens_twin(tiny_bert_dir, data_dir, capsys):
    expected = cli_json(capsys, "probe-labels", "--model", str(tiny_bert_dir), "--task", "upos", *ARGV)
    assert set(expected) == {"task", "n_train", "n_eval", "labels", "majority", "layers", "expected_layer"}
    assert [row["layer"] for row in expected["layers"]] == [0, 1, 2]  # all: the embeddings and both layers
    for row in expected["layers"]:
        assert set(row) == {"layer", "accuracy", "control_accuracy", "selectivity", "codelength_bits", "compression"}
        assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control_accuracy"])
        assert row["codelength_bits"] > 0 and row["compression"] > 0
    assert expected["task"] == "upos" and "NOUN" in expected["labels"] and expected["n_train"] > 100

    data = lens.probe_labels(str(tiny_bert_dir), "ud:dev:24", "ud:test:16", task="upos", layers="all", control=True,
                             mdl=True, seed=2, max_iter=30, return_data=True)
    assert as_printed(data.to_json()) == expected
    chart, frame = data
    assert chart.to_dict()
    drawn = frame[(frame["row"] == "layer") & (frame["measure"] == "accuracy")]
    assert list(drawn["value"]) == pytest.approx([row["accuracy"] for row in expected["layers"]])


def test_morph_task_without_control_leaves_those_fields_null(tiny_bert_dir, data_dir, capsys):
    payload = cli_json(capsys, "probe-labels", "--model", str(tiny_bert_dir), "--task", "morph:Number",
                       "--corpus", "ud:dev:24", "--eval-corpus", "ud:test:16", "--layers", "0,2", "--max-iter", "20")
    assert set(payload["labels"]) <= {"Sing", "Plur"}
    assert [row["layer"] for row in payload["layers"]] == [0, 2]
    assert all(row["control_accuracy"] is None and row["compression"] is None for row in payload["layers"])


@pytest.mark.parametrize("argv, said", [
    (["--task", "pos", "--corpus", "ud:dev:5", "--eval-corpus", "ud:test:5"], "Task 'pos' unknown"),
    (["--task", "upos", "--corpus", "no-such.conllu", "--eval-corpus", "ud:test:5"], "no-such.conllu"),
    (["--task", "upos", "--corpus", "snli:dev:5", "--eval-corpus", "ud:test:5"], "no dependency trees"),
    (["--task", "upos", "--layers", "0,x", "--corpus", "ud:dev:5", "--eval-corpus", "ud:test:5"], "--layers '0,x'"),
])
def test_bad_task_or_corpus_is_one_line_and_exit_2(argv, said, capsys):
    # no model named exists: each is refused before a model would load
    assert main(["probe-labels", "--model", "no-such-model", *argv, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_tenney_study_orders_the_expected_layers_as_shape_only(tiny_bert_dir, data_dir):
    from core import studies
    from core.analyses.layer_knowledge.probes import expected_layer
    from core.studies import StudyOptions
    from core.studies.tenney import pos_below_dependencies

    result = studies.get("tenney").run(StudyOptions(model=str(tiny_bert_dir), limit=30))
    assert result.verdict in ("different model: shape only", "not measured")
    (comparison,) = result.comparisons
    assert comparison.verdict == "different model: shape only"  # another model and probe: the order only
    for task in ("upos", "deprel"):
        accuracy = result.measured[f"{task} accuracy"]
        wanted = expected_layer(list(accuracy), list(accuracy.values()))
        assert result.measured["expected layer"].get(task) == (pytest.approx(wanted) if wanted is not None else None)
    assert result.measured["finding"]["part of speech below dependencies"] == pos_below_dependencies(
        {t: result.measured["expected layer"].get(t) for t in ("upos", "deprel")})
    assert pos_below_dependencies({"upos": 1.5, "deprel": 3.2}) == 1.0
    assert pos_below_dependencies({"upos": 3.5, "deprel": 3.2}) == 0.0
    assert pos_below_dependencies({"upos": None, "deprel": 3.2}) == 0.0


def test_a_lesson_step_draws_the_probes_of_its_link(tiny_bert_dir, data_dir):
    from core import views

    step = {"model": str(tiny_bert_dir), "tasks": "deprel", "corpus": "ud:dev:20", "eval_corpus": "ud:test:10",
            "control": "true"}
    assert not views.parse("layer_knowledge", {k: v for k, v in step.items() if k != "model"}).notices
    (chart, caption), *_ = lens.view("layer_knowledge", step)
    rows = chart.data
    assert set(rows["task"]) == {"deprel"} and "control accuracy" in set(rows["measure"])
    assert "probe" in caption
