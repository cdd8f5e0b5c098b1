"""The streaming anisotropy pass on real models, against the pure functions applied to every vector at once."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from core import anisotropy as an
from core import corpus as corpora
from core.encoding import encode
from core.models import load_model
from core.progress import Cancelled

TINY_SENTENCES = [
    "the cat sat on the mat .",
    "the dog ran to the river bank .",
    "he sat in the park .",
    "she ran at the bank , unhappy .",
    "the man and the woman sat .",
    "it was the house of the girl .",
    "they ran in the park and sat .",
    "the boy sat on the bank of the river .",
]


def all_units(lm, sentences, include_special=False):
    """Every unit vector of every sentence, from one plain `encode` call (no streaming, no sums)."""
    keys, vectors, ids = [], [], []
    for i, enc in enumerate(encode(lm, sentences, attentions=False)):
        k, v = an.sentence_units(enc, include_special)
        keys.append(k)
        vectors.append(v)
        ids.extend([i] * len(k))
    return keys, vectors, np.concatenate(vectors), np.array(ids)


@pytest.mark.parametrize("include_special", [False, True])
def test_streaming_pass_equals_pure_functions_on_tiny_bert(tiny_bert_dir, include_special):
    lm = load_model(str(tiny_bert_dir))
    corpus = corpora.from_items(TINY_SENTENCES + [("the cat sat .", "the dog sat .")], "tiny")
    settings = an.AnisotropySettings(n_pairs=300, seed=4, min_contexts=3, include_special=include_special, batch_size=3)
    seen = []
    profile = an.measure_corpus(lm, corpus, settings, progress=lambda d, t: seen.append((d, t)))
    keys, per_sentence, stacked, ids = all_units(lm, list(corpus.sentences), include_special)

    assert seen[-1] == (len(corpus), len(corpus))
    assert profile.n_tokens == len(stacked) and profile.n_sentences == len(corpus)
    np.testing.assert_allclose(profile.random_cosine, an.random_pair_cosine(stacked, ids, 300, seed=4).mean, atol=1e-5)
    np.testing.assert_allclose(profile.exact_cosine, an.all_pairs_cosine(stacked, ids), atol=1e-5)
    np.testing.assert_allclose(profile.intra_sentence, np.mean([an.intra_sentence_similarity(v) for v in per_sentence], axis=0), atol=1e-5)
    np.testing.assert_allclose(profile.top_pc_variance, an.top_pc_variance_share(stacked), atol=1e-4)

    contexts: dict[str, list] = {}
    for k, v in zip(keys, per_sentence):
        for word in set(k):
            contexts.setdefault(word, []).append(v[k.index(word)])
    expected = an.self_similarity({w: np.stack(v) for w, v in contexts.items()}, min_contexts=3)
    assert set(profile.words) == set(expected.words)
    assert ("[CLS]" in profile.words) == include_special
    np.testing.assert_allclose(profile.self_similarity, expected.mean, atol=1e-5)
    np.testing.assert_allclose(profile.adjusted_self_similarity, expected.mean - profile.random_cosine, atol=1e-5)

    a, b = corpus.pairs[0]
    pair_vectors = np.stack([per_sentence[a].mean(axis=0), per_sentence[b].mean(axis=0)])
    expected_pair = an.alignment_uniformity(pair_vectors, np.array([[0, 1]]))
    np.testing.assert_allclose(profile.alignment, expected_pair.alignment, atol=1e-5)
    np.testing.assert_allclose(profile.uniformity, expected_pair.uniformity, atol=1e-5)


def test_words_in_a_single_sentence_are_left_out(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir))
    profile = an.measure_corpus(lm, corpora.from_items(TINY_SENTENCES, "tiny"), an.AnisotropySettings(n_pairs=50, min_contexts=2))
    assert "mat" not in profile.words and "house" not in profile.words  # one sentence each
    assert "bank" in profile.words and "park" in profile.words
    assert np.all(profile.word_contexts >= 2)


def test_cancel_stops_the_pass(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir))
    with pytest.raises(Cancelled):
        an.measure_corpus(lm, corpora.from_items(TINY_SENTENCES, "tiny"), should_stop=lambda: True)


def test_random_pair_estimate_is_within_001_of_exact_mean_on_minilm(minilm_dir):
    lm = load_model(str(minilm_dir))
    corpus = corpora.builtin(limit=120)
    profile = an.measure_corpus(lm, corpus, an.AnisotropySettings(n_pairs=6000, seed=0, batch_size=64))
    # Exact mean, brute force: every cross-sentence pair through a full cosine matrix.
    _, _, stacked, ids = all_units(lm, list(corpus.sentences))
    cross = ids[:, None] != ids[None, :]
    brute = []
    for layer in range(stacked.shape[1]):
        u = stacked[:, layer] / np.linalg.norm(stacked[:, layer], axis=1, keepdims=True)
        brute.append((u @ u.T)[cross].mean())
    np.testing.assert_allclose(profile.exact_cosine, brute, atol=1e-5)
    assert np.max(np.abs(profile.random_cosine - profile.exact_cosine)) < 0.01
    assert profile.n_pairs == 6000
    # A contrastively trained model: the last layer is far less anisotropic than the middle ones.
    assert profile.random_cosine[-1] < profile.random_cosine[3]


def test_word_drilldown_on_minilm(minilm_dir):
    lm = load_model(str(minilm_dir))
    corpus = corpora.builtin()
    drill = an.collect_word(lm, corpus, "Bank")
    assert drill.word == "bank" and len(drill.contexts) >= 5
    assert all("bank" in c.lower() for c in drill.contexts)
    assert drill.cosines.shape == (lm.num_layers + 1, len(drill.contexts), len(drill.contexts))
    with pytest.raises(ValueError, match="occurs in 0 sentence"):
        an.collect_word(lm, corpus, "zyzzyva")


def test_cli_prints_the_documented_json(tiny_bert_dir, tmp_path):
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("\n".join(TINY_SENTENCES))
    result = subprocess.run(
        [sys.executable, "-m", "core", "anisotropy", "--model", str(tiny_bert_dir), "--corpus", str(corpus_file),
         "--pairs", "200", "--seed", "1", "--min-contexts", "2", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"] == str(tiny_bert_dir)
    assert data["layers"] == [0, 1, 2]
    assert data["n_pairs"] == 200
    for key in ("random_cosine", "self_similarity", "adjusted_self_similarity", "intra_sentence",
                "adjusted_intra_sentence", "top_pc_variance"):
        assert len(data[key]) == 3
    lm = load_model(str(tiny_bert_dir))
    _, _, stacked, ids = all_units(lm, TINY_SENTENCES)
    assert data["n_tokens"] == len(stacked)
    np.testing.assert_allclose(data["random_cosine"], an.random_pair_cosine(stacked, ids, 200, seed=1).mean, atol=1e-5)


def test_cli_names_a_missing_corpus_file(tiny_bert_dir, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "core", "anisotropy", "--model", str(tiny_bert_dir), "--corpus", str(tmp_path / "no.txt")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2
    assert "no.txt not found" in result.stderr
