"""Dataset explorer on a tiny random BERT: the token index's neighbours equal a brute-force cosine top-k over
word vectors computed here with transformers, the index is float16 on disk and reused, and the CLI prints the
issue's JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from core.data import corpus as corpora
from core.analyses import vector_index as vi
from core.model.loading import load_model

SENTENCES = [
    "the cat sat on the mat .", "the dog ran to the river bank .", "she put money in the bank .",
    "he sat in the park .", "the girl ran to the house .", "they deposit money at the bank .",
    "it was a tree in the park .", "the man and the woman sat on the bank of the river .",
]
QUERY = "the boy sat on the bank ."


def word_vectors_hf(model_dir, sentence: str, layer: int) -> tuple[list[str], np.ndarray]:
    """Words and [W, D] word vectors (pieces averaged) straight from transformers."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    words = sentence.split()
    batch = tok(words, is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        states = model(**batch, output_hidden_states=True).hidden_states[layer][0].double().numpy()
    ids = np.array([-1 if w is None else w for w in batch.word_ids()])
    return words, np.stack([states[ids == w].mean(axis=0) for w in range(len(words))])


def test_exact_neighbours_equal_brute_force_cosine(tiny_bert_dir, isolated_cache):
    from core.model.encoding import encode

    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.from_items(SENTENCES, "test")
    index = vi.build_token_index(lm, corpus, [1, 2])
    assert index.info.mode == "exact" and index.info.count == sum(len(s.split()) for s in SENTENCES)
    # float16 on disk, count x dim
    for layer in (1, 2):
        assert (index.folder / f"layer_{layer}.f16").stat().st_size == index.info.count * lm.hidden_size * 2
    assert index.folder.parent == isolated_cache / "explorer_index"
    encoding = encode(lm, QUERY)
    result = vi.neighbours(index, encoding, 5, layer=2, k=8)
    _, q = word_vectors_hf(tiny_bert_dir, QUERY, 2)
    q = q[5]
    rows = []
    for s, sentence in enumerate(SENTENCES):
        words, vecs = word_vectors_hf(tiny_bert_dir, sentence, 2)
        for w, v in enumerate(vecs):
            rows.append((float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q))), sentence, words[w], w))
    rows.sort(key=lambda r: -r[0])
    top = rows[:8]
    got = [(n.similarity, n.sentence, n.word, n.position) for n in result.neighbours]
    np.testing.assert_allclose([g[0] for g in got], [t[0] for t in top], atol=2e-3)  # float16 storage
    assert [(g[1], g[2], g[3]) for g in got] == [(t[1], t[2], t[3]) for t in top]
    assert result.query["word"] == "bank" and result.query["mode"] == "exact"


def test_index_is_reused_without_a_forward_pass(tiny_bert_dir, monkeypatch):
    import core.model.encoding

    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.from_items(SENTENCES, "test")
    first = vi.build_token_index(lm, corpus, [2])

    def boom(*args, **kwargs):
        raise AssertionError("the model ran again")

    monkeypatch.setattr(core.model.encoding, "encode_stream", boom)
    again = vi.build_token_index(lm, corpus, [2])
    assert again.folder == first.folder
    assert not [p for p in first.folder.parent.iterdir() if p.name.startswith(".")]


def test_treebank_index_keeps_pos_and_relations(tiny_bert_dir, data_dir):
    from core.model.encoding import encode

    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.resolve("ud:dev:30")
    index = vi.build_token_index(lm, corpus, [2])
    assert index.info.has_trees
    result = vi.neighbours(index, encode(lm, QUERY), 5, 2, 10)
    matched = [(n.upos, n.deprel) for n in result.neighbours]
    for n in result.neighbours:
        tree = next(t for t in corpus.trees if (t.text or " ".join(t.words)) == n.sentence)
        assert (n.word, n.upos, n.deprel) == (tree.words[n.position], tree.upos[n.position], tree.deprels[n.position])
    assert sum(c for _, c in result.pos) == len(matched)


def cli(*args, env_cache):
    import os

    env = dict(os.environ, BERTLENS_CACHE=str(env_cache))
    out = subprocess.run([sys.executable, "-m", "core", *args, "--json", "--quiet"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_cli_neighbours_and_project_json(tiny_bert_dir, tmp_path, isolated_cache):
    corpus_file = tmp_path / "c.csv"
    corpus_file.write_text("text,label,source\n" + "".join(f"{s},{'ab'[i % 2]},{i}\n" for i, s in enumerate(SENTENCES)))
    got = cli("neighbours", "--model", str(tiny_bert_dir), "--text", QUERY, "--word", "bank", "--layer", "2",
              "--corpus", str(corpus_file), "--k", "3", env_cache=isolated_cache)
    assert set(got) == {"query", "neighbours", "truncated", "corpus_truncated"} and len(got["neighbours"]) == 3
    assert all(set(n) == {"sentence", "word", "position", "similarity"} for n in got["neighbours"])
    sims = [n["similarity"] for n in got["neighbours"]]
    assert sims == sorted(sims, reverse=True)
    proj = cli("project", "--model", str(tiny_bert_dir), "--corpus", str(corpus_file), "--layer", "1",
               "--method", "pca", env_cache=isolated_cache)
    assert [p["id"] for p in proj["points"]] == list(range(len(SENTENCES)))
    assert [p["label"] for p in proj["points"]] == ["ab"[i % 2] for i in range(len(SENTENCES))]
    assert all(set(p) == {"id", "x", "y", "label", "agreement"} for p in proj["points"])


def test_cli_unknown_word_is_a_clear_error(tiny_bert_dir, isolated_cache):
    import os

    out = subprocess.run([sys.executable, "-m", "core", "neighbours", "--model", str(tiny_bert_dir), "--text", QUERY,
                          "--word", "zebra", "--corpus", "builtin", "--quiet"], capture_output=True, text=True,
                         env=dict(os.environ, BERTLENS_CACHE=str(isolated_cache)), timeout=300)
    assert out.returncode == 2 and "not a word of the sentence" in out.stderr


def test_lens_project_and_neighbours_return_what_the_cli_json_has(tiny_bert_dir, tmp_path, capsys):
    """The notebook twins take the CLI's settings (layer, method, pooling, seed; layer, k, seed) and give the same
    data as --json (less the notes the command adds about inputs cut to the model's length)."""
    from core import lens
    from tests.cli_json import cli_json

    corpus_file = tmp_path / "c.csv"
    corpus_file.write_text("text,label\n" + "".join(f"{s},{'ab'[i % 2]}\n" for i, s in enumerate(SENTENCES)))

    got = cli_json(capsys, "project", "--model", str(tiny_bert_dir), "--corpus", str(corpus_file), "--layer", "1",
                   "--pooling", "mean")
    data = lens.project(str(tiny_bert_dir), str(corpus_file), layer=1, pooling="mean", return_data=True)
    assert json.loads(json.dumps(data.to_json())) == got
    assert list(data[1]["gold label"]) == ["ab"[i % 2] for i in range(len(SENTENCES))]
    assert data[0].to_dict()["encoding"]["color"]["title"] == "gold label"  # a valid spec, coloured by the labels
    got = cli_json(capsys, "neighbours", "--model", str(tiny_bert_dir), "--text", QUERY, "--word", "bank", "--corpus",
                   str(corpus_file), "--k", "3")
    data = lens.neighbours(str(tiny_bert_dir), QUERY, "bank", str(corpus_file), k=3, return_data=True)
    notes = ("truncated", "corpus_truncated")
    assert json.loads(json.dumps(data.to_json())) == {k: v for k, v in got.items() if k not in notes}
    assert got["query"]["layer"] == 2 and len(data[1]) == 3  # default: the last layer of the 2-layer model


def test_a_layer_past_the_models_last_is_one_clear_line(tiny_bert_dir, tmp_path, capsys):
    from core.__main__ import main

    assert main(["neighbours", "--model", str(tiny_bert_dir), "--text", QUERY, "--word", "bank", "--corpus",
                 "builtin", "--layer", "5", "--quiet"]) == 2
    assert "layer must be within 0…2" in capsys.readouterr().err
