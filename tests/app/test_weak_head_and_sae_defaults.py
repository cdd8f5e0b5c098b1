"""Issue 47, items 3 and 4, on the pages: a fitted head under 1.5× the best constant guess is flagged where the
Masked words page offers it and where its guesses are drawn (Masked words, the Lens tab of Read the layers); the
Sparse features tab starts on the defaults the bench sized (SNLI train, 2,000 pairs, 400 steps)."""

from __future__ import annotations

import json

import pytest

from core.analyses import sparse_features as sf
from core.data.sources import SNLI
from core.model import artefacts
from core.safe_text import markdown_text
from tests.tiny_mlm import make_tiny_mlm

FIGURES = {"top1_accuracy": 0.12, "constant_accuracy": 0.11, "constant_word": "a", "held_out_words": 300}


@pytest.fixture()
def weak_head(isolated_cache, tiny_bert_dir) -> str:
    """A fitted head saved with figures under 1.5× its constant guess (a tiny MLM stands for the fitted folder)."""
    folder = make_tiny_mlm(artefacts.heads_dir() / "weak-head")
    config = json.loads((folder / "config.json").read_text())
    config.update({"bertlens_fitted_on": str(tiny_bert_dir), artefacts.FIT_KEY: FIGURES})
    (folder / "config.json").write_text(json.dumps(config))
    return "weak-head"


def said(at, text: str) -> bool:
    return any(markdown_text(text) in w.value for w in at.warning)


def test_the_masked_words_page_flags_a_weak_head_where_it_guesses(weak_head, make_app):
    at = make_app(weak_head, "the cat sat on the [MASK] .")
    at.switch_page("app_pages/masked.py").run()
    assert not at.exception, at.exception
    assert said(at, "weak head 'weak-head'") and said(at, "12.0%") and said(at, "11.0%")
    assert at.get("vega_lite_chart")  # still drawn: flagged, not refused


def test_the_masked_words_page_offers_a_weak_head_with_its_warning(weak_head, tiny_bert_dir, make_app):
    at = make_app(str(tiny_bert_dir))  # an encoder without a head: the page offers the local heads
    at.switch_page("app_pages/masked.py").run()
    assert not at.exception, at.exception
    at.button(key="masked.use.weak-head")
    assert any(markdown_text("weak head 'weak-head'") in c.value for c in at.caption)


def test_the_lens_tab_flags_a_weak_head(weak_head, make_app):
    at = make_app(weak_head, "the cat sat on the mat .")
    at.switch_page("app_pages/layers.py").run()
    assert not at.exception, at.exception
    assert said(at, "weak head 'weak-head'")


def test_a_head_that_beats_the_constant_is_not_flagged(isolated_cache, tiny_bert_dir, make_app):
    folder = make_tiny_mlm(artefacts.heads_dir() / "good-head")
    config = json.loads((folder / "config.json").read_text())
    config[artefacts.FIT_KEY] = {**FIGURES, "top1_accuracy": 0.30}
    (folder / "config.json").write_text(json.dumps(config))
    at = make_app("good-head", "the cat sat on the [MASK] .")
    at.switch_page("app_pages/masked.py").run()
    assert not at.exception and not said(at, "weak head")


def test_the_sparse_features_tab_starts_on_the_sized_defaults(tiny_bert_dir, make_app):
    at = make_app(str(tiny_bert_dir), "the cat sat on the mat .")
    at.switch_page("app_pages/layers.py").run()
    assert not at.exception, at.exception
    assert at.session_state["features.train.source"] == SNLI and at.session_state["features.train.split"] == "train"
    assert at.session_state["features.train.dataset_limit"] == sf.DEFAULT_PAIRS == 2000
    assert at.number_input(key="features.train.steps").value == sf.DEFAULT_STEPS == 400


def test_the_sidebars_model_picker_marks_a_weak_head(weak_head, isolated_cache, tiny_bert_dir, make_app):
    folder = make_tiny_mlm(artefacts.heads_dir() / "good-head")
    config = json.loads((folder / "config.json").read_text())
    config[artefacts.FIT_KEY] = {**FIGURES, "top1_accuracy": 0.30}
    (folder / "config.json").write_text(json.dumps(config))
    at = make_app(str(tiny_bert_dir))
    at.run()
    assert not at.exception, at.exception
    options = at.selectbox(key="model").options
    assert "weak-head (weak head)" in options and "good-head" in options
