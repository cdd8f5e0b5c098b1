"""AppTest of the Attention heads page's "What causes it?" tab on a tiny random BertForMaskedLM: the heatmaps hold
core.analyses.patching's numbers, a length mismatch is shown plainly, a head click opens the head view, and the
settings make a link."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core import jobs
from core.analyses.patching import attribution_patch, correlation, patch
from core.model.loading import load_model
from core.safe_text import markdown_text
from core.views.attention import CAUSES
from tests.app.conftest import APP_FILE, chart_rows_titled
from tests.app.test_url_state import all_chart_rows, open_link
from tests.tiny_mlm import make_tiny_mlm

CLEAN, CORRUPT, TARGET = "the woman sat on the [MASK] .", "the man sat on the [MASK] .", "mat"


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm-causes"))


def _app(model: str, clean: str = CLEAN, corrupt: str = CORRUPT, method: str = "exact") -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"] = model
    at.session_state["attention.tab"] = CAUSES  # only the open tab runs
    at.session_state["causes.clean"], at.session_state["causes.corrupt"] = clean, corrupt
    at.session_state["causes.target"], at.session_state["causes.method"] = TARGET, method
    at.switch_page("app_pages/attention.py").run()
    return settle(at)


def settle(at: AppTest) -> AppTest:
    """Wait for the tab's patching job (started on its own for new settings), then draw its result."""
    assert not at.exception, at.exception
    key = "causes.patching.jobstate"
    # a job for older settings is collected first, and the rerun starts the one for the settings now on the page
    while key in at.session_state and at.session_state[key].get("id"):
        assert jobs.wait(at.session_state[key]["id"], timeout=240).state == "done"
        at.run()
        assert not at.exception, at.exception
    return at


def _grid(rows: list[dict], layers: int, width: int, column: str = "patched") -> np.ndarray:
    grid = np.full((layers, width), np.nan)
    for i, row in enumerate(rows):
        grid[row["layer"] - 1, i % width] = row[column]  # the chart shows layers 1..L (core.numbering)
    return grid


@pytest.mark.parametrize("method", ["exact", "attribution"])
def test_heatmaps_hold_the_patching_result(mlm_dir, method):
    at = _app(str(mlm_dir), method=method)
    run = attribution_patch if method == "attribution" else patch
    lm = load_model(str(mlm_dir), masked_lm=True)
    heads, positions = run(lm, CLEAN, CORRUPT, TARGET, "heads"), run(lm, CLEAN, CORRUPT, TARGET, "positions")
    assert heads.patched.shape == (2, 4) and positions.patched.shape == (2, len(heads.tokens))
    for result, title in ((heads, "over heads"), (positions, "over positions")):
        rows = chart_rows_titled(at, title)
        layers, width = result.patched.shape
        assert [r["layer"] for r in rows] == list(np.repeat(np.arange(layers) + 1, width))
        np.testing.assert_allclose(_grid(rows, layers, width), result.patched, atol=1e-5)
        np.testing.assert_allclose(_grid(rows, layers, width, "recovered"), result.recovered, atol=1e-5)
    # every token labels its own column of the position grid
    cells = [r["cell"] for r in chart_rows_titled(at, "over positions")][:len(heads.tokens)]
    assert cells == [f"{i}·{t}" for i, t in enumerate(heads.tokens)]
    assert cells[6] == "6·[MASK]"
    assert any(f"{heads.clean_metric:.4f}" in c.value for c in at.caption)


def test_attribution_vs_exact_shows_their_correlation_over_the_cells(mlm_dir):
    """Issue 34 item 2: attribution patching "with its correlation against exact patching shown"."""
    at = _app(str(mlm_dir), method="compare")
    lm = load_model(str(mlm_dir), masked_lm=True)
    r = [correlation(patch(lm, CLEAN, CORRUPT, TARGET, over), attribution_patch(lm, CLEAN, CORRUPT, TARGET, over))
         for over in ("heads", "positions")]
    assert all(np.isfinite(r))
    note = next(c.value for c in at.caption if "Pearson r" in c.value)
    assert f"heads {r[0]:.3f}, positions {r[1]:.3f}" in note
    heads = attribution_patch(lm, CLEAN, CORRUPT, TARGET, "heads")  # the charts show the estimate
    rows = chart_rows_titled(at, "over heads")
    np.testing.assert_allclose(_grid(rows, *heads.patched.shape), heads.patched, atol=1e-5)


def test_length_mismatch_is_shown_with_both_token_lists(mlm_dir):
    at = _app(str(mlm_dir), corrupt="the man sat on the big [MASK] .")
    assert not at.get("vega_lite_chart")
    message = at.error[0].value
    assert "same number of word pieces" in message
    # both token lists, escaped for Markdown by core.safe_text (so [MASK] is shown as typed, not as a link)
    assert markdown_text("9: [CLS] the woman sat on the [MASK] . [SEP]") in message
    assert markdown_text("10: [CLS] the man sat on the [UNK] [MASK] . [SEP]") in message


def test_a_model_without_mlm_head_gets_a_plain_error(tiny_bert_dir):
    at = _app(str(tiny_bert_dir))
    assert not at.get("vega_lite_chart") and at.error


def test_clicking_a_head_opens_it_in_the_head_view(mlm_dir, monkeypatch):
    from types import SimpleNamespace

    from app_pages.widgets import causes

    # AppTest cannot click a vega cell: run the chart's on_select callback on the state a click on (2, 3) leaves: the
    # chart shows layers 1..L (core.numbering), so its layer 2 is array index 1.
    state = {causes.HEADS_CHART: SimpleNamespace(selection={causes.charts.HEAD_SELECTION: [{"layer": 2, "cell": "3"}]}),
             "causes.clean": CLEAN}
    monkeypatch.setattr(causes, "st", SimpleNamespace(session_state=state))
    causes.open_clicked_head()
    opened = {k: v for k, v in state.items() if k.startswith("attention.") or k.startswith("sentence_")}
    assert opened == {"attention.layer": 1, "attention.heads": [3], "attention.mode": "Head view",
                      "attention.tab": "One sentence", "sentence_a": CLEAN, "sentence_b": ""}
    monkeypatch.undo()

    at = _app(str(mlm_dir))
    for key, value in opened.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="attention.layer").value == 1 and at.multiselect(key="attention.heads").value == [3]
    assert "Layer 2, head 3" in at.get("vega_lite_chart")[0].proto.spec


def test_settings_round_trip_through_the_link(mlm_dir):
    query = {"model": str(mlm_dir), "tab": CAUSES, "clean": CLEAN, "corrupt": CORRUPT, "target": TARGET,
             "method": "attribution"}
    at = settle(open_link("attention", query))
    assert at.session_state["causes.method"] == "attribution" and at.session_state["causes.clean"] == CLEAN
    assert "approximated by gradients" in at.get("vega_lite_chart")[0].proto.spec
    settle(at.text_input(key="causes.target").set_value("dog").run())
    assert at.query_params["target"] in (["dog"], "dog")  # AppTest keeps a value or a list of them
    again = settle(open_link("attention", {k: at.query_params[k] for k in query}))
    assert again.session_state["causes.target"] == "dog"
    assert all_chart_rows(again) == all_chart_rows(at)


def test_patching_job_shows_progress_and_cancels(mlm_dir, monkeypatch):
    import time

    from core.analyses import patching
    from core.progress import check_stop
    from tests.app.test_cancel_every_job import _cancel_while_running

    def slow_patch(model, clean, corrupt, target, over, *, progress=None, should_stop=None):
        """Stands in for a bert-base-sized grid: reports a first cell, then works until cancelled."""
        progress(1, 100)
        for _ in range(2400):
            check_stop(should_stop)
            time.sleep(0.05)
        raise AssertionError("never cancelled")

    monkeypatch.setattr(patching, "patch", slow_patch)
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"], at.session_state["attention.tab"] = str(mlm_dir), CAUSES
    at.session_state["causes.clean"], at.session_state["causes.corrupt"] = CLEAN, CORRUPT
    at.session_state["causes.target"] = TARGET
    at.switch_page("app_pages/attention.py").run()
    _cancel_while_running(at, "causes.patching", start=False)
    assert not at.get("vega_lite_chart") and at.button(key="causes.patching.run")


def test_a_classification_run_is_patched_on_the_chosen_class_logit(tiny_bert_dir):
    from core.training import load_classifier
    from tests.app.test_attention_dataset import _classifier_run

    run = _classifier_run(tiny_bert_dir, name="causes-classifier")
    clean, corrupt = "the woman sat on the mat .", "the man sat on the mat ."
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"], at.session_state["attention.tab"] = run, CAUSES
    at.session_state["causes.clean"], at.session_state["causes.corrupt"] = clean, corrupt
    at.switch_page("app_pages/attention.py").run()
    assert at.selectbox(key="causes.class").options == ["entailment", "neutral", "contradiction"]
    settle(at.selectbox(key="causes.class").set_value("neutral").run())
    expected = patch(load_classifier(run), clean, corrupt, "neutral", "heads")
    assert expected.metric == "logit[neutral]"
    rows = chart_rows_titled(at, "over heads")
    np.testing.assert_allclose(_grid(rows, 2, 4), expected.patched, atol=1e-5)


def _in_page_order(block) -> list:
    """The page's elements in the order they are drawn (AppTest keeps each block's children by position)."""
    out = []
    for child in getattr(block, "children", {}).values():
        out.append(child)
        out.extend(_in_page_order(child))
    return out


def test_a_pair_the_model_barely_tells_apart_is_flagged_above_the_grid(mlm_dir):
    """Issue 48: the tiny random model's clean and corrupted log P(mat) differ by ~2e-4 and its top guess is not
    "mat": both warnings, worded as core.analyses.patching's, come before the first heatmap; the clean sentence's
    box is named by what it is."""
    at = _app(str(mlm_dir))
    expected = patch(load_model(str(mlm_dir), masked_lm=True), CLEAN, CORRUPT, TARGET, "heads").warnings
    assert [w.code for w in expected] == ["small_gap", "clean_not_top"]
    assert [w.value for w in at.warning] == [markdown_text(w.message) for w in expected]
    assert at.text_input(key="causes.clean").label == "Clean sentence"
    order = [getattr(e, "type", type(e).__name__) for e in _in_page_order(at.main)]
    assert order.index("warning") < order.index("vega_lite_chart"), order
