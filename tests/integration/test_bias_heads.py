"""The heads behind a bias flip find a planted head: a tiny classifier whose prediction can learn of the swapped word
only through one head (every other head's value weights are zero, so no other head moves anything between
positions and the [CLS] vector hears of the swapped word through that head alone), and whose
output layer is set to flip on the swaps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.bias import heads as bias_heads
from core.bias.flips import item_examples
from core.model.loading import LoadedModel
from core.training.classifier import Classifier, LoadedClassifier
from tests.integration.test_adapter import _config, _peaked, _tokenizer

PLANTED = (0, 2)
TEXTS = ["the man sat on the mat .", "the man ran to the park .", "he was in the house .", "a man ran to the river .",
         "the girl sat in the park .", "the cat sat on the mat ."]


def _planted_classifier() -> LoadedClassifier:
    config, _, _ = _config("bert")
    config._attn_implementation = "eager"
    torch.manual_seed(5)
    from transformers import BertModel

    encoder = BertModel(config, add_pooling_layer=False).eval()
    _peaked(encoder)
    layer, head = PLANTED
    d = 8
    with torch.no_grad():
        for index, block in enumerate(encoder.encoder.layer):
            value = block.attention.self.value
            keep = torch.zeros(value.weight.shape[0], dtype=torch.bool)
            if index == layer:
                keep[head * d:(head + 1) * d] = True
            value.weight[~keep] = 0.0  # other heads' values: their bias only, the same whatever the words
            value.weight[keep] *= 5.0
    clf = Classifier(encoder, 2, "linear", pooling="cls", dropout=0.0).eval()
    tokenizer = _tokenizer(True)
    loaded = LoadedClassifier(encoder=LoadedModel(ref="planted", path="", source="local", model=encoder,
                                                  tokenizer=tokenizer, device="cpu"),
                              model=clf, labels=("no", "yes"), head={})
    # The output layer separates the originals' [CLS] vectors from their swapped copies': class 0 vs class 1.
    from core.bias.swaps import DEFAULT_SWAPS, swap_text

    def cls_vectors(texts):
        feed = dict(tokenizer(texts, padding=True, return_tensors="pt"))
        with torch.no_grad():
            return encoder(**feed).last_hidden_state[:, 0]

    originals = [t for t in TEXTS if swap_text(t, DEFAULT_SWAPS) != t]
    a, b = cls_vectors(originals), cls_vectors([swap_text(t, DEFAULT_SWAPS) for t in originals])
    direction = a.mean(0) - b.mean(0)
    middle = float(((a @ direction).mean() + (b @ direction).mean()) / 2)
    with torch.no_grad():
        clf.head[0].weight.copy_(torch.stack([direction, -direction]) * 50)
        clf.head[0].bias.copy_(torch.tensor([-middle, middle]) * 50)
    return loaded


def test_the_planted_head_ranks_first_and_its_ablation_ends_the_flips():
    clf = _planted_classifier()
    result = bias_heads.bias_heads(clf, item_examples(TEXTS), top_k=1, corpus="planted")
    assert result.swappable == 5 and result.flips >= 3 and result.patched_pairs == result.flips
    assert result.ranking[0] == PLANTED
    assert result.recovery[PLANTED] == pytest.approx(1.0, abs=1e-4)
    others = np.delete(result.recovery.ravel(), PLANTED[0] * 4 + PLANTED[1])
    np.testing.assert_allclose(others, 0.0, atol=1e-4)  # their outputs do not depend on the words at all
    assert result.flip_rate_before == pytest.approx(result.flips / 5)
    assert result.flip_rate_after == 0.0  # nothing carries the swapped word to [CLS] any more
    payload = result.to_json()
    # JSON [layer, head], the layer shown 1..L as on every chart (core.numbering)
    assert payload["top_heads"] == [[PLANTED[0] + 1, PLANTED[1]]] and payload["flip_rate_after"] == 0.0


def test_a_corpus_without_swappable_words_is_refused():
    with pytest.raises(ValueError, match="contains a word the swaps change"):
        bias_heads.bias_heads(_planted_classifier(), item_examples(["the cat sat on the mat ."]))


def test_pairs_with_a_small_gap_are_counted_and_warned_about(monkeypatch):
    """Issue 48: a pair whose original - swapped metric is tiny gives a noisy recovery. Each flipping pair's gap is
    computed here from the classifier's own logits; the threshold is set between them so some pairs fall below."""
    from core.bias.swaps import DEFAULT_SWAPS, swap_text

    clf = _planted_classifier()
    plain = bias_heads.bias_heads(clf, item_examples(TEXTS), top_k=1, corpus="planted")

    def logits(text):
        with torch.no_grad():
            return clf.model(**dict(clf.tokenizer(text, return_tensors="pt")))[0]

    gaps = []
    for text in TEXTS:
        swapped = swap_text(text, DEFAULT_SWAPS)
        a, b = logits(text), logits(swapped)
        c0, c1 = int(a.argmax()), int(b.argmax())
        if swapped != text and c0 != c1:
            gaps.append(float((a[c0] - a[c1]) - (b[c0] - b[c1])))
    assert len(gaps) == plain.patched_pairs >= 3
    assert plain.small_gaps == sum(abs(g) < bias_heads.SMALL_GAP for g in gaps)
    # Halfway between two neighbouring gaps, not on one: patching batches pairs of different lengths with padding,
    # so its gaps may differ from these unpadded ones in the 6th decimal (a threshold at the median + 1e-6 flipped).
    ordered = sorted(abs(g) for g in gaps)
    half = len(ordered) // 2
    assert ordered[half] - ordered[half - 1] > 1e-4
    threshold = (ordered[half - 1] + ordered[half]) / 2
    monkeypatch.setattr(bias_heads, "SMALL_GAP", threshold)
    flagged = bias_heads.bias_heads(clf, item_examples(TEXTS), top_k=1, corpus="planted")
    expected = sum(abs(g) < threshold for g in gaps)
    assert 0 < flagged.small_gaps == expected < len(gaps)
    payload = flagged.to_json()
    assert payload["small_gap_pairs"] == expected
    assert [w["code"] for w in payload["warnings"]] == ["small_gap"]
    assert payload["warnings"][0]["message"].startswith(f"{expected} of the {len(gaps)} patched pairs")


def _stable(value) -> str:
    """JSON text with sorted keys: NaN (a head no pair recovered) compares as text."""
    import json

    return json.dumps(value, sort_keys=True)


def test_lens_bias_and_bias_heads_return_what_the_cli_json_has(tiny_bert_dir, tmp_path, capsys):
    """The notebook twins take the CLI's settings and give the same data as --json: `bias --corpus` (the flip rate
    of a finished run, no training), `bias --show` (a finished experiment) and `bias-heads`."""
    from core import lens
    from tests.app.test_attention_dataset import _classifier_run
    from tests.app.test_bias_page import write_finished_experiment
    from tests.cli_json import cli_json

    run = _classifier_run(tiny_bert_dir)
    corpus = tmp_path / "people.txt"
    corpus.write_text("the woman sat on the mat .\nthe man ran to the park .\nher mother is at home .\n"
                      "a girl and a boy play .\nthe dog sat .\n")

    got = cli_json(capsys, "bias", "--corpus", str(corpus), "--model", run)
    assert _stable(lens.bias(run, corpus=str(corpus), return_data=True).to_json()) == _stable(got)
    assert got["swappable"] == 4
    write_finished_experiment("shown")
    got = cli_json(capsys, "bias", "--show", "shown")
    assert _stable(lens.bias(show="shown", return_data=True).to_json()) == _stable(got)
    got = cli_json(capsys, "bias-heads", "--model", run, "--corpus", str(corpus), "--top-k", "2", "--mode", "uniform")
    data = lens.bias_heads(run, str(corpus), top_k=2, mode="uniform", return_data=True)
    assert _stable(data.to_json()) == _stable(got)
    assert len(data[1]) == data.result.recovery.size  # every head ranked in the frame
    assert data[0].to_dict()["layer"]  # a valid Vega-Lite spec: the recovery cells and the disabled heads' outline


def test_bias_limits_accept_0_for_all_and_the_old_test_limit_spelling():
    from core.bias_settings import BIAS
    from core.commands.bias import register
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bias", "--train-limit", "0", "--test-limit", "50", "--freeze-embeddings"])
    settings = BIAS.make({f.name: getattr(args, f.name) for f in BIAS.fields})
    assert settings.limits == (None, 50) and settings.freeze_embeddings
    with pytest.raises(SystemExit):
        parser.parse_args(["bias", "--head", "cnn"])
