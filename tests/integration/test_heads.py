"""The streaming drivers of core.analyses.heads on real models: the survey against per-input transformers outputs, a model
compared with itself, the syntactic head finder against a hand-merged word map, and the CLI's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.analyses.heads import (
    PATTERNS,
    STAT_NAMES,
    attention_change,
    example_patterns,
    example_stats,
    syntax_heads,
    token_roles,
)
from core.model.encoding import pool_attention
from core.model.loading import load_model
from core.data.treebank import parse_conllu

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
    from core.analyses.heads import survey_heads

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


# ---- the Clark protocol and the three studies on real models ---------------------------------------------


def test_clark_cli_is_one_based_and_says_its_protocol(minilm_dir, tmp_path, capsys):
    from core.__main__ import main

    treebank = tmp_path / "t.conllu"
    treebank.write_text(CONLLU)
    assert main(["syntax-heads", "--model", str(minilm_dir), "--treebank", str(treebank), "--protocol", "clark",
                 "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] == "clark"
    rows = {r["relation"]: r for r in out["relations"]}
    assert rows["all"]["count"] == 5 and rows["root"]["accuracy"] == 0.0  # every word scored, the root a miss
    assert rows["det"]["label"] == f"{rows['det']['layer']}-{rows['det']['head'] + 1}"  # JSON layers from 1 too
    assert main(["syntax-heads", "--model", str(minilm_dir), "--treebank", str(treebank), "--protocol", "clark",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "Protocol: Clark et al. (2019)" in text and "from 1" in text
    assert main(["heads", "--model", str(minilm_dir), "--corpus", str(treebank), "--protocol", "clark", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "attention to periods and commas" in text and "\nL1\t" in text and "\nL0\t" not in text


def _sep_cls_punct_by_hand(lm, pairs, max_length=128):
    """Clark's General_Analysis loop on transformers' own attentions, one pair at a time: [3, layer] means."""
    total = None
    for a, b in pairs:
        feed = lm.tokenizer(a, b, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            att = torch.stack(lm.model(**feed, output_attentions=True).attentions)[:, 0].double().numpy()
        tokens = lm.tokenizer.convert_ids_to_tokens(feed["input_ids"][0])
        n = len(tokens)
        masks = [[t == "[CLS]" for t in tokens], [t == "[SEP]" for t in tokens], [t in (".", ",") for t in tokens]]
        values = np.zeros((3, att.shape[0]))
        for m, mask in enumerate(masks):
            for layer in range(att.shape[0]):
                per_head = [sum(att[layer, h, q, k] for q in range(n) for k in range(n) if mask[k]) / n
                            for h in range(att.shape[1])]
                values[m, layer] = sum(per_head) / len(per_head)
        total = values if total is None else total + values
    return total / len(pairs)


def test_clark_study_on_minilm(minilm_dir):
    from core import studies
    from core.studies import clark

    corpus = "ud:dev:8"
    seen = []
    result = clark.STUDY.run(studies.StudyOptions(model=str(minilm_dir), corpus=corpus),
                             lambda d, t: seen.append((d, t)), None)
    assert seen[-1] == (12, 12)  # 4 pairs, then 8 sentences
    assert result.protocol == "clark" and result.verdict == "different model: shape only"
    assert [c.reference.key for c in result.comparisons] == [
        "clark-cls", "clark-sep", "clark-punct", "clark-syntax-best-head", "clark-syntax-baseline"]
    from core.data import corpus as corpora

    items = corpora.resolve(corpus, 0).items
    by_hand = _sep_cls_punct_by_hand(load_model(str(minilm_dir), device="cpu"), clark.segment_pairs(items))
    for m, name in enumerate(("attention to [CLS]", "attention to [SEP]", "attention to periods and commas")):
        got = result.measured[name]
        assert sorted(got) == list(range(1, 7))  # paper numbering: the first transformer layer is 1
        np.testing.assert_allclose([got[k] for k in range(1, 7)], by_hand[m], atol=1e-5)
    best = result.measured["best head accuracy per relation"]
    assert "det" in best and "dobj" in best and "obj" not in best  # UD relations renamed to Stanford's
    assert any("Stand-in data" in n for n in result.notes)
    json.dumps(result.to_json())
    # the heads Table 1 names (from 1) that MiniLM has (6 layers): their rank by accuracy, as scipy ranks them
    from scipy.stats import rankdata

    from core.analyses.heads import syntax_heads

    syntax = syntax_heads(load_model(str(minilm_dir)), [clark.to_stanford(t) for t in corpora.resolve(corpus, 0).trees],
                          protocol="clark")
    rows = {name: r for r, name in enumerate(syntax.relations)}
    assert result.heads and all(int(h.head.split("-")[0]) <= 6 and h.of == 72 for h in result.heads)
    for h in result.heads:
        layer, head = (int(n) - 1 for n in h.head.split("-"))
        ranks = rankdata(-syntax.accuracy[rows[h.claim.removeprefix("best head for ")]], method="min").reshape(6, 12)
        assert h.rank == ranks[layer, head], h


def _sharpen(folder, out, layers, scale=25.0):
    """A copy of a model whose query weights in `layers` are scaled: their maps change, the others do not."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(folder)
    with torch.no_grad():
        for layer in layers:
            model.encoder.layer[layer].attention.self.query.weight.mul_(scale)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    return out


def test_kovaleva_study_finds_the_changed_layers(tmp_path):
    from core import studies
    from core.studies import kovaleva
    from tests.conftest import make_tiny_bert

    base = make_tiny_bert(tmp_path / "base", layers=4)
    corpus = tmp_path / "s.txt"
    corpus.write_text("the cat sat on the mat .\na dog ran in the park .\nthe man ran to the house .\n")
    top = _sharpen(base, tmp_path / "top", [2, 3])
    middle = _sharpen(base, tmp_path / "middle", [1, 2])
    options = studies.StudyOptions(model=str(base), corpus=str(corpus), extra={"finetuned": str(top)})
    result = kovaleva.STUDY.run(options, None, None)
    assert result.measured["last two layers change most"] == {"claim": 1.0}
    cosine = result.measured["mean cosine per layer (pretrained vs fine-tuned)"]
    assert cosine[1] == pytest.approx(1.0, abs=1e-6) and cosine[2] == pytest.approx(1.0, abs=1e-6)
    assert cosine[3] < 0.999 and cosine[4] < 0.999
    other = kovaleva.STUDY.run(studies.StudyOptions(model=str(base), corpus=str(corpus),
                                                    extra={"finetuned": str(middle)}), None, None)
    assert other.measured["last two layers change most"] == {"claim": 0.0}
    with pytest.raises(ValueError, match="finetuned=RUN"):
        kovaleva.STUDY.run(studies.StudyOptions(model=str(base), corpus=str(corpus)), None, None)


def _bertviz_by_hand(lm, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """A→B and A→same piece in B per layer (mean over heads) of one pair: bertviz's slice by hand, A = tokens
    before the first token_type_id 1, B = the rest; queries = A's pieces."""
    feed = lm.tokenizer(a, b, return_tensors="pt")
    with torch.inference_mode():
        att = torch.stack(lm.model(**feed, output_attentions=True).attentions)[:, 0].double().numpy()
    tokens = lm.tokenizer.convert_ids_to_tokens(feed["input_ids"][0])
    start = feed["token_type_ids"][0].tolist().index(1)
    queries = [q for q in range(start) if tokens[q] not in ("[CLS]", "[SEP]")]
    to_b, twin = np.zeros(len(att)), np.zeros(len(att))
    for layer in range(len(att)):
        m = att[layer].mean(axis=0)  # the mean over heads of a linear measure is the measure of the mean
        to_b[layer] = sum(m[q, start:].sum() for q in queries) / len(queries)
        twin[layer] = sum(m[q, k] for q in queries for k in range(start, len(tokens))
                          if tokens[k] == tokens[q] and tokens[k] != "[SEP]") / len(queries)
    return to_b, twin


def test_bertviz_study_honours_the_split_and_measures_the_report_pairs(minilm_dir):
    from core import studies
    from core.data.examples import MRPC_REPORT_PAIRS
    from core.studies import bertviz_mrpc

    result = bertviz_mrpc.STUDY.run(studies.StudyOptions(model=str(minilm_dir), limit=12, extra={"split": "train"}),
                                    None, None)
    assert result.corpus == "mrpc:train:all" and any("of mrpc:train:all" in n for n in result.notes)
    lm = load_model(str(minilm_dir), device="cpu")
    twins = {}
    for label, (a, b, _, _) in MRPC_REPORT_PAIRS.items():
        name = label.removeprefix("MRPC report pair: ")
        to_b, twin = _bertviz_by_hand(lm, a, b)
        got = result.measured[f"report pair {name}: A→B attention per layer"]
        np.testing.assert_allclose([got[k] for k in range(1, 7)], to_b, atol=1e-5)
        got = result.measured[f"report pair {name}: A→same word in B per layer"]
        np.testing.assert_allclose([got[k] for k in range(1, 7)], twin, atol=1e-5)
        twins[name] = twin.mean()
    summary = result.measured["report pairs"]
    assert summary["equivalent pair has more twin attention (1 = yes)"] == float(
        twins["Compaq (equivalent)"] > twins["rovers (not equivalent)"])
    with pytest.raises(ValueError, match="not an MRPC split"):
        bertviz_mrpc.STUDY.run(studies.StudyOptions(model=str(minilm_dir), extra={"split": "dev2"}), None, None)
    with pytest.raises(ValueError, match="not both"):
        bertviz_mrpc.STUDY.run(studies.StudyOptions(model=str(minilm_dir), corpus="mrpc:test:4",
                                                    extra={"split": "train"}), None, None)


def test_bertviz_study_on_minilm(minilm_dir):
    from core.data import corpus as corpora
    from core import studies
    from core.studies import bertviz_mrpc

    corpus = "mrpc:validation:12"
    result = bertviz_mrpc.STUDY.run(studies.StudyOptions(model=str(minilm_dir), corpus=corpus), None, None)
    assert {c.reference.key for c in result.comparisons} == {"bertviz-mrpc-twin", "bertviz-mrpc-deeper"}
    lm = load_model(str(minilm_dir), device="cpu")
    pairs, groups = bertviz_mrpc.labelled_pairs(corpora.resolve(corpus, 0))
    # bertviz's slice by hand: A = tokens before the first token_type_id 1, B = the rest; queries = A's pieces.
    to_b = np.zeros(6)
    twin = {g: np.zeros(6) for g in bertviz_mrpc.GROUPS}
    for (a, b), group in zip(pairs, groups):
        pair_to_b, pair_twin = _bertviz_by_hand(lm, a, b)
        to_b += pair_to_b / len(pairs)
        twin[group] += pair_twin / groups.count(group)
    got = result.measured["A→B attention per layer"]
    np.testing.assert_allclose([got[k] for k in range(1, 7)], to_b, atol=1e-5)
    for group in bertviz_mrpc.GROUPS:
        got = result.measured[f"A→same word in B per layer, {group}"]
        np.testing.assert_allclose([got[k] for k in range(1, 7)], twin[group], atol=1e-5)
    eq, neq = twin["equivalent"].mean(), twin["not equivalent"].mean()
    assert result.comparisons[0].rows[0].measured == float(eq > neq)
