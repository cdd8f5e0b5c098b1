"""The "What causes it?" tab outside the page: its preset pairs are real same-length swaps, and a lesson step's
charts (core.views.attention.charts) hold lens.patch's numbers for the step's pair."""

from __future__ import annotations

import numpy as np
import pytest

from core import lens
from core.analyses.patching import patch
from core.bias.swaps import DEFAULT_SWAPS, swap_text
from core.charts.patching import patching_frame
from core.data.examples import PATCHING_EXAMPLES
from core.views.attention import CAUSES, VIEW
from tests.tiny_mlm import make_tiny_mlm


def test_gender_presets_are_the_bias_swap_of_their_clean_sentence():
    gender = {k: v for k, v in PATCHING_EXAMPLES.items() if k.startswith("Gender swap")}
    assert len(gender) == 2
    for clean, corrupt, _ in gender.values():
        assert swap_text(clean, DEFAULT_SWAPS) == corrupt


def test_presets_tokenize_to_equal_lengths_with_one_mask(minilm_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir))  # bert-base-uncased's word pieces
    for clean, corrupt, target in PATCHING_EXAMPLES.values():
        a, b = tokenizer.tokenize(clean), tokenizer.tokenize(corrupt)
        assert len(a) == len(b) and a.count("[MASK]") == b.count("[MASK]") == 1, (a, b)
        assert tokenizer.tokenize(" " + target) == [target]


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-causes-view"))


def test_a_lesson_step_on_the_tab_draws_both_heatmaps(mlm_dir):
    clean, corrupt = "the woman sat on the [MASK] .", "the man sat on the [MASK] ."
    params = {"tab": CAUSES, "clean": clean, "corrupt": corrupt, "target": "mat"}
    drawn = VIEW.charts(lens, str(mlm_dir), "", None, params)
    assert len(drawn) == 2
    model = lens.load(str(mlm_dir))
    for (chart, note), over in zip(drawn, ("heads", "positions")):
        expected = patch(model, clean, corrupt, "mat", over)
        # issue 48: the deck and PDF carry the page's warnings (this random model barely tells the pair apart)
        assert expected.warnings and all(w.message in note for w in expected.warnings)
        frame = chart.data
        np.testing.assert_allclose(frame["patched"].to_numpy(), expected.patched.ravel(), atol=1e-5)
        assert list(frame["cell"]) == list(patching_frame(expected)["cell"])
    assert VIEW.charts(lens, str(mlm_dir), "", None, {"tab": CAUSES, "clean": clean}) == []
