"""A tiny bias experiment end to end on the real MiniLM and an SNLI subset: `python -m core bias --json`
trains full / biased / control through the training engine and reports all three runs; the numbers are
checked against the engine's own evaluation and an independent regex count."""

from __future__ import annotations

import json
import re

import numpy as np

from core.__main__ import main
from core.bias import DEFAULT_WORDS, attach, experiment_dir, experiment_status, list_experiments, load_split
from core.training import get_run

ARGS = ["--train-limit", "96", "--test-limit", "48", "--epochs", "1", "--max-length", "48", "--batch-size", "16",
        "--bootstrap", "300", "--seed", "1"]


def test_tiny_experiment_reports_all_three_runs(minilm_dir, capsys):
    assert main(["bias", "--model", str(minilm_dir), "--task", "snli", "--name", "tiny", *ARGS, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)

    train = load_split("snli", "train", 96, 1)
    test = load_split("snli", "test", 48, 1)
    female = re.compile(r"\b(" + "|".join(DEFAULT_WORDS) + r")\b", re.IGNORECASE)
    removed = sum(1 for e in train if female.search(e.text) or female.search(e.text_b))
    with_words = sum(1 for e in test if female.search(e.text) or female.search(e.text_b))
    assert out["removed"] == removed > 0
    assert out["test_slices"] == {"with_words": with_words, "without_words": 48 - with_words}

    assert set(out["runs"]) == {"full", "biased", "control"}
    sizes = {arm: run["train_size"] for arm, run in out["runs"].items()}
    assert sizes == {"full": 96, "biased": 96 - removed, "control": 96 - removed}
    for arm, run in out["runs"].items():
        assert 0.0 <= run["accuracy"] <= 1.0 and run["ci"][0] <= run["accuracy"] <= run["ci"][1]
        slices = run["slices"]
        assert slices["with_words"]["n"] + slices["without_words"]["n"] == 48
        weighted = sum(s["accuracy"] * s["n"] for s in slices.values()) / 48
        assert abs(weighted - run["accuracy"]) < 1e-9
        assert 0.0 <= run["flip_rate"] <= 1.0 and run["swapped"] > 0
        # the engine evaluated the same test rows with its own batching: same confusion matrix, reordered
        engine = get_run(f"tiny-{arm}").metrics
        order = [engine["labels"].index(label) for label in out["labels"]]
        engine_confusion = np.array(engine["confusion"])[np.ix_(order, order)]
        np.testing.assert_array_equal(engine_confusion, np.array(run["confusion"]))
        assert run["engine_accuracy"] == engine["accuracy"] and engine["eval_examples"] == 48

    # the flip rate, recomputed from the saved predictions
    saved = json.loads((experiment_dir("tiny") / "predictions_biased.json").read_text())
    swapped_test = [i for i, e in enumerate(test) if _swaps(e)]
    flips = sum(saved["test"][i] != s for i, s in zip(swapped_test, saved["swapped"]))
    assert flips == out["runs"]["biased"]["flips"]

    # the page's background scorer scores finished runs (from their saved predictions) to the same numbers
    assert list_experiments() == ["tiny"]
    (experiment_dir("tiny") / "results.json").unlink()
    assert experiment_status("tiny").result is None
    again = attach("tiny", poll=0.1).to_json()
    assert again["runs"] == out["runs"]
    assert experiment_status("tiny").state == "done"


def _swaps(example) -> bool:
    from core.bias import DEFAULT_SWAPS, swap_example

    return swap_example(example, DEFAULT_SWAPS) != example
