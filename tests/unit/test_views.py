"""core.views: the view registry (issue 38): each view's page, URL params (issue 20, point 1) and CLI commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import views

REPO = Path(__file__).resolve().parents[2]
APP_SOURCES = "\n".join(p.read_text() for p in (REPO / "app_pages").rglob("*.py"))


def test_every_view_has_its_page_file_and_one_name_and_url_path():
    found = views.all_views()
    assert len(found) == 14 and found[0].url_path == "" and found[0].name == "home"
    assert len({v.name for v in found}) == len({v.url_path for v in found}) == len(found)
    for view in found:
        assert (REPO / view.page).is_file(), view.page
        assert views.page_file(view.url_path) == view.page and views.get(view.name) is view
        assert view.title and view.icon.startswith(":material/") and view.summary.count(". ") >= 1, view.name
    assert views.step_pages() == tuple(v.url_path for v in found if v.url_path not in ("lessons", "present"))
    with pytest.raises(KeyError):
        views.get("no-such-page")


def test_registry_is_well_formed():
    for view in views.all_views():
        names = [p.name for p in view.params]
        keys = [p.key for p in view.params]
        assert len(set(names)) == len(names), view.name
        assert len(set(keys)) == len(keys), view.name
        for p in view.params:
            assert p.type in views.TYPES
            assert p.name not in views.SHARED and p.name not in views.IGNORED
            # The key's last part is written in a page (catches a typo that would restore into nothing).
            assert p.key.rsplit(".", 1)[-1] in APP_SOURCES, p.key


def test_every_cli_subcommand_belongs_to_exactly_one_view_or_to_the_utilities():
    from core.__main__ import build_parser

    parser = build_parser()
    (subcommands,) = [a.choices for a in parser._subparsers._group_actions]
    owned = [c for v in views.all_views() for c in views.commands_of(v.name)] + list(views.UTILITIES)
    assert len(owned) == len(set(owned)), sorted(c for c in owned if owned.count(c) > 1)
    assert set(owned) == set(subcommands)


def test_views_json_has_exactly_the_documented_keys(capsys):
    from core.__main__ import main

    assert main(["views", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert set(listing) == {"views", "utilities", "analyses"} and listing["utilities"] == list(views.UTILITIES)
    assert [a["name"] for a in listing["analyses"]] == [a.name for a in views.all_analyses()]
    assert [v["url_path"] for v in listing["views"]] == [v.url_path for v in views.all_views()]
    for shown, view in zip(listing["views"], views.all_views()):
        assert set(shown) == {"name", "title", "url_path", "commands", "params"}
        assert shown["commands"] == list(views.commands_of(view.name))
        assert [views.Param(**{**p, "choices": tuple(p["choices"]) if p["choices"] else None,
                               "aliases": tuple(tuple(pair) for pair in p["aliases"])}) for p in shown["params"]] \
            == list(views.params_of(view.name))  # every Param field, back to the same Param
    assert main(["views"]) == 0
    text = capsys.readouterr().out
    assert all(v.title in text for v in views.all_views()) and "Utilities: models" in text


def _samples(p: views.Param):
    if p.choices:
        return [list(p.choices[:2])] if p.type in ("ints", "strs") else list(p.choices)
    return {
        "str": ["hello world", "A→B, with commas & ünïcode"],
        "int": [int(p.low or 0) - p.shown, int(p.high or 7) - p.shown],  # widget values: the URL adds `shown`
        "float": [0.25],
        "bool": [True, False],
        "ints": [[0, 3, 11], []],
        "strs": [["run-a", "run b"]],
    }[p.type]


@pytest.mark.parametrize("page", [v.url_path for v in views.all_views()])
def test_every_param_round_trips_through_its_url_string(page):
    for p in views.params_of(page):
        for value in _samples(p):
            assert p.parse(p.encode(value)) == value, (page, p.name, value)


def test_encode_then_parse_gives_the_session_back_and_skips_defaults():
    state = {"attention.layer": 3, "attention.heads": [1, 4], "attention.style": "Heatmap",
             "attention.mode": "Head view", "attention.hide_special": True, "unrelated": 1}
    query = views.encode("attention", state)
    # the URL's layer is the one the page shows, 1..L (core.numbering): array index 3 is layer 4
    assert query == {"layer": "4", "heads": "1,4", "style": "Heatmap", "hide_special": "true"}
    restored = views.parse("attention", query)
    assert restored.notices == ()
    assert restored.values == {k: v for k, v in state.items() if k not in ("unrelated", "attention.mode")}


def test_unknown_and_stale_params_become_notices_not_errors():
    restored = views.parse("attention", {"layer": "two", "heads": "1,x", "filter": "C→D", "zoom": "3",
                                         "style": "Heatmap", "model": "m", "a": "text", "embed": "true"})
    assert restored.values == {"attention.style": "Heatmap"}
    text = " ".join(restored.notices)
    assert len(restored.notices) == 4
    for name in ("layer=two", "heads=1,x", "filter=C→D", "“zoom”"):
        assert name in text
    assert views.parse("no-such-page", {"x": "1"}).notices  # an unknown page too, without raising
    assert views.parse("masked", {"top_k": "99"}).values == {}  # out of range


def test_bool_accepts_the_usual_spellings():
    p = views.Param("x", "k", "bool")
    assert [p.parse(s) for s in ("true", "1", "on", "False", "0", "no")] == [True, True, True, False, False, False]
    with pytest.raises(ValueError):
        p.parse("maybe")


def test_the_registry_loads_without_torch_or_chart_libraries():
    """View modules stay light at import: `python -m core views` and the router must not wait for torch."""
    import subprocess
    import sys

    heavy = ("torch", "transformers", "altair", "pandas", "sklearn", "scipy")
    code = f"import sys; from core import views; views.all_views(); print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
