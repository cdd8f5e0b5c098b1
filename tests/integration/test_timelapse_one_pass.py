"""A time-lapse frame is one forward pass over its probe set (issue 47, item 2): the word vectors, the attention maps
and the dev scores it reads from that pass equal what the three passes of before computed (compare's word vectors,
attention-change's maps, the classifier's own logits), and the encoder runs once over each probe input a frame.

On the tiny random BERT of tests/conftest.py with a 3-class head, the probe set being 20 seeded SNLI dev pairs (the
default probe's kind: the task's labelled dev pairs), the "training" a change of every weight by seeded noise."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.analyses.heads.change import AttentionMaps
from core.analyses.similarity import Reference, word_vectors
from core.model.classifier import Classifier, predict_logits, text_features
from core.model.loading import LoadedModel, load_model
from core.training.timelapse import read_timelapse
from core.training.watch import Watch, _eager_attention, dev_scores

LABELS = ("entailment", "neutral", "contradiction")
PROBE = "snli:dev:20"


@pytest.fixture
def watched(tiny_bert_dir, data_dir, tmp_path):
    """A Watch over a fresh classifier on the tiny BERT, its frames planned at steps 0, 5 and 10."""
    lm = load_model(str(tiny_bert_dir))
    torch.manual_seed(0)
    classifier = Classifier(lm.model, len(LABELS)).eval()
    recipe = SimpleNamespace(task="snli", timelapse_corpus=PROBE, eval_split=None, seed=0, run_name="one-pass",
                             batch_size=8, timelapse=3, keep_checkpoints=0)
    folder = SimpleNamespace(path=tmp_path, log=lambda _message: None)
    watch = Watch(recipe, folder, classifier, lm.tokenizer, LABELS, [], LABELS.index, 64, "cpu")
    watch.begin(10)
    return watch, classifier, lm


def trained(classifier: Classifier) -> None:
    """Every weight moved by seeded noise: the model of a later step."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for weight in classifier.parameters():
            weight.add_(0.05 * torch.randn(weight.shape, generator=generator))


class ForwardCount:
    """Rows the encoder's forward ran on (a hook on the encoder module), and how many calls."""

    def __init__(self, encoder):
        self.rows = self.calls = 0
        self.handle = encoder.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, _module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.rows += int(ids.shape[0])
        self.calls += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        return False


def test_a_frame_runs_the_encoder_once_over_the_probe_pairs(watched):
    watch, classifier, _ = watched
    pairs = len(watch.probe.inputs)
    assert pairs == 20 and watch.dev_features is None  # the probe pairs are the dev sample
    for step in (0, 5, 10):
        if step:
            trained(classifier)
        with ForwardCount(classifier.encoder) as forwards:
            watch.at(step, float(step))
        # Each probe pair once, in one batch (20 < the frame's batch of 32): no second pass for the word vectors,
        # none for the attention maps, none for the dev scores.
        assert (forwards.rows, forwards.calls) == (pairs, 1), step
    assert len(read_timelapse(watch.folder.path).frames) == 3


def test_the_frame_equals_the_three_passes_of_before(watched):
    watch, classifier, lm = watched
    watch.at(0, 0.0)
    base_vectors = word_vectors(lm, watch.plan.read, keep=watch.plan.keep)  # compare's pass on the base
    with _eager_attention(classifier.encoder):
        base_maps = AttentionMaps.of(lm, list(watch.probe.inputs))  # attention-change's pass on the base
    # Frame 0 read from the one pass: its word vectors and maps are the reference's.
    np.testing.assert_allclose(watch.reference.vectors.vectors, base_vectors.vectors, atol=1e-5)
    assert watch.reference.vectors.words == base_vectors.words
    for index, (ids, maps) in base_maps.maps.items():
        np.testing.assert_array_equal(watch.maps.maps[index][0], ids)
        np.testing.assert_allclose(watch.maps.maps[index][1], maps, atol=1e-5)

    trained(classifier)
    now = LoadedModel(ref="now", path="", source="training", model=classifier.encoder, tokenizer=lm.tokenizer,
                      device="cpu")
    # Today's frame, from its one pass ...
    measured = watch.plan.measure(now, classifier, watch.maps)
    watch.at(5, 1.0)
    frame = watch.writer.timelapse.frames[-1]
    # ... and the three passes of before, each the commands' own code.
    old_vectors = word_vectors(now, watch.plan.read, keep=watch.plan.keep)
    np.testing.assert_allclose(measured.vectors.vectors, old_vectors.vectors, atol=1e-5)
    old_reference = Reference.of_vectors(lm, watch.plan.read, watch.plan.keep, 0, base_vectors)
    old_similarity = old_reference.versus("now", old_vectors)
    np.testing.assert_allclose(frame.rsa, old_similarity.rsa, atol=1e-5)
    np.testing.assert_allclose(frame.cka, old_similarity.cka, atol=1e-5)
    with _eager_attention(classifier.encoder):
        old_change = base_maps.change(now)
    np.testing.assert_allclose(frame.attention_change, old_change.cosine, atol=1e-5)
    targets = watch.dev_targets
    old_logits = predict_logits(classifier, text_features(lm.tokenizer, list(watch.probe.inputs), 64), pad_id=0,
                                device="cpu")
    np.testing.assert_allclose(measured.logits, old_logits, atol=1e-5)
    old_loss, old_accuracy = dev_scores(old_logits, targets)
    assert frame.loss == pytest.approx(old_loss, abs=1e-5) and frame.dev_accuracy == pytest.approx(old_accuracy, abs=1e-6)
    assert old_change.cosine.min() < 0.999  # the noise moved the maps: the comparison is not of two identities


def test_a_sentence_probe_encodes_each_sentence_once_and_equals_compare(tiny_bert_dir, tmp_path, monkeypatch):
    """A sentence probe: attention-change's first inputs and compare's sampled sentences overlap; the frame encodes
    the union, each sentence once, and its word vectors are compare's (the sample reaches past those inputs)."""
    import random

    from core.data.datasets import Example
    from core.training import watch as watch_module
    from tests.integration.test_training import ANIMALS, FILLER

    monkeypatch.setattr(watch_module, "ATTENTION_INPUTS", 4)  # fewer than the sample's sentences
    rng = random.Random(2)
    sentences = [" ".join(rng.sample(FILLER, 4) + [rng.choice(ANIMALS)]) for _ in range(12)]
    probe = tmp_path / "probe.txt"
    probe.write_text("\n".join(sentences) + "\n")
    lm = load_model(str(tiny_bert_dir))
    torch.manual_seed(0)
    classifier = Classifier(lm.model, len(ANIMALS)).eval()
    recipe = SimpleNamespace(task="animals.jsonl", timelapse_corpus=str(probe), eval_split=None, seed=0,
                             run_name="one-pass-sentences", batch_size=8, timelapse=2, keep_checkpoints=0)
    dev = [Example(s, None, next(a for a in ANIMALS if a in s.split())) for s in sentences[:6]]
    watch = Watch(recipe, SimpleNamespace(path=tmp_path, log=lambda _m: None), classifier, lm.tokenizer, tuple(ANIMALS),
                  dev, ANIMALS.index, 32, "cpu")
    watch.begin(4)
    trained(classifier)  # frame 0 of a model that is not the tiny BERT: compare the frame with compare's own pass
    with ForwardCount(classifier.encoder) as forwards:
        watch.at(0, 0.0)
    plan = watch.plan
    assert plan.attended == 4 and len(plan.inputs) > 4 and len(set(plan.inputs)) == len(plan.inputs)
    assert len(plan.read) == len(plan.sampled)  # every sentence of the sample is among the inputs encoded
    # The union once (the encoder's one pass), then the dev sample's own pass: this probe carries no labels.
    assert forwards.rows == len(plan.inputs) + len(dev)
    now = LoadedModel(ref="now", path="", source="training", model=classifier.encoder, tokenizer=lm.tokenizer,
                      device="cpu")
    expected = Reference.of(now, sentences, seed=0)  # compare's sample and pass over the whole probe
    np.testing.assert_allclose(watch.reference.vectors.vectors, expected.vectors.vectors, atol=1e-5)
    assert watch.reference.vectors.words == expected.vectors.words
