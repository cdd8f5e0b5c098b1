"""AppTest of the anisotropy page on the real small model: Run, wait for the worker, check the chart's numbers."""

from __future__ import annotations

import time

import numpy as np

from core.analyses import anisotropy as an
from core.data import corpus as corpora
from core import protocols, references
from core.model.loading import load_model

PAGE = "app_pages/anisotropy.py"


def run_until(at, done, timeout=180):
    """Rerun the page until done(at) (the pass runs in a worker thread between reruns)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        at.run()
        assert not at.exception, at.exception
        if done(at):
            return at
        time.sleep(0.5)
    raise AssertionError("the anisotropy pass did not finish in time")


def open_page(make_app, model, limit):
    at = make_app(model)
    at.switch_page(PAGE).run()
    assert not at.exception
    at.number_input(key="anisotropy.limit").set_value(limit)
    at.number_input(key="anisotropy.pairs").set_value(500).run()
    assert not at.exception
    return at


def test_page_waits_for_run_then_charts_the_measured_profile(minilm_dir, make_app, chart_rows):
    at = open_page(make_app, str(minilm_dir), 40)
    assert any("Press **Run**" in i.value for i in at.info)
    assert not at.get("vega_lite_chart")
    at.button(key="anisotropy.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0)
    # Everything asked for is measured: no Run button is left over once the finished job is collected.
    assert not [b for b in at.button if b.key == "anisotropy.run"]

    expected = an.measure_corpus(load_model(str(minilm_dir)), corpora.builtin(limit=40), an.AnisotropySettings(n_pairs=500))
    rows = chart_rows(at)
    assert {r["series"] for r in rows} == {minilm_dir.name}  # the display name, not the folder path
    assert {r["kind"] for r in rows} == {"measured"}  # no published curve for MiniLM
    shown = [r["value"] for r in sorted(rows, key=lambda r: r["layer"])]
    np.testing.assert_allclose(shown, expected.random_cosine, atol=1e-6)

    at.selectbox(key="anisotropy.measure").set_value("adjusted_self_similarity").run()
    shown = [r["value"] for r in sorted(chart_rows(at), key=lambda r: r["layer"])]
    np.testing.assert_allclose(shown, expected.adjusted_self_similarity, atol=1e-6)
    assert any("40 sentences" in c.value for c in at.caption)

    at.selectbox(key="anisotropy.measure").set_value("random_cosine").run()
    assert any(c.value == protocols.describe("bertlens") for c in at.caption)
    at.toggle(key="anisotropy.reference").set_value(True).run()
    published = [r for r in chart_rows(at) if r["kind"] == "published"]
    reference = an.reference_for("random_cosine")
    assert [r["value"] for r in sorted(published, key=lambda r: r["layer"])] == [reference.values[k] for k in range(13)]
    # MiniLM, whole words: the paper's bert-base-cased curve may only be compared in shape.
    assert {r["series"] for r in published} == {references.overlay_label(reference, str(minilm_dir), "bertlens")}
    assert references.SHAPE_LABEL in published[0]["series"]


def test_paper_protocol_switch_measures_the_papers_way_and_says_so(minilm_dir, make_app, chart_rows):
    at = open_page(make_app, str(minilm_dir), 60)
    at.toggle(key="anisotropy.paper_protocol").set_value(True).run()
    assert not at.exception
    at.button(key="anisotropy.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0)

    settings = an.AnisotropySettings(n_pairs=500, protocol="ethayarajh")
    expected = an.measure_corpus(load_model(str(minilm_dir)), corpora.builtin(limit=60), settings)
    shown = [r["value"] for r in sorted(chart_rows(at), key=lambda r: r["layer"]) if r["kind"] == "measured"]
    np.testing.assert_allclose(shown, expected.random_cosine, atol=1e-6)
    assert any(c.value == protocols.describe("ethayarajh") for c in at.caption)
    assert any("WordPiece tokens" in c.value and "sampled sentences" in c.value for c in at.caption)

    at.selectbox(key="anisotropy.measure").set_value("mev").run()
    assert not at.exception
    shown = [r["value"] for r in sorted(chart_rows(at), key=lambda r: r["layer"]) if r["kind"] == "measured"]
    np.testing.assert_allclose(shown, expected.mev, atol=1e-6)
    # Per word (issue 45): the paper's curves are the means over words of the table's per-word values, at any layer.
    at.selectbox(key="anisotropy.words_layer").set_value(6).run()
    (per_word,) = [d.value for d in at.dataframe if {"word", "contexts", "self_similarity"} <= set(d.value.columns)]
    assert set(per_word["layer"]) == {6} and len(per_word) == len(expected.words)
    np.testing.assert_allclose(per_word["self_similarity"].mean(), expected.self_similarity[6], atol=1e-5)
    np.testing.assert_allclose(per_word["mev"].mean(), expected.mev[6], atol=1e-5)
    at.toggle(key="anisotropy.reference").set_value(True).run()
    published = [r for r in chart_rows(at) if r["kind"] == "published"]
    assert sorted(r["layer"] for r in published) == list(range(1, 13))
    assert references.SHAPE_LABEL in published[0]["series"]  # same protocol, other model
    assert any("variance_explained.csv" in c.value for c in at.caption)

    at.toggle(key="anisotropy.paper_protocol").set_value(False).run()
    assert not at.exception
    assert not any(c.value == protocols.describe("ethayarajh") for c in at.caption)  # the paper profile is not shown


def test_two_models_share_one_chart_and_word_drilldown_works(minilm_dir, tiny_bert_dir, make_app, chart_rows):
    # The tiny model lives in a temp folder, so it is the sidebar model; MiniLM is offered by name from the data folder.
    at = open_page(make_app, str(tiny_bert_dir), 30)
    assert "all-MiniLM-L6-v2" in at.multiselect(key="anisotropy.models").options
    at.multiselect(key="anisotropy.models").set_value([str(tiny_bert_dir), "all-MiniLM-L6-v2"]).run()
    assert not at.exception
    at.button(key="anisotropy.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0 and not a.session_state["anisotropy.jobstate"].get("id"))
    series = {r["series"] for r in chart_rows(at)}
    assert series == {"all-MiniLM-L6-v2", tiny_bert_dir.name}
    layers = {s: sorted(r["layer"] for r in chart_rows(at) if r["series"] == s) for s in series}
    assert layers["all-MiniLM-L6-v2"] == list(range(7)) and layers[tiny_bert_dir.name] == [0, 1, 2]

    at.selectbox(key="anisotropy.word_model").set_value("all-MiniLM-L6-v2")
    at.text_input(key="anisotropy.word").input("the").run()
    assert not at.exception
    drill = an.collect_word(load_model(str(minilm_dir)), corpora.builtin(limit=30), "the")
    word_rows = [r for r in chart_rows(at, index=1) if r["series"] == "“the”"]
    np.testing.assert_allclose([r["value"] for r in sorted(word_rows, key=lambda r: r["layer"])], drill.self_similarity, atol=1e-6)
    nearest_shown = at.dataframe[-1].value
    expected = drill.nearest(0, 6, k=5)
    assert list(nearest_shown["nearest sentences (same word)"]) == [drill.contexts[i] for i, _ in expected]


def test_bad_pasted_text_names_the_problem(minilm_dir, make_app):
    at = make_app(str(minilm_dir))
    at.switch_page(PAGE).run()
    at.radio(key="anisotropy.source").set_value("Paste text").run()
    assert any("Give the corpus some text" in i.value for i in at.info)
    at.text_area(key="anisotropy.text").input("just one line").run()
    assert not at.exception
    assert "at least 2" in at.error[0].value


def test_examples_fill_the_form_and_a_smaller_corpus_keeps_the_limit_valid(minilm_dir, make_app):
    at = make_app(str(minilm_dir))
    at.switch_page(PAGE).run()
    at.button(key="anisotropy.ex.snli").click().run()
    assert not at.exception
    assert at.radio(key="anisotropy.source").value == "SNLI"
    assert at.number_input(key="anisotropy.limit").value == 300
    assert any("positive pairs" in c.value for c in at.caption)
    at.radio(key="anisotropy.source").set_value("Paste text").run()
    at.text_area(key="anisotropy.text").input("The bank was closed.\nWe sat on the river bank.\nThe bank paid us.").run()
    assert not at.exception
    assert at.number_input(key="anisotropy.limit").value == 3
    assert any("3 sentences" in c.value for c in at.caption)


def test_offline_a_model_that_needs_a_download_is_said_once_without_press_run(make_app, minilm_dir, monkeypatch):
    """Before: Run was offered for bert-base-uncased offline, and its load error appeared beside "Press Run…"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = make_app("bert-base-uncased")
    at.switch_page(PAGE).run()
    assert not at.exception
    assert [w.value for w in at.warning if "needs a download" in w.value]
    assert not any("Press **Run**" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "anisotropy.run"]
    box = at.multiselect(key="anisotropy.models")
    assert "bert-base-uncased" in box.value
    assert box.format_func("bert-base-uncased") == "bert-base-uncased (cannot load now)"
    box.set_value(["bert-base-uncased", "all-MiniLM-L6-v2"]).run()  # the local one still runs beside it
    assert not at.exception
    assert at.button(key="anisotropy.run").label == "Run on 1 model"


def test_sentences_longer_than_the_model_get_one_notice_with_their_count(tmp_path, tiny_bert_dir, make_app):
    """Issue 32: the page said "K sentences cut" in a caption, not the shared notice with N and the word pieces.
    A tiny model reading 12 tokens cuts some built-in sentences; one reading 64 cuts none and says nothing."""
    from tests.app.cuts import cut_warnings, expected_corpus_notice
    from tests.conftest import make_tiny_bert

    short = make_tiny_bert(tmp_path / "short-bert", positions=12)
    sentences = corpora.builtin(limit=40).sentences
    for model, positions in ((short, 12), (tiny_bert_dir, 64)):
        expected = expected_corpus_notice(model, sentences, positions)
        at = open_page(make_app, str(model), 40)
        at.button(key="anisotropy.run").click()
        run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0)
        assert cut_warnings(at) == ([expected] if expected else [])
        assert (expected is None) == (positions == 64)


def test_words_seen_once_get_the_profiles_warning_not_a_silent_empty_curve(tiny_bert_dir, make_app):
    """Issue 48: two pasted sentences without a shared word leave self-similarity undefined; the page says why in
    the profile's own words (core LayerProfile.warnings)."""
    from core.safe_text import markdown_text

    at = make_app(str(tiny_bert_dir))
    at.switch_page(PAGE).run()
    at.radio(key="anisotropy.source").set_value("Paste text").run()
    at.text_area(key="anisotropy.text").input("the cat sat\na dog ran").run()
    assert not at.exception, at.exception
    at.button(key="anisotropy.run").click()
    run_until(at, lambda a: len(a.get("vega_lite_chart")) > 0)
    expected = an.measure_corpus(load_model(str(tiny_bert_dir)), corpora.corpus_of(["the cat sat", "a dog ran"]),
                                 an.AnisotropySettings(n_pairs=at.number_input(key="anisotropy.pairs").value))
    (warning,) = expected.warnings
    assert [w.value for w in at.warning if "No word occurs" in w.value] == [
        f"`{tiny_bert_dir.name}`: {markdown_text(warning)}"]
