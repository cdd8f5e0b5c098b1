"""Training engine pieces without a model: scores vs sklearn, batching, the SimCSE loss, user-file checks,
run folders and the recipe."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from core import settings
from core.training import Recipe, TaskError, evaluate_predictions, list_runs, load_task, simcse_loss
from core.training.engine import collate, length_grouped_batches, loss_curve
from core.training.runs import RunFolder, ended_dir, final_dir, partial_dir


def test_scores_match_sklearn():
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    rng = np.random.default_rng(0)
    true = rng.integers(0, 4, 300)
    predicted = np.where(rng.random(300) < 0.6, true, rng.integers(0, 3, 300))
    m = evaluate_predictions(true, predicted, ("a", "b", "c", "d", "e"))  # "e" never occurs
    assert m.accuracy == pytest.approx(accuracy_score(true, predicted))
    np.testing.assert_array_equal(m.confusion, confusion_matrix(true, predicted, labels=[0, 1, 2, 3, 4]))
    np.testing.assert_allclose(m.per_class_f1, f1_score(true, predicted, labels=[0, 1, 2, 3, 4], average=None, zero_division=0))
    assert m.macro_f1 == pytest.approx(f1_score(true, predicted, labels=[0, 1, 2, 3, 4], average="macro", zero_division=0))
    assert m.majority_accuracy == pytest.approx(np.bincount(true).max() / 300)
    assert m.to_json()["per_class_f1"]["e"] == 0.0


def test_length_grouped_batches_cover_every_index_once_with_similar_lengths():
    lengths = [random.Random(i).randint(5, 60) for i in range(1000)]
    batches = length_grouped_batches(lengths, 16, random.Random(3))
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000))
    assert batches == length_grouped_batches(lengths, 16, random.Random(3))
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches if len(b) == 16])
    assert spread < 5  # random batches of 16 from 5..60 would spread ~45


def test_collate_pads_to_longest_with_mask():
    batch = collate([{"input_ids": [2, 7, 3], "token_type_ids": [0, 0, 0]}, {"input_ids": [2, 3], "token_type_ids": [0, 1]}], 0, "cpu")
    assert batch["input_ids"].tolist() == [[2, 7, 3], [2, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 1, 0]]


def test_simcse_loss_matches_a_numpy_computation():
    rng = np.random.default_rng(1)
    anchors, candidates = rng.normal(size=(4, 8)), rng.normal(size=(6, 8))  # 4 positives + 2 hard negatives
    a = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    c = candidates / np.linalg.norm(candidates, axis=1, keepdims=True)
    logits = a @ c.T / 0.05
    expected = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)])
    got = simcse_loss(torch.tensor(anchors), torch.tensor(candidates), 0.05)
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_loss_curve_keeps_short_curves_and_averages_long_ones():
    assert loss_curve([3.0, 2.0]) == [[1, 3.0], [2, 2.0]]
    long = loss_curve(list(range(1000)), points=10)
    assert len(long) == 10 and long[0] == [100, pytest.approx(49.5)] and long[-1][0] == 1000


# ---- user files -------------------------------------------------------------------------------------


def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.csv", "", "is empty"),
        ("header.csv", "text,label\n", "no rows"),
        ("cols.csv", "sentence,label\nhello,a\nbye,b\n", "no 'text' column (columns found: 'sentence', 'label')"),
        ("nolabel.jsonl", '{"text": "a"}\n{"text": "b"}\n', "no 'label' column"),
        ("badjson.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", label}\n', "badjson.jsonl, line 2: not valid JSON"),
        ("cells.csv", "text,label\nhello,a\nhi, there,b\n", "line 3: 3 cells but the header has 2 columns"),
        ("emptytext.csv", "text,label\nhello,a\n,b\nok,\n", "1 row(s) have an empty text (lines 3)"),
        ("onelabel.csv", "text,label\nhello,a\nbye,a\nhi,a\n", "a classifier needs at least two labels"),
        ("unknown.csv", "text,label,split\nhello,a,train\nbye,b,train\nhi,c,test\n", "label(s) 'c' do not occur in the training rows"),
        ("nosplit.csv", "text,label,split\nhello,a,train\nbye,b,train\n", "split column must mark some rows"),
        ("data.xlsx", "x", "unknown file type '.xlsx'"),
    ],
)
def test_malformed_user_files_get_clear_messages(tmp_path, name, content, message):
    with pytest.raises(TaskError) as err:
        load_task(_write(tmp_path, name, content))
    assert message in str(err.value)


def test_missing_file_names_the_built_in_tasks(tmp_path):
    with pytest.raises(TaskError, match="neither a built-in task .*snli.* nor an existing file"):
        load_task(str(tmp_path / "nope.csv"))


def test_user_file_holdout_and_split_column(tmp_path):
    rows = "".join(f"sentence {i},{'yes' if i % 2 else 'no'}\n" for i in range(50))
    data = load_task(_write(tmp_path, "d.csv", "text,label\n" + rows), seed=1)
    assert data.labels == ("no", "yes") and len(data.eval) == 10 and len(data.train) == 40
    assert not ({e.text for e in data.train} & {e.text for e in data.eval})
    numeric = "text,text_b,label,split\n" + "".join(f"a{i},b{i},{i % 3 * 5},{'test' if i < 3 else 'train'}\n" for i in range(12))
    data = load_task(_write(tmp_path, "n.csv", numeric))
    assert data.labels == ("0", "5", "10") and data.pairs and len(data.eval) == 3 and data.eval_split == "split column"
    gz = tmp_path / "g.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"text": "x", "label": 1}\n{"text": "y", "label": 2}\n{"text": "z", "label": 1}\n'))
    assert load_task(str(gz)).labels == ("1", "2")


# ---- recipe and run folders ---------------------------------------------------------------------------


def test_recipe_validation_names_each_problem():
    with pytest.raises(ValueError) as err:
        Recipe(model="m", task="snli", run_name=".hidden", head="cnn", epochs=0)
    text = str(err.value)
    assert "run name '.hidden'" in text and "head 'cnn'" in text and "epochs must be at least 1" in text
    with pytest.raises(ValueError, match="supervised SimCSE needs pairs"):
        Recipe(model="m", task="drugs", run_name="x", objective="simcse-sup")
    recipe = Recipe(model="m", task="snli", run_name="ok")
    assert Recipe.from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe


def test_failed_run_moves_to_a_dotted_folder_without_weights():
    folder = RunFolder.create(Recipe(model="m", task="snli", run_name="r1"))
    (folder.path / "model.safetensors").write_bytes(b"x")
    (folder.path / "config.json").write_text("{}")
    folder.log("boom")
    folder.end("failed", "RuntimeError: boom")
    assert not final_dir("r1").exists() and not partial_dir("r1").exists()
    assert not list(settings.runs_dir().glob("**/*.safetensors"))
    [run] = list_runs()
    assert (run.name, run.state, run.error) == ("r1", "failed", "RuntimeError: boom") and "boom" in run.log_tail
    # the name can be used again
    RunFolder.create(Recipe(model="m", task="snli", run_name="r1"))


def test_a_run_whose_process_died_is_listed_as_killed():
    """Issue 44: a run whose process vanished without a word (SIGKILL, out of memory) is "killed", not "failed"."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = RunFolder.create(Recipe(model="m", task="snli", run_name="r2"))
    folder.write_status(state="running", pid=dead.pid)
    status_before = (partial_dir("r2") / "status.json").read_bytes()
    [run] = list_runs()
    assert run.state == "killed" and run.error.startswith("killed:")
    # Reading never writes: the folder stays as the dead process left it ...
    assert partial_dir("r2").exists() and (partial_dir("r2") / "status.json").read_bytes() == status_before
    alive = RunFolder.create(Recipe(model="m", task="snli", run_name="r3"))
    # ... until a writer (a new run) settles it as killed.
    assert not partial_dir("r2").exists() and ended_dir("r2", "killed").is_dir()
    assert {r.name: r.state for r in list_runs()}["r2"] == "killed"
    alive.write_status(state="running", pid=os.getpid())
    assert {r.name: r.state for r in list_runs()}["r3"] == "running"


def test_a_run_whose_process_died_after_a_cancel_was_asked_is_cancelled():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = RunFolder.create(Recipe(model="m", task="snli", run_name="r4"))
    folder.write_status(state="queued", pid=dead.pid)
    (partial_dir("r4") / "cancel").touch()  # what cancel() writes before its SIGTERM
    [run] = list_runs()
    assert run.state == "cancelled" and run.error.startswith("cancelled by the user")
    RunFolder.create(Recipe(model="m", task="snli", run_name="r5"))
    assert ended_dir("r4", "cancelled").is_dir() and {r.name: r.state for r in list_runs()}["r4"] == "cancelled"


# ---- built-in tasks from the shared data folder --------------------------------------------------------


def test_builtin_tasks_read_the_local_data(data_dir, monkeypatch):
    import collections

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    drugs = load_task("drugs")
    # README: effectiveness_score counts in the train split; every review has some text.
    assert collections.Counter(e.label for e in drugs.train) == {"5": 1330, "4": 928, "3": 415, "1": 247, "2": 187}
    assert drugs.labels == ("1", "2", "3", "4", "5") and len(drugs.eval) == 895 and not drugs.pairs
    absa = load_task("absa")
    # 3,714 aspect categories in train, 196 of them "conflict" (dropped); text = the category, text_b = the review.
    assert len(absa.train) == 3714 - 196 and absa.pairs and absa.eval_split == "test"
    assert {e.text for e in absa.train} == {"food", "service", "price", "ambience", "anecdotes/miscellaneous"}
    snli = load_task("snli", train_limit=100, seed=3)
    assert snli.source == "local" and len(snli.train) == 100 and len(snli.eval) == 9842
    assert snli.train == load_task("snli", train_limit=100, seed=3).train
    mrpc = load_task("mrpc")
    assert (len(mrpc.train), len(mrpc.eval)) == (3668, 408)


def test_supervised_snli_triples_pair_entailment_with_contradiction(data_dir, monkeypatch):
    from core.training import load_contrastive

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = load_contrastive("snli", "sup", eval_limit=50)
    rows = load_task("snli").train
    label_of = {(e.text, e.text_b): e.label for e in rows}
    assert len(data.train) == 6666  # every entailment pair of the local train subset
    with_negative = [t for t in data.train if t.negative]
    assert 300 < len(with_negative) < 1000
    assert all(label_of[(t.anchor, t.positive)] == "entailment" for t in data.train[:500])
    assert all(label_of[(t.anchor, t.negative)] == "contradiction" for t in with_negative)
    assert len(data.eval_pairs) == 50


# ---- paper protocols ----------------------------------------------------------------------------------


def test_slides_protocol_fixes_the_slides_optimizer_and_the_test_split():
    from core.training.recipe import paper_recipe, protocol_table

    r = paper_recipe("slides", model="m", task="snli", run_name="s", train_limit=100)
    # The slides: AdamW(lr=5e-5, eps=1e-8), epochs = 2, 549,367 / 17,168 batches = 32 per batch, test accuracy.
    assert (r.protocol, r.lr, r.eps, r.weight_decay, r.epochs, r.batch_size) == ("slides", 5e-5, 1e-8, 0.0, 2, 32)
    assert (r.schedule, r.max_grad_norm, r.eval_split, r.train_limit) == ("none", 0.0, "test", 100)
    assert round(549_367 / 17_168) == r.batch_size
    rows = {row["setting"]: row for row in protocol_table("slides")}
    assert rows["schedule"]["source"] == "not stated in slides; none used"
    assert r.to_dict()["protocol"] == "slides" and Recipe.from_dict(r.to_dict()) == r
    # A run labelled "slides" cannot quietly use other values.
    with pytest.raises(ValueError, match="protocol 'slides' fixes lr=5e-05"):
        r.replace(lr=1e-4)
    with pytest.raises(ValueError, match="does not apply to objective"):
        r.replace(objective="simcse-unsup")
    assert Recipe(model="m", task="snli", run_name="b").protocol == "bertlens"


def test_gao_protocol_is_unsupervised_simcse_with_the_papers_values():
    from core.training.recipe import paper_recipe

    g = paper_recipe("gao", model="m", task="snli", run_name="g")
    # princeton-nlp/SimCSE run_unsup_example.sh and the Hugging Face Trainer's defaults.
    assert (g.objective, g.lr, g.batch_size, g.max_length, g.epochs, g.temperature) == ("simcse-unsup", 3e-5, 64, 32, 1, 0.05)
    assert (g.pooling, g.mlp_in_training, g.schedule, g.weight_decay, g.max_grad_norm) == ("cls", True, "linear", 0.0, 1.0)
    with pytest.raises(ValueError, match="does not apply"):
        paper_recipe("gao", model="m", task="snli", run_name="g", objective="classify")
    with pytest.raises(ValueError, match="SimCSE setting"):
        Recipe(model="m", task="snli", run_name="c", mlp_in_training=True)


def test_optimizer_settings_and_linear_schedule_follow_the_recipe():
    from core.training.engine import make_optimizer
    from core.training.recipe import paper_recipe

    recipe = paper_recipe("gao", model="m", task="snli", run_name="g")
    w = torch.nn.Parameter(torch.ones(3))
    optimizer, scheduler = make_optimizer(recipe, [w], total_steps=10)
    group = optimizer.param_groups[0]
    assert (group["lr"], group["eps"], group["weight_decay"]) == (3e-5, 1e-8, 0.0)
    for k in range(1, 11):
        w.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
        # Hugging Face's get_linear_schedule_with_warmup(0 warm-up): lr * (T - k) / T after k steps.
        assert optimizer.param_groups[0]["lr"] == pytest.approx(3e-5 * (10 - k) / 10)
    slides = paper_recipe("slides", model="m", task="snli", run_name="s")
    optimizer, scheduler = make_optimizer(slides, [torch.nn.Parameter(torch.ones(2))], total_steps=10)
    assert scheduler is None and optimizer.param_groups[0]["weight_decay"] == 0.0
    optimizer, _ = make_optimizer(Recipe(model="m", task="snli", run_name="b"), [torch.nn.Parameter(torch.ones(2))], 10)
    assert optimizer.param_groups[0]["weight_decay"] == 0.01  # BERT Lens's default, labelled as such


def test_compare_table_names_the_protocol_and_the_split():
    from core.training import report
    from core.training.runs import RunInfo

    run = RunInfo("r", "done", "/x", {"task": "snli", "protocol": "slides"}, {},
                  {"eval_split": "test", "eval_examples": 9824, "accuracy": 0.9}, "")
    table = report.compare_table([run])
    assert table.loc["eval split", "r"] == "test (9824 examples)"
    assert table.loc["protocol", "r"] == "slides"
    assert report.runs_table([run])["protocol"].tolist() == ["slides"]
    assert table.loc["layer-wise lr decay", "r"] == "1.0000"  # a recipe saved before lr_decay: one rate
    decayed = RunInfo("d", "done", "/x", {"task": "snli", "lr_decay": 0.95}, {}, {"accuracy": 0.5}, "")
    assert report.compare_table([decayed]).loc["layer-wise lr decay", "d"] == "0.9500"


def test_slides_reference_table_comes_from_core_references():
    from core import references
    from core.training import report

    table = report.SLIDES_REFERENCE
    snli = references.get("slides-layer12-snli")
    assert set(table["eval split"]) == {"test"}
    assert table["test accuracy %"].tolist()[:2] == [round(100 * v, 2) for v in snli.values.values()]
    # The slides' SNLI accuracies are whole numbers of the 9,824 test pairs: the full test split.
    for value in snli.values.values():
        assert abs(value * 9824 - round(value * 9824)) < 1e-6


def test_drug_rating_buckets_follow_the_raw_ratings(data_dir):
    """drugs-rating labels recomputed from the raw Druglib rows (rating 1-10 -> pairs of ratings)."""
    import gzip
    import json as _json

    from core.training.tasks import TASK_LABELS, drug_reviews

    raw = [_json.loads(line) for line in gzip.open(data_dir / "drug_reviews_druglib" / "druglib_train.jsonl.gz")]
    texts = [" ".join(" ".join(str(r.get(k) or "").split()) for k in ("benefits_review", "side_effects_review",
                                                                     "comments_review") if str(r.get(k) or "").strip())
             for r in raw]
    expected5 = [f"{2 * ((r['rating'] - 1) // 2) + 1}-{2 * ((r['rating'] - 1) // 2) + 2}" for r, t in zip(raw, texts) if t]
    expected3 = ["1-4" if r["rating"] <= 4 else "5-6" if r["rating"] <= 6 else "7-10" for r, t in zip(raw, texts) if t]
    five = drug_reviews("train", label="drugs-rating")
    three = drug_reviews("train", label="drugs-rating3")
    assert [e.label for e in five] == expected5 and [e.label for e in three] == expected3
    assert [e.text for e in five] == [t for t in texts if t]
    assert set(expected5) == set(TASK_LABELS["drugs-rating"]) and len(TASK_LABELS["drugs-rating3"]) == 3
    effectiveness = drug_reviews("train")
    assert [e.text for e in effectiveness] == [e.text for e in five]  # same reviews, another label


def test_drug_rating_task_loads_with_its_label_order(data_dir, monkeypatch):
    monkeypatch.setenv("BERTLENS_DATA", str(data_dir))
    from core.training.tasks import load_task

    data = load_task("drugs-rating", train_limit=50, eval_limit=20)
    assert data.labels == ("1-2", "3-4", "5-6", "7-8", "9-10") and data.eval_split == "test"
    assert {e.label for e in data.train} <= set(data.labels)


def test_frozen_description_names_the_union_of_lowest_and_chosen_layers():
    from core.training.report import frozen_description

    assert frozen_description({"freeze_layers": 2, "frozen_layers": [5, 11], "freeze_embeddings": True}) == \
        "layers 1-2,6,12, embeddings"  # array indices shown 1..L, as on every chart (core.numbering)
    assert frozen_description({"freeze_layers": 0, "frozen_layers": []}) == ""


def test_progress_line_and_runs_table_say_the_same_phase_and_no_numbers_before_a_step():
    """Issue 37: the line read "loss nan, 0.0 examples/s" while the model loaded, and the runs table said "queued"
    while the progress said "loading model"."""
    from core.training import report
    from core.training.runs import RunInfo

    def run(state, **status):
        return RunInfo("r", state, "/x", {"epochs": 2}, status, None, "")

    queued = run("queued", phase="queued")
    starting = run("running", phase="loading")
    loading = run("running", phase="loading model", step=0, loss=None, examples_per_second=0.0)
    zero = run("running", phase="training", step=0, total_steps=10, loss=None, examples_per_second=0.0)
    training = run("running", phase="training", step=3, total_steps=10, epoch=1, loss=0.6931, examples_per_second=12.5,
                   eta_seconds=7.4)
    evaluating = run("running", phase="evaluating", step=10, total_steps=10, loss=0.5, examples_per_second=12.0)
    assert report.progress_text(queued, 2) == "queued, waiting (position 2 in the queue)"
    assert report.progress_text(queued) == "queued, waiting for the run before it"
    assert report.progress_text(starting) == "starting…"
    assert report.progress_text(loading) == "loading model…"
    assert report.progress_text(zero) == "training…"
    assert report.progress_text(training) == ("training, step 3/10, epoch 1/2, loss 0.6931, 12.5 examples/s, "
                                              "about 7 s left")
    assert report.progress_text(evaluating) == "evaluating…"
    for r in (queued, starting, loading, zero, training, evaluating):
        assert "nan" not in report.progress_text(r) and "0.0 examples/s" not in report.progress_text(r)
        assert report.runs_table([r])["state"].tolist() == [report.phase(r)]
        assert report.progress_text(r).startswith(report.phase(r))
    assert report.runs_table([loading])["state"].tolist() == ["loading model"]


def test_torch_threads_sets_and_restores_the_thread_count():
    from core.training import torch_threads

    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


def _expected_lr(name: str, base: float, decay: float, layers: int) -> float:
    """Discriminative learning rate from a parameter's name: encoder layer i (0-based) of L at base x decay^(L-1-i),
    the embeddings one step below layer 0, everything else (pooler, head) at base."""
    import re

    if name.startswith("encoder.embeddings."):
        return base * decay ** layers
    match = re.match(r"encoder\.encoder\.layer\.(\d+)\.", name)
    return base * decay ** (layers - 1 - int(match[1])) if match else base


def test_layerwise_learning_rates_are_base_times_decay_to_the_distance_from_the_top():
    from transformers import BertConfig, BertModel

    from core.training.classifier import Classifier
    from core.training.engine import make_optimizer, optimizer_groups

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = Classifier(BertModel(config), 2)
    for p in model.encoder.encoder.layer[1].parameters():
        p.requires_grad_(False)  # a frozen layer gets no group
    base, decay = 1e-3, 0.5
    recipe = Recipe(model="m", task="snli", run_name="d", lr=base, lr_decay=decay, weight_decay=0.0)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer, _ = make_optimizer(recipe, optimizer_groups(model, trainable, recipe), total_steps=1)
    lr_of = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    names = dict(model.named_parameters())
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(trainable)
    assert {g["name"] for g in optimizer.param_groups} == {"embeddings", "layer 1", "layer 3", "head"}  # 1..L
    for name, p in names.items():
        if p.requires_grad:
            assert lr_of[id(p)] == pytest.approx(_expected_lr(name, base, decay, 3)), name
        else:
            assert id(p) not in lr_of, name
    # What the rates do: Adam's first step moves every element with a gradient by its lr (m / sqrt(v) = sign(g)).
    before = {n: p.detach().clone() for n, p in names.items()}
    ids = torch.randint(0, 50, (4, 8))
    loss = torch.nn.functional.cross_entropy(model(input_ids=ids, attention_mask=torch.ones_like(ids)), torch.tensor([0, 1, 0, 1]))
    loss.backward()
    optimizer.step()
    for name in ("encoder.embeddings.LayerNorm.weight", "encoder.encoder.layer.0.output.dense.weight",
                 "encoder.encoder.layer.2.output.dense.weight", "head.0.weight"):
        moved = (names[name].detach() - before[name]).abs().max().item()
        assert moved == pytest.approx(_expected_lr(name, base, decay, 3), rel=1e-3), name
    assert torch.equal(names["encoder.encoder.layer.1.output.dense.weight"], before["encoder.encoder.layer.1.output.dense.weight"])
    # a SimCSE run's module (encoder + projection) gets the same depths, its projection at the base rate
    from core.training.engine import SimCSEProjection, _Embedder

    embedder = _Embedder(model.encoder, SimCSEProjection(16), "cls")
    rates = {g["name"]: g["lr"] for g in optimizer_groups(embedder, list(embedder.parameters()), recipe)}
    assert rates == pytest.approx({"embeddings": base * decay ** 3, "layer 1": base * decay ** 2,
                                   "layer 2": base * decay, "layer 3": base, "head": base})
    # decay 1 keeps one group at the base rate; decay outside (0, 1] is refused with the reason
    assert [g["lr"] for g in optimizer_groups(model, trainable, recipe.replace(lr_decay=1.0))] == [base]
    with pytest.raises(ValueError, match=r"lr_decay 1.5 must be in \(0, 1\]"):
        recipe.replace(lr_decay=1.5)


def test_layerwise_learning_rates_on_albert_shared_layers_and_its_embedding_projection():
    from transformers import AlbertConfig, AlbertModel

    from core.training.classifier import Classifier
    from core.training.engine import optimizer_groups

    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=16)
    model = Classifier(AlbertModel(config), 2)
    recipe = Recipe(model="m", task="snli", run_name="a", lr=1e-3, lr_decay=0.5)
    lr_of = {id(p): g["lr"] for g in optimizer_groups(model, list(model.parameters()), recipe) for p in g["params"]}
    for name, p in model.named_parameters():
        # one layer module runs three times: it trains at the top layer's rate; the 8 -> 16 projection is embedding
        expected = 1e-3 * 0.5 ** 3 if name.startswith(("encoder.embeddings.", "encoder.encoder.embedding_hidden")) else 1e-3
        assert lr_of[id(p)] == pytest.approx(expected), name
