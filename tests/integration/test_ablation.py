"""Head ablation on a real (tiny) classification run: the hook-based uniform and mask ablations against an
independent implementation that overwrites the head's probabilities inside transformers' own eager attention,
the layer-reuse sweep against full forwards, and the intact accuracy against the run's metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.analyses.ablation import (
    AblationError,
    HeadDisabler,
    ablation_sweep,
    load_for_ablation,
    predict_disabled,
)
from core.training.runs import run_eval_sample


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, data_dir) -> Path:
    """A classification run trained by the real engine: tiny random BERT, 96 SNLI pairs, one epoch (~seconds)."""
    from tests.conftest import make_tiny_bert

    root = tmp_path_factory.mktemp("ablation")
    base = make_tiny_bert(root / "tiny-bert", layers=2, heads=4, hidden=32, seed=3)
    # BERT's 0.02 init leaves attention outputs tiny next to the residual stream; larger attention weights make
    # every head matter, so a wrong ablation cannot hide below float error.
    from transformers import BertModel

    model = BertModel.from_pretrained(base)
    with torch.no_grad():
        for layer in model.encoder.layer:
            for linear in (layer.attention.self.query, layer.attention.self.key, layer.attention.self.value,
                           layer.attention.output.dense):
                linear.weight.mul_(8.0)
    model.save_pretrained(base, safe_serialization=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTLENS_CACHE", str(root / "cache"))
        from core.training import Recipe, finetune

        finetune(Recipe(model=str(base), task="snli", run_name="tiny-snli", train_limit=96, eval_limit=120,
                        epochs=1, batch_size=16, max_length=48, data_source="local", device="cpu"))
        from core import settings

        return settings.runs_dir() / "tiny-snli"


@pytest.fixture(scope="module")
def classifier(tiny_run):
    return load_for_ablation(str(tiny_run), device="cpu")


PAIRS = [
    ("the man sat on the bank of the river .", "a man is at the river ."),
    ("she ran to the park .", "the woman was in the house ."),
    ("a dog ran .", "the cat sat on the mat in the park ."),
]


def _overwritten_probabilities(tiny_run, items, layer, heads, mode):
    """Last hidden states from transformers' eager attention with the chosen heads' probabilities overwritten: uniform 1/L over
    the real tokens of each input, or all zero (mask)."""
    import transformers.models.bert.modeling_bert as bert
    from core.training import load_classifier

    clf = load_classifier(str(tiny_run), device="cpu", attention="eager")
    feed = clf.tokenize(items, 48)
    real = feed["attention_mask"].float()  # [batch, keys]
    original = bert.eager_attention_forward

    def patched(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        weights = torch.softmax(query @ key.transpose(2, 3) * scaling + attention_mask, dim=-1)
        if module.layer_idx == layer:
            weights = weights.clone()
            for h in heads:
                if mode == "uniform":
                    weights[:, h] = (real / real.sum(dim=1, keepdim=True))[:, None, :].expand_as(weights[:, h])
                else:
                    weights[:, h] = 0.0
        return (weights @ value).transpose(1, 2).contiguous(), weights

    bert.eager_attention_forward = patched
    try:
        with torch.inference_mode():
            return clf.model.encoder(**feed).last_hidden_state.numpy()
    finally:
        bert.eager_attention_forward = original


@pytest.mark.parametrize("mode", ["uniform", "mask"])
@pytest.mark.parametrize("layer,heads", [(0, [2]), (1, [0, 3]), (1, [0, 1, 2, 3])])
def test_hooks_equal_overwritten_probabilities(classifier, tiny_run, mode, layer, heads):
    feed = classifier.tokenize(PAIRS, 48)
    with torch.inference_mode():
        intact = classifier.model.encoder(**feed).last_hidden_state.numpy()
        with HeadDisabler(classifier.model.encoder, mode) as disabler:
            disabler.disabled = {layer: tuple(heads)}
            got = classifier.model.encoder(**feed).last_hidden_state.numpy()
    expected = _overwritten_probabilities(tiny_run, PAIRS, layer, heads, mode)
    real = feed["attention_mask"].numpy().astype(bool)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-4)
    assert np.abs(got[real] - intact[real]).max() > 1e-2  # the ablation changed the states
    # no hook is left behind on the model
    for module in classifier.model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_intact_accuracy_equals_run_metrics_and_sweep_matches_full_forwards(classifier, tiny_run):
    sample = run_eval_sample(classifier)
    metrics = json.loads((tiny_run / "metrics.json").read_text())
    assert sample.complete and len(sample.examples) == metrics["eval_examples"] == 120
    result = ablation_sweep(classifier, sample.examples, mode="uniform", batch_size=32)
    assert result.base_accuracy == pytest.approx(metrics["accuracy"], abs=1e-12)
    assert result.head_accuracy.shape == (2, 4) and result.layer_accuracy.shape == (2,)
    full = ablation_sweep(classifier, sample.examples, mode="uniform", batch_size=32, reuse_lower_layers=False)
    np.testing.assert_array_equal(result.head_accuracy, full.head_accuracy)
    np.testing.assert_array_equal(result.layer_accuracy, full.layer_accuracy)
    # one head, checked against predict_disabled's plain full forward with the same head disabled
    items = [(e.text, e.text_b) for e in sample.examples]
    truth = np.array([classifier.labels.index(e.label) for e in sample.examples])
    probs = predict_disabled(classifier, items, {1: [2]}, mode="uniform")
    assert result.head_accuracy[1, 2] == pytest.approx((probs.argmax(1) == truth).mean())
    d = result.to_json()
    assert len(d["head_delta"]) == 2 and len(d["head_delta"][0]) == 4 and len(d["layer_delta"]) == 2


def test_sweep_progress_and_bad_input(classifier):
    from core.data.datasets import Example
    from core.progress import Cancelled

    examples = [Example(a, b, "entailment") for a, b in PAIRS]
    seen = []
    ablation_sweep(classifier, examples, sweep_heads=False, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3, 3)  # one batch: intact + 2 layers
    with pytest.raises(Cancelled):
        ablation_sweep(classifier, examples, should_stop=lambda: True)
    with pytest.raises(AblationError, match="not among"):
        ablation_sweep(classifier, [Example("a", "b", "maybe")])
    with pytest.raises(AblationError, match="layer 5"):
        predict_disabled(classifier, PAIRS, {5: [0]})


def test_cli_ablate_json(tiny_run, capsys):
    from core.__main__ import main

    assert main(["ablate", "--model", str(tiny_run), "--mode", "mask", "--limit", "40", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "mask" and out["n_examples"] == 40 and out["task"] == "snli"
    assert np.array(out["head_delta"]).shape == (2, 4) and len(out["layer_delta"]) == 2
    assert 0.0 <= out["base_accuracy"] <= 1.0
    # issue 32: the JSON's "truncated", counted at the run's own length (48) with the tokenizer's untruncated lengths
    classifier = load_for_ablation(str(tiny_run), device="cpu")
    lengths = [len(classifier.tokenizer(e.text, e.text_b)["input_ids"]) for e in run_eval_sample(classifier, 40).examples]
    assert out["truncated"] == {"tokens_dropped": sum(max(0, n - 48) for n in lengths)}
    assert main(["ablate", "--model", str(tiny_run.parent / "no-such-run"), "--quiet"]) == 2
    assert "no-such-run" in capsys.readouterr().err


def test_sweep_and_cli_say_whether_the_intact_run_learned_nothing(classifier, tiny_run, capsys):
    """The rule (one class >= 90 %, or accuracy within 2 sqrt(p (1 - p) / n) of the majority) worked out here from
    the intact model's own predictions."""
    from core.__main__ import main

    sample = run_eval_sample(classifier)
    result = ablation_sweep(classifier, sample.examples, sweep_heads=False)
    items = [(e.text, e.text_b) for e in sample.examples]
    truth = np.array([classifier.labels.index(e.label) for e in sample.examples])
    predicted = predict_disabled(classifier, items, {}).argmax(1)
    n, accuracy = truth.size, float((predicted == truth).mean())
    dominant = np.bincount(predicted, minlength=3).max() / n
    majority = np.bincount(truth, minlength=3).max() / n
    expected = dominant >= 0.9 or accuracy - majority <= 2 * np.sqrt(accuracy * (1 - accuracy) / n)
    assert result.degenerate.flagged == expected
    assert (result.degenerate.accuracy, result.degenerate.dominant_share) == pytest.approx((accuracy, dominant))
    assert main(["ablate", "--model", str(tiny_run), "--no-layers", "--quiet", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["degenerate"]["flagged"] == expected
    assert ("learned (almost) nothing" in captured.err) == expected


def test_sweep_counts_the_examples_cut_to_the_runs_length(classifier):
    """Issue 32: the classifier tokenizes itself, so the sweep counts its cuts (at the run's max_length, 48)."""
    from core.data.datasets import Example

    long = " ".join(["the man sat on the bank of the river ."] * 6)
    examples = [Example(long, "a man is at the river .", "entailment"),
                Example("she ran to the park .", None, "neutral")]
    result = ablation_sweep(classifier, examples, sweep_layers=False)
    full = len(classifier.tokenizer(long, "a man is at the river .")["input_ids"])
    assert result.max_length == 48 and result.dropped == (full - 48, 0)
    assert result.truncation_notice().startswith("1 of 2 examples are longer than the model reads (48 tokens): "
                                                 f"{full - 48} word pieces")


def test_lens_ablate_is_the_ablate_command(tiny_run, capsys):
    """The `ablate` analysis declared once (core.contract): lens.ablate's JSON is the CLI's --json, settings spelled
    as the CLI spells them (--mode, --no-layers: the old flag, now one half of --layers / --no-layers)."""
    from core import lens
    from core.__main__ import main

    assert main(["ablate", "--model", str(tiny_run), "--limit", "40", "--seed", "2", "--mode", "mask", "--no-layers",
                 "--batch-size", "8", "--device", "cpu", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    data = lens.ablate(str(tiny_run), limit=40, seed=2, mode="mask", sweep_layers=False, batch_size=8, device="cpu",
                       return_data=True)
    assert data.to_json() == out
    assert out["mode"] == "mask" and out["n_examples"] == 40 and all(v is None for v in out["layer_delta"])
    chart, frame = data
    np.testing.assert_allclose(frame["accuracy change"].to_numpy(), data.result.head_delta.ravel())
