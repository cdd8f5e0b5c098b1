"""The "Heads over a dataset" tab of the attention page in a real browser: run the statistics pass on a few SNLI
pairs, wait for the layer x head heatmap, check the pattern grid, and save a screenshot."""

from __future__ import annotations

import re

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

TAB = "Heads over a dataset"


def test_heads_over_a_dataset(page, app_url, data_dir):
    page.goto(f"{app_url}/attention")
    wait_for_app(page)
    tab = page.get_by_role("tab", name=TAB)
    assert tab.count() == 1, f"the attention page has no '{TAB}' tab (it should call app_pages.widgets.attention_dataset.render())"
    tab.click()
    wait_for_app(page)
    examples = page.get_by_label("Examples", exact=True)
    examples.fill("8")
    examples.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name=re.compile(r"Run .* over 8 examples")).click()
    page.get_by_text(re.compile(r"8 inputs \(8 pairs")).wait_for(timeout=180_000)
    wait_for_app(page)
    chart = page.locator('[data-testid="stVegaLiteChart"]').filter(has=page.locator("canvas, svg")).first
    chart.wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset")

    page.get_by_role("radio", name="Pattern types").or_(page.get_by_role("button", name="Pattern types")).first.click()
    wait_for_app(page)
    page.get_by_text("Example maps of each type").wait_for()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset_patterns")


def test_a_finished_pass_shows_in_a_new_tab(page, browser, app_url, data_dir):
    """Issue 37: a job's result did not appear in a new tab. Run the pass in one tab, open the same link in a new
    one (a new session): the chart is there, and no Run button for the same settings."""
    page.goto(f"{app_url}/attention?tab={TAB.replace(' ', '+')}&heads_n=6")
    wait_for_app(page)
    page.get_by_role("button", name=re.compile(r"Run .* over 6 examples")).click()
    page.get_by_text(re.compile(r"6 inputs \(6 pairs")).wait_for(timeout=180_000)
    wait_for_app(page)

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        tab = context.new_page()
        tab.set_default_timeout(120_000)
        tab.goto(page.url)
        wait_for_app(tab)
        tab.get_by_text(re.compile(r"6 inputs \(6 pairs")).wait_for()
        tab.locator('[data-testid="stVegaLiteChart"]').filter(has=tab.locator("canvas, svg")).first.wait_for()
        assert_no_streamlit_exception(tab)
        screenshot(tab, "attention_dataset_new_tab")
    finally:
        context.close()


def test_syntax_part_draws_its_declared_subtypes_switch(page, app_url, data_dir):
    """The syntactic heads part's "Keep subtypes" switch is drawn from the analysis's declaration (its help the
    CLI's --subtypes help), off by default and disabled under the paper protocol, which always keeps them."""
    page.goto(f"{app_url}/attention?tab={TAB.replace(' ', '+')}&part=Syntactic+heads")
    wait_for_app(page)
    def switch():  # st.toggle: a checkbox input drawn as a switch
        return page.get_by_role("switch", name="Keep subtypes (nmod:poss)").or_(
            page.get_by_role("checkbox", name="Keep subtypes (nmod:poss)")).first

    switch().wait_for()
    assert not switch().is_checked() and switch().is_enabled()
    page.get_by_text("Paper protocol (Clark et al. 2019)").click()
    wait_for_app(page)
    assert not switch().is_enabled()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset_syntax")


def test_ablation_part_offers_the_declared_modes(page, app_server, app_url, tiny_bert_dir, tmp_path, monkeypatch,
                                                 data_dir):
    """The ablation part's "Disable by" choice is drawn from the `ablate` analysis's declaration (the CLI's --mode
    choices and help); a screenshot shows the row it sits in."""
    import random

    from core.training import Recipe, finetune

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))  # the server's own models_cache
    rng = random.Random(1)
    data = tmp_path / "tiny.csv"
    data.write_text("text,label\n" + "".join(f"the {rng.choice(['cat', 'dog'])} sat on the mat,{rng.choice('ab')}\n"
                                             for _ in range(60)))
    finetune(Recipe(model=str(tiny_bert_dir), task=str(data), run_name="ablate_modes", epochs=1, batch_size=16,
                    max_length=16, cpu_threads=1))
    page.goto(f"{app_url}/attention?tab={TAB.replace(' ', '+')}&part=Ablation&run=ablate_modes")
    wait_for_app(page)
    for mode in ("uniform", "mask"):
        page.get_by_role("radio", name=mode).wait_for()
    assert page.get_by_role("radio", name="uniform").is_checked()
    page.get_by_text("mask", exact=True).click()
    wait_for_app(page)
    assert page.get_by_role("radio", name="mask").is_checked()
    assert_no_streamlit_exception(page)
    screenshot(page, "attention_dataset_ablation")
