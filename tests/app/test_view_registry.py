"""Issue 38's "done when": a view is registered once. A throw-away view, one module in a folder added to the
registry's path (no other file edited) with its own tiny page script, shows up in the navigation, the Home page,
`lens.view` and `python -m core views --json`."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from streamlit.testing.v1 import AppTest

from core import lens, views
from core.__main__ import main
from tests.app.conftest import APP_FILE

MODULE = "throwaway_view"


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The view's module and page script in tmp_path; the registry's path extended for this test only."""
    page = tmp_path / "throwaway_page.py"
    page.write_text(textwrap.dedent('''
        import streamlit as st

        st.title("Throw-away page")
        st.write(f"colour is {st.session_state.get('throwaway.colour')}")
    '''))
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / f"{MODULE}.py").write_text(textwrap.dedent(f'''
        from core.views import Param, View


        def charts(lens, model, a, b, params):
            return [(lens.__name__, f"{{model}} {{a}} {{params.get('colour')}}")]


        VIEW = View(name="throwaway", title="Throw-away view", url_path="throwaway", icon=":material/science:",
                    page={str(page)!r}, order=999, summary="A view a test made. It lives in one module.",
                    params=(Param("colour", "throwaway.colour", "str", "red", ("red", "blue")),),
                    charts=charts)
    '''))
    monkeypatch.setattr(views, "__path__", [*views.__path__, str(tmp_path / "views")])
    yield page
    sys.modules.pop(f"core.views.{MODULE}", None)


def test_a_view_in_one_module_reaches_navigation_home_lens_and_cli(throwaway, tiny_bert_dir, capsys):
    assert views.get("throwaway").title == "Throw-away view"

    at = AppTest.from_file(APP_FILE, default_timeout=120)
    at.session_state["model"] = str(tiny_bert_dir)
    at.run()  # Home
    assert not at.exception, at.exception
    links = {link.proto.label: link.proto.page for link in at.get("page_link")}
    # st.page_link raises for a page the navigation lacks: every link is a page the router registered
    assert links == {v.title: v.url_path for v in views.all_views() if v.url_path}
    assert links["Throw-away view"] == "throwaway"
    assert "A view a test made. It lives in one module." in [c.value for c in at.caption]

    at.query_params.update({"colour": "blue"})
    at.switch_page(str(throwaway)).run()  # the navigation runs the view's own page, its URL param restored
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Throw-away page"]
    assert "colour is blue" in [m.value for m in at.markdown]

    assert lens.view("/throwaway", {"model": "m", "a": "hi", "colour": "blue"}) == [("core.lens", "m hi blue")]

    assert main(["views", "--json"]) == 0
    (listed,) = [v for v in json.loads(capsys.readouterr().out)["views"] if v["name"] == "throwaway"]
    assert listed["url_path"] == "throwaway" and listed["commands"] == []  # its analyses' commands: none declared
    assert listed["params"] == [{"name": "colour", "key": "throwaway.colour", "type": "str", "default": "red",
                                 "choices": ["red", "blue"], "low": None, "high": None, "shown": 0,
                                 "aliases": []}]


def test_without_it_the_registry_is_the_apps_own():
    assert "throwaway" not in [v.name for v in views.all_views()]
    assert lens.view("throwaway", {"a": "hi"}) == []  # an unknown view draws nothing, as before
