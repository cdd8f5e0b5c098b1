"""The streaming drivers of core.heads on real models: the survey against per-input transformers outputs, a model
compared with itself, the syntactic head finder against a hand-merged word map, and the CLI's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.heads import (
    PATTERNS,
    STAT_NAMES,
    attention_change,
    example_patterns,
    example_stats,
    syntax_heads,
    token_roles,
)
from core.encoding import pool_attention
from core.models import load_model
from core.treebank import parse_conllu

INPUTS = [
    ("the cat sat on the mat .", "a dog ran in the park ."),
    ("he was unhappy at the bank .", "she is at the river bank ."),
    "the man ran to the house , and the boy sat .",
]


@pytest.fixture(scope="module")
def tiny(tiny_bert_dir):
    return load_model(str(tiny_bert_dir), device="cpu")


def _transformers_attention(lm, item):
    """[L, H, T, T] and tokens for one input, straight from transformers (no batching, no padding)."""
    a, b = (item, None) if isinstance(item, str) else item
    feed = lm.tokenizer(a, b, return_tensors="pt")
    with torch.inference_mode():
        out = lm.model(**feed, output_attentions=True)
    tokens = lm.tokenizer.convert_ids_to_tokens(feed["input_ids"][0])
    segments = feed["token_type_ids"][0].numpy()
    special = np.array([t in ("[CLS]", "[SEP]") for t in tokens])
    return torch.stack(out.attentions)[:, 0].numpy(), tokens, special, segments


def test_survey_equals_per_input_computation(tiny):
    from core.heads import survey_heads

    seen = []
    survey = survey_heads(tiny, INPUTS, batch_size=2, keep_examples=2, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3, 3)
    stats, counts = [], np.zeros((2, 4, len(PATTERNS)), dtype=int)
    for item in INPUTS:
        att, tokens, special, segments = _transformers_attention(tiny, item)
        roles = token_roles(tokens, special, segments, is_pair=not isinstance(item, str))
        stats.append(example_stats(att, roles))
        for (layer, head), k in np.ndenumerate(example_patterns(att, roles)):
            counts[layer, head, k] += 1
    np.testing.assert_allclose(survey.stats, np.mean(stats, axis=0), atol=1e-5)
    np.testing.assert_array_equal(survey.pattern_counts, counts)
    assert survey.n_examples == 3 and survey.n_pairs == 2
    d = survey.to_json()
    assert set(STAT_NAMES) <= set(d) and np.array(d["sep"]).shape == (2, 4)
    assert sum(d["pattern_share"].values()) == pytest.approx(1.0)
    for example in survey.examples:  # kept maps are the real maps of that head on that input
        att, *_ = _transformers_attention(tiny, INPUTS[example.example])
        np.testing.assert_allclose(example.attention, att[example.layer, example.head], atol=1e-5)


def test_model_with_itself_has_cosine_one(tiny, tiny_bert_dir):
    other = load_model(str(tiny_bert_dir), device="cpu")
    change = attention_change(tiny, other, INPUTS, batch_size=2)
    assert change.cosine.shape == (2, 4)
    np.testing.assert_allclose(change.cosine, 1.0, atol=1e-6)


def test_attention_change_differs_between_different_models(tiny, tmp_path):
    from tests.conftest import make_tiny_bert

    other = load_model(str(make_tiny_bert(tmp_path / "other", seed=7)), device="cpu")
    change = attention_change(tiny, other, INPUTS)
    expected = np.zeros((2, 4))
    for item in INPUTS:
        a, b = _transformers_attention(tiny, item)[0], _transformers_attention(other, item)[0]
        for layer in range(2):
            for head in range(4):
                x, y = a[layer, head].ravel(), b[layer, head].ravel()
                expected[layer, head] += x @ y / np.sqrt((x @ x) * (y @ y)) / len(INPUTS)
    np.testing.assert_allclose(change.cosine, expected, atol=1e-6)
    assert (change.cosine < 1 - 1e-5).all()  # random tiny models attend almost uniformly, yet not identically


CONLLU = """# text = The unhappy cats sat .
1	The	the	DET	DT	_	3	det	_	_
2	unhappy	unhappy	ADJ	JJ	_	3	amod	_	_
3	cats	cat	NOUN	NNS	_	4	nsubj	_	_
4	sat	sit	VERB	VBD	_	0	root	_	_
5	.	.	PUNCT	.	_	4	punct	_	_
"""


def test_syntax_heads_on_a_hand_made_treebank(tiny):
    sentence = parse_conllu(CONLLU)[0]
    result = syntax_heads(tiny, [sentence])
    # Independent: tokens of the words one by one ("unhappy" is two pieces: un ##happy), merged by hand.
    pieces = [tiny.tokenizer.tokenize(w) for w in sentence.words]
    assert pieces[1] == ["un", "##happy"]
    ids = tiny.tokenizer.convert_tokens_to_ids(["[CLS]"] + [p for ps in pieces for p in ps] + ["[SEP]"])
    with torch.inference_mode():
        att = torch.stack(tiny.model(input_ids=torch.tensor([ids]), output_attentions=True).attentions)[:, 0].numpy()
    word_of = [-1] + [w for w, ps in enumerate(pieces) for _ in ps] + [-1]
    merged, _ = pool_attention(att, np.array(word_of))
    np.testing.assert_allclose(merged[..., 1, 0], (att[..., 2, 1] + att[..., 3, 1]) / 2, atol=1e-6)
    correct = np.zeros((2, 4))
    for d, h in enumerate(sentence.heads):
        if h:
            scores = merged[..., d, :].copy()
            scores[..., d] = -np.inf
            correct += scores.argmax(-1) == h - 1
    row = result.relations.index("all")
    np.testing.assert_allclose(result.accuracy[row], correct / 4)
    assert result.counts[row] == 4 and result.n_sentences == 1


def test_cli_json(minilm_dir, tmp_path, capsys):
    from core.__main__ import main

    corpus = tmp_path / "pairs.csv"
    corpus.write_text("premise,hypothesis\nA man eats.,Someone is eating.\nA dog runs fast.,The cat sleeps.\n")
    assert main(["heads", "--model", str(minilm_dir), "--corpus", str(corpus), "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert np.array(out["sep"]).shape == (6, 12) and out["n_pairs"] == 2
    assert set(out["pattern_share"]) == set(PATTERNS) and len(out["dominant_pattern"]) == 6
    assert main(["attention-change", "--a", str(minilm_dir), "--b", str(minilm_dir), "--corpus", str(corpus), "--quiet", "--json"]) == 0
    np.testing.assert_allclose(json.loads(capsys.readouterr().out)["cosine"], 1.0, atol=1e-6)
    treebank = tmp_path / "t.conllu"
    treebank.write_text(CONLLU)
    assert main(["syntax-heads", "--model", str(minilm_dir), "--treebank", str(treebank), "--quiet", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["relations"]
    assert rows[-1]["relation"] == "all" and rows[-1]["count"] == 4
    assert main(["heads", "--model", str(minilm_dir), "--corpus", str(tmp_path / "missing.txt"), "--quiet"]) == 2
    assert "not found" in capsys.readouterr().err
