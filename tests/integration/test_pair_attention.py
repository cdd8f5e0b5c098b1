"""pair_heads end to end on a tiny random BERT: per-pair shares recomputed from transformers' own attentions,
label means and AUC (scikit-learn) recomputed from them; the pair-attention CLI on MRPC."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from core.model.loading import load_model
from core.analyses.heads import mrpc_pairs, pair_heads

PAIRS = [("the cat sat on the mat", "a cat sat on a mat"), ("the dog ran", "the dog ran in the park"),
         ("a bird sang", "the river is cold"), ("the house is big", "a tree fell on the house"),
         ("the cat ran to the dog", "the dog sat"), ("a mat", "the bank of the river")]
GOLD = ["equivalent", "equivalent", "not equivalent", "not equivalent", "equivalent", "not equivalent"]
LABELS = ("equivalent", "not equivalent")


def _transformers_shares(folder, a, b, words_only):
    import torch
    from transformers import AutoTokenizer, BertModel

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = tok(a, b, return_tensors="pt", return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask")[0].numpy().astype(bool)
    with torch.no_grad():
        att = np.stack([x[0].numpy() for x in model(**enc, output_attentions=True).attentions]).astype(np.float64)
    types = enc["token_type_ids"][0].numpy()
    in_a = types == 0
    out = []
    for queries, keys in ((in_a & ~special, ~in_a), (~in_a & ~special, in_a)):
        if words_only:
            keys = keys & ~special
        out.append(np.einsum("lhqk,q,k->lh", att, queries.astype(float), keys.astype(float)) / queries.sum())
    return np.stack(out)


@pytest.mark.parametrize("words_only", [False, True])
def test_pair_heads_match_transformers(tiny_bert_dir, words_only):
    lm = load_model(str(tiny_bert_dir))
    result = pair_heads(lm, PAIRS, GOLD, LABELS, words_only=words_only, batch_size=4)
    expected = np.stack([_transformers_shares(tiny_bert_dir, a, b, words_only) for a, b in PAIRS])
    np.testing.assert_allclose(result.shares, expected, atol=1e-5)
    gold = np.array([LABELS.index(g) for g in GOLD])
    np.testing.assert_allclose(result.mean[0], expected[gold == 0].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(result.mean[1], expected[gold == 1].mean(axis=0), atol=1e-5)
    for d in range(2):
        for layer in range(result.auc.shape[1]):
            for head in range(result.auc.shape[2]):
                assert result.auc[d, layer, head] == pytest.approx(roc_auc_score(gold == 0, expected[:, d, layer, head]))
    top = result.top_heads(3)
    assert [c["separation"] for c in top] == sorted((c["separation"] for c in top), reverse=True)
    assert top[0]["separation"] == pytest.approx(np.nanmax(np.abs(result.auc - 0.5)))
    assert list(result.n_pairs) == [3, 3]


def test_pair_heads_rejects_bad_input(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir))
    with pytest.raises(ValueError, match="both labels"):
        pair_heads(lm, PAIRS[:2], GOLD[:2], LABELS)
    with pytest.raises(ValueError, match="sentence pair"):
        pair_heads(lm, ["one sentence", "another"], ["equivalent", "not equivalent"], LABELS)
    with pytest.raises(ValueError, match="not among"):
        pair_heads(lm, PAIRS[:2], ["equivalent", "maybe"], LABELS)


def test_cli_json_on_mrpc(tiny_bert_dir, data_dir, capsys):
    from core.__main__ import main

    assert main(["pair-attention", "--model", str(tiny_bert_dir), "--corpus", "mrpc:test", "--limit", "30",
                 "--top", "5", "--quiet", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"model", "corpus", "labels", "words_only", "n_pairs", "directions", "mean", "auc",
                            "top_heads", "truncated"}
    assert len(payload["top_heads"]) == 5 and sum(payload["n_pairs"].values()) == 30
    # The same pairs through the library give the same AUC grid.
    pairs, gold, _ = mrpc_pairs("mrpc:test", 0, 30)
    result = pair_heads(load_model(str(tiny_bert_dir)), pairs, gold, LABELS)
    np.testing.assert_allclose(np.array(payload["auc"]["a_to_b"], dtype=float), result.auc[0], atol=1e-6)


def test_bertviz_study_reports_label_shares_and_separating_heads(minilm_dir, data_dir):
    from core.data import corpus as corpora
    from core import studies
    from core.studies import bertviz_mrpc

    spec = "mrpc:validation:12"
    result = bertviz_mrpc.STUDY.run(studies.StudyOptions(model=str(minilm_dir), corpus=spec), None, None)
    pairs, groups = bertviz_mrpc.labelled_pairs(corpora.resolve(spec, 0))
    # One pair at a time, unpadded: differs from the study's padded batches by ~1e-5 (float32), hence abs=1e-4.
    shares = np.stack([_transformers_shares(minilm_dir, a, b, False) for a, b in pairs])
    gold = np.array([g == "equivalent" for g in groups])
    shown = result.measured["A→B / B→A share by gold label (mean over heads)"]
    assert shown["A→B, equivalent"] == pytest.approx(shares[gold, 0].mean(), abs=1e-4)
    assert shown["B→A, not equivalent"] == pytest.approx(shares[~gold, 1].mean(), abs=1e-4)
    top = result.measured["heads that separate the labels most (AUC, equivalent > not equivalent)"]
    auc = np.array([[[roc_auc_score(gold, shares[:, d, layer, head]) for head in range(12)] for layer in range(6)]
                    for d in range(2)])
    assert max(abs(v - 0.5) for v in top.values()) == pytest.approx(np.abs(auc - 0.5).max(), abs=1e-6)
    for name, value in top.items():
        direction, layer, head = name.split()
        # "L3 H5": layers shown from 1 (core.numbering), so array index 2
        assert value == pytest.approx(auc[["A→B", "B→A"].index(direction), int(layer[1:]) - 1, int(head[1:])], abs=1e-6)
    assert result.measured["summary"]["AUC of bertviz's layer 4 head 3, A→B share"] == pytest.approx(auc[0, 4, 3], abs=1e-6)
