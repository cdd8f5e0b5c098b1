"""AppTest of the "Paraphrase heads (MRPC)" section of the attention page's dataset tab: the pass runs as a job,
the AUC grid and the per-pair chart show the core result, and a pair opens in the head view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from core import jobs
from core.analyses.heads import PAIR_DIRECTIONS
from tests.app.conftest import chart_rows_titled

APP_FILE = str(Path(__file__).resolve().parents[2] / "app.py")


def test_paraphrase_heads_section(minilm_dir, data_dir):
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"] = str(minilm_dir)
    at.session_state["sentence_a"] = "The cat sat on the mat."
    at.session_state["sentence_b"] = ""
    at.switch_page("app_pages/attention.py")
    at.session_state["pairheads.limit"] = 12
    at.session_state["attention.tab"] = "Heads over a dataset"  # only the open tab runs
    at.run()
    assert not at.exception
    assert any("bertviz MRPC report" in m.value for m in at.markdown)
    at.button(key="pairheads.run.run").click().run()
    record = jobs.wait(at.session_state["pairheads.run.jobstate"]["last_id"], timeout=240)
    assert record.state == "done", record.error
    at.run()
    assert not at.exception
    result = jobs.get(record.id).result.value  # the job keeps the result with its cuts
    assert result.shares.shape == (12, 2, 6, 12) and result.corpus == "mrpc:test:12"

    rows = chart_rows_titled(at, "tells equivalent from not equivalent")
    shown = np.full((2, 6, 12), np.nan)
    for row in rows:
        shown[["A→B", "B→A"].index(row["direction"]), row["layer"] - 1, row["head"]] = row["auc"]  # shown 1..L
    np.testing.assert_allclose(shown, result.auc, atol=1e-9)

    # The picked head (the most separating one by default) and every pair's share in its chart.
    top = result.top_heads(1)[0]
    assert at.selectbox(key="pairheads.head").value == (top["direction"], top["layer"], top["head"])
    rows = chart_rows_titled(at, "per pair")
    d = PAIR_DIRECTIONS.index(top["direction"])
    shares = {row["pair"]: row["share"] for row in rows}
    np.testing.assert_allclose([shares[i] for i in range(12)], result.shares[:, d, top["layer"], top["head"]],
                               atol=1e-9)

    # Open the chosen pair in the head view: sidebar sentences, layer, head and filter follow.
    pair = at.selectbox(key="pairheads.pair").value
    at.button(key="pairheads.open").click().run()
    assert not at.exception
    assert at.session_state["sentence_a"] == result.pairs[pair][0]
    assert at.session_state["sentence_b"] == result.pairs[pair][1]
    assert at.session_state["attention.layer"] == top["layer"]
    assert at.session_state["attention.heads"] == [top["head"]]
    assert at.session_state["attention.filter"] == {"a_to_b": "A→B", "b_to_a": "B→A"}[top["direction"]]
    assert at.session_state["attention.tab"] == "One sentence"  # the head view's tab is the one that runs


def test_pairs_longer_than_the_model_get_the_corpus_notice(tmp_path):
    """Issue 32: the section cut long MRPC pairs to the model's length without a word. A tiny model reading 12
    tokens cuts them (counted against the tokenizer's own lengths); one reading 512 cuts none and says nothing."""
    from core.analyses.heads import mrpc_pairs
    from tests.app.cuts import cut_warnings, expected_corpus_notice
    from tests.conftest import make_tiny_bert

    pairs = mrpc_pairs("mrpc:test:12")[0]
    for positions in (12, 512):
        model = make_tiny_bert(tmp_path / f"bert-{positions}", positions=positions)
        expected = expected_corpus_notice(model, pairs, positions)
        assert (expected is None) == (positions == 512)
        at = AppTest.from_file(APP_FILE, default_timeout=240)
        at.session_state["model"] = str(model)
        at.session_state["sentence_a"] = "The cat sat on the mat."
        at.session_state["sentence_b"] = ""
        at.switch_page("app_pages/attention.py")
        at.session_state["pairheads.limit"] = 12
        at.session_state["attention.tab"] = "Heads over a dataset"
        at.run()
        at.button(key="pairheads.run.run").click().run()
        assert jobs.wait(at.session_state["pairheads.run.jobstate"]["last_id"], timeout=240).state == "done"
        at.run()
        assert not at.exception
        assert cut_warnings(at) == ([expected] if expected else [])
