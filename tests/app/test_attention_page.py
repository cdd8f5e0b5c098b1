"""AppTest of Home and the attention page: what a user sees, on the real small model."""

from __future__ import annotations

import numpy as np
import pytest

from core.charts import attention as charts
from core.model.encoding import encode
from core.model.loading import load_model
from core.safe_text import markdown_code, markdown_text


def test_home_shows_model_facts(minilm_dir, make_app):
    at = make_app(str(minilm_dir)).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "6"
    assert metrics["Heads per layer"] == "12"
    assert metrics["Parameters"] == "22.7 M"
    facts = next(c.value for c in at.caption if "loaded from" in c.value)
    assert facts.startswith(markdown_code(minilm_dir.name)) and facts.count(str(minilm_dir)) == 1  # the path once


def test_home_unavailable_model_warns_and_app_keeps_working(make_app):
    at = make_app("no-such-org/no-such-model").run()
    assert not at.exception
    assert "unreachable" in at.sidebar.error[0].value  # said under the model box, on every page
    assert any("the sidebar says why" in i.value for i in at.main.info)
    assert at.sidebar.text_area  # the sidebar is still there to pick another model


def test_attention_empty_input_prompts(minilm_dir, make_app):
    at = make_app(str(minilm_dir))
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    assert "Type a sentence" in at.info[0].value


def test_attention_unavailable_model_shows_error(make_app):
    at = make_app("no-such-org/no-such-model", "The cat sat.")
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    assert markdown_text("no-such-org/no-such-model") in at.error[0].value  # shown as text, escaped


def test_attention_heatmap_matches_model_output(minilm_dir, make_app, chart_rows):
    text_a, text_b = "The bank raised rates.", "Rates went up."
    at = make_app(str(minilm_dir), text_a, text_b)
    at.switch_page("app_pages/attention.py").run()
    at.selectbox(key="attention.layer").set_value(4)
    at.multiselect(key="attention.heads").set_value([3])
    at.radio(key="attention.style").set_value("Heatmap").run()
    assert not at.exception
    expected = encode(load_model(str(minilm_dir)), (text_a, text_b)).attentions[4, 3]
    rows = chart_rows(at)
    shown = np.zeros_like(expected)
    for row in rows:
        shown[int(row["query"].split("·")[0]), int(row["key"].split("·")[0])] = row["weight"]
    np.testing.assert_allclose(shown, expected, atol=1e-3)  # kept as float16 for display (issue 18)


def test_attention_pair_filter_and_hidden_specials(minilm_dir, make_app, chart_rows):
    at = make_app(str(minilm_dir), "The bank raised rates.", "Rates went up.")
    at.switch_page("app_pages/attention.py").run()
    at.selectbox(key="attention.filter").set_value("A→B")
    at.toggle(key="attention.hide_special").set_value(True).run()
    at.toggle(key="attention.show_all").set_value(True).run()  # faint lines too: every pair of the filter
    assert not at.exception
    rows = [r for r in chart_rows(at) if "weight" in r]  # the lines, not the label columns
    queries = {r["query"].split("·")[1] for r in rows}
    keys = {r["key"].split("·")[1] for r in rows}
    assert queries == {"the", "bank", "raised", "rates", "."}
    assert keys == {"rates", "went", "up", "."}
    assert "[SEP]" not in queries | keys
    assert any("rescaled" in c.value for c in at.caption)


def test_truncation_is_announced(minilm_dir, make_app):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    dropped = len(tokenizer("word " * 600, truncation=False)["input_ids"]) - 512
    at = make_app(str(minilm_dir), "word " * 600)
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    assert at.warning[0].value == (f"The input is longer than the model reads (512 tokens): {dropped} word pieces at "
                                   "its end were cut off and are not part of this view.")


def test_model_view_lists_every_head(minilm_dir, make_app, chart_rows):
    at = make_app(str(minilm_dir), "A dog ran in the park.")
    at.switch_page("app_pages/attention.py").run()
    at.session_state["attention.mode"] = "Model view"
    at.run()
    assert not at.exception
    cells = {(r["layer"], r["head"]) for r in chart_rows(at)}
    assert cells == {(layer, head) for layer in range(1, 7) for head in range(12)}  # layers 1..L (core.numbering)


def test_model_view_thumbnails_are_the_block_max_of_the_models_attention(minilm_dir, make_app, chart_rows):
    """A pair at the shared scale, A→B: each thumbnail is the block max of transformers' A→B attention over
    one maximum for every head, and the hover names the head's top keys (issue 33)."""
    import base64
    import io

    import torch
    from PIL import Image
    from transformers import AutoModel, AutoTokenizer

    from tests.unit.test_model_view import looped_block_max

    text_a = ("The bank raised its rates again after the long meeting of the board on a rainy Monday in the old city "
              "centre, and the traders, who had expected nothing of the kind, sold their shares quickly before the "
              "markets closed for the evening.")
    text_b = "Rates went up again."
    at = make_app(str(minilm_dir), text_a, text_b)
    at.switch_page("app_pages/attention.py").run()
    at.session_state["attention.mode"] = "Model view"
    at.run()
    at.session_state["attention.scale"] = "shared"
    at.session_state["attention.filter"] = "A→B"
    at.run()
    assert not at.exception

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    model = AutoModel.from_pretrained(minilm_dir, attn_implementation="eager", dtype=torch.float32).eval()
    batch = tokenizer(text_a, text_b, return_tensors="pt")
    with torch.no_grad():
        attentions = torch.stack(model(**batch, output_attentions=True).attentions)[:, 0].numpy()
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
    a_end = tokens.index("[SEP]") + 1
    a_to_b = attentions[:, :, :a_end, a_end:]
    peak = a_to_b.max()
    assert a_end > 44  # more rows of sentence A than pixels: the pooled case

    rows = chart_rows(at)
    assert {(r["layer"], r["head"]) for r in rows} == {(layer, head) for layer in range(1, 7) for head in range(12)}
    for row in rows:
        layer, head = row["layer"] - 1, row["head"]  # the chart shows layers 1..L (core.numbering)
        assert row["scale max"] == pytest.approx(peak, abs=2e-3)  # the display copy is float16 (issue 18)
        image = np.asarray(Image.open(io.BytesIO(base64.b64decode(row["url"].split(",", 1)[1]))).convert("RGB"))
        expected = charts.heatmap_rgb(looped_block_max(a_to_b[layer, head], 44), peak=peak)
        assert np.abs(image.astype(int) - expected.astype(int)).max() <= 3
        received = a_to_b[layer, head].mean(axis=0)
        strongest = int(np.argmax(received)) + a_end
        assert row["top keys"].startswith(f"{strongest}·{tokens[strongest]} ")
    assert any("one scale for every head" in c.value and "Only A→B" in c.value for c in at.caption)


def test_changing_view_settings_never_reruns_the_model(minilm_dir, make_app, monkeypatch):
    import app_pages.widgets.common as common

    calls = []
    real_encode = common.encode
    monkeypatch.setattr(common, "encode", lambda *a, **k: calls.append(a[1]) or real_encode(*a, **k))
    at = make_app(str(minilm_dir), "A unique sentence about a heron and a canoe.")
    at.switch_page("app_pages/attention.py").run()
    at.selectbox(key="attention.layer").set_value(5).run()
    at.multiselect(key="attention.heads").set_value([1, 2]).run()
    at.toggle(key="attention.word_level").set_value(True).run()
    at.radio(key="attention.style").set_value("Heatmap").run()
    at.session_state["attention.mode"] = "Model view"
    at.run()
    assert not at.exception
    assert len(calls) == 1


def test_model_box_shows_the_short_name_and_keeps_the_folder(minilm_dir, make_app, monkeypatch):
    """The sidebar shows a model by its display name, the full folder in its help; the name the browser sends back
    selects the same model (its folder stays the value), so the model is neither loaded again nor run again."""
    import app_pages.widgets.common as common

    calls = []
    real_encode = common.encode
    monkeypatch.setattr(common, "encode", lambda *a, **k: calls.append(a[1]) or real_encode(*a, **k))
    at = make_app(str(minilm_dir), "A heron stood in the reeds.")
    at.switch_page("app_pages/attention.py").run()
    box = at.sidebar.selectbox(key="model")
    assert box.options[box.index] == minilm_dir.name and str(minilm_dir) not in box.options
    assert markdown_text(str(minilm_dir)) in box.help
    assert box.value == str(minilm_dir)
    box.set_value(minilm_dir.name).run()  # what the browser sends: the label it showed
    assert not at.exception
    assert at.sidebar.selectbox(key="model").value == str(minilm_dir) == at.session_state["model"]
    assert len(calls) == 1


def test_display_names_tell_apart_models_of_the_same_name():
    from core.model.loading import display_name_among, display_names

    assert display_names(["/a/models/mini", "/b/runs/bert", "bert-base-uncased"]) == {
        "/a/models/mini": "mini", "/b/runs/bert": "bert", "bert-base-uncased": "bert-base-uncased"}
    assert display_names(["/a/mini", "/b/mini", "org/x"]) == {
        "/a/mini": "/a/mini", "/b/mini": "/b/mini", "org/x": "org/x"}
    name = display_name_among(["/a/mini", "/b/mini"])
    assert (name("/a/mini"), name("/typed/into/the/box"), name("org/x")) == ("/a/mini", "box", "org/x")


def test_url_carries_model_and_sentences(minilm_dir):
    from streamlit.testing.v1 import AppTest

    from tests.app.conftest import APP_FILE

    at = AppTest.from_file(APP_FILE, default_timeout=180)
    at.query_params["model"] = str(minilm_dir)
    at.query_params["a"] = "The river bank flooded."
    at.query_params["b"] = "Water rose."
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    assert at.sidebar.text_area(key="sentence_a").value == "The river bank flooded."
    assert at.sidebar.text_area(key="sentence_b").value == "Water rose."
    at.sidebar.text_area(key="sentence_b").set_value("").run()
    assert "b" not in at.query_params
    assert at.query_params["a"] == ["The river bank flooded."] or at.query_params["a"] == "The river bank flooded."


def test_long_input_head_view_is_thresholded_and_show_all_restores_it(minilm_dir, make_app, chart_rows):
    """Issue 18: a long input's head view carries the visible pairs only (stated under it); "Show all" every pair."""
    from core.analyses.attention import visible_pairs

    text = " ".join(f"word{i % 37} is here" for i in range(40))
    at = make_app(str(minilm_dir), text)
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    weights = encode(load_model(str(minilm_dir)), text).attentions[2, 0]
    rows = [r for r in chart_rows(at) if "weight" in r]
    drawn = {(int(r["query"].split("·")[0]), int(r["key"].split("·")[0])) for r in rows}
    # float16 display weights: compare with the float32 ones away from the cut, where rounding cannot flip a pair
    keep = visible_pairs(weights)
    assert {(q, k) for q, k in zip(*np.nonzero(keep))} - drawn <= _near_cut(weights)
    assert drawn - {(q, k) for q, k in zip(*np.nonzero(keep))} <= _near_cut(weights)
    assert len(drawn) < weights.size
    assert any("lines drawn" in c.value and "at most the 20 strongest" in c.value for c in at.caption)
    at.toggle(key="attention.show_all").set_value(True).run()
    rows = [r for r in chart_rows(at) if "weight" in r]
    assert len(rows) == weights.size


def _near_cut(weights, tol=1e-3):
    """Pairs within tol of the threshold or their row's 20th weight."""
    kth = -np.partition(-weights, 19, axis=1)[:, 19:20]
    near = (np.abs(weights - 0.02) <= tol) | (np.abs(weights - kth) <= tol)
    return {(q, k) for q, k in zip(*np.nonzero(near))}


def test_mrpc_report_presets_fill_the_exact_mrpc_train_pairs(minilm_dir, data_dir, make_app):
    """Report 004's two pairs (rovers, Compaq) as presets: sentence A/B are the MRPC train rows, read here by id."""
    import gzip
    import json

    from core.data.examples import MRPC_REPORT_PAIRS

    with gzip.open(data_dir / "mrpc" / "msr_paraphrase_train.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = {(r["id1"], r["id2"]): r for r in map(json.loads, f)}
    at = make_app(str(minilm_dir))
    at.switch_page("app_pages/attention.py").run()
    for label, (_, _, ids, gold) in MRPC_REPORT_PAIRS.items():
        row = rows[ids]
        assert (row["glue_split"], str(row["label"])) == ("train", gold)
        at.button(key=f"attention.mrpc_report.{label}").click().run()
        assert not at.exception, at.exception
        assert [t.value for t in at.sidebar.text_area] == [row["sentence1"], row["sentence2"]]
        assert at.selectbox(key="attention.filter").value  # a pair: the A→B filter is offered
    assert {r["sentence1"][:20] for r in (rows[p[2]] for p in MRPC_REPORT_PAIRS.values())} == {
        "The identical rovers", "The 2002 second quar"}
