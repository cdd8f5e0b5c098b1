"""`finetune --lr-decay F` trains with discriminative learning rates: the run's optimizer has one group per depth."""

from __future__ import annotations

import json

import pytest

from core.__main__ import main
from core.training import engine
from tests.task_files import learned_and_noise


def test_finetune_lr_decay_reaches_the_runs_optimizer(tiny_bert_dir, tmp_path, capsys, monkeypatch):
    learned_and_noise(tmp_path, seed=3)
    seen = []
    real = engine.make_optimizer

    def spy(recipe, parameters, total_steps):
        optimizer, scheduler = real(recipe, parameters, total_steps)
        seen.append({g["name"]: g["lr"] for g in optimizer.param_groups})
        return optimizer, scheduler

    monkeypatch.setattr(engine, "make_optimizer", spy)
    assert main(["finetune", "--model", str(tiny_bert_dir), "--task", str(tmp_path / "learned.csv"), "--run", "lrd",
                 "--epochs", "1", "--lr", "1e-3", "--lr-decay", "0.5", "--batch-size", "16", "--max-length", "16",
                 "--train-limit", "32", "--eval-limit", "16", "--threads", "1", "--json"]) == 0
    json.loads(capsys.readouterr().out)
    # tiny_bert_dir has 2 layers: layer 2 (the top) and the head at the base rate, layer 1 half, embeddings a quarter
    assert seen == [{"embeddings": pytest.approx(2.5e-4), "layer 1": pytest.approx(5e-4), "layer 2": pytest.approx(1e-3),
                     "head": pytest.approx(1e-3)}]
