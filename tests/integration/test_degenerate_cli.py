"""The command-line twins say when a run learned (almost) nothing: a "degenerate" key in --json, a warning on
stderr (stdout stays JSON)."""

from __future__ import annotations

import json
import random

from core.__main__ import main
from tests.task_files import learned_and_noise

FLAG = "learned (almost) nothing"


def test_finetune_json_and_warning(tiny_bert_dir, tmp_path, capsys):
    learned_and_noise(tmp_path, seed=1)
    common = ["--model", str(tiny_bert_dir), "--epochs", "5", "--lr", "3e-3", "--batch-size", "16", "--max-length", "16",
              "--threads", "1", "--json"]
    for name, flagged in (("learned", False), ("noise", True)):
        assert main(["finetune", "--task", str(tmp_path / f"{name}.csv"), "--run", name, *common]) == 0
        captured = capsys.readouterr()
        metrics = json.loads(captured.out)
        confusion = metrics["confusion"]
        n = sum(map(sum, confusion))
        dominant = max(sum(row[j] for row in confusion) for j in range(2)) / n
        assert metrics["degenerate"]["flagged"] is flagged
        assert metrics["degenerate"]["dominant_share"] == dominant
        assert (FLAG in captured.err) is flagged, captured.err


def test_bias_show_warns_about_the_arm_that_learned_nothing(data_dir, capsys):
    from tests.app.test_bias_page import write_finished_experiment

    write_finished_experiment("bias-cli-flat", {"full": None, "biased": 0.9, "control": 0.9})
    assert main(["bias", "--show", "bias-cli-flat", "--json"]) == 0
    captured = capsys.readouterr()
    runs = json.loads(captured.out)["runs"]
    assert [arm for arm, r in runs.items() if r["degenerate"]["flagged"]] == ["full"]
    assert [line.split(":")[1].strip() for line in captured.err.splitlines() if FLAG in line] == ["the full run"]


def test_explain_commands_carry_the_runs_degeneracy(tiny_bert_dir, tmp_path, capsys):
    rng = random.Random(2)
    (tmp_path / "noise.csv").write_text("text,label\n" + "".join(
        f"the {rng.choice(['cat', 'dog'])} sat on the mat,{'a' if rng.random() < 0.7 else 'b'}\n" for _ in range(200)))
    assert main(["finetune", "--model", str(tiny_bert_dir), "--task", str(tmp_path / "noise.csv"), "--run", "noise",
                 "--epochs", "2", "--batch-size", "16", "--max-length", "16", "--threads", "1", "--json"]) == 0
    flagged = json.loads(capsys.readouterr().out)["degenerate"]["flagged"]
    assert flagged  # labels that ignore the text: nothing to learn
    (tmp_path / "texts.txt").write_text("the cat sat on the mat\nthe dog sat on the mat\n")
    for command in (["explain", "--model", "noise", "--text", "the cat sat", "--method", "saliency", "--json"],
                    ["explain-faithfulness", "--model", "noise", "--corpus", str(tmp_path / "texts.txt"),
                     "--methods", "saliency", "--quiet", "--json"]):
        assert main(command) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["degenerate"]["flagged"] is True
        assert FLAG in captured.err
    assert main(["explain", "--model", str(tiny_bert_dir), "--text", "the cat sat", "--method", "rollout", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["degenerate"] is None  # a plain encoder is no run
