"""Two CPU processes with gloo (torchrun --nproc_per_node 2): corpus passes equal the single-process result,
training under DDP gives a complete run with the full evaluation split, and a dead rank leaves no model."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core.training.runs import final_dir, get_run, partial_dir
from tests.conftest import TINY_VOCAB

WORDS = [w for w in TINY_VOCAB if w.isalpha() and w not in ("cat", "dog")]
REPO = Path(__file__).resolve().parents[2]


def torchrun(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "core", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def single(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def animal_rows(n: int, split: str, rng: random.Random) -> list[dict]:
    rows = []
    for _ in range(n):
        animal = rng.choice(["cat", "dog"])
        words = rng.sample(WORDS, 5)
        words.insert(rng.randrange(6), animal)
        rows.append({"text": " ".join(words), "label": animal, "split": split})
    return rows


@pytest.fixture
def animal_task(tmp_path) -> tuple[str, list[dict]]:
    """80 training rows and 37 evaluation rows: 37 splits unevenly over 2 ranks (19 + 18)."""
    rng = random.Random(1)
    train, evaluation = animal_rows(80, "train", rng), animal_rows(37, "test", rng)
    path = tmp_path / "animals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in train + evaluation))
    return str(path), evaluation


def test_anisotropy_on_two_processes_equals_one_process(tiny_bert_dir):
    args = ("anisotropy", "--model", str(tiny_bert_dir), "--corpus", "builtin", "--device", "cpu", "--json",
            "--min-contexts", "3")
    one, two = single(*args), torchrun(*args)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    lines = [line for line in two.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, "the reduced result is printed once, by the main process"
    a, b = json.loads(one.stdout), json.loads(lines[0])
    assert a["world_size"] == 1 and b["world_size"] == 2
    for key, value in a.items():
        if key == "world_size":
            continue
        if key == "words":  # per word: the same words and counts, its measures reduced over ranks (float sums)
            assert [(w["word"], w["contexts"]) for w in b[key]] == [(w["word"], w["contexts"]) for w in value]
            for mine, theirs in zip(value, b[key]):
                np.testing.assert_allclose(theirs["self_similarity"], mine["self_similarity"], atol=1e-4)
            continue
        if isinstance(value, list) and value and isinstance(value[0], float):
            np.testing.assert_allclose(b[key], value, atol=1e-4, err_msg=key)
        else:
            assert b[key] == value, key
    # Each rank encoded its own share only: 0, 2, 4, ... and 1, 3, 5, ... of the n sentences.
    n = a["n_sentences"]
    assert f"rank 0/2: encoding {(n + 1) // 2} of {n} inputs" in two.stderr
    assert f"rank 1/2: encoding {n // 2} of {n} inputs" in two.stderr


def test_paper_protocol_anisotropy_on_two_processes_equals_one_process(tiny_bert_dir):
    args = ("anisotropy", "--model", str(tiny_bert_dir), "--corpus", "builtin", "--device", "cpu", "--json",
            "--protocol", "ethayarajh", "--min-contexts", "3", "--baseline-sentences", "50")
    one, two = single(*args), torchrun(*args)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    for key in ("random_cosine", "self_similarity", "intra_sentence", "mev", "top_pc_variance", "exact_cosine"):
        np.testing.assert_allclose(b[key], a[key], atol=1e-4, err_msg=key)
    assert b["world_size"] == 2


def test_finetune_on_two_processes_scores_the_whole_uneven_split(tiny_bert_dir, animal_task):
    from sklearn.metrics import accuracy_score

    from core.training import load_classifier

    task, evaluation = animal_task
    done = torchrun("finetune", "--model", str(tiny_bert_dir), "--task", task, "--run-name", "ddp-tiny", "--epochs", "2",
                    "--batch-size", "8", "--max-length", "32", "--lr", "1e-3", "--device", "cpu", "--json",
                    "--gradient-accumulation", "2")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    folder = final_dir("ddp-tiny")
    saved = json.loads((folder / "metrics.json").read_text())
    assert printed["world_size"] == saved["world_size"] == 2
    assert saved["processes_requested"] == 2 and saved["gradient_accumulation"] == 2
    # 80 rows in batches of 8 = 10 batches per epoch; one optimizer step per 2 batches; every batch logged.
    assert saved["steps"] == 20
    assert saved["eval_examples"] == 37 and int(np.sum(saved["confusion"])) == 37
    # Independent check of the gathered predictions: the saved model, loaded in this one process, scores all 37.
    clf = load_classifier("ddp-tiny")
    probs = clf.predict_proba([(r["text"], None) for r in evaluation], max_length=32)
    predicted = [clf.labels[i] for i in probs.argmax(axis=1)]
    assert accuracy_score([r["label"] for r in evaluation], predicted) == pytest.approx(saved["accuracy"], abs=1e-9)
    assert not partial_dir("ddp-tiny").exists()


def test_one_process_and_two_processes_train_alike(tiny_bert_dir, animal_task):
    """Same recipe, same batches: two ranks each take half of every batch, so the loss curves agree closely
    (dropout masks differ between the runs, nothing else)."""
    task, _ = animal_task
    common = ("finetune", "--model", str(tiny_bert_dir), "--task", task, "--epochs", "2", "--batch-size", "8",
              "--max-length", "32", "--lr", "1e-3", "--device", "cpu", "--json")
    one = single(*common, "--run", "one")
    two = torchrun(*common, "--run-name", "two")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["steps"] == b["steps"] == 20
    assert a["world_size"] == 1 and b["world_size"] == 2
    first_a, first_b = a["loss_curve"][0][1], b["loss_curve"][0][1]
    assert first_b == pytest.approx(first_a, rel=0.15)  # the same first batch, before any update


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_killing_one_rank_leaves_no_run_and_records_the_failure(tiny_bert_dir, tmp_path):
    rng = random.Random(2)
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in animal_rows(3000, "train", rng) + animal_rows(20, "test", rng)))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "core",
               "finetune", "--model", str(tiny_bert_dir), "--task", str(path), "--run-name", "killed", "--epochs", "20",
               "--batch-size", "8", "--max-length", "32", "--device", "cpu"]
    launcher = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status_file = partial_dir("killed") / "status.json"
    deadline = time.time() + 120
    status = {}
    while time.time() < deadline:
        try:
            status = json.loads(status_file.read_text())
        except (OSError, ValueError):
            status = {}
        if (status.get("step") or 0) >= 3:
            break
        time.sleep(0.2)
    assert (status.get("step") or 0) >= 3, "training did not start"
    ranks = _children(launcher.pid)
    assert len(ranks) == 2
    other = next(p for p in ranks if p != status["pid"])  # rank 1: status.json holds the main rank's pid
    os.kill(other, signal.SIGKILL)
    launcher.communicate(timeout=120)
    assert launcher.returncode != 0
    assert not final_dir("killed").exists() and not partial_dir("killed").exists()
    run = get_run("killed")
    assert run is not None and run.state == "failed" and run.error
    assert not list(Path(run.folder).glob("*.safetensors"))


def test_the_job_runner_starts_two_ranks_for_a_two_process_recipe(tiny_bert_dir, animal_task):
    """What the page's "processes / GPUs" field does: core.training.submit -> a core.jobs process job whose work
    starts torchrun (no GPU here) and reports the main rank's status."""
    from core.training import Recipe, jobs

    task, _ = animal_task
    recipe = Recipe(model=str(tiny_bert_dir), task=task, run_name="from-page", epochs=1, batch_size=8, max_length=32,
                    lr=1e-3, device="cpu", processes=2)
    jobs.submit(recipe)
    run = jobs.wait("from-page", timeout=240)
    assert run.state == "done", run.error
    assert run.metrics["world_size"] == 2 and run.metrics["processes_requested"] == 2
    assert (final_dir("from-page") / "launcher.log").exists()


def _assert_same_json(a: dict, b: dict, skip: tuple[str, ...] = ()) -> None:
    for key, value in a.items():
        if key in ("world_size", *skip):
            continue
        if isinstance(value, (list, float)) and np.asarray(value, dtype=object).size and np.issubdtype(
                np.asarray(value).dtype, np.number):
            np.testing.assert_allclose(np.asarray(b[key], dtype=float), np.asarray(value, dtype=float), atol=1e-4, err_msg=key)
        else:
            assert b[key] == value, key


def test_head_statistics_and_attention_change_on_two_processes(tiny_bert_dir, tmp_path):
    from tests.conftest import make_tiny_bert

    other = make_tiny_bert(tmp_path / "other", seed=1)
    for args in (("heads", "--model", str(tiny_bert_dir), "--corpus", "builtin", "--limit", "41", "--json", "--quiet"),
                 ("attention-change", "--a", str(tiny_bert_dir), "--b", str(other), "--corpus", "builtin", "--limit", "41",
                  "--json", "--quiet")):
        one, two = single(*args), torchrun(*args)
        assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
        a, b = json.loads(one.stdout), json.loads(two.stdout)
        assert a["world_size"] == 1 and b["world_size"] == 2
        _assert_same_json(a, b)
        assert "rank 1/2: encoding 20 of 41 inputs" in two.stderr


def test_corpus_passes_count_the_cut_of_every_rank_on_two_processes(tiny_bert_dir, data_dir):
    """counted() under torchrun: each rank encodes only its share, the JSON counts the whole corpus (was 0 against 17)."""
    for args in (("heads", "--model", str(tiny_bert_dir), "--corpus", "ud:dev:30", "--limit", "30", "--json", "--quiet"),
                 ("anisotropy", "--model", str(tiny_bert_dir), "--corpus", "ud:dev:30", "--device", "cpu", "--json",
                  "--min-contexts", "3")):
        one, two = single(*args), torchrun(*args)
        assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
        a = json.loads(one.stdout)
        b = json.loads([line for line in two.stdout.splitlines() if line.strip()][-1])
        assert b["world_size"] == 2
        assert a["truncated"]["tokens_dropped"] > 0 and b["truncated"] == a["truncated"], args[0]


def test_rsa_cka_word_vectors_and_probe_encoding_on_two_processes(tiny_bert_dir, tmp_path, data_dir):
    from tests.conftest import make_tiny_bert

    other = make_tiny_bert(tmp_path / "other", seed=1)
    compare = ("compare", "--a", str(tiny_bert_dir), "--b", str(other), "--corpus", "builtin", "--limit", "31", "--json")
    probe = ("probe", "--model", str(tiny_bert_dir), "--corpus", "ud:dev:30", "--layers", "0,2", "--epochs", "2",
             "--rank", "8", "--no-cache", "--json")
    for args in (compare, probe):
        one, two = single(*args), torchrun(*args)
        assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
        a, b = json.loads(one.stdout), json.loads(two.stdout)
        assert a["world_size"] == 1 and b["world_size"] == 2
        _assert_same_json(a, b, skip=("seconds", "elapsed_seconds", "cached"))
    # Each rank encodes only its share of the treebank: the cut-off count is the whole treebank's (17 here).
    assert b["truncated"] == a["truncated"] and a["truncated"]["tokens_dropped"] > 0


def test_simcse_on_two_processes_saves_one_encoder(tiny_bert_dir, tmp_path):
    """[CLS] pooling leaves the pooler without a gradient: DDP is told so and the run completes."""
    rng = random.Random(3)
    path = tmp_path / "sentences.csv"
    path.write_text("text\n" + "".join(" ".join(rng.sample(WORDS, 6)) + "\n" for _ in range(60)))
    done = torchrun("contrastive", "--model", str(tiny_bert_dir), "--task", str(path), "--run-name", "simcse2",
                    "--batch-size", "8", "--max-length", "16", "--device", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    assert metrics["world_size"] == 2 and metrics["similarity_after"]
    assert (final_dir("simcse2") / "model.safetensors").exists()


def test_sae_training_on_two_processes_equals_one_process(tiny_bert_dir, isolated_cache):
    """Each rank encodes its share; the gathered vectors are the single process's, so rank 0 trains the same SAE."""
    from safetensors.numpy import load_file

    args = ("sae-train", "--model", str(tiny_bert_dir), "--corpus", "builtin", "--limit", "60", "--layer", "1",
            "--features", "32", "--k", "4", "--steps", "20", "--device", "cpu", "--json", "--quiet")
    one, two = single(*args, "--out", "one"), torchrun(*args, "--out", "two")
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    lines = [line for line in two.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and json.loads(lines[0])["name"] == "two"
    assert json.loads(lines[0])["train_tokens"] == json.loads(one.stdout)["train_tokens"]
    a, b = (load_file(str(isolated_cache / "saes" / name / "sae.safetensors")) for name in ("one", "two"))
    for key in a:
        np.testing.assert_allclose(b[key], a[key], atol=1e-6, err_msg=key)
