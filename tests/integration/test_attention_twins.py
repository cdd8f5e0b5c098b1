"""Issue 45 on the attention analyses: each `core.lens` twin returns what its CLI's `--json` prints (the same keys,
the same numbers), the notebook and the command line take a sentence filter spelled `a-b` and `A→B` alike, the new
`head-view` command draws transformers' own attention, and the neuron view gains bertviz's A/B filter and its
scores and softmax in the notebook's frame."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.__main__ import main
from tests.cli_json import cli_json as printed_json
from tests.conftest import make_tiny_bert

TEXT, TEXT_B = "the cat sat on the mat .", "a dog ran in the park ."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(make_tiny_bert(tmp_path_factory.mktemp("twins-bert"), layers=3, heads=4, seed=3))


def cli_json(capsys, *argv: str) -> dict:
    out = printed_json(capsys, *argv)
    out.pop("truncated", None)  # the command's own note of what a long input lost (the lens warns instead)
    return out


def same_json(lens_json: dict, cli: dict) -> None:
    """The same keys in the same order, the same text, numbers equal to 1e-6 (the CLI prints floats as text)."""
    lens_json = json.loads(json.dumps(lens_json))  # tuples and numpy scalars as the CLI prints them
    lens_json.pop("truncated", None)
    _same(lens_json, cli, "")


def _same(a, b, where: str) -> None:
    assert type(a) is type(b) or {type(a), type(b)} <= {int, float}, where
    if isinstance(b, dict):
        assert list(a) == list(b), where
        for key in b:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-6), where
    else:
        assert a == b, where


def transformers_attentions(folder: str, text: str, text_b: str | None = None):
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    batch = tokenizer(text, text_b, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy(), batch["token_type_ids"][0].numpy()


def test_head_view_twins_agree_and_take_both_spellings(tiny, capsys):
    from core import lens

    cli = cli_json(capsys, "head-view", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--layer", "2",
                   "--heads", "0,3", "--pair-filter", "a-b")
    for spelling in ("a-b", "A→B"):
        data = lens.head_view(tiny, TEXT, TEXT_B, layer=1, heads=[0, 3], pair_filter=spelling, return_data=True)
        same_json(data.to_json(), cli)
    assert cli_json(capsys, "head-view", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--layer", "2",
                    "--heads", "0,3", "--pair-filter", "A→B") == cli
    # against transformers: layer 2 (index 1), heads 0 and 3 averaged, rows of sentence A, columns of sentence B
    attentions, segments = transformers_attentions(tiny, TEXT, TEXT_B)
    expected = attentions[1, [0, 3]].mean(0)[np.ix_(segments == 0, segments == 1)]
    assert cli["layer"] == 2 and cli["heads"] == [0, 3] and cli["pair_filter"] == "A→B"
    np.testing.assert_allclose(np.asarray(cli["weights"]), expected, atol=1e-5)
    assert len(cli["queries"]) == (segments == 0).sum() and len(cli["keys"]) == (segments == 1).sum()


def test_head_view_default_layer_is_the_pages(tiny, tmp_path, capsys):
    from core import lens

    # 3 layers: index 2 (layer 3); a 2-layer model: its last, index 1 (numbering.default_head_layer)
    assert cli_json(capsys, "head-view", "--model", tiny, "--text", TEXT)["layer"] == 3
    two = str(make_tiny_bert(tmp_path / "two", layers=2))
    assert lens.head_view(two, TEXT, return_data=True).to_json()["layer"] == 2
    assert lens.head_view(tiny, TEXT, heads=2, return_data=True).to_json()["heads"] == [2]  # one head, as before
    assert main(["head-view", "--model", tiny, "--text", TEXT, "--layer", "4"]) == 2
    assert "transformer layers are 1..3" in capsys.readouterr().err


def test_model_view_twins_agree_and_take_both_spellings(tiny, capsys):
    from core import lens

    cli = cli_json(capsys, "model-view", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--pair-filter", "b-a",
                   "--pixels", "6", "--scale", "shared")
    for spelling in ("b-a", "B→A"):
        data = lens.model_view(tiny, TEXT, TEXT_B, pair_filter=spelling, pixels=6, scale="shared", return_data=True)
        same_json(data.to_json(), cli)
    assert cli["pair_filter"] == "B→A"


def test_neuron_view_frame_has_the_scores_and_softmax_of_the_json(tiny, capsys):
    from core import lens

    cli = cli_json(capsys, "neuron", "--model", tiny, "--text", TEXT, "--layer", "3", "--head", "1", "--query", "2")
    data = lens.neuron_view(tiny, TEXT, layer=2, head=1, query=2, return_data=True)
    same_json(data.to_json(), cli)
    _, frame = data
    per_key = frame.drop_duplicates("key_order").sort_values("key_order")
    np.testing.assert_allclose(per_key["score"], cli["scores"], atol=1e-6)
    np.testing.assert_allclose(per_key["attention"], cli["attention"], atol=1e-6)
    attentions, _ = transformers_attentions(tiny, TEXT)
    np.testing.assert_allclose(per_key["attention"], attentions[2, 1, 2], atol=1e-5)


def test_neuron_view_filter_keeps_the_other_sentences_keys(tiny, capsys):
    from core import lens

    full = cli_json(capsys, "neuron", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--layer", "2",
                    "--head", "3", "--query", "4")
    cli = cli_json(capsys, "neuron", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--layer", "2",
                   "--head", "3", "--query", "4", "--pair-filter", "a-b")
    _, segments = transformers_attentions(tiny, TEXT, TEXT_B)
    kept = list(np.flatnonzero(segments == 1))
    assert cli["pair_filter"] == "A→B" and cli["key_positions"] == kept and cli["tokens"] == full["tokens"]
    for key in ("keys", "products", "scores", "attention"):  # the rows of the unfiltered view, not renormalised
        np.testing.assert_allclose(np.asarray(cli[key]), np.asarray(full[key])[kept], atol=1e-6, err_msg=key)
    assert sum(cli["attention"]) < 1
    for spelling in ("a-b", "A→B"):
        data = lens.neuron_view(tiny, TEXT, TEXT_B, layer=1, head=3, query=4, pair_filter=spelling, return_data=True)
        same_json(data.to_json(), cli)
        assert set(data[1]["key"]) == {f"{p}·{cli['tokens'][p]}" for p in kept}
    # a query of sentence B under A→B, or a filter without a pair: one plain line, exit 2
    assert main(["neuron", "--model", tiny, "--text", TEXT, "--text-b", TEXT_B, "--query", str(kept[0]),
                 "--pair-filter", "a-b"]) == 2
    assert "not in sentence A" in capsys.readouterr().err
    assert main(["neuron", "--model", tiny, "--text", TEXT, "--pair-filter", "b-b"]) == 2
    assert "needs a sentence pair" in capsys.readouterr().err


def test_attention_norms_and_shares_twins_agree(tiny, tmp_path, capsys):
    from core import lens

    cli = cli_json(capsys, "attention-norms", "--model", tiny, "--text", TEXT)
    same_json(lens.attention_norms(tiny, TEXT, return_data=True).to_json(), cli)
    with pytest.raises(ValueError, match="head 9 does not exist; pick head 0..3"):
        lens.attention_norms(tiny, TEXT, head=9)  # a plain message, not an IndexError from the array
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("the cat sat on the mat .\na dog ran in the park .\nhe sat by the river bank .\n")
    cli = cli_json(capsys, "attention-norm-shares", "--model", tiny, "--corpus", str(corpus), "--limit", "2",
                   "--batch-size", "1")
    data = lens.attention_norm_shares(tiny, str(corpus), limit=2, batch_size=1, return_data=True)
    same_json(data.to_json(), cli)
    assert cli["n_inputs"] == 2
    _draws("attention-norm-shares", data.result)


def test_pair_attention_twins_agree(tiny, data_dir, capsys):
    from core import lens

    cli = cli_json(capsys, "pair-attention", "--model", tiny, "--corpus", "mrpc:test", "--limit", "16", "--top", "3",
                   "--words-only")
    data = lens.pair_attention(tiny, "mrpc:test", limit=16, top=3, words_only=True, return_data=True)
    same_json(data.to_json(), cli)
    assert len(cli["top_heads"]) == 3 and cli["words_only"] is True
    _draws("pair-attention", data.result)


def _draws(name: str, result) -> None:
    from core import views

    for chart, caption in views.analysis(name).charts_function()(result):
        assert chart.to_dict() and caption


@pytest.mark.parametrize("name, inputs, chosen", [
    ("head-view", (TEXT, TEXT_B), {"layer": 0, "heads": "1,2", "pair_filter": "b-a", "word_level": True}),
    ("model-view", (TEXT, TEXT_B), {"pixels": 5, "pair_filter": "a-a"}),
    ("neuron", (TEXT, TEXT_B), {"layer": 2, "head": 1, "query": 9, "pair_filter": "B→A"}),
    ("attention-norms", (TEXT, None), {}),
])
def test_each_declarations_run_and_charts_give_the_lens_result(tiny, name, inputs, chosen):
    """The declaration's run(subject, inputs, settings) is what the lens twin draws, and its charts draw it."""
    from core import lens, views
    from core.model.loading import load_model

    analysis = views.analysis(name)
    settings = analysis.make(chosen)
    result = analysis.run_function()(load_model(tiny, device="cpu"), inputs, settings)
    data = getattr(lens, analysis.lens)(tiny, *inputs, **chosen, return_data=True)
    same_json(data.to_json(), json.loads(json.dumps(result.to_json())))
    charts = analysis.charts_function()
    if charts is not None:
        for chart, caption in charts(result):
            assert chart.to_dict() and caption


def test_a_lesson_steps_inside_head_charts_start_where_the_page_does(tiny):
    """The step's charts read their defaults from the neuron view's declaration, as the page does: query 1 (the
    first word), not 0 as the step's code had its own copy; `inside_filter=a-b` is read too."""
    from core import lens

    steps = lens.view("attention", {"model": tiny, "a": TEXT, "inside_layer": "2"})
    assert steps[1][0].to_dict() == lens.neuron_view(tiny, TEXT, layer=1, query=1).to_dict()
    assert steps[2][0].to_dict() == lens.attention_norms(tiny, TEXT, layer=1, query=1).to_dict()
    paired = lens.view("attention", {"model": tiny, "a": TEXT, "b": TEXT_B, "inside_layer": "2", "inside_query": "3",
                                     "inside_filter": "a-b", "filter": "a-b"})
    assert paired[0][0].to_dict() == lens.head_view(tiny, TEXT, TEXT_B, pair_filter="A→B").to_dict()
    assert paired[1][0].to_dict() == lens.neuron_view(tiny, TEXT, TEXT_B, layer=1, query=3, pair_filter="A→B").to_dict()
