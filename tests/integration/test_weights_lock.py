"""transformers 5's from_pretrained swaps torch.nn.init's functions for no-ops process-wide while it loads
(transformers/initialization.py: no_init_weights). In the app a page loads a model while a job thread builds a
classifier head, so the head could keep torch.empty's leftovers. core.model.loading.WEIGHTS_LOCK is held by every
load and every construction of fresh weights: these tests show the load holds it and a head waits for it."""

from __future__ import annotations

import threading
import time

import torch
from transformers import AutoModel
from transformers.initialization import no_init_weights

from core.model import loading
from core.training.classifier import Classifier


def test_a_load_holds_the_weights_lock_while_transformers_swaps_the_init_functions(tiny_bert_dir, monkeypatch):
    original = AutoModel.from_pretrained.__func__
    seen = []

    def watched(cls, *args, **kwargs):
        free = []
        probe = threading.Thread(target=lambda: free.append(loading.WEIGHTS_LOCK.acquire(blocking=False)))
        probe.start()
        probe.join()
        if free[0]:
            loading.WEIGHTS_LOCK.release()
        seen.append(free[0])
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", classmethod(watched))
    loading.load_model(str(tiny_bert_dir), device="cpu")
    assert seen == [False]  # another thread could not take the lock during the load


def test_a_head_built_during_another_threads_load_waits_and_is_initialised(tiny_bert_dir):
    encoder = loading.load_model(str(tiny_bert_dir), device="cpu").model
    inside, held_s = threading.Event(), 0.4

    def slow_load():  # what from_pretrained does, held as long as a real load of a large model
        with loading.fresh_weights(), no_init_weights():
            inside.set()
            time.sleep(held_s)

    loader = threading.Thread(target=slow_load)
    loader.start()
    inside.wait()
    started = time.perf_counter()
    torch.manual_seed(0)
    head = Classifier(encoder, num_labels=3).head[0]
    waited = time.perf_counter() - started
    loader.join()
    assert waited >= held_s / 2  # it waited for the load to end
    # Initialised as nn.Linear does (kaiming uniform within ±1/sqrt(fan_in)): the same as a head built alone.
    torch.manual_seed(0)
    alone = Classifier(encoder, num_labels=3).head[0]
    assert torch.equal(head.weight, alone.weight) and head.weight.abs().max() > 0
