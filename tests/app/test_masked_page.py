"""AppTest of the Masked words page on a tiny random BertForMaskedLM: the charts hold transformers' own numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.safe_text import markdown_text
from tests.markdown_text import plain
from tests.tiny_mlm import make_tiny_mlm

PAGE = "app_pages/masked.py"


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-app"))


def model_probabilities(folder, text):
    from transformers import BertForMaskedLM, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(folder))
    model = BertForMaskedLM.from_pretrained(str(folder)).eval()
    feed = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(model(**feed).logits[0], -1).numpy()
    ids = feed["input_ids"][0].numpy()
    return probs, np.flatnonzero(ids == tokenizer.mask_token_id), tokenizer


def bars(rows, label):
    part = sorted((r for r in rows if r["mask"] == label), key=lambda r: r["rank"])
    return [r["token"] for r in part], [r["probability"] for r in part]


def test_typed_mask_draws_the_models_guesses_layers_and_attention(mlm_dir, make_app, chart_rows, chart_spec):
    text = "the [MASK] sat on the mat ."
    at = make_app(str(mlm_dir), text)
    at.switch_page(PAGE).run()
    assert not at.exception
    probs, positions, tokenizer = model_probabilities(mlm_dir, text)
    top = np.argsort(-probs[positions[0]], kind="stable")[:5]
    tokens, values = bars(chart_rows(at, 0), f"mask 1 (token {positions[0]})")
    assert tokens == tokenizer.convert_ids_to_tokens(top.tolist())
    np.testing.assert_allclose(values, probs[positions[0], top], atol=1e-5)

    lens = chart_rows(at, 1)
    assert sorted({r["layer"] for r in lens}) == [0, 1, 2]
    last = sorted((r for r in lens if r["layer"] == 2), key=lambda r: r["rank"])
    assert [r["token"] for r in last] == tokens
    assert "not the model's output" in " ".join(c.value for c in at.caption)
    final = chart_rows(at, 2)
    assert [r["layer"] for r in final] == [0, 1, 2] and final[-1]["rank"] == 1

    spec = chart_spec(at, 3)  # the head view, starting on the mask's row
    assert spec["params"][0]["value"] == [{"query": f"{positions[0]}·[MASK]"}]


def test_clicking_words_masks_them_each_with_its_own_list(mlm_dir, make_app, chart_rows):
    at = make_app(str(mlm_dir), "the cat sat on the mat .")
    at.switch_page(PAGE).run()
    assert not at.exception
    assert "Nothing to guess yet" in at.info[0].value
    words = at.get("button_group")[0]
    # Pills render Markdown, so each word is sent escaped (core.safe_text) and shown as typed.
    assert words.options == [markdown_text(w) for w in ["the", "cat", "sat", "on", "the", "mat", "."]]
    words.set_value([1, 5]).run()
    assert not at.exception
    probs, positions, tokenizer = model_probabilities(mlm_dir, "the [MASK] sat on the [MASK] .")
    rows = chart_rows(at, 0)
    for m, position in enumerate(positions):
        top = np.argsort(-probs[position], kind="stable")[:5]
        tokens, values = bars(rows, f"mask {m + 1} (token {position})")
        assert tokens == tokenizer.convert_ids_to_tokens(top.tolist())
        np.testing.assert_allclose(values, probs[position, top], atol=1e-5)


def test_empty_sentence_prompts(mlm_dir, make_app):
    at = make_app(str(mlm_dir))
    at.switch_page(PAGE).run()
    assert not at.exception
    assert "[MASK]" in at.info[0].value


def test_a_model_without_an_mlm_head_says_so_and_offers_one(minilm_dir, make_app):
    at = make_app(str(minilm_dir), "the [MASK] sat on the mat .")
    at.switch_page(PAGE).run()
    assert not at.exception
    warning = at.warning[0].value
    said = f"'{minilm_dir.name}' cannot guess masked words: its saved weights have no masked-word (MLM) head"
    assert markdown_text(said) in warning
    assert str(minilm_dir.parent) not in warning and markdown_text(str(minilm_dir.parent)) not in warning
    assert not at.get("vega_lite_chart")
    offer = at.button(key="masked.use.bert-base-uncased")
    assert offer.label == f"Use {markdown_text('bert-base-uncased')}"  # a model's name is text, never Markdown


def test_offers_that_cannot_load_are_disabled_with_why_and_local_heads_are_offered(minilm_dir, mlm_dir, isolated_cache,
                                                                                   make_app, monkeypatch):
    """Before: "Use bert-base-uncased" was offered offline and led to a ModelUnavailable error; the message came
    only after a sentence was typed."""
    import shutil

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    shutil.copytree(mlm_dir, isolated_cache / "runs" / "tiny-mlm")
    at = make_app(str(minilm_dir))  # no sentence typed yet
    at.switch_page(PAGE).run()
    assert not at.exception
    assert markdown_text("no masked-word (MLM) head") in at.warning[0].value
    public = at.button(key="masked.use.bert-base-uncased")
    assert public.disabled and "needs a download" in public.help
    assert any("needs a download" in c.value for c in at.caption)
    local = at.button(key="masked.use.tiny-mlm")
    assert not local.disabled
    local.click().run()
    assert not at.exception and at.session_state["model"] == "tiny-mlm"
    assert "[MASK]" in at.info[0].value  # the tiny model has a head: the page now asks for a sentence


def test_a_model_without_a_head_gets_one_fitted_as_a_job_and_can_use_it(tiny_bert_dir, make_app, tmp_path):
    import time

    from transformers import AutoModelForMaskedLM

    from core.model import artefacts

    words = "the a cat dog man woman sat ran on in at mat river bank park house tree".split()
    rng = np.random.default_rng(1)
    corpus = tmp_path / "fit.txt"
    corpus.write_text("\n".join(sorted({" ".join(rng.choice(words, 6)) + " ." for _ in range(200)})))
    at = make_app(str(tiny_bert_dir))
    at.switch_page(PAGE).run()
    assert not at.exception and markdown_text("no masked-word (MLM) head") in at.warning[0].value
    at.text_input(key="masked.fit_corpus").set_value(str(corpus))
    at.number_input(key="masked.fit_steps").set_value(20)
    at.text_input(key="masked.fit_name").set_value("tiny-fitted")
    at.run()
    # Issue 48: the time it should take, before it starts (measured here), in the sentences and steps asked for.
    estimate = [plain(c.value) for c in at.caption if "Estimated time" in c.value]
    assert estimate and "20 training steps" in estimate[0] and "about" in estimate[0], estimate
    at.button(key="masked.fit_head.run").click().run()
    deadline = time.time() + 180
    while not at.success and time.time() < deadline:
        time.sleep(0.5)
        at.run()
        assert not at.exception, at.exception
    assert at.success and markdown_text("Saved as tiny-fitted:") in at.success[0].value
    folder = artefacts.heads_dir() / "tiny-fitted"
    assert AutoModelForMaskedLM.from_pretrained(folder).config.architectures == ["BertForMaskedLM"]
    at.button(key="masked.use_fitted").click().run()
    assert not at.exception and at.session_state["model"] == "tiny-fitted"
    assert "[MASK]" in at.info[0].value  # the fitted model guesses: the page asks for a sentence
