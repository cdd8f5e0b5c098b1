"""One declaration per analysis (core.contract): every front end is made from it, and this test is made from the
registry, so a new analysis is checked without touching it: its settings are CLI options and core.lens keyword
arguments with the same defaults, its URL parameters carry the same defaults and bounds, and every analysis
subcommand is declared."""

from __future__ import annotations

import argparse
import inspect
import json
from dataclasses import dataclass

import pytest

from core import contract, views
from core.contract import Analysis, setting


def _parser_of(command: str) -> argparse.ArgumentParser:
    from core.__main__ import build_parser

    (subcommands,) = [a.choices for a in build_parser()._subparsers._group_actions]
    return subcommands[command]


ANALYSES = views.all_analyses()


def test_every_analysis_subcommand_is_declared_once():
    from core.__main__ import build_parser

    (subcommands,) = [a.choices for a in build_parser()._subparsers._group_actions]
    declared = [a.command for a in ANALYSES]
    assert len(declared) == len(set(declared))
    assert sorted(set(subcommands) - set(views.UTILITIES)) == sorted(declared)
    owners = [a.view for a in ANALYSES]  # each command's view: every one registered (all_analyses checks it)
    assert set(owners) <= {v.name for v in views.all_views()}


def test_a_view_that_lists_its_tabs_lists_each_of_its_analyses_in_one():
    """A view whose TABS name each tab's analyses (attention, finetune): the page draws its tabs from them, so every
    analysis of the view sits in exactly one tab and every name there is one of the view's analyses."""
    import importlib

    checked = 0
    for view in views.all_views():
        tabs = getattr(importlib.import_module(f"core.views.{view.name}"), "TABS", ())
        if not tabs or not isinstance(tabs[0], tuple):
            continue
        listed = [name for _, names in tabs for name in names]
        assert sorted(listed) == sorted(a.name for a in views.analyses_of(view.name)), view.name
        checked += 1
    assert checked >= 3  # attention, finetune, explorer


@pytest.mark.parametrize("analysis", ANALYSES, ids=[a.name for a in ANALYSES])
def test_settings_are_cli_options_with_the_declared_defaults(analysis: Analysis):
    parser = _parser_of(analysis.command)
    actions = {option: a for a in parser._actions for option in a.option_strings}
    for f in analysis.fields:
        if f.option is None:
            continue
        action = actions.get(f.option)
        assert action is not None and action.dest == f.name, (analysis.name, f.option)
        assert action.default == f.default and parser.get_default(f.name) == f.default, (analysis.name, f.name)


@pytest.mark.parametrize("analysis", ANALYSES, ids=[a.name for a in ANALYSES])
def test_settings_are_lens_keyword_arguments_with_the_declared_defaults(analysis: Analysis):
    from core import lens

    function = getattr(lens, analysis.lens)
    assert getattr(function, "analysis", None) is analysis, f"lens.{analysis.lens} is not made with lens.twin"
    parameters = inspect.signature(function).parameters
    for f in analysis.fields:
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        assert f.name in parameters and parameters[f.name].default == default, (analysis.lens, f.name)
        assert f.name in (function.__doc__ or ""), (analysis.lens, f.name)


@pytest.mark.parametrize("analysis", ANALYSES, ids=[a.name for a in ANALYSES])
def test_url_parameters_carry_the_declared_defaults_and_bounds(analysis: Analysis):
    params = {p.name: p for p in views.get(analysis.view).params}
    for f in analysis.fields:
        param = params.get(f.url_name or "")
        if param is None or param.key.rsplit(".", 1)[-1] not in (f.name, f.url_name):
            continue  # the view shows this setting under another name, or not in its link
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        assert (param.type, param.default, param.choices) == (f.type, default, f.meta.choices), (analysis.name, f.name)
        assert param.low == (None if f.meta.low is None else f.meta.low + f.meta.shown), (analysis.name, f.name)
        assert param.high == (None if f.meta.high is None else f.meta.high + f.meta.shown), (analysis.name, f.name)


def test_the_notebook_guide_names_every_lens_twin():
    from core.settings import REPO_ROOT

    text = (REPO_ROOT / "docs" / "notebook.md").read_text(encoding="utf-8")
    assert [a.lens for a in ANALYSES if f"`{a.lens}`" not in text] == []


def test_views_json_lists_every_analysis_with_its_settings(capsys):
    from core.__main__ import main

    assert main(["views", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["analyses"]
    assert [a["name"] for a in listed] == [a.name for a in ANALYSES]
    for shown, analysis in zip(listed, ANALYSES):
        assert {"name", "view", "command", "lens", "settings"} <= set(shown)
        assert [s["name"] for s in shown["settings"]] == [f.name for f in analysis.fields]
        for s in shown["settings"]:
            assert set(s) == {"name", "type", "default", "low", "high", "choices", "help"} and s["help"]


# ---- the contract itself, on a throw-away declaration -------------------------------------------------------------

@dataclass(frozen=True)
class _Settings:
    layer: int = setting(0, "a transformer layer", low=0, high=11, shown=1)
    pair_filter: str = setting("all", "which pairs", choices=("all", "a-b", "b-a"), aliases={"A→B": "a-b", "B→A": "b-a"})
    scale: float = setting(1.0, "a scale", low=0.0, high=10.0)
    heads: tuple = setting((0,), "heads", low=0, high=11)
    words: bool = setting(False, "whole words")
    bookkeeping: int = 7  # not a setting: no front end offers it


_TOY = Analysis(name="toy", view="attention", command="toy", lens="toy", settings=_Settings)


def test_make_checks_every_value_by_its_declaration():
    assert _TOY.make() == _Settings()
    made = _TOY.make(layer="3", pair_filter="A→B", scale=2, heads="1,2", words="true")
    assert made == _Settings(layer=3, pair_filter="a-b", scale=2.0, heads=(1, 2), words=True)
    assert [f.name for f in _TOY.fields] == ["layer", "pair_filter", "scale", "heads", "words"]
    assert contract.SettingField("target", "", contract.Setting("a class", type="str")).check(1) == "1"
    for bad, words in [({"layer": 12}, "layer must be within 0…11"), ({"layer": 1.5}, "whole number"),
                       ({"pair_filter": "a-a"}, "one of all, a-b, b-a"), ({"scale": float("nan")}, "scale must be a number"),
                       ({"heads": "1,99"}, "heads must be within"), ({"words": "maybe"}, "true or false"),
                       ({"colour": "red"}, "no setting 'colour'")]:
        with pytest.raises(ValueError, match=words):
            _TOY.make(**bad)


def test_the_cli_options_and_url_params_are_made_from_the_declaration():
    from core.commands import add_settings_arguments, settings_from_args

    parser = argparse.ArgumentParser(exit_on_error=False)
    add_settings_arguments(parser, _TOY)
    args = parser.parse_args(["--layer", "4", "--pair-filter", "A→B", "--heads", "2,3", "--words"])
    assert settings_from_args(_TOY, args) == _Settings(layer=3, pair_filter="a-b", heads=(2, 3), words=True)
    assert settings_from_args(_TOY, parser.parse_args([])) == _Settings()
    with pytest.raises(argparse.ArgumentError, match="layer must be within 1…12, got 13"):  # as the user counts
        parser.parse_args(["--layer", "13"])  # layers are numbered 1..12 on the command line
    layer, pair_filter, *_ = views.analysis_params(_TOY, "toy.")
    assert (layer.name, layer.key, layer.low, layer.high, layer.shown) == ("layer", "toy.layer", 1, 12, 1)
    assert layer.parse("12") == 11 and layer.encode(11) == "12"
    assert pair_filter.parse("A→B") == "a-b"  # a link may use either spelling, as the notebook and the CLI
    assert contract.bound_text(1_000_000) == "1000000" and contract.bound_text(0.5) == "0.5"
