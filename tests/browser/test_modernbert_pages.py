"""Issue 46: every page of the registry opens on a tiny random ModernBERT (tests/tiny_modernbert.py, opened through
?model=<folder>) without an error and draws a chart: the pages that draw from the sentence at once, then those that
wait for a Run (anisotropy, the explorer, a study) after it, and the fine-tuning page with a ModernBERT run.
Home and Lessons draw no chart on any model."""

from __future__ import annotations

import random
from urllib.parse import urlencode

from tests.browser.conftest import assert_no_streamlit_exception, each_page, screenshot, wait_for_app
from tests.tiny_modernbert import make_tiny_modernbert

CHART = '[data-testid="stVegaLiteChart"]'
DRAWN = f"{CHART} canvas, {CHART} svg"
NO_CHART = {"home", "lessons"}
# Drawn only after the page's Run button: (page, the query it opens with, the buttons pressed in turn).
AFTER_RUN = {
    "anisotropy": ({}, ("Run on 1 model",)),
    "explorer": ({"n": "40"}, ("Run this model",)),
    "reproduce": ({"study": "ethayarajh"}, ("Measure the sidebar's model", "Run the study")),
    "layer_knowledge": ({"corpus": "ud:dev:60", "eval_corpus": "ud:test:60"}, ("Run",)),
}


def _charts(page) -> int:
    return page.locator(DRAWN).count()


def test_every_page_opens_on_modernbert_with_a_chart(page, app_server, app_url, tmp_path, monkeypatch):
    folder = make_tiny_modernbert(tmp_path / "tiny-modernbert")
    sentences = {"model": str(folder), "a": "The cat sat on the [MASK] because it was tired.", "b": "It was sleepy."}
    # A ModernBERT classification run in the server's own models_cache, for the fine-tuning page.
    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    from core.training import Recipe, finetune

    rng = random.Random(0)
    data = tmp_path / "animals.csv"
    data.write_text("text,label\n" + "".join(
        f"the {a} sat on the mat,{a}\n" for a in (rng.choice(["cat", "dog"]) for _ in range(60))))
    finetune(Recipe(model=str(folder), task=str(data), run_name="modernbert-run", epochs=2, lr=2e-3,
                    batch_size=16, max_length=16, cpu_threads=1))

    missing = []
    for view in each_page(page, app_url, urlencode(sentences)):
        if view.name in NO_CHART or view.name in AFTER_RUN:
            continue
        try:
            page.wait_for_selector(DRAWN, timeout=60_000)
        except Exception:
            missing.append(view.name)
        screenshot(page, f"modernbert_{view.name}")
    for name, (extra, buttons) in AFTER_RUN.items():
        page.goto(f"{app_url}/{name}?{urlencode({**sentences, **extra})}")
        wait_for_app(page)
        if name == "reproduce":
            page.get_by_role("button", name=buttons[0]).click()
            wait_for_app(page)
            items = page.get_by_label("Items (0 = default)")
            items.fill("40")
            items.press("Enter")
            wait_for_app(page)
            buttons = buttons[1:]
        for button in buttons:
            page.get_by_role("button", name=button, exact=True).click()
            wait_for_app(page)
        try:
            page.wait_for_selector(DRAWN, timeout=300_000)
        except Exception:
            missing.append(name)
        wait_for_app(page)
        assert_no_streamlit_exception(page)
        screenshot(page, f"modernbert_{name}")
    assert missing == []


def test_the_neuron_view_of_a_local_layer_shows_its_window(page, app_url, tmp_path):
    folder = make_tiny_modernbert(tmp_path / "tiny-modernbert")
    query = urlencode({"model": str(folder), "a": "The cat sat on the mat because it was tired.",
                       "tab": "Inside a head", "inside_layer": "2", "inside_query": "6"})  # layer 2 (1-based): local
    page.goto(f"{app_url}/attention?{query}")
    wait_for_app(page)
    page.get_by_role("heading", name="Neuron view").wait_for()
    page.wait_for_selector(DRAWN)
    page.get_by_role("heading", name="Neuron view").scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "modernbert_neuron_local")
    page.get_by_text("is a local (sliding-window) layer").first.wait_for(timeout=30_000)
    page.wait_for_selector(DRAWN)
    assert_no_streamlit_exception(page)
