"""core.lens on a tiny random BertForMaskedLM: each view's data frame against transformers' own output, the frame
is what the chart draws, lens.view draws a lesson step, and the notebook renderer loads nothing from the network;
notebooks/tour.ipynb runs top to bottom (nbclient)."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tiny_mlm import make_tiny_mlm

REPO = Path(__file__).resolve().parents[2]
TEXT = "the cat sat on the mat ."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(make_tiny_mlm(tmp_path_factory.mktemp("lens-mlm")))


def reference(folder: str, text: str):
    """transformers' own forward pass: attentions [L, H, T, T], MLM probabilities [T, V], tokens."""
    from transformers import BertForMaskedLM, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(folder)
    model = BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    feed = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**feed, output_attentions=True)
    attentions = torch.stack(out.attentions)[:, 0].numpy()
    return attentions, torch.softmax(out.logits[0], -1).numpy(), tokenizer.convert_ids_to_tokens(feed["input_ids"][0])


def inline_rows(chart) -> list[dict]:
    """Every data row the chart's spec carries (altair inlines data as named datasets)."""
    return [row for rows in chart.to_dict().get("datasets", {}).values() for row in rows]


def test_head_view_averages_transformers_heads(tiny):
    from core import lens

    chart, frame = lens.head_view(tiny, TEXT, layer=1, heads=[0, 2], return_data=True)
    attentions, _, tokens = reference(tiny, TEXT)
    expected = attentions[1, [0, 2]].mean(0)
    n = len(tokens)
    assert len(frame) == n * n
    got = frame["weight"].to_numpy().reshape(n, n)  # rows in query order, keys inside
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [q.split("·", 1)[1] for q in frame["query"].iloc[::n]] == tokens
    # the frame is what the chart draws
    drawn = sorted(round(r["weight"], 6) for r in inline_rows(chart) if "weight" in r and "query" in r)
    assert drawn and set(drawn) <= set(np.round(expected.ravel().astype(float), 6))


def test_model_view_frame_is_every_head(tiny):
    from core import lens

    chart, frame = lens.model_view(tiny, TEXT, return_data=True)
    attentions, _, _ = reference(tiny, TEXT)
    pivot = np.zeros_like(attentions)
    # the frame and the chart number layers as every chart does, from 1 (core.numbering): array index + 1
    pivot[frame["layer"] - 1, frame["head"], frame["query"], frame["key"]] = frame["weight"]
    np.testing.assert_allclose(pivot, attentions, atol=1e-5)
    cells = {(r["layer"], r["head"]) for r in inline_rows(chart) if "url" in r}
    assert cells == {(l + 1, h) for l in range(attentions.shape[0]) for h in range(attentions.shape[1])}


def test_model_view_filter_and_shared_scale(tiny):
    from core import lens

    chart, frame = lens.model_view(tiny, TEXT, "a dog ran .", pair_filter="B→A", scale="shared", return_data=True)
    b_start = 9  # [CLS] + 7 words + [SEP]
    assert frame["query"].min() == b_start and frame["key"].max() == b_start - 1
    peaks = {r["scale max"] for r in inline_rows(chart) if "url" in r}
    assert len(peaks) == 1 and peaks.pop() == pytest.approx(frame["weight"].max(), abs=1e-6)


def test_fill_mask_top_guesses_are_the_mlm_heads(tiny):
    from core import lens

    text = "the [MASK] sat on the mat ."
    _, frame = lens.fill_mask(tiny, text, top_k=4, return_data=True)
    _, probs, tokens = reference(tiny, text)
    row = probs[tokens.index("[MASK]")]
    from transformers import BertTokenizerFast

    vocab = BertTokenizerFast.from_pretrained(tiny).convert_ids_to_tokens(list(np.argsort(-row)[:4]))
    ranked = frame.sort_values("rank")
    assert list(ranked["token"]) == vocab
    np.testing.assert_allclose(ranked["probability"], np.sort(row)[::-1][:4], atol=1e-5)


def test_layerwise_pca_and_explain_and_norms_return_their_frames(tiny):
    from core import lens

    chart, frame = lens.layerwise_pca(tiny, ["he sat on the river bank .", "money in the bank ."], layer=1,
                                      colour="word", word="bank", return_data=True)
    assert set(frame["layer"]) == {0, 1, 2} and (frame["word"].str.lower() == "bank").sum() == 3 * 2
    _, words = lens.explain(tiny, TEXT, method="attention", return_data=True)
    attentions, _, tokens = reference(tiny, TEXT)
    # raw attention method: the [CLS] row of the last layer, averaged over heads; every word here is one piece
    cls_row = attentions[-1, :, 0].mean(0)
    assert list(words["text"]) == tokens[1:-1]
    np.testing.assert_allclose(words["score"], cls_row[1:-1], atol=1e-5)
    _, norms = lens.attention_norms(tiny, TEXT, layer=1, head=3, query=2, return_data=True)
    raw = norms[norms["measure"] == norms["measure"].iloc[0]]["share"].to_numpy()
    np.testing.assert_allclose(raw, attentions[1, 3, 2], atol=1e-5)


def test_cls_by_feature_frame_is_the_core_result(tiny, tmp_path):
    from core import lens
    from core.analyses.head_features import CLS_FEATURE_TITLES, CLS_FEATURES

    treebank = tmp_path / "t.conllu"
    treebank.write_text("1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
                        "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\n4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n")
    _, frame = lens.cls_by_feature(tiny, str(treebank), return_data=True)
    attentions, _, tokens = reference(tiny, "the cat sat .")
    row = attentions[-1, :, 0]  # one piece per word: [CLS] the cat sat . [SEP]
    expect = {"noun": row[:, 2], "verb": row[:, 3], "subject": row[:, 2], "cls": row[:, 0], "sep": row[:, 5],
              "punct": row[:, 4]}
    for f in CLS_FEATURES:
        shown = frame[frame["definition"] == CLS_FEATURE_TITLES[f]].sort_values("head")["share"].to_numpy(dtype=float)
        if f in expect:
            np.testing.assert_allclose(shown, expect[f], atol=1e-5)
        else:
            assert np.isnan(shown).all()


def test_view_draws_a_lesson_step(tiny):
    from core import lens

    # a URL's layer 2 (1..L, core.numbering) is the notebook API's array index 1
    steps = lens.view("attention", {"model": tiny, "a": TEXT, "layer": "2", "heads": "0,2", "unknown": "x"})
    assert len(steps) == 1
    chart, caption = steps[0]
    same = lens.head_view(tiny, TEXT, layer=1, heads=[0, 2])
    assert chart.to_dict() == same.to_dict() and caption
    assert len(lens.view("masked", {"model": tiny, "a": "the [MASK] sat ."})) == 2
    inside = lens.view("attention", {"model": tiny, "a": TEXT, "inside_layer": "2", "inside_head": "3", "inside_query": "2"})
    assert len(inside) == 3
    assert inside[2][0].to_dict() == lens.attention_norms(tiny, TEXT, layer=1, head=3, query=2).to_dict()
    assert lens.view("home", {"model": tiny}) == [] and lens.view("attention", {"model": tiny}) == []


def test_notebook_renderer_is_offline(tiny):
    import altair as alt

    from core import lens

    assert alt.renderers.active == lens.RENDERER
    bundle = lens.head_view(tiny, TEXT)._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    page = bundle["text/html"]
    # Sandboxed without allow-same-origin: a script in the chart's data could not reach the notebook's origin.
    assert page.startswith('<iframe sandbox="allow-scripts" srcdoc=') and "allow-same-origin" not in page
    import html

    inner = html.unescape(page.split('srcdoc="', 1)[1].split('" style=', 1)[0])
    assert "vegaEmbed" in inner and len(inner) > 500_000  # the libraries are inside, not fetched
    assert not re.findall(r"<script[^>]+src\s*=", inner, flags=re.I)
    assert not re.findall(r"<link[^>]+href\s*=\s*[\"']?https?:", inner, flags=re.I)


def test_tour_notebook_runs_top_to_bottom(tiny, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(REPO / "notebooks" / "tour.ipynb", as_version=4)
    env = {"BERTLENS_TOUR_MODEL": tiny, "BERTLENS_REPO": str(REPO)}
    os.environ.update(env)  # the kernel inherits the environment; the autouse fixture's cache variable too
    try:
        NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for key in env:
            os.environ.pop(key, None)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    charts = [o for o in outputs if "text/html" in o.get("data", {}) and o["data"]["text/html"].startswith("<iframe")]
    assert len(charts) >= 9
    last = notebook.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "deck.html" in last and "report.pdf" in last



LONG = " ".join(["the cat sat on the mat ."] * 20)  # far over the tiny model's 64 positions
VIEWS = {  # each view, and the text it reads for a sentence t
    "head_view": (lambda lens, m, t: lens.head_view(m, t), lambda t: t),
    "model_view": (lambda lens, m, t: lens.model_view(m, t), lambda t: t),
    "neuron_view": (lambda lens, m, t: lens.neuron_view(m, t), lambda t: t),
    "attention_norms": (lambda lens, m, t: lens.attention_norms(m, t), lambda t: t),
    "fill_mask": (lambda lens, m, t: lens.fill_mask(m, "the [MASK] sat on " + t), lambda t: "the [MASK] sat on " + t),
    "layerwise_pca": (lambda lens, m, t: lens.layerwise_pca(m, [t, "a dog ran ."]), lambda t: t),
    "explain": (lambda lens, m, t: lens.explain(m, t, method="attention"), lambda t: t),
}


@pytest.mark.parametrize("name", VIEWS)
def test_a_view_of_a_cut_input_warns_in_the_notebook(name, tiny):
    """Issue 32: the notebook API drew a long input cut to the model's length without a word. Now it warns with
    the pages' notice, the count being the tokenizer's own; a short input draws without it."""
    from transformers import BertTokenizerFast

    from core import lens

    draw, read = VIEWS[name]
    dropped = len(BertTokenizerFast.from_pretrained(tiny)(read(LONG))["input_ids"]) - 64
    assert dropped > 50
    for text, expected in ((LONG, [f"The input is longer than the model reads (64 tokens): {dropped} word pieces at "
                                   "its end were cut off and are not part of this view."]), (TEXT, [])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            draw(lens, tiny, text)
        assert [str(w.message) for w in caught if "cut off" in str(w.message)] == expected
        # said under the notebook cell: the line that called core.lens, not a line inside it
        assert {w.filename for w in caught if "cut off" in str(w.message)} <= {__file__}


@pytest.mark.parametrize("protocol", ["bertlens", "ethayarajh"])
def test_anisotropy_of_words_seen_once_warns_instead_of_a_silent_nan(tiny, protocol):
    """Issue 48: lens.anisotropy(model, ["a b c", "d e f"]) gave NaN self-similarity and no word. Each word here
    occurs once, so self-similarity is undefined: the profile, the notebook, the CLI's JSON and table say so."""
    import warnings as python_warnings

    from core import lens
    from core.analyses import anisotropy as an
    from core.data.corpus import corpus_of

    sentences = ["the cat sat", "a dog ran"]  # six different words (word pieces), each in one sentence
    with python_warnings.catch_warnings(record=True) as caught:
        python_warnings.simplefilter("always")
        _, frame = lens.anisotropy(tiny, sentences, protocol=protocol, return_data=True)
    assert frame[frame["measure"] == "self_similarity"]["value"].isna().all()
    profile = an.measure_corpus(lens.load(tiny), corpus_of(sentences), an.AnisotropySettings(protocol=protocol))
    assert profile.words == () and profile.most_word_contexts == 1
    unit = "token" if protocol == "ethayarajh" else "word"
    contexts = "occurrences" if protocol == "ethayarajh" else "sentences"
    (warning,) = profile.warnings
    assert warning.startswith(f"No {unit} occurs in 5 or more {contexts} (the most any {unit} has here is 1), so "
                              "self-similarity")
    assert [str(w.message) for w in caught if "No " in str(w.message)] == [f"{tiny}: {warning}"]
    assert [w.filename for w in caught if "No " in str(w.message)] == [__file__]  # the cell, past lens.twin
    assert profile.to_json()["warnings"] == [warning]
    # min_contexts=2 on a corpus where "the" repeats: the measure is defined and nothing is said
    defined = an.measure_corpus(lens.load(tiny), corpus_of(["the cat sat", "the dog ran"]),
                                an.AnisotropySettings(protocol=protocol, min_contexts=2))
    assert defined.words == ("the",) and defined.warnings == () and np.isfinite(defined.self_similarity).all()


def test_cli_anisotropy_prints_the_warning_above_its_table(tiny, tmp_path, capsys):
    from core.__main__ import main

    corpus = tmp_path / "once.txt"
    corpus.write_text("the cat sat\na dog ran\n")
    assert main(["anisotropy", "--model", tiny, "--corpus", str(corpus), "--pairs", "10", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "warning: No word occurs in 5 or more sentences (the most any word has here is 1)" in out
    assert out.index("warning: No word") < out.index("layer\t")
