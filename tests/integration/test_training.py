"""Training end to end: a tiny random BERT on synthetic data (loss falls, layers drop, checkpoints reload,
cancel and crash leave no model, the job queue runs one at a time) and MiniLM on 2,000 SNLI pairs."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from core import settings
from core.model.loading import available_models, load_model
from core.progress import Cancelled
from core.training import Recipe, finetune, get_run, list_runs, load_classifier
from core.training import jobs, queue
from core.training.runs import final_dir, partial_dir

ANIMALS = ["cat", "dog"]
FILLER = "the a sat ran on in at to of and is was mat river bank park house tree".split()


@pytest.fixture(scope="module")
def animal_file(tmp_path_factory):
    """Label = which animal word the sentence contains: learnable by a tiny model in a few steps."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("data") / "animals.jsonl"
    with open(path, "w") as handle:
        for _ in range(400):
            animal = rng.choice(ANIMALS)
            words = rng.sample(FILLER, 5)
            words.insert(rng.randrange(6), animal)
            handle.write(json.dumps({"text": " ".join(words), "label": animal}) + "\n")
    return str(path)


def tiny_recipe(tiny_bert_dir, animal_file, name, **changes) -> Recipe:
    values = dict(model=str(tiny_bert_dir), task=animal_file, run_name=name, epochs=3, lr=1e-3, batch_size=16, max_length=32,
                  cpu_threads=1)
    return Recipe(**{**values, **changes})


def test_tiny_model_learns_and_reloads_with_a_dropped_layer(tiny_bert_dir, animal_file):
    metrics = finetune(tiny_recipe(tiny_bert_dir, animal_file, "tiny-drop", drop_last_layers=1, head="mlp", epochs=6, lr=2e-3))
    losses = [loss for _, loss in metrics["loss_curve"]]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert metrics["accuracy"] > metrics["majority_accuracy"] + 0.2
    for key in ("task", "accuracy", "per_class_f1", "confusion", "train_examples", "eval_examples", "train_seconds",
                "examples_per_second", "recipe"):
        assert key in metrics
    folder = final_dir("tiny-drop")
    assert json.loads((folder / "metrics.json").read_text())["accuracy"] == metrics["accuracy"]
    assert "tiny-drop" in [e.name for e in available_models()]

    lm = load_model("tiny-drop")  # the encoder alone, through the app's loader
    assert lm.num_layers == 1 and len(lm.model.encoder.layer) == 1
    assert lm.config.id2label == {0: "cat", 1: "dog"}

    # Independent check of the reported accuracy: reload the classifier, predict the same hold-out, score with sklearn.
    from core.training.tasks import load_task

    data = load_task(animal_file)
    clf = load_classifier("tiny-drop")
    assert clf.head["head"] == "mlp"
    probs = clf.predict_proba([(e.text, e.text_b) for e in data.eval], max_length=32)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    predicted = [clf.labels[i] for i in probs.argmax(axis=1)]
    assert accuracy_score([e.label for e in data.eval], predicted) == pytest.approx(metrics["accuracy"], abs=0.02)


def test_cancelled_and_crashed_runs_leave_no_model(tiny_bert_dir, animal_file):
    steps = []
    with pytest.raises(Cancelled):
        finetune(tiny_recipe(tiny_bert_dir, animal_file, "tiny-cancel"), progress=lambda d, t: steps.append(d),
                 should_stop=lambda: len(steps) >= 3)

    def explode(done, total):
        if done > 40:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        finetune(tiny_recipe(tiny_bert_dir, animal_file, "tiny-crash"), progress=explode)

    states = {r.name: r for r in list_runs()}
    assert states["tiny-cancel"].state == "cancelled" and states["tiny-crash"].state == "failed"
    assert "simulated crash" in states["tiny-crash"].log_tail
    for name in ("tiny-cancel", "tiny-crash"):
        assert not final_dir(name).exists() and not partial_dir(name).exists()
    assert not list(settings.runs_dir().rglob("*.safetensors"))
    assert not [e for e in available_models() if e.source == "run"]


def _wait_until(predicate, timeout=180.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise TimeoutError("condition not reached")


def test_jobs_run_one_at_a_time_cancel_and_kill(tiny_bert_dir, animal_file):
    """Three background processes: A (long) is cancelled, B waits in the queue and then finishes, C is killed."""
    long = dict(epochs=200)
    jobs.submit(tiny_recipe(tiny_bert_dir, animal_file, "job-a", **long))
    jobs.submit(tiny_recipe(tiny_bert_dir, animal_file, "job-b", epochs=1, cpu_threads=1))
    _wait_until(lambda: (get_run("job-a").status.get("step") or 0) > 0)
    assert get_run("job-b").state == "queued" and queue.queue_position("job-b") == 1
    assert jobs.cancel("job-a")
    a = jobs.wait("job-a", timeout=60)
    assert a.state == "cancelled" and not final_dir("job-a").exists()

    b = jobs.wait("job-b", timeout=180)
    assert b.state == "done", b.log_tail
    assert b.status["started_at"] >= a.status["finished_at"]  # B started only after A had ended
    assert (final_dir("job-b") / "model.safetensors").is_file()

    jobs.submit(tiny_recipe(tiny_bert_dir, animal_file, "job-c", **long))
    c = _wait_until(lambda: (r := get_run("job-c")) and (r.status.get("step") or 0) > 0 and r)
    os.killpg(int(c.status["pid"]), signal.SIGKILL)  # a crash: no chance to clean up
    c = _wait_until(lambda: (r := get_run("job-c")) and r.state == "killed" and r, timeout=30)
    assert c.error.startswith("killed:")
    assert not final_dir("job-c").exists()
    # The one runner's record of that training job says it was killed (and reading it wrote nothing).
    from core import jobs as runner
    from core.training.runs import job_id

    assert runner.read_record(job_id(partial_dir("job-c"))).state == "killed"
    assert [e.name for e in available_models() if e.source == "run"] == ["job-b"]


def test_contrastive_training_separates_positives_from_negatives(tiny_bert_dir, tmp_path):
    """Positive = the same words in another order; SimCSE (supervised) should pull those together."""
    rng = random.Random(1)
    vocabulary = ANIMALS + FILLER + "man woman girl boy money water deposit".split()
    path = tmp_path / "pairs.csv"
    with open(path, "w") as handle:
        handle.write("text,text_b\n")
        for _ in range(300):
            words = rng.sample(vocabulary, 5)
            shuffled = rng.sample(words, 5)
            handle.write(f"{' '.join(words)},{' '.join(shuffled)}\n")
    metrics = finetune(Recipe(model=str(tiny_bert_dir), task=str(path), run_name="tiny-simcse", objective="simcse-sup",
                              epochs=4, lr=1e-3, batch_size=32, max_length=16, pooling="mean", cpu_threads=1))
    before, after = metrics["similarity_before"], metrics["similarity_after"]
    assert after["margin"] > before["margin"] + 0.05

    # Recompute the margin independently: the saved encoder through load_model, mean pooling in numpy.
    from core.training.tasks import load_contrastive

    pairs = load_contrastive(str(path), "sup").eval_pairs
    lm = load_model("tiny-simcse")

    def embed(text: str) -> np.ndarray:
        batch = lm.tokenizer(text, return_tensors="pt", truncation=True, max_length=16)
        hidden = lm.model(**batch).last_hidden_state[0].detach().numpy()
        vector = hidden.mean(axis=0)
        return vector / np.linalg.norm(vector)

    a = np.stack([embed(x) for x, _ in pairs])
    b = np.stack([embed(y) for _, y in pairs])
    sims = a @ b.T
    n = len(pairs)
    margin = np.trace(sims) / n - (sims.sum() - np.trace(sims)) / (n * n - n)
    assert margin == pytest.approx(after["margin"], abs=1e-3)


def test_minilm_on_2000_snli_pairs_beats_the_majority_class(minilm_dir, data_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the local data folder, without waiting for the hub
    # Kept short for CI: one epoch, short pairs, the top two of six layers trained; still far above chance.
    recipe = Recipe(model=str(minilm_dir), task="snli", run_name="minilm-snli", train_limit=2000, eval_limit=300,
                    epochs=1, max_length=48, lr=1e-4, freeze_embeddings=True, frozen_layers=(0, 1, 2, 3), cpu_threads=1)
    metrics = finetune(recipe)
    assert metrics["train_examples"] == 2000 and metrics["eval_split"] == "dev" and metrics["data_source"] == "local"
    assert metrics["labels"] == ["entailment", "neutral", "contradiction"]
    assert metrics["accuracy"] > metrics["majority_accuracy"] + 0.08


# ---- paper protocols ----------------------------------------------------------------------------------


def _tiny_encoder(tiny_bert_dir):
    import torch
    from transformers import AutoTokenizer, BertModel

    torch.manual_seed(0)
    return BertModel.from_pretrained(str(tiny_bert_dir), attn_implementation="eager").eval(), AutoTokenizer.from_pretrained(str(tiny_bert_dir))


def test_gao_projection_and_loss_match_an_independent_implementation(tiny_bert_dir):
    """Gao et al.'s cl_forward with pooler_type cls: z = tanh(W h_cls + b), cos(z1_i, z2_j) / 0.05, cross-entropy
    with target i; written here in numpy from the transformers model's own [CLS] state."""
    import torch

    from core.training.engine import SimCSEProjection, collate, embed_texts, simcse_loss, text_features, training_embeddings

    encoder, tokenizer = _tiny_encoder(tiny_bert_dir)
    anchors = ["the cat sat on the mat", "a dog ran in the park", "he was at the bank", "she is in the house"]
    positives = ["the cat sat", "the dog ran", "the river bank", "a tree and a house"]
    projection = SimCSEProjection(encoder.config.hidden_size, encoder.config.initializer_range)
    features = text_features(tokenizer, [(t, None) for t in anchors + positives], 32)
    with torch.no_grad():
        z = training_embeddings(encoder, projection, collate(features, tokenizer.pad_token_id, "cpu"), "cls")
        loss = float(simcse_loss(z[:4], z[4:], 0.05))

    cls = []
    for text in anchors + positives:  # one sentence at a time: no padding involved
        with torch.no_grad():
            out = encoder(**tokenizer(text, return_tensors="pt"))
        cls.append(out.last_hidden_state[0, 0].numpy().astype(np.float64))
    W = projection.dense.weight.detach().numpy().astype(np.float64)
    b = projection.dense.bias.detach().numpy().astype(np.float64)
    projected = [np.tanh(W @ h + b) for h in cls]
    total = 0.0
    for i in range(4):
        row = []
        for j in range(4):
            u, v = projected[i], projected[4 + j]
            row.append(float(u @ v / np.linalg.norm(u) / np.linalg.norm(v)) / 0.05)
        total += -(row[i] - np.log(np.sum(np.exp(row))))
    assert loss == pytest.approx(total / 4, rel=1e-4)
    assert float(projection.dense.bias.detach().abs().max()) == 0.0 and float(projection.dense.weight.detach().std()) < 0.05  # BERT init

    # Evaluation is "cls_before_pooler": the [CLS] state itself, without the projection.
    embedded = embed_texts(encoder, tokenizer, anchors, 32, "cls", "cpu")
    for k in range(4):
        np.testing.assert_allclose(embedded[k], cls[k] / np.linalg.norm(cls[k]), atol=1e-5)


def test_gao_run_trains_with_the_projection_and_saves_the_encoder_only(tiny_bert_dir, tmp_path):
    from safetensors import safe_open

    from core.training.recipe import paper_recipe

    path = tmp_path / "sentences.csv"
    rng = random.Random(0)
    path.write_text("text\n" + "\n".join(" ".join(rng.sample(FILLER + ANIMALS, 6)) for _ in range(80)) + "\n")
    metrics = finetune(paper_recipe("gao", model=str(tiny_bert_dir), task=str(path), run_name="tiny-gao", cpu_threads=1))
    assert metrics["protocol"] == "gao" and metrics["recipe"]["mlp_in_training"] is True
    assert metrics["eval_pooling"] == "cls_before_pooler"
    assert metrics["steps"] == 1  # 64 training sentences, batch 64, 1 epoch
    with safe_open(str(final_dir("tiny-gao") / "model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert not [k for k in keys if "projection" in k]
    assert sorted(keys) == sorted(k for k in load_model(str(tiny_bert_dir)).model.state_dict())


def test_slides_run_scores_the_snli_test_split(tiny_bert_dir, data_dir):
    from core.data.datasets import snli
    from core.training.recipe import paper_recipe

    recipe = paper_recipe("slides", model=str(tiny_bert_dir), task="snli", run_name="tiny-slides", train_limit=40,
                          eval_limit=30, max_length=32, head="mlp", data_source="local", cpu_threads=1)
    metrics = finetune(recipe)
    assert (metrics["protocol"], metrics["eval_split"], metrics["eval_examples"]) == ("slides", "test", 30)
    assert metrics["recipe"]["weight_decay"] == 0.0 and metrics["recipe"]["schedule"] == "none"
    test_pairs = {(e.text, e.text_b) for e in snli("test")}
    from core.training import load_task

    evaluated = load_task("snli", eval_limit=30, source="local", eval_split="test").eval
    assert all((e.text, e.text_b) in test_pairs for e in evaluated)
    clf = load_classifier("tiny-slides")
    assert clf.model.dropout.p == 0.0  # the slides' MLP model has no dropout before its head


# ---- studies --------------------------------------------------------------------------------------------


def test_slides_layer12_study_runs_on_a_tiny_bert(tiny_bert_dir, data_dir):
    from core.studies import StudyOptions, get

    study = get("slides-layer12")
    result = study.run(StudyOptions(model=str(tiny_bert_dir), limit=24, extra={"eval_limit": 20}), None, None)
    assert result.protocol == "slides" and result.corpus == "snli"
    comparison, frozen_claim = result.comparisons  # accuracy per arm; "the frozen run trains faster" (a yes/no claim)
    assert comparison.reference.key == "slides-layer12-snli"
    assert comparison.verdict == "different model: shape only"  # a tiny BERT is not the slides' bert-base
    from core import references
    from core.references import SLIDES_FREEZE_LAST

    assert frozen_claim.reference is references.SLIDES_FREEZE_FASTER

    # The third arm keeps every layer and freezes the last one.
    assert result.measured["layers"] == {"12 layers, linear head": 2, "11 layers (layer 12 removed), MLP head": 1,
                                         SLIDES_FREEZE_LAST: 2}
    runs = {r.name: r for r in list_runs()}
    full = next(r for n, r in runs.items() if n.endswith("-all-layers"))
    assert full.metrics["eval_split"] == "test" and full.metrics["eval_examples"] == 20
    assert result.measured["test accuracy"]["12 layers, linear head"] == full.metrics["accuracy"]
    assert any("indicative only" in n for n in result.notes)
    # Reusing the finished runs by prefix gives the same numbers without training.
    prefix = full.name.removesuffix("-all-layers")
    again = study.run(StudyOptions(extra={"run": prefix}), None, None)
    assert again.measured["test accuracy"] == result.measured["test accuracy"]
    assert json.loads(json.dumps(again.to_json()))["verdict"] == "different model: shape only"


def test_slides_contrastive_study_runs_on_a_tiny_bert(tiny_bert_dir, data_dir):
    from core.studies import StudyOptions, get
    from core.studies.slides_contrastive import random_word_cosine

    result = get("slides-contrastive").run(
        StudyOptions(model=str(tiny_bert_dir), limit=64, corpus="snli:dev:12", extra={"eval_limit": 10}), None, None)
    assert result.protocol == "gao" and result.comparisons == () and result.verdict == "not measured"
    original = result.measured["random-word cosine, original"]
    assert sorted(original) == [0, 1, 2]
    run = next(r for r in list_runs() if r.name.startswith("slides-contrastive-"))
    assert run.metrics["protocol"] == "gao" and run.metrics["steps"] == 1
    assert any("grows slower" in n for n in result.notes)

    # The measure against a plain computation: random tokens of different sentences, special tokens left out.
    import torch
    from transformers import AutoTokenizer, BertModel

    from core.data.corpus import resolve

    sentences = resolve("snli:dev:12").sentences
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    model = BertModel.from_pretrained(str(tiny_bert_dir)).eval()
    vectors, owners = [], []
    for s, sentence in enumerate(sentences):
        batch = tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            states = model(**batch, output_hidden_states=True).hidden_states
        for t in range(1, batch["input_ids"].shape[1] - 1):  # [CLS] ... [SEP]
            vectors.append([h[0, t].numpy() for h in states])
            owners.append(s)
    # Exact mean over every cross-sentence pair, by loops; the study samples 20,000 of them (sampling error ~0.002).
    by_hand = []
    for layer in range(3):
        cosines = [vectors[i][layer] @ vectors[j][layer] / np.linalg.norm(vectors[i][layer]) / np.linalg.norm(vectors[j][layer])
                   for i in range(len(owners)) for j in range(len(owners)) if owners[i] != owners[j]]
        by_hand.append(float(np.mean(cosines)))
    measured = random_word_cosine(load_model(str(tiny_bert_dir)), sentences, n_pairs=20000)
    for layer in range(3):
        assert measured[layer] == pytest.approx(by_hand[layer], abs=0.01)
    assert max(abs(by_hand[layer] - original[layer]) for layer in range(3)) < 0.05  # the study's 1,000 pairs
