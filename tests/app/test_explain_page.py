"""The "Why this prediction?" page in AppTest: bars equal core.analyses.explain's word scores, the no-head message."""

from __future__ import annotations

import numpy as np

from core.analyses import explain as ex
from core.safe_text import markdown_text
from tests.markdown_text import plain
from tests.integration.test_explain import make_seq_classifier

PAGE = "app_pages/explain.py"


def test_bars_equal_core_scores_and_ig_gap_shown(make_app, chart_rows, tmp_path):
    folder = make_seq_classifier(tmp_path / "seqcls")
    at = make_app(str(folder), "the cat sat on the mat", "a dog ran")
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    expected = ex.explain(ex.load_explainer(str(folder), device="cpu"), "the cat sat on the mat", "a dog ran", "ig")
    rows = chart_rows(at, 0)
    np.testing.assert_allclose([r["score"] for r in rows], expected.word_scores, rtol=1e-4, atol=1e-7)
    assert [r["text"] for r in rows] == list(expected.words)
    assert any("Completeness gap" in m.value for m in [*at.success, *at.warning])
    assert any(f"Predicted: {markdown_text(expected.predicted)}" in m.value for m in at.markdown)


def test_model_without_head_gets_message_and_rollout(make_app, chart_rows, tiny_bert_dir):
    at = make_app(str(tiny_bert_dir), "the cat sat")
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    warning = next(w.value for w in at.warning if "no classifier head" in w.value)
    assert markdown_text(f"'{tiny_bert_dir.name}' has no classifier head") in warning  # the short name, escaped
    assert str(tiny_bert_dir.parent) not in warning and markdown_text(str(tiny_bert_dir.parent)) not in warning
    # Issue 48: an escaped backtick is drawn as a literal one; the warning read "… or `python -m core finetune`)".
    assert "\\`" not in warning and "`" not in plain(warning)
    assert at.multiselect(key="explain.methods").value == ["rollout"]
    expected = ex.explain(ex.load_explainer(str(tiny_bert_dir), device="cpu"), "the cat sat", method="rollout")
    np.testing.assert_allclose([r["score"] for r in chart_rows(at, 0)], expected.word_scores, atol=1e-6)


def test_faithfulness_job_on_pasted_sentences_matches_core(make_app, tmp_path):
    """The dataset comes from the shared corpus picker (pasted text here, as a user's own file would be)."""
    from core.data import corpus as corpora
    from core import jobs
    from core.analyses.faithfulness import faithfulness

    folder = make_seq_classifier(tmp_path / "seqcls")
    at = make_app(str(folder), "the cat sat on the mat")
    at.session_state["explain.faith.source"] = "Paste text"
    at.session_state["explain.faith.text"] = "the cat sat on the mat\na dog ran in the park\nthe bird sang"
    at.session_state["explain.size"] = 5
    at.session_state["explain.fsteps"] = 5
    at.session_state["explain.faith.methods"] = ["ig", "occlusion", "lime", "attention"]
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    at.button(key="explain.faith.run").click().run()
    job_id = at.session_state["explain.faith.jobstate"]["last_id"]
    assert jobs.wait(job_id, timeout=120).state == "done"
    at.run()
    assert not at.exception, at.exception
    shown = at.session_state["explain.faith.jobstate"]["result"]
    items = corpora.from_text("the cat sat on the mat\na dog ran in the park\nthe bird sang").items
    assert shown.methods == ("ig", "occlusion", "lime", "attention", "random")  # the control added by faithfulness
    methods = shown.methods[:-1]
    expected = faithfulness(ex.load_explainer(str(folder), device="cpu"), items, methods=methods, steps=5)
    assert shown.examples == expected.examples == 3
    np.testing.assert_allclose(shown.comprehensiveness, expected.comprehensiveness, atol=1e-5)
    np.testing.assert_allclose(shown.sufficiency, expected.sufficiency, atol=1e-5)
    assert at.dataframe, "the faithfulness table is not shown"


def test_faithfulness_says_which_pasted_lines_were_cut(make_app, tmp_path):
    """Issue 32: faithfulness scored a long pasted line cut to the model's length without a word."""
    from transformers import AutoTokenizer

    from core import jobs

    folder = make_seq_classifier(tmp_path / "seqcls")
    lines = ["the cat sat on the mat", " ".join(["a dog ran in the park ."] * 15), "the bird sang"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    dropped = sum(max(0, len(tokenizer(t, truncation=False)["input_ids"]) - 64) for t in lines)
    assert dropped > 20
    at = make_app(str(folder), "the cat sat on the mat")
    at.session_state["explain.faith.source"] = "Paste text"
    at.session_state["explain.faith.text"] = "\n".join(lines)
    at.session_state["explain.fsteps"] = 5
    at.switch_page(PAGE)
    at.run()
    at.button(key="explain.faith.run").click().run()
    assert jobs.wait(at.session_state["explain.faith.jobstate"]["last_id"], timeout=120).state == "done"
    at.run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "examples are longer" in w.value] == [
        f"1 of 3 examples are longer than the model reads (64 tokens): {dropped} word pieces at their ends were cut "
        "off and are not part of this view."]


def test_long_input_is_cut_with_a_warning(make_app, tiny_bert_dir):
    """Issue 32: the page said nothing when a long text was cut to the model's 64 positions."""
    from transformers import AutoTokenizer

    long_text = " ".join(["the cat sat on the mat ."] * 20)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    dropped = len(tokenizer(long_text, truncation=False)["input_ids"]) - tokenizer.model_max_length
    at = make_app(str(tiny_bert_dir), long_text)
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "cut off" in w.value] == [
        f"The input is longer than the model reads (64 tokens): {dropped} word pieces at its end were cut off and "
        "are not part of this view."]
    at = make_app(str(tiny_bert_dir), "the cat sat")
    at.switch_page(PAGE)
    at.run()
    assert not [w for w in at.warning if "cut off" in w.value]


def test_perturbation_methods_chosen_on_the_page_draw_core_scores(make_app, chart_rows, tmp_path):
    folder = make_seq_classifier(tmp_path / "seqcls")
    at = make_app(str(folder), "the cat sat on the mat", "a dog ran")
    at.session_state["explain.methods"] = ["occlusion", "kernel-shap"]
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    at.number_input(key="explain.samples").set_value(60).run()
    at.number_input(key="explain.window").set_value(2).run()
    assert not at.exception, at.exception
    explainer = ex.load_explainer(str(folder), device="cpu")
    for index, (method, kwargs) in enumerate((("occlusion", {"window": 2}), ("kernel-shap", {"samples": 60}))):
        expected = ex.explain(explainer, "the cat sat on the mat", "a dog ran", method, **kwargs)
        rows = chart_rows(at, index)
        np.testing.assert_allclose([r["score"] for r in rows], expected.word_scores, rtol=1e-4, atol=1e-7)
        assert [r["text"] for r in rows] == list(expected.words)
    assert any("windows of 2 word(s)" in c.value for c in at.caption)
    assert any("60 samples" in c.value for c in at.caption)


def test_faithfulness_starts_quick_and_all_methods_are_one_click_away(make_app, tmp_path):
    """Issue 48: "Score the methods" defaulted to all 10 methods × 50 examples (~30 min on 2 cores)."""
    from core.analyses.explain import METHODS
    from core.analyses.faithfulness import QUICK_METHODS

    folder = make_seq_classifier(tmp_path / "seqcls")
    at = make_app(str(folder), "the cat sat on the mat")
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    methods = at.multiselect(key="explain.faith.methods")
    assert methods.value == list(QUICK_METHODS) and len(QUICK_METHODS) <= 4
    assert {"shapley", "kernel-shap", "lime", "ig"}.isdisjoint(methods.value)  # the slow ones wait for a click
    sizes = [n.value for n in at.number_input if n.key in ("explain.faith.dataset_limit", "explain.size")]
    assert sizes and all(size <= 20 for size in sizes), sizes
    at.button(key="explain.faith.all").click().run()
    assert at.multiselect(key="explain.faith.methods").value == list(METHODS)
    assert at.button(key="explain.faith.all").disabled
