"""Occlusion, Shapley value sampling, KernelSHAP and LIME (core.analyses.explain through captum) against
computations written here: probability drops and exact Shapley values from core.training.classifier.predict_logits
on word pieces replaced by hand, and a toy classifier whose probability is linear in the words present."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from core.analyses import explain as ex
from core.analyses.faithfulness import RANDOM, faithfulness, n_top
from core.training.classifier import predict_logits, softmax
from tests.cli_json import cli_json
from tests.conftest import TINY_VOCAB
from tests.integration.test_explain import LABELS, make_seq_classifier


@pytest.fixture(scope="module")
def seqcls(tmp_path_factory):
    return ex.load_explainer(str(make_seq_classifier(tmp_path_factory.mktemp("seqcls"))), device="cpu")


def probability_without(explainer, tok, absent: set[int], target: int, baseline: str = "pad") -> float:
    """p(target) with the pieces of the words in `absent` replaced by [PAD] / [MASK] (special tokens kept)."""
    replacement = {"pad": explainer.tokenizer.pad_token_id, "mask": explainer.tokenizer.mask_token_id}[baseline]
    ids = np.array([replacement if w in absent else i for i, w in zip(tok.input_ids, tok.word_ids)])
    return float(softmax(predict_logits(explainer, [(ids, np.asarray(tok.type_ids))], batch_size=1))[0, target])


def subset_values(explainer, tok, target: int) -> dict[frozenset, float]:
    """p(target) for every subset of the words present (the others [PAD]), in one batched call."""
    n = len(tok.words)
    subsets = [frozenset(c) for size in range(n + 1) for c in itertools.combinations(range(n), size)]
    pad = explainer.tokenizer.pad_token_id
    sequences = [(np.array([i if w < 0 or w in s else pad for i, w in zip(tok.input_ids, tok.word_ids)]),
                  np.asarray(tok.type_ids)) for s in subsets]
    probs = softmax(predict_logits(explainer, sequences, batch_size=64))[:, target]
    return dict(zip(subsets, probs.astype(np.float64)))


def exact_shapley(value, n: int) -> np.ndarray:
    """Shapley values of a set function over n players by the subset formula."""
    out = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for coalition in itertools.combinations(others, size):
                out[i] += weight * (value(set(coalition) | {i}) - value(set(coalition)))
    return out


@pytest.mark.parametrize("baseline", ["pad", "mask"])
def test_occlusion_of_one_word_is_its_probability_drop(seqcls, baseline):
    text = "the unhappy dog sat on the mat"  # "unhappy" is two pieces, occluded together
    tok = ex.prepare(seqcls, text)
    result = ex.explain(seqcls, text, method="occlusion", baseline=baseline)
    target = LABELS.index(result.target)
    full = probability_without(seqcls, tok, set(), target, baseline)
    expected = [full - probability_without(seqcls, tok, {w}, target, baseline) for w in range(len(tok.words))]
    np.testing.assert_allclose(result.word_scores, expected, atol=1e-5)
    assert np.ptp(expected) > 1e-3  # the words matter differently, so a wrong word order would fail
    unhappy = np.asarray(tok.word_ids) == tok.words.index("unhappy")
    np.testing.assert_allclose(result.token_scores[unhappy], expected[tok.words.index("unhappy")] / 2, atol=1e-5)
    assert result.token_scores[np.asarray(tok.special_mask, dtype=bool)].tolist() == [0.0, 0.0]


def test_occlusion_window_of_two_words_averages_the_windows_over_each_word(seqcls):
    text = "the cat sat on the mat"
    tok = ex.prepare(seqcls, text)
    result = ex.explain(seqcls, text, method="occlusion", window=2, target="neutral")
    target = LABELS.index("neutral")
    full = probability_without(seqcls, tok, set(), target)
    n = len(tok.words)
    drops = [full - probability_without(seqcls, tok, {s, s + 1}, target) for s in range(n - 1)]
    expected = [np.mean([drops[s] for s in range(n - 1) if s <= w <= s + 1]) for w in range(n)]
    np.testing.assert_allclose(result.word_scores, expected, atol=1e-5)
    assert result.to_json()["window"] == 2


def test_shapley_with_every_order_of_three_words_is_exact(seqcls):
    text, text_b = "the unhappy dog", None
    tok = ex.prepare(seqcls, text, text_b)
    assert len(tok.words) == 3
    result = ex.explain(seqcls, text, method="shapley", samples=6, target=2)
    values = subset_values(seqcls, tok, 2)
    expected = exact_shapley(lambda present: values[frozenset(present)], 3)
    np.testing.assert_allclose(result.word_scores, expected, atol=1e-5)
    assert np.abs(expected).max() > 1e-3


def test_sampled_shapley_is_efficient_and_near_exact(seqcls):
    """With fewer orders than W! captum samples; every order telescopes, so the scores still add up to
    p(x) - p(baseline), and more orders land nearer the exact values."""
    text = "a man sat on the bank"
    tok = ex.prepare(seqcls, text)
    n = len(tok.words)
    values = subset_values(seqcls, tok, 0)
    expected = exact_shapley(lambda present: values[frozenset(present)], n)
    errors = {}
    for samples in (20, 200):
        assert math.factorial(n) > samples
        sampled = ex.explain(seqcls, text, method="shapley", samples=samples, target=0)
        np.testing.assert_allclose(sampled.word_scores.sum(), values[frozenset(range(n))] - values[frozenset()], atol=1e-5)
        errors[samples] = np.abs(sampled.word_scores - expected).max()
    assert errors[200] < 0.25 * np.abs(expected).max() and errors[200] < errors[20]
    again = ex.explain(seqcls, text, method="shapley", samples=60, target=0)
    np.testing.assert_array_equal(again.word_scores, ex.explain(seqcls, text, method="shapley", samples=60, target=0).word_scores)
    other = ex.explain(seqcls, text, method="shapley", samples=60, target=0, seed=1)
    assert not np.array_equal(again.word_scores, other.word_scores)  # seeded


WEIGHTS = {"cat": 0.2, "sat": -0.15, "on": 0.05, "mat": 0.1, "dog": -0.1, "ran": 0.12}


def linear_toy(seqcls) -> ex.Explainer:
    """p(class 0) = 0.5 + the sum of the weights of the words present ([PAD] and special tokens weigh 0)."""
    table = torch.nn.Embedding(len(TINY_VOCAB), 1)
    with torch.no_grad():
        table.weight.zero_()
        for word, weight in WEIGHTS.items():
            table.weight[TINY_VOCAB.index(word)] = weight

    def logits(embeds, type_ids, mask):
        p = 0.5 + (embeds[..., 0] * mask).sum(-1)
        return torch.log(torch.stack([p, 1 - p], dim=-1))

    return dataclasses.replace(seqcls, labels=("yes", "no"), logits_from_embeds=logits, embeddings=table)


@pytest.mark.parametrize("method, atol", [("kernel-shap", 1e-4), ("lime", 0.01), ("shapley", 1e-6), ("occlusion", 1e-6)])
def test_every_perturbation_method_recovers_a_linear_models_weights(seqcls, method, atol):
    toy = linear_toy(seqcls)
    text = "cat sat on mat dog ran"
    result = ex.explain(toy, text, method=method, target="yes")
    np.testing.assert_allclose(result.word_scores, [WEIGHTS[w] for w in result.words], atol=atol)


def test_faithfulness_table_has_the_perturbation_methods_and_they_beat_random_on_the_linear_toy(seqcls):
    toy = linear_toy(seqcls)
    items = ["cat sat on mat dog ran", "dog ran on mat", "cat sat"]
    methods = ("occlusion", "shapley", "kernel-shap", "lime")
    assert set(methods) <= set(ex.METHODS)
    result = faithfulness(toy, items, methods=methods)
    assert result.methods == methods + (RANDOM,)
    # deleting the top-k words by the true weights drops p(yes) (the predicted class) by their weights' sum
    expected = []
    for item in items:
        weights = sorted((WEIGHTS[w] for w in item.split()), reverse=True)
        expected.append([sum(weights[:n_top(f, len(weights))]) for f in result.fractions])
    for m in methods:
        np.testing.assert_allclose(result.comprehensiveness[result.methods.index(m)], np.mean(expected, axis=0), atol=1e-3)
    assert all(result.aopc_comprehensiveness[i] > result.aopc_comprehensiveness[-1] for i in range(len(methods)))
    assert set(result.to_json()["methods"]) == set(methods)


def test_perturbation_methods_need_a_head_and_positive_counts(tiny_bert_dir, seqcls):
    plain = ex.load_explainer(str(tiny_bert_dir), device="cpu")
    assert not set(ex.PERTURBATION_METHODS) & set(ex.available_methods(plain))
    with pytest.raises(ex.NoClassifierHead):
        ex.explain(plain, "the cat sat", method="lime")
    with pytest.raises(ValueError, match="at least 1"):
        ex.explain(seqcls, "the cat sat", method="kernel-shap", samples=0)
    with pytest.raises(ValueError, match="at least 1"):
        ex.explain(seqcls, "the cat sat", method="occlusion", window=0)


def test_cli_explain_and_faithfulness_with_perturbation_methods(seqcls, capsys, tmp_path):
    import json

    from core.__main__ import main

    assert main(["explain", "--model", seqcls.lm.path, "--text", "the cat sat", "--text-b", "a dog", "--method", "lime",
                 "--samples", "40", "--target", "neutral", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = ex.explain(seqcls, "the cat sat", "a dog", "lime", samples=40, target="neutral")
    np.testing.assert_allclose(out["word_scores"], expected.word_scores, atol=1e-7)
    assert out["samples"] == 40 and out["target"] == "neutral"
    assert main(["explain", "--model", seqcls.lm.path, "--text", "the cat sat", "--method", "occlusion", "--window", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(out["word_scores"], ex.explain(seqcls, "the cat sat", method="occlusion", window=2).word_scores,
                               atol=1e-7)
    (tmp_path / "lines.txt").write_text("the cat sat\na dog ran in the park\n")
    assert main(["explain-faithfulness", "--model", seqcls.lm.path, "--corpus", str(tmp_path / "lines.txt"),
                 "--methods", "occlusion,shapley", "--samples", "5", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["methods"]) == {"occlusion", "shapley"} and out["examples"] == 2


def test_notebook_and_lesson_view_pass_samples_and_window(seqcls):
    from core import lens

    _, frame = lens.explain(seqcls.lm.path, "the cat sat", "a dog", method="kernel-shap", samples=30, return_data=True)
    np.testing.assert_allclose(frame["score"], ex.explain(seqcls, "the cat sat", "a dog", "kernel-shap", samples=30).word_scores,
                               atol=1e-7)
    (chart, title), = lens.view("explain", {"model": seqcls.lm.path, "a": "the cat sat", "methods": "occlusion",
                                            "window": "2"})
    assert title == ex.METHOD_TITLES["occlusion"]
    expected = ex.explain(seqcls, "the cat sat", method="occlusion", window=2).word_scores
    np.testing.assert_allclose([r["score"] for r in chart.data.to_dict("records")], expected, atol=1e-7)


@pytest.mark.parametrize("method", sorted(ex.PERTURBATION_METHODS))
def test_one_word_gets_its_whole_probability_drop(seqcls, method):
    """With one word every method's answer is p(x) - p(baseline) (KernelSHAP alone cannot sample it)."""
    tok = ex.prepare(seqcls, "cat")
    result = ex.explain(seqcls, "cat", method=method, window=3, target=1)
    expected = probability_without(seqcls, tok, set(), 1) - probability_without(seqcls, tok, {0}, 1)
    np.testing.assert_allclose(result.word_scores, [expected], atol=1e-4 if method == "lime" else 1e-6)


def _same_json(lens_json, cli_json, notes=("truncated", "degenerate")) -> None:
    """The lens twin's data is the CLI's --json less the notes the command adds (same keys, same numbers)."""
    cli_json = {k: v for k, v in cli_json.items() if k not in notes}
    assert set(lens_json) == set(cli_json)
    for key, value in cli_json.items():
        if isinstance(value, (list, float)) and np.asarray(value).dtype.kind == "f":
            np.testing.assert_allclose(np.asarray(lens_json[key], dtype=float), np.asarray(value, dtype=float),
                                       atol=1e-7, err_msg=key)
        else:
            assert lens_json[key] == value, key


def test_lens_explain_returns_what_the_cli_json_has(seqcls, capsys):
    from core import lens

    for method, extra in (("occlusion", ["--window", "2", "--target", "1"]), ("rollout", [])):
        out = cli_json(capsys, "explain", "--model", seqcls.lm.path, "--text", "the cat sat", "--text-b", "a dog",
                        "--method", method, *extra)
        data = lens.explain(seqcls.lm.path, "the cat sat", "a dog", method=method, return_data=True,
                            **({"window": 2, "target": "1"} if extra else {}))
        _same_json(data.to_json(), out)
    assert "matrix" in out  # the rollout one


def test_lens_explain_faithfulness_returns_what_the_cli_json_has(seqcls, capsys, tmp_path):
    from core import lens

    corpus = tmp_path / "lines.txt"
    corpus.write_text("the cat sat\na dog ran in the park\n")
    out = cli_json(capsys, "explain-faithfulness", "--model", seqcls.lm.path, "--corpus", str(corpus),
                    "--methods", "occlusion,rollout", "--steps", "3", "--seed", "1")
    data = lens.explain_faithfulness(seqcls.lm.path, str(corpus), methods="occlusion,rollout", steps=3, seed=1,
                                     return_data=True)
    _same_json(data.to_json(), out, notes=("degenerate",))
    assert list(out["methods"]) == ["occlusion", "rollout"] and "random" in out["curves"]


def test_faithfulness_methods_all_is_every_method_and_a_bad_one_is_refused(seqcls):
    from core.analyses.explain import METHODS
    from core.analyses.faithfulness import ANALYSIS

    assert ANALYSIS.make(methods="all").chosen_methods == METHODS
    with pytest.raises(ValueError, match="methods must be one of"):
        ANALYSIS.make(methods="occlusion,nope")


def test_a_class_index_given_as_text_is_the_class_of_that_index(seqcls):
    by_index = ex.explain(seqcls, "the cat sat", method="occlusion", target="1")
    by_label = ex.explain(seqcls, "the cat sat", method="occlusion", target=seqcls.labels[1])
    assert by_index.target == seqcls.labels[1]
    np.testing.assert_array_equal(by_index.word_scores, by_label.word_scores)
