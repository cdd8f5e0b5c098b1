"""Issue 45 on the Attention heads page: its tabs are read from the view (core.views.attention.TABS, each tab with
the analyses it shows), the page's renderers must match them, the head views share one default layer and one title,
and a link's sentence filter may be spelled a-b as on the command line."""

from __future__ import annotations

import pytest

from core import numbering, views
from core.views import attention


def test_the_pages_renderers_come_in_the_views_tab_order():
    shuffled = {title: (lambda t=title: t) for title in reversed(attention.TAB_TITLES)}
    ordered = attention.tab_renderers(shuffled)
    assert [title for title, _ in ordered] == list(attention.TAB_TITLES)
    assert [render() for _, render in ordered] == list(attention.TAB_TITLES)
    missing = dict(list(shuffled.items())[1:])
    with pytest.raises(ValueError, match="lists"):
        attention.tab_renderers(missing)
    with pytest.raises(ValueError, match="Extra tab"):
        attention.tab_renderers({**shuffled, "Extra tab": lambda: None})


def test_the_tab_param_offers_the_views_tabs():
    (tab,) = [p for p in views.get("attention").params if p.name == "tab"]
    assert tab.choices == attention.TAB_TITLES and tab.default == attention.TAB_TITLES[0]


def test_every_declared_attention_analysis_sits_in_the_tab_its_title_names():
    tab_of = {name: title for title, names in attention.TABS for name in names}
    assert len(tab_of) == sum(len(names) for _, names in attention.TABS)  # an analysis in one tab only
    declared = views.analyses_of("attention")
    assert {"head-view", "model-view", "neuron", "attention-norms", "attention-norm-shares",
            "pair-attention"} <= {a.name for a in declared}
    for analysis in declared:  # each in one tab; its own title may say more ("Heads over a dataset: statistics …")
        assert analysis.title.startswith(tab_of[analysis.name]), (analysis.name, analysis.title)
        assert analysis.command in views.commands_of("attention")


def test_one_default_layer_and_one_title_for_every_head_view():
    assert [numbering.default_head_layer(n) for n in (1, 2, 3, 6, 12, 24)] == [0, 1, 2, 2, 2, 2]
    assert numbering.head_title(2, [5]) == "Layer 3, head 5"
    assert numbering.head_title(0, (0, 2)) == "Layer 1, heads 0, 2"


def test_a_links_filter_reads_both_spellings():
    for spelling, value in (("a-b", "A→B"), ("A→B", "A→B"), ("b-a", "B→A"), ("all", "all")):
        restored = views.parse("attention", {"filter": spelling, "inside_filter": spelling})
        assert restored.values == {"attention.filter": value, "inside.filter": value} and not restored.notices
    assert views.parse("attention", {"filter": "c-d"}).notices
