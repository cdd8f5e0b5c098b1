"""finetune and contrastive declared once (core.training.settings): lens.finetune / lens.contrastive train the
same run the CLI trains (the same metrics, timing aside), return its metrics as the CLI's --json prints them, and
the declaration keeps the old rules: settings a paper protocol fixes are checked only when the user gave them."""

from __future__ import annotations

import json
import random

import pytest

from core import lens
from core.__main__ import main

CLOCK = {"train_seconds", "examples_per_second", "finished_at", "eval_seconds"}


@pytest.fixture()
def word_file(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "words.csv"
    filler = "the a sat ran on in at to of and is was mat river bank park house tree".split()
    path.write_text("text,label\n" + "".join(f"{' '.join(rng.sample(filler, 4))} {label},{label}\n"
                                             for label in (rng.choice(["cat", "dog"]) for _ in range(64))))
    return str(path)


def _same_run(cli: dict, twin: dict) -> None:
    assert set(cli) == set(twin)
    strip = lambda m: {k: v for k, v in m.items() if k not in CLOCK | {"run", "recipe"}}  # noqa: E731
    assert strip(cli) == strip(twin)
    assert {**cli["recipe"], "run_name": None} == {**twin["recipe"], "run_name": None}


def test_finetune_twin_trains_the_cli_run(tiny_bert_dir, word_file, capsys):
    options = ["--epochs", "1", "--lr", "1e-3", "--batch-size", "16", "--max-length", "16", "--seed", "3",
               "--head", "mlp", "--freeze-layers", "1", "--threads", "1"]
    assert main(["finetune", "--model", str(tiny_bert_dir), "--task", word_file, "--run", "by-cli", *options,
                 "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    data = lens.finetune(str(tiny_bert_dir), word_file, "by-lens", epochs=1, lr=1e-3, batch_size=16, max_length=16,
                         seed=3, head="mlp", freeze_layers="1", cpu_threads=1, return_data=True)
    twin = json.loads(json.dumps(data.to_json()))  # as --json writes it (tuples as lists)
    _same_run(cli, twin)
    assert (cli["run"], twin["run"], data.result.name) == ("by-cli", "by-lens", "by-lens")
    assert twin["recipe"]["frozen_layers"] == [0] and twin["recipe"]["head"] == "mlp"
    assert data.result.folder.endswith("by-lens")
    chart, frame = data
    assert chart.to_dict() and list(frame["run"].unique()) == ["by-lens"]


def test_contrastive_twin_trains_the_cli_run(tiny_bert_dir, word_file, capsys):
    options = ["--epochs", "1", "--batch-size", "8", "--max-length", "16", "--temperature", "0.1", "--pooling",
               "mean", "--threads", "1", "--train-limit", "32"]
    assert main(["contrastive", "--model", str(tiny_bert_dir), "--task", word_file, "--run", "cl-cli", *options,
                 "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    data = lens.contrastive(str(tiny_bert_dir), word_file, "cl-lens", epochs=1, batch_size=8, max_length=16,
                            temperature=0.1, pooling="mean", cpu_threads=1, train_limit=32, return_data=True)
    _same_run(cli, json.loads(json.dumps(data.to_json())))
    assert cli["recipe"]["objective"] == "simcse-unsup" and cli["recipe"]["lr"] == 3e-5  # contrastive's own default


def test_protocol_checks_only_what_was_given(tiny_bert_dir):
    from core.training.settings import CONTRASTIVE, FINETUNE, recipe_of

    gao = recipe_of(CONTRASTIVE.make(protocol="gao"), model="m", task="snli", run_name="g")
    assert (gao.batch_size, gao.max_length, gao.temperature) == (64, 32, 0.05)  # left out: the paper's
    with pytest.raises(ValueError, match="--batch-size 16 clash with --protocol gao"):
        recipe_of(CONTRASTIVE.make(protocol="gao", batch_size=16), model="m", task="snli", run_name="g")
    plain = recipe_of(FINETUNE.make(), model="m", task="snli", run_name="p")
    assert (plain.epochs, plain.lr, plain.batch_size, plain.max_length, plain.lr_decay) == (2, 5e-5, 32, 128, 1.0)
    with pytest.raises(ValueError, match="give the run a name"):
        lens.contrastive(str(tiny_bert_dir))
