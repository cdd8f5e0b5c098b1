"""The Read-the-layers page's Neurons tab in a real browser on MiniLM: the corpus pass runs from its button, then
the neuron list, the top contexts and the shading over the sentence are drawn, none of them 0 px wide."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHARTS = '[data-testid="stVegaLiteChart"]'
VISIBLE = CHARTS + ':visible'


def test_neurons_tab_runs_its_pass_and_draws_three_charts(page, app_url, browser_model):
    query = urlencode({"model": browser_model, "a": "The bank did not raise its interest rates on Monday.",
                       "neuron_layer": "3", "tab": "Neurons"})
    page.goto(f"{app_url}/layers?{query}")
    wait_for_app(page)
    page.get_by_role("tab", name="Neurons", selected=True).wait_for()  # the link's tab
    page.get_by_role("button", name="Read the neurons of").click()
    page.wait_for_function(f"() => document.querySelectorAll('{CHARTS}').length >= 3", timeout=300_000)
    wait_for_app(page)
    screenshot(page, "neurons_tab")
    assert_no_streamlit_exception(page)
    charts = page.locator(VISIBLE)
    assert charts.count() == 3
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 40, (i, box)
    charts.nth(1).scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    screenshot(page, "neurons_contexts")
    charts.nth(2).scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    screenshot(page, "neurons_sentence")
