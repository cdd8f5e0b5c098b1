"""Feed-forward neurons on tiny random BERTs: the corpus index's top contexts and statistics equal a brute-force
pass (every activation collected with a plain torch hook on the intermediate module, one sentence at a time,
sorted here); the shaded sentence equals the hook's values; the fine-tuning ranking equals numpy's Cohen's d;
the index is kept on disk and reused; a cancelled pass leaves nothing."""

from __future__ import annotations

import numpy as np
import pytest

from core.analyses import neurons as nr
from core.data import corpus as corpora
from core.model.loading import load_model
from core.progress import Cancelled
from tests.conftest import make_tiny_bert

SENTENCES = [
    "the cat sat on the mat .", "the dog ran to the river bank .", "she put money in the bank .",
    "he sat in the park .", "the girl ran to the house .", "they deposit money at the bank .",
    "it was a tree in the park .", "the man and the woman sat on the bank of the river .",
    ("the boy sat .", "he was unhappy ."),
]


def hooked_activations(model_dir, items, layer: int):
    """[(example, position, activations [I])] for every non-special token, read with a forward hook on
    transformers' BertIntermediate of layer `layer` (1-based), one input at a time, no padding."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    seen = []
    handle = model.encoder.layer[layer - 1].intermediate.register_forward_hook(
        lambda _m, _i, out: seen.append(out[0].detach().numpy().copy()))
    rows = []
    try:
        for e, item in enumerate(items):
            a, b = (item, None) if isinstance(item, str) else item
            batch = tok(a, b, return_tensors="pt")
            with torch.no_grad():
                model(**batch)
            # [CLS] and [SEP] only: get_special_tokens_mask would also drop [UNK], a word of the text
            ids = batch["input_ids"][0].tolist()
            rows += [(e, p, seen[-1][p]) for p, i in enumerate(ids) if i not in (tok.cls_token_id, tok.sep_token_id)]
    finally:
        handle.remove()
    return rows


def test_top_contexts_and_statistics_equal_a_brute_force_pass(tiny_bert_dir, isolated_cache):
    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.from_items(SENTENCES, "test")
    index = nr.build_neuron_index(lm, corpus, layer=2, k=5, batch_size=3)
    rows = hooked_activations(tiny_bert_dir, SENTENCES, layer=2)
    acts = np.stack([r[2] for r in rows]).astype(np.float64)            # [n, I]
    assert index.n_neurons == acts.shape[1] == 64 and index.n_tokens == len(rows)
    for neuron in range(index.n_neurons):
        ranked = sorted(rows, key=lambda r: -r[2][neuron])[:5]
        np.testing.assert_allclose(index.top.values[neuron], [r[2][neuron] for r in ranked], atol=1e-5)
        assert [(c.example, c.position) for c in index.contexts(neuron)] == [(r[0], r[1]) for r in ranked]
    np.testing.assert_allclose(index.mean, acts.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(index.std, acts.std(axis=0), atol=1e-5)
    np.testing.assert_allclose(index.firing_rate, (acts > 0).mean(axis=0), atol=1e-12)
    # a context names its token, the word it belongs to and the words around it
    best = index.contexts(int(index.by_max()[0]))[0]
    item = index.items[best.example]
    assert best.token == item.tokens[best.position] and best.word in item.words
    assert best.left.split() == list(item.words[max(0, item.word_ids[best.position] - nr.CONTEXT_WORDS):
                                                item.word_ids[best.position]])
    # kept on disk, keyed by model, corpus, layer and k, and read back as it was
    (folder,) = (isolated_cache / "neuron_index").iterdir()
    again = nr.build_neuron_index(lm, corpus, layer=2, k=5, should_stop=lambda: True)  # no pass runs
    assert np.array_equal(again.top.example, index.top.example) and np.array_equal(again.mean, index.mean)
    assert again.to_json([3], 2) == index.to_json([3], 2)
    assert len(list((isolated_cache / "neuron_index").iterdir())) == 1 and folder.name == nr.index_key(
        lm.ref, corpus.digest, 2, 5)


def test_a_cancelled_pass_leaves_no_index_and_bad_input_is_named(tiny_bert_dir, isolated_cache):
    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.from_items(SENTENCES, "test")
    calls = []
    with pytest.raises(Cancelled):
        nr.build_neuron_index(lm, corpus, layer=1, batch_size=2, should_stop=lambda: calls.append(1) or len(calls) > 2)
    assert not (isolated_cache / "neuron_index").exists() or not any((isolated_cache / "neuron_index").iterdir())
    with pytest.raises(nr.NeuronError, match=r"layer must be 1\.\.2"):
        nr.build_neuron_index(lm, corpus, layer=0)
    with pytest.raises(nr.NeuronError, match=r"neuron must be 0\.\.63"):
        nr.neuron_sentence(lm, "the cat sat .", 1).of(64)
    with pytest.raises(nr.NeuronError, match="give a sentence"):
        nr.neuron_sentence(lm, "  ", 1)


def test_the_sentence_shading_equals_the_hooks_values(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir))
    result = nr.neuron_sentence(lm, "the man sat on the bank .", layer=1, text_b="he was unhappy .")
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    model = AutoModel.from_pretrained(str(tiny_bert_dir)).eval()
    seen = []
    handle = model.encoder.layer[0].intermediate.register_forward_hook(lambda _m, _i, out: seen.append(out[0]))
    batch = tok("the man sat on the bank .", "he was unhappy .", return_tensors="pt")
    with torch.no_grad():
        model(**batch)
    handle.remove()
    assert list(result.tokens) == tok.convert_ids_to_tokens(batch["input_ids"][0])
    np.testing.assert_allclose(result.activations, seen[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(result.of(7), seen[0][:, 7].numpy(), atol=1e-6)
    assert result.special_mask.tolist() == [t in ("[CLS]", "[SEP]") for t in result.tokens]


def test_changes_rank_neurons_by_cohens_d_as_numpy_does(tiny_bert_dir, tmp_path):
    other_dir = make_tiny_bert(tmp_path / "other", seed=1)
    corpus = corpora.from_items(SENTENCES, "test")
    a = nr.build_neuron_index(load_model(str(tiny_bert_dir)), corpus, layer=1)
    b = nr.build_neuron_index(load_model(str(other_dir)), corpus, layer=1)
    changes = nr.neuron_changes(a, b)
    acts_a = np.stack([r[2] for r in hooked_activations(tiny_bert_dir, SENTENCES, 1)]).astype(np.float64)
    acts_b = np.stack([r[2] for r in hooked_activations(other_dir, SENTENCES, 1)]).astype(np.float64)
    d = (acts_b.mean(0) - acts_a.mean(0)) / np.sqrt((acts_a.var(0) + acts_b.var(0)) / 2)
    np.testing.assert_allclose(changes.effect, d, rtol=1e-4, atol=1e-6)
    assert changes.order[:10].tolist() == np.argsort(-np.abs(d), kind="stable")[:10].tolist()
    np.testing.assert_allclose(changes.firing_b, (acts_b > 0).mean(0))
    payload = changes.to_json(top=3)
    assert [n["neuron"] for n in payload["neurons"]] == changes.order[:3].tolist() and "Cohen" in payload["measure"]
    with pytest.raises(nr.NeuronError, match="same corpus and layer"):
        nr.neuron_changes(a, nr.build_neuron_index(load_model(str(other_dir)), corpus, layer=2))


def test_cli_prints_one_object_with_the_index_and_the_sentence(tiny_bert_dir, tmp_path, capsys):
    import json

    from core.__main__ import main

    corpus_file = tmp_path / "sentences.txt"
    corpus_file.write_text("\n".join(s for s in SENTENCES if isinstance(s, str)) + "\n")
    other_dir = make_tiny_bert(tmp_path / "other", seed=1)
    argv = ["neurons", "--model", str(tiny_bert_dir), "--layer", "1", "--corpus", str(corpus_file), "--top", "3",
            "--neuron", "5", "--neuron", "9", "--text", "the cat sat .", "--json", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    payload = json.loads(out[0])
    index = nr.build_neuron_index(load_model(str(tiny_bert_dir)), corpora.resolve(str(corpus_file)), 1, k=3)
    assert [n["neuron"] for n in payload["neurons"]] == [5, 9] and payload["layer"] == 1 and payload["k"] == 3
    assert payload["neurons"][0] == json.loads(json.dumps(index.neuron_json(5)))
    sentence = nr.neuron_sentence(load_model(str(tiny_bert_dir)), "the cat sat .", 1)
    assert payload["sentence"]["tokens"] == list(sentence.tokens)
    np.testing.assert_allclose(payload["sentence"]["activations"]["9"], sentence.of(9), atol=1e-6)
    assert main(["neurons-diff", "--model", str(tiny_bert_dir), "--model", str(other_dir), "--layer", "2",
                 "--corpus", str(corpus_file), "--top", "4", "--json", "--quiet"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["a"] == str(tiny_bert_dir) and len(diff["neurons"]) == 4 and "Cohen" in diff["measure"]
    assert main(["neurons", "--model", str(tiny_bert_dir), "--layer", "3", "--corpus", str(corpus_file)]) != 0
    assert "layer must be 1..2" in capsys.readouterr().err


def test_notebook_function_draws_the_indexs_numbers(tiny_bert_dir, tmp_path):
    from core import lens

    other_dir = make_tiny_bert(tmp_path / "other", seed=1)
    sentences = [s for s in SENTENCES if isinstance(s, str)]
    index = nr.build_neuron_index(load_model(str(tiny_bert_dir)), corpora.corpus_of(sentences), 2)
    _, listed = lens.neurons(str(tiny_bert_dir), sentences, layer=2, top=5, return_data=True)
    assert listed["neuron"].tolist() == index.by_max()[:5].tolist()
    chart, contexts = lens.neurons(str(tiny_bert_dir), sentences, layer=2, neuron=11, text="the cat sat .",
                                   return_data=True)
    assert [(e, p) for e, p in zip(contexts["example"], contexts["position"])] == \
        [(c.example, c.position) for c in index.contexts(11)]
    assert len(chart.to_dict()["vconcat"]) == 2  # the contexts, then the shaded sentence
    from core.charts.export import chart_svg

    assert "Neuron 11 of layer 2 on your sentence" in chart_svg(chart)  # it draws
    _, changed = lens.neurons(str(tiny_bert_dir), sentences, layer=2, compare=str(other_dir), top=4, return_data=True)
    other = nr.build_neuron_index(load_model(str(other_dir)), corpora.corpus_of(sentences), 2)
    assert changed["neuron"].tolist() == nr.neuron_changes(index, other).order[:4].tolist()
