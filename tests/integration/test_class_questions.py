"""Questions for a live class built from a tiny random masked-word model: the right answer is the model's own,
checked against transformers' logits and attentions computed here, not through BERT Lens's forward pass."""

from __future__ import annotations

import numpy as np
import pytest

from core.analyses.masked import fill_mask
from core.classroom.questions import QuestionError, attention_question, masked_word_question
from core.model.encoding import encode
from core.model.loading import load_model
from tests.tiny_mlm import make_tiny_mlm


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    folder = make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-class"))
    return folder, load_model(str(folder), masked_lm=True)


def transformers_top(folder, text: str, k: int) -> list[str]:
    """The k most probable vocabulary entries at the (single) mask, by transformers' own MLM forward."""
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForMaskedLM.from_pretrained(folder).eval()
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0]
    at = int((inputs["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
    return tokenizer.convert_ids_to_tokens(torch.argsort(logits[at], descending=True)[:k].tolist())


def test_masked_question_is_right_about_the_models_top_guess(tiny_mlm):
    folder, lm = tiny_mlm
    text = "the girl sat on the [MASK] of the river ."
    pred = fill_mask(lm, text, top_k=20)
    question = masked_word_question(pred, n_choices=4, seed=3)
    ranked = transformers_top(folder, text, 20)
    assert question.kind == "masked" and not question.free_text
    assert question.correct == ranked[0]
    assert question.correct in question.choices and len(question.choices) == 4
    assert set(question.choices) <= set(ranked)  # distractors are the model's own lower-ranked guesses
    assert not any(c.startswith("##") for c in question.choices)
    assert "the girl sat on the ___ of the river." in question.prompt
    # seeded: the same seed gives the same question; the right answer is not always in one place
    assert masked_word_question(pred, n_choices=4, seed=3) == question
    places = {masked_word_question(pred, n_choices=4, seed=s).choices.index(question.correct) for s in range(12)}
    assert len(places) > 1
    typed = masked_word_question(pred, free_text=True)
    assert typed.free_text and typed.choices == () and typed.correct == ranked[0]


def test_masked_question_needs_enough_guesses(tiny_mlm):
    _, lm = tiny_mlm
    pred = fill_mask(lm, "the [MASK] sat .", top_k=2)
    with pytest.raises(QuestionError, match="ask for more guesses"):
        masked_word_question(pred, n_choices=4)
    with pytest.raises(QuestionError, match="Mask 1 does not exist"):
        masked_word_question(pred, mask=1)


def test_attention_question_answer_is_the_heads_argmax_over_words(tiny_mlm):
    import torch
    from transformers import AutoTokenizer, BertModel

    folder, lm = tiny_mlm
    text = "the unhappy girl sat on the bank ."
    encoding = encode(lm, text)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        attentions = model(**inputs, output_attentions=True).attentions
    word_of_token = inputs.word_ids(0)  # None for [CLS] / [SEP]
    words = sorted({w for w in word_of_token if w is not None})
    for layer, head, query in [(0, 0, 1), (1, 3, 6), (1, 2, 2)]:
        a = attentions[layer][0, head].numpy().astype(np.float64)
        query_rows = [t for t, w in enumerate(word_of_token) if w == query]
        row = a[query_rows].mean(axis=0)  # attention from a word: mean over its pieces
        to_word = [sum(row[t] for t, w in enumerate(word_of_token) if w == k) for k in words]  # to a word: sum
        question = attention_question(encoding, layer, head, query)
        assert question.choices == ("the", "unhappy", "girl", "sat", "on", "the (2)", "bank", ".")
        assert question.correct == question.choices[int(np.argmax(to_word))]
        assert f"layer {layer + 1}, head {head}" in question.prompt and f"“{question.choices[query]}”" in question.prompt
    with pytest.raises(QuestionError, match="heads 0..3"):
        attention_question(encoding, 0, 4, 0)
    with pytest.raises(QuestionError, match="words 0..7"):
        attention_question(encoding, 0, 0, 8)


def test_attention_question_reads_the_weights_the_page_draws(tiny_mlm):
    _, lm = tiny_mlm
    encoding = encode(lm, "the unhappy girl sat on the bank .")
    raw = attention_question(encoding, 1, 2, 0).correct
    target = "bank" if raw != "bank" else "girl"
    planted = np.full_like(encoding.attentions, 1.0 / encoding.attentions.shape[-1])
    word = attention_question(encoding, 1, 2, 0).choices.index(target)
    planted[1, 2, :, np.flatnonzero(np.asarray(encoding.word_ids) == word)[0]] += 1.0  # every token looks at it
    assert attention_question(encoding, 1, 2, 0, attentions=planted).correct == target != raw
