"""AppTest of the "Inside a head" section and the head view's weights control, on MiniLM-L6 (a BERT): chart data
against transformers' attention and against ‖α f(x)‖ computed here from the weights and hidden states."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
from streamlit.testing.v1 import AppTest

from core import jobs
from core.model.loading import load_model
from tests.app.conftest import chart_rows_titled as _chart

APP_FILE = str(Path(__file__).resolve().parents[2] / "app.py")
TEXT = "The bank raised rates, and the river flooded."


def _app(model: str, text: str = TEXT, tab: str = "Inside a head") -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"] = model
    at.session_state["sentence_a"] = text
    at.session_state["sentence_b"] = ""
    at.session_state["attention.tab"] = tab  # only the open tab runs
    at.switch_page("app_pages/attention.py")
    return at




def _reference(minilm_dir):
    lm = load_model(str(minilm_dir), device="cpu")
    tok = lm.tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**tok, output_attentions=True, output_hidden_states=True)
    return lm, out


def _norm_weighted(lm, out, layer: int, head: int) -> np.ndarray:
    """‖α_ij f(x_j)‖ / Σ_j, from the layer's input, its value and output weights."""
    att = lm.model.encoder.layer[layer].attention
    d = lm.hidden_size // lm.num_heads
    part = slice(head * d, (head + 1) * d)
    x = out.hidden_states[layer][0].double()
    with torch.no_grad():
        v = x @ att.self.value.weight.double().T + att.self.value.bias.double()
        f = v[:, part] @ att.output.dense.weight.double()[:, part].T
    alpha = out.attentions[layer][0, head].double()
    w = torch.linalg.vector_norm(alpha[:, :, None] * f[None], dim=-1).numpy()
    return w / w.sum(axis=1, keepdims=True)


def _head_view_matrix(at: AppTest, size: int) -> np.ndarray:
    """The head view heatmap's weights as a [query, key] matrix (tokens are labelled "index·token")."""
    element = at.get("vega_lite_chart")[0]
    rows = [r for named in element.proto.datasets for r in pa.ipc.open_stream(named.data.data).read_all().to_pylist()]
    shown = np.zeros((size, size))
    for r in rows:
        shown[int(r["query"].split("·")[0]), int(r["key"].split("·")[0])] = r["weight"]
    return shown


def test_neuron_view_softmax_is_transformers_attention(minilm_dir):
    lm, out = _reference(minilm_dir)
    at = _app(str(minilm_dir))
    at.run()
    at.selectbox(key="inside.layer").set_value(3)
    at.selectbox(key="inside.head").set_value(5)
    at.selectbox(key="inside.query").set_value(2).run()
    assert not at.exception
    rows = [r for r in _chart(at, "softmax") if "attention" in r and r.get("attention") is not None]
    shown = {int(r["key"].split("·")[0]): r["attention"] for r in rows if "score" in r}
    expected = out.attentions[3][0, 5, 2].numpy()
    np.testing.assert_allclose([shown[j] for j in range(len(expected))], expected, atol=1e-5)
    products = [r for r in _chart(at, "raises the score") if "product" in r]
    assert len({r["dim"] for r in products}) == lm.hidden_size // lm.num_heads
    # the raw vs norm-weighted row for the same query
    row = _chart(at, "raw vs norm-weighted (layer 4, head 5)")  # array index 3 is layer 4 (core.numbering)
    norm = {int(r["key"].split("·")[0]): r["share"] for r in row if r["measure"].startswith("norm")}
    np.testing.assert_allclose([norm[j] for j in range(len(expected))], _norm_weighted(lm, out, 3, 5)[2], atol=1e-5)


def test_weights_control_draws_norm_weighted_heatmap(minilm_dir):
    lm, out = _reference(minilm_dir)
    at = _app(str(minilm_dir), tab="One sentence")
    at.run()
    assert at.selectbox(key="attention.weights").options == [
        "raw attention", "norm-weighted (Kobayashi et al. 2020)", "attention rollout (Abnar & Zuidema 2020)"]
    at.selectbox(key="attention.layer").set_value(4)
    at.multiselect(key="attention.heads").set_value([7])
    at.radio(key="attention.style").set_value("Heatmap")
    at.selectbox(key="attention.weights").set_value("norm-weighted (Kobayashi et al. 2020)").run()
    assert not at.exception
    assert any("Norm-weighted" in c.value for c in at.caption)
    expected = _norm_weighted(lm, out, 4, 7)
    shown = _head_view_matrix(at, len(expected))
    np.testing.assert_allclose(shown, expected, atol=1e-5)
    assert not np.allclose(expected, out.attentions[4][0, 7].numpy(), atol=1e-3)  # it is not the raw map
    at.session_state["attention.mode"] = "Model view"
    at.run()
    assert not at.exception


def test_dataset_shares_run_as_a_job(minilm_dir):
    at = _app(str(minilm_dir))
    at.session_state["inside.source"] = "Paste text"
    at.session_state["inside.text"] = "The cat sat on the mat.\nA dog ran, fast, in the park.\nIt rained."
    at.run()
    assert not at.exception
    at.button(key="inside.shares.run").click().run()
    job_id = at.session_state["inside.shares.jobstate"]["last_id"]
    record = jobs.wait(job_id, timeout=240)
    assert record.state == "done", record.error
    at.run()
    assert not at.exception
    result = jobs.get(job_id).result
    rows = _chart(at, "where attention goes")
    assert len(rows) == 2 * 6 * 4
    for r in rows:
        values = result.raw if r["measure"].startswith("raw") else result.norm
        assert abs(values[r["layer"] - 1, result.categories.index(r["category"])] - r["share"]) < 1e-9
    assert any("Kobayashi" in c.value for c in at.caption)


def test_empty_sentence_prompts_and_dataset_part_still_shows(minilm_dir):
    at = _app(str(minilm_dir), text="")
    at.run()
    assert not at.exception
    assert any("Type a sentence" in i.value for i in at.info)
    assert at.button(key="inside.shares.run") is not None


def test_weights_control_draws_attention_rollout(minilm_dir):
    """Rollout from the paper's definition, in numpy: Â_l = 0.5·mean_h(A_l) + 0.5·I, rows renormalised,
    R_l = Â_l · Â_{l-1} · … · Â_0."""
    lm, out = _reference(minilm_dir)
    layer = 3
    product = None
    for l in range(layer + 1):
        a = out.attentions[l][0].double().mean(dim=0).numpy()
        a = 0.5 * a + 0.5 * np.eye(a.shape[0])
        a = a / a.sum(axis=1, keepdims=True)
        product = a if product is None else a @ product
    at = _app(str(minilm_dir), tab="One sentence")
    at.run()
    at.selectbox(key="attention.layer").set_value(layer)
    at.multiselect(key="attention.heads").set_value([2])
    at.radio(key="attention.style").set_value("Heatmap")
    at.selectbox(key="attention.weights").set_value("attention rollout (Abnar & Zuidema 2020)").run()
    assert not at.exception
    assert any("Attention rollout" in c.value for c in at.caption)
    shown = _head_view_matrix(at, len(product))
    np.testing.assert_allclose(shown, product, atol=1e-5)
    at.session_state["attention.mode"] = "Model view"
    at.run()
    assert not at.exception


def test_long_sentence_says_what_was_cut(tiny_bert_dir):
    """Issue 32: the "Inside a head" tab cut a long sentence to the model's length without a word (the "One
    sentence" tab, which does not run beside it, warned). The count is the tokenizer's own."""
    from transformers import AutoTokenizer

    long = " ".join(["the cat sat on the mat ."] * 20)
    dropped = len(AutoTokenizer.from_pretrained(tiny_bert_dir)(long, truncation=False)["input_ids"]) - 64
    assert dropped > 50
    at = _app(str(tiny_bert_dir), text=long)
    at.run()
    assert not at.exception
    assert [w.value for w in at.warning if "cut off" in w.value] == [
        f"The input is longer than the model reads (64 tokens): {dropped} word pieces at its end were cut off and "
        "are not part of this view."]
    assert len(at.selectbox(key="inside.query").options) == 64  # the views show the 64 tokens the model read

    at.sidebar.text_area(key="sentence_a").set_value("the cat sat on the mat").run()
    assert not at.exception and not [w for w in at.warning if "cut off" in w.value]


def test_dataset_shares_say_which_pasted_lines_were_cut(tiny_bert_dir):
    """Issue 32: the dataset shares cut a long pasted line to the model's length without a word."""
    from transformers import AutoTokenizer

    long = " ".join(["the cat sat on the mat ."] * 20)
    dropped = len(AutoTokenizer.from_pretrained(tiny_bert_dir)(long, truncation=False)["input_ids"]) - 64
    at = _app(str(tiny_bert_dir), text="")
    at.session_state["inside.source"] = "Paste text"
    at.session_state["inside.text"] = f"the cat sat on the mat .\n{long}\na dog ran in the park ."
    at.run()
    at.button(key="inside.shares.run").click().run()
    record = jobs.wait(at.session_state["inside.shares.jobstate"]["last_id"], timeout=240)
    assert record.state == "done", record.error
    at.run()
    assert not at.exception
    assert [w.value for w in at.warning if "cut off" in w.value] == [
        f"1 of 3 examples are longer than the model reads (64 tokens): {dropped} word pieces at their ends were cut "
        "off and are not part of this view."]


def test_neuron_view_sentence_filter_keeps_the_other_sentences_keys(minilm_dir):
    """Issue 45: bertviz's neuron-view filter on the page: A→B offers sentence A's tokens as queries and draws
    the keys of sentence B, each with the softmax of the full row (not rescaled)."""
    lm = load_model(str(minilm_dir), device="cpu")
    text_b = "The river was calm."
    tok = lm.tokenizer(TEXT, text_b, return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**tok, output_attentions=True)
    segments = tok["token_type_ids"][0].numpy()
    at = _app(str(minilm_dir))
    at.session_state["sentence_b"] = text_b
    at.run()
    assert at.selectbox(key="inside.filter").options == ["all", "A→A", "A→B", "B→A", "B→B"]
    at.selectbox(key="inside.layer").set_value(2)
    at.selectbox(key="inside.head").set_value(4)
    at.selectbox(key="inside.filter").set_value("A→B").run()
    assert not at.exception
    assert [int(o.split("·")[0]) for o in at.selectbox(key="inside.query").options] == list(np.flatnonzero(segments == 0))
    query = at.selectbox(key="inside.query").value
    rows = [r for r in _chart(at, "softmax") if r.get("score") is not None]
    shown = {int(r["key"].split("·")[0]): r["attention"] for r in rows}
    assert sorted(shown) == list(np.flatnonzero(segments == 1))
    expected = out.attentions[2][0, 4, query].numpy()
    np.testing.assert_allclose([shown[j] for j in sorted(shown)], expected[segments == 1], atol=1e-5)
