"""AppTest of the Read the layers page's Lens tab on a tiny random BertForMaskedLM: the grid holds transformers' own
numbers, a saved tuned lens is drawn beside the logit lens, a model without a head is told how to get one, and a
tuned lens is fitted (and a fit cancelled) from the page as a job."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from core import jobs
from core.analyses import logit_lens as lenses
from core.model import artefacts
from core.safe_text import markdown_text
from tests.app.conftest import chart_rows_titled
from tests.app.test_cancel_every_job import _cancel_while_running
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

PAGE = "app_pages/layers.py"
TEXT = "the cat sat on the mat ."
GRID, KL, CELL = "Top guess at every layer and token", "KL to the final layer", "top 5 guesses"


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-lens"), layers=3)


def head_on_every_layer(folder, text):
    """[L+1, T, V] softmax of BertForMaskedLM's own head on each hidden state, and the tokenizer."""
    from transformers import BertForMaskedLM, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(folder))
    model = BertForMaskedLM.from_pretrained(str(folder)).eval()
    feed = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        states = model(**feed, output_hidden_states=True).hidden_states
        probs = torch.stack([torch.softmax(model.cls(h[0]), -1) for h in states]).numpy()
    return probs, tokenizer


def test_grid_and_cell_hold_the_heads_guesses_at_every_layer(mlm_dir, make_app):
    at = make_app(str(mlm_dir), TEXT)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    probs, tokenizer = head_on_every_layer(mlm_dir, TEXT)
    rows = chart_rows_titled(at, GRID)
    assert len(rows) == probs.shape[0] * probs.shape[1]
    for row in rows:
        layer, position = row["layer"], row["position"]
        best = int(np.argmax(probs[layer, position]))
        assert row["guess"] == tokenizer.convert_ids_to_tokens(best), row
        assert row["p"] == pytest.approx(float(probs[layer, position, best]), abs=1e-5)
    assert [r["token"] for r in rows if r["layer"] == 0] == [f"{i}·{t}" for i, t in
                                                             enumerate(tokenizer.tokenize(TEXT, add_special_tokens=True))]
    at.selectbox(key="layers.lens.layer").set_value(1)
    at.selectbox(key="layers.lens.token").set_value(2).run()
    cell = chart_rows_titled(at, "Layer 1, token 2")
    top = np.argsort(-probs[1, 2], kind="stable")[:5]
    assert [r["guess"] for r in cell] == tokenizer.convert_ids_to_tokens(top.tolist())
    np.testing.assert_allclose([r["p"] for r in cell], probs[1, 2, top], atol=1e-5)
    kl = chart_rows_titled(at, KL)
    assert {r["lens"] for r in kl} == {"logit lens"} and kl[-1]["kl"] == 0.0


def test_a_saved_tuned_lens_is_drawn_and_compared(mlm_dir, make_app):
    from core.model.loading import load_model

    ref = str(mlm_dir)
    rng = np.random.default_rng(1)
    moved = lenses.Translators((np.eye(32) + rng.normal(0, 0.5, (3, 32, 32))).astype(np.float32),
                               np.zeros((3, 32), np.float32))
    lenses.save_lens(moved, "moved", {"model": ref})
    at = make_app(ref, TEXT)
    at.session_state["layers.lens.kind"] = "tuned"
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    expected = lenses.logit_lens(load_model(ref, masked_lm=True, device="cpu"), TEXT, kind="tuned", lens="moved")
    rows = chart_rows_titled(at, "tuned lens 'moved'")
    assert [r["guess"] for r in rows] == [expected.top_tokens[n][i][0] for n in range(4) for i in range(len(expected.tokens))]
    kl = chart_rows_titled(at, KL)
    assert {r["lens"] for r in kl} == {"logit lens", "tuned lens 'moved'"}
    tuned_kl = [r["kl"] for r in kl if r["lens"] == "tuned lens 'moved'"]
    np.testing.assert_allclose(tuned_kl, expected.kl_to_final, rtol=1e-5)


def test_a_model_without_a_head_is_told_to_fit_one(tmp_path, make_app):
    at = make_app(str(make_tiny_bert(tmp_path / "bare")), TEXT)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    assert any(markdown_text("python -m core fit-mlm-head") in w.value for w in at.warning), [w.value for w in at.warning]


def test_fit_from_the_page_saves_a_lens_and_cancel_saves_none(mlm_dir, make_app):
    at = make_app(str(mlm_dir), TEXT, timeout=240)
    at.session_state["layers.lens.fit.steps"] = 3
    at.session_state["layers.lens.fit.name"] = "page-lens"
    at.switch_page(PAGE).run()
    at.button(key="layers.lens.fit.run").click().run()
    job_id = at.session_state["layers.lens.fit.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=120).state == "done"
    at.run()
    assert not at.exception, at.exception
    assert any(markdown_text("'page-lens'") in s.value for s in at.success), [s.value for s in at.success]
    assert [a.name for a in artefacts.list_artefacts("tuned-lens")] == ["page-lens"]
    assert at.selectbox(key="layers.lens.name").options == ["page-lens"]

    at.session_state["layers.lens.fit.steps"] = 5000
    at.session_state["layers.lens.fit.name"] = "cut-lens"
    at.run()
    _cancel_while_running(at, "layers.lens.fit")
    assert [a.name for a in artefacts.list_artefacts("tuned-lens")] == ["page-lens"]
    assert sorted(p.name for p in artefacts.artefact_dir("tuned-lens").iterdir()) == ["page-lens"]
