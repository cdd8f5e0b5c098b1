"""Issue 47 item 1: patching starts each patched row at its cell's layer from the corrupted run's cached layer input,
and pairs of different lengths share padded batches. On the tiny random model of every family the adapter knows,
the new path gives the numbers of the whole-forward path (reuse_layers=False, itself checked against plain torch
hooks in test_patching.py) per head and per position, alone and in a padded batch; the layers' own outputs are
checked against transformers' hidden states; the fallback (whole forwards) is taken where a pass cannot start
mid-stack, and gives the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.analyses import patching
from core.model.adapter import AdapterError, LayerCall, ModelAdapter
from tests.integration.test_adapter import FAMILIES, _feed
from tests.integration.test_patching import CLEAN, CORRUPT, TARGET, _classifier, _mlm

# three lengths, so the batch is padded: 9, 5 and 13 word pieces with BERT's tokenizer
ITEMS = [(CLEAN, CORRUPT, TARGET), ("he [MASK] .", "she [MASK] .", "ran"),
         ("the girl ran to the park and the [MASK] sat .", "the boy ran to the park and the [MASK] sat .", "dog")]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return (request.param, *_mlm(request.param))


@pytest.mark.parametrize("over", patching.OVER)
def test_reusing_layers_gives_the_whole_forward_numbers(family, over):
    _, _, lm = family
    new = patching.patch(lm, CLEAN, CORRUPT, TARGET, over)
    old = patching.patch(lm, CLEAN, CORRUPT, TARGET, over, reuse_layers=False)
    assert new.patched.shape == old.patched.shape
    np.testing.assert_allclose(new.patched, old.patched, atol=1e-5, rtol=0)
    assert new.clean_metric == pytest.approx(old.clean_metric, abs=1e-5)
    assert new.corrupt_metric == pytest.approx(old.corrupt_metric, abs=1e-5)
    assert new.clean_top == old.clean_top and new.metric == old.metric
    # The tiny random models' cells differ by 1e-4 or less (mlp: 8e-5), so they are also compared at 2e-6, far
    # finer than their spread: a row patched at the wrong cell or from the wrong pair would show.
    assert np.ptp(old.patched) > 2e-5
    np.testing.assert_allclose(new.patched, old.patched, atol=2e-6, rtol=0)


@pytest.mark.parametrize("over", ["heads", "positions"])
def test_a_padded_batch_of_pairs_of_different_lengths(family, over, monkeypatch):
    _, _, lm = family
    groups = []
    group = patching._patch_group
    monkeypatch.setattr(patching, "_patch_group", lambda pairs, *a: (groups.append(len(pairs)), group(pairs, *a))[1])
    results = patching.patch_many(lm, ITEMS, over)
    assert groups == [3]  # all three in one padded batch
    assert len({len(r.tokens) for r in results}) == 3
    for item, result in zip(ITEMS, results):
        alone = patching.patch(lm, *item, over, reuse_layers=False)
        assert result.patched.shape == alone.patched.shape == (3, 4 if over == "heads" else len(alone.tokens))
        np.testing.assert_allclose(result.patched, alone.patched, atol=1e-5, rtol=0)
        assert result.clean_metric == pytest.approx(alone.clean_metric, abs=1e-5)
        assert result.corrupt_metric == pytest.approx(alone.corrupt_metric, abs=1e-5)
        assert (result.clean_top, result.tokens, result.target) == (alone.clean_top, alone.tokens, alone.target)


def test_small_chunks_split_a_layers_cells_and_still_agree(family):
    """A budget of a few rows cuts the cells of one layer across chunks (each chunk starts at its first cell's
    layer)."""
    _, _, lm = family
    results = patching.patch_many(lm, ITEMS, "positions", memory_mb=0.05)
    for item, result in zip(ITEMS, results):
        np.testing.assert_allclose(result.patched, patching.patch(lm, *item, "positions", reuse_layers=False).patched,
                                   atol=1e-5, rtol=0)


def test_a_cell_runs_only_the_layers_from_its_own_up(family):
    """Rows through each layer: a cell of layer l passes layers l..L-1 only (plus the clean and corrupted passes)."""
    name, mlm, lm = family
    adapter = ModelAdapter.of(mlm)
    rows, ffn_positions = [], []
    modules = {id(m): m for m in adapter.layers}.values()  # ALBERT: one shared module, called once per layer
    handles = [m.register_forward_pre_hook(lambda _m, args: rows.append(int(args[0].shape[0]))) for m in modules]
    ffn = {id(adapter.parts(l).ffn_in): adapter.parts(l).ffn_in for l in range(3)}.values()
    # a forward hook sees the input the module ran on (after the adapter's pre-hooks)
    handles += [m.register_forward_hook(lambda _m, args, _out: ffn_positions.append(tuple(args[0].shape[:2])))
                for m in ffn]
    try:
        patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads")
    finally:
        for h in handles:
            h.remove()
    layers, heads = 3, 4
    climbing = sum((layers - l) * heads for l in range(layers))  # 24 rows-layers, not 3 x 12 = 36
    # + the clean and the corrupted pass, one row each (the clean top guess is read from the clean pass)
    assert sum(rows) == climbing + 2 * layers
    # the last layer's feed-forward block ran at the [MASK] only (the metric reads nothing else) for all 12 rows
    assert ffn_positions[-1] == (12, 1) and all(t == 9 for _, t in ffn_positions[:-1])


def test_the_last_layers_feed_forward_at_one_position_per_row(family):
    """adapter.feed_forward_at: the layer's output at each row's own position equals the whole layer's."""
    _, mlm, lm = family
    adapter = ModelAdapter.of(mlm)
    feed = _feed(lm.tokenizer)
    with torch.no_grad(), adapter.capture(["resid_pre", "call"]) as store:
        final = mlm.base_model(**feed).last_hidden_state
    rows, positions = torch.tensor([0, 1, 0]), torch.tensor([3, 1, 0])
    with torch.no_grad(), adapter.feed_forward_at(2, positions):
        out = adapter.run_layers(store["resid_pre", 2][rows], store["call", 2].rows(rows), 2)
    torch.testing.assert_close(out[torch.arange(3), positions], final[rows, positions], atol=1e-5, rtol=0)
    assert not torch.allclose(out[0, 5], final[0, 5], atol=1e-3)  # elsewhere it is not the layer's output


def test_classifier_pairs_with_a_second_text_and_a_refused_pair():
    clf = _classifier()
    items = [(("the man sat .", "he ran ."), ("the woman sat .", "he ran ."), ("c", 0)),
             ("the man sat on the mat .", "the woman sat on the mat .", 1),
             ("the man sat .", "the cat sat on the mat .", 0)]
    results = patching.patch_many(clf, items, "heads")
    assert isinstance(results[2], patching.PatchingError) and "same number of word pieces" in str(results[2])
    for item, result in zip(items[:2], results[:2]):
        alone = patching.patch(clf, *item, "heads", reuse_layers=False)
        np.testing.assert_allclose(result.patched, alone.patched, atol=1e-5, rtol=0)
        assert result.clean_top == alone.clean_top and result.metric == alone.metric
        assert result.gap == pytest.approx(alone.gap, abs=1e-5)


def test_layers_started_mid_stack_give_the_models_own_hidden_states(family):
    """adapter.run_layers from a layer's captured input, called with the padded pass's call taken at rows
    (LayerCall.rows), gives transformers' own last hidden state at every real token of those rows."""
    _, mlm, lm = family
    adapter = ModelAdapter.of(mlm)
    feed = _feed(lm.tokenizer)  # two inputs of different lengths, padded
    with torch.no_grad(), adapter.capture(["resid_pre", "call"]) as store:
        final = mlm.base_model(**feed).last_hidden_state
    rows = torch.tensor([1, 0, 1])
    mask = feed["attention_mask"][rows].bool()
    for layer in range(3):
        call = store["call", layer]
        assert call.batch == 2
        with torch.no_grad(), adapter.intervene("z", lambda v, l: None):  # inside a session, as patching runs it
            out = adapter.run_layers(store["resid_pre", layer][rows], call.rows(rows), layer)
        torch.testing.assert_close(out[mask], final[rows][mask], atol=1e-5, rtol=0)


def test_a_call_that_cannot_be_split_by_rows_is_refused():
    mask = torch.zeros(2, 1, 5, 5)
    call = LayerCall((mask, None), {"position_ids": None, "flag": False}, batch=2)
    taken = call.rows(torch.tensor([1, 1, 0]))
    assert taken.args[0].shape == (3, 1, 5, 5) and taken.args[1] is None and taken.batch == 3
    assert LayerCall((torch.zeros(1, 1, 5, 5),), {}, batch=1).rows(torch.tensor([0, 0])).args[0].shape[0] == 1
    with pytest.raises(AdapterError, match="cannot be split by rows"):
        LayerCall((), {"cache": object()}, batch=2).rows(torch.tensor([0]))
    with pytest.raises(AdapterError, match="cannot be split by rows"):
        LayerCall((torch.zeros(3, 5, 5),), {}, batch=2).rows(torch.tensor([0]))


def _count_whole(monkeypatch) -> list:
    calls = []
    whole = patching._patch_whole
    monkeypatch.setattr(patching, "_patch_whole", lambda pair, *a: (calls.append(pair), whole(pair, *a))[1])
    return calls


def test_fallback_when_the_layer_call_cannot_be_split(monkeypatch):
    """A model whose layers get an argument LayerCall.rows cannot follow runs whole forwards, same numbers."""
    _, lm = _mlm("bert")
    reference = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads", reuse_layers=False)
    whole = _count_whole(monkeypatch)

    def refuse(self, index):
        raise AdapterError("a layer argument of type Cache cannot be split by rows")

    monkeypatch.setattr(LayerCall, "rows", refuse)
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads")
    assert len(whole) == 1
    np.testing.assert_allclose(result.patched, reference.patched, atol=1e-6, rtol=0)
    assert result.clean_top == reference.clean_top


def test_fallback_when_the_output_cannot_be_had_from_the_last_hidden_state(monkeypatch):
    """A classifier whose model has no head_logits (not core's Classifier) runs whole forwards, same numbers."""
    clf = _classifier()
    reference = patching.patch(clf, "the man sat .", "the woman sat .", 1, "positions", reuse_layers=False)
    whole = _count_whole(monkeypatch)
    monkeypatch.setattr(type(clf.model), "head_logits", property(lambda self: None))
    results = patching.patch_many(clf, [("the man sat .", "the woman sat .", 1)] * 2, "positions")
    assert len(whole) == 2
    for result in results:
        np.testing.assert_allclose(result.patched, reference.patched, atol=1e-6, rtol=0)
