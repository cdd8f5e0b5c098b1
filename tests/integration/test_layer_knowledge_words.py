"""labelled_words (issue 49): each kept word's vector is the mean of its pieces' hidden states, computed here from
transformers' own output_hidden_states and the tokenizer's word_ids; unlabelled words are left out."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from core.analyses.layer_knowledge.tasks import TaskError, labelled_words
from core.data.treebank import Sentence
from core.model.loading import load_model

SENTENCES = [
    Sentence(("the", "cats", "sat"), (2, 3, 0), ("det", "nsubj", "root"), ("DET", "NOUN", "VERB"),
             feats=("_", "Number=Plur", "Tense=Past")),
    Sentence(("a", "dog", "ran", "home"), (2, 3, 0, 3), ("det", "nsubj", "root", "advmod"),
             ("DET", "NOUN", "VERB", "ADV"), feats=("_", "Number=Sing", "Tense=Past", "_")),
]


def test_vectors_are_mean_of_pieces_from_transformers(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir), device="cpu")
    words = labelled_words(lm, SENTENCES, "morph:Number", [0, 2])
    assert list(words.labels) == ["Plur", "Sing"] and list(words.words) == ["cats", "dog"]
    assert list(words.sentence_of) == [0, 1] and words.vectors.shape[:2] == (2, 2)

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    model = AutoModel.from_pretrained(str(tiny_bert_dir), attn_implementation="eager").eval()
    for row, (sentence, word_index) in enumerate([(SENTENCES[0], 1), (SENTENCES[1], 1)]):
        batch = tokenizer(list(sentence.words), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            states = model(**batch, output_hidden_states=True).hidden_states
        pieces = [t for t, w in enumerate(batch.word_ids()) if w == word_index]
        for k, layer in enumerate([0, 2]):
            expected = states[layer][0, pieces].mean(0).numpy()
            np.testing.assert_allclose(words.vectors[k, row], expected, atol=1e-5)
    np.testing.assert_array_equal(words.at(2), words.vectors[1])


def test_a_task_no_word_has_is_refused(tiny_bert_dir):
    lm = load_model(str(tiny_bert_dir), device="cpu")
    with pytest.raises(TaskError, match="No word"):
        labelled_words(lm, SENTENCES, "morph:Gender", [1])
