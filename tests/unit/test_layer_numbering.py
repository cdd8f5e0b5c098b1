"""One layer numbering everywhere (issue 48, core.numbering): 0 = the embeddings, 1..L = the transformer layers, in
chart data and axis titles, captions, CLI help, JSON and URLs. Built from small arrays, no model: a head chart of a
6-layer model must show layers 1..6 whichever chart it is, and say so the same way."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from core import numbering
from core.charts import attention as attention_charts
from core.charts import head_studies, inside_head, pair_attention, patching, timelapse

L, H = 6, 12  # a MiniLM-L6-sized model: the "labels layers 0-5 in the heatmap and 1-6 below"
SHOWN = list(range(1, L + 1))


def _titles(spec) -> list[str]:
    """Every axis title of a chart's Vega-Lite dict whose field is "layer"."""
    found, stack = [], [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("field") == "layer" and "title" in node:
                found.append(node["title"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _survey(protocol: str = "bertlens"):
    rng = np.random.default_rng(0)
    stats = {name: rng.random((L, H)) for name in ("cls", "sep", "entropy")}
    counts = rng.integers(0, 5, size=(L, H, 5))
    return SimpleNamespace(stat=stats.__getitem__, layer_means=lambda name: stats[name].mean(axis=1), protocol=protocol,
                           model="all-MiniLM-L6-v2", dominant_pattern=counts.argmax(axis=-1), pattern_counts=counts,
                           n_examples=10, pattern_share={"vertical": 1.0})


@pytest.mark.parametrize("protocol", ["bertlens", "clark"])
def test_statistics_heatmap_and_layer_means_line_share_one_numbering(protocol):
    survey = _survey(protocol)
    for name in ("cls", "entropy"):
        heat, heat_frame = attention_charts.statistic_chart(survey, name, "t")
        line, line_frame = attention_charts.layer_means_chart(survey, name, "t")
        measured = line_frame[line_frame["series"].str.startswith("measured")]
        assert sorted(set(heat_frame["layer"])) == sorted(set(measured["layer"])) == SHOWN
        assert set(_titles(heat.to_dict())) == set(_titles(line.to_dict())) == {numbering.BLOCK_AXIS}


def test_every_head_chart_numbers_layers_from_one():
    rng = np.random.default_rng(1)
    grid = rng.random((L, H))
    frames = {
        "pattern types": attention_charts.pattern_frame(_survey()),
        "attention change": attention_charts.change_chart(SimpleNamespace(cosine=grid, model_a="a", model_b="b"))[1],
        "ablation": attention_charts.ablation_chart(SimpleNamespace(head_delta=grid - 0.5, layer_delta=grid[:, 0],
                                                                    mode="mask"))[1],
        "head studies": head_studies._grid(grid, "m", "score"),
        "patching": patching.patching_frame(SimpleNamespace(patched=grid, recovered=grid, over="heads",
                                                            tokens=())),
        "time-lapse": timelapse.attention_frame(SimpleNamespace(frames=[SimpleNamespace(attention_change=grid)]), 0),
        "inside a head": inside_head.shares_frame(SimpleNamespace(raw=grid[:, :4], norm=grid[:, :4],
                                                                  categories=("[CLS]", "[SEP]", "punct", "other"))),
        "paraphrase heads": pair_attention.separation_frame(SimpleNamespace(
            labels=("equivalent", "not equivalent"), auc=rng.random((2, L, H)), mean=rng.random((2, 2, L, H)))),
    }
    for name, frame in frames.items():
        assert sorted(set(frame["layer"])) == SHOWN, name


def test_model_view_click_and_inside_a_head_say_the_same_layer():
    from core.analyses.model_view import model_view

    attentions = np.full((L, 2, 4, 4), 0.25, dtype=np.float32)
    view = model_view(attentions, ["[CLS]", "a", "b", "[SEP]"], [0, 0, 0, 0])
    assert sorted(set(attention_charts.model_view_frame(view)["layer"])) == SHOWN
    assert set(_titles(attention_charts.model_view_grid(view).to_dict())) == {numbering.BLOCK_AXIS}
    shares = SimpleNamespace(raw=np.zeros((L, 4)), norm=np.zeros((L, 4)), categories=("a", "b", "c", "d"),
                             model="m", n_inputs=3)
    titles = _titles(inside_head.shares_chart(shares)[0].to_dict())
    assert set(titles) == {numbering.BLOCK_AXIS} and not any("0 = first transformer layer" in t for t in titles)


def test_syntax_caption_names_no_layer_a_six_layer_model_lacks():
    """The bertlens caption said "Heads are named from 0 (L7 H9)", a head a 6-layer model does not have; the Clark
    caption's example is the paper's BERT-base head, and says so."""
    assert "L7" not in attention_charts.syntax_note("bertlens") and "L1 H0" in attention_charts.syntax_note("bertlens")
    clark = attention_charts.syntax_note("clark")
    assert "8-10" in clark and "BERT-base" in clark
    from core.analyses.heads import head_label

    assert head_label(0, 5) == "L1 H5" and head_label(0, 5, "clark") == "1-6"


def test_attention_urls_read_the_layer_the_page_shows():
    from core import views

    restored = views.parse("attention", {"layer": "3", "inside_layer": "1"})
    assert restored.values == {"attention.layer": 2, "inside.layer": 0} and not restored.notices
    assert views.encode("attention", {"attention.layer": 2})["layer"] == "3"
    assert views.parse("attention", {"layer": "0"}).notices  # 0 is the embeddings: no attention layer
    assert views.parse("pca", {"layer": "0"}).values == {"pca.layer": 0}  # a hidden-states layer keeps 0


def test_built_in_lessons_use_layers_their_model_has():
    from core import lessons

    for path in sorted(lessons.BUILTIN_DIR.glob("*.json")):
        for step in lessons.load(path).steps:
            if step.page == "attention" and "layer" in step.params:
                assert 1 <= int(step.params["layer"]) <= L, (path.name, step.title)  # the local MiniLM has 6


def test_cli_help_and_json_number_layers_as_the_charts(capsys):
    from core.__main__ import build_parser

    def help_of(*command):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*command, "--help"])
        return " ".join(capsys.readouterr().out.split())

    assert "1..L" in help_of("neuron") and "first transformer layer" in help_of("neuron")
    assert "0-based" not in help_of("patch") and "0-based" not in help_of("finetune")
    assert "freeze layers" in help_of("finetune").lower() and "freeze layers 1..N" in help_of("bias")
    from core.analyses.head_clustering import HeadMap
    from core.analyses.heads import STAT_NAMES

    head_map = HeadMap(model="m", n_layers=2, n_heads=2, distances=np.zeros((4, 4)), points=np.zeros((4, 2)),
                       stats=np.zeros((len(STAT_NAMES), 2, 2)), n_examples=1)
    assert sorted({h["layer"] for h in json.loads(json.dumps(head_map.to_json()))["heads"]}) == [1, 2]


def test_a_typed_layer_outside_the_model_names_its_range():
    assert numbering.block_index(6, L) == 5
    for wrong in (0, 7):
        with pytest.raises(ValueError, match=r"--layer .*1\.\.6"):
            numbering.block_index(wrong, L, "--layer")


def test_freeze_layers_are_typed_as_the_charts_number_them():
    from core.training.recipe import parse_frozen

    assert parse_frozen("12") == ((11,), False)
    assert parse_frozen("0-2,6") == ((0, 1, 5), True)  # 0 = the embeddings
    assert parse_frozen("") == ((), False)
