"""The fine-tuning page's time-lapse player in a real browser (issue 35): a MiniLM-shaped run cancelled after 6 of
its 10 frames, opened from a link at one frame; Play moves the slider on by itself. Screenshots of both."""

from __future__ import annotations

import json
import time

import numpy as np

from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

RUN = "minilm-timelapse-cancelled"
LAYERS, HEADS, STEPS = 6, 12, list(range(0, 451, 50))


def frames(measured: int) -> list[dict]:
    """Frames shaped like MiniLM's, the top layers moving most (as fine-tuning does; the numbers are made up)."""
    rng = np.random.default_rng(0)
    depth = np.arange(LAYERS + 1) / LAYERS
    moved = rng.uniform(0.3, 1, (LAYERS, HEADS)) * (np.arange(1, LAYERS + 1) / LAYERS)[:, None]
    out = []
    for step in STEPS[:measured]:
        f = step / STEPS[-1]
        out.append({"step": step, "loss": 1.1 - 0.5 * f, "dev_accuracy": 0.33 + 0.4 * f,
                    "rsa": (1 - 0.5 * f * depth ** 2).tolist(), "cka": (1 - 0.35 * f * depth ** 1.5).tolist(),
                    "anisotropy": (0.3 + 0.05 * np.arange(LAYERS + 1) + 0.1 * f * depth).tolist(),
                    "attention_change": (1 - 0.4 * f * moved).tolist(), "measure_seconds": 2.0})
    return out


def cancelled_run(cache) -> None:
    folder = cache / "runs" / f".{RUN}.cancelled"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.json").write_text(json.dumps({"model": "all-MiniLM-L6-v2", "task": "snli", "run_name": RUN,
                                                    "objective": "classify", "epochs": 1, "timelapse": 10}))
    (folder / "status.json").write_text(json.dumps({"state": "cancelled", "phase": "cancelled", "queued_at": time.time(),
                                                    "error": "cancelled by the user", "losses": []}))
    (folder / "timelapse.json").write_text(json.dumps({
        "steps": STEPS, "probe": "snli:dev:100", "seed": 0, "frames": frames(6), "dev_examples": 200,
        "measure_seconds": 12.0, "train_seconds": 61.0}))


def slider_value(page) -> str:
    return page.locator('[data-testid="stSlider"]').filter(has_text="Training step").first.inner_text()


def show_player(page) -> None:
    """Scroll the main column so the player (slider and charts) fills the screenshot."""
    page.get_by_text("Run with a time-lapse").first.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)


def test_the_player_opens_at_the_links_frame_and_plays(page, app_url, app_server):
    cancelled_run(app_server.log.parent)
    page.goto(f"{app_url}/finetune?timelapse={RUN}&frame=150")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    heading = page.locator('[data-testid="stMain"]').get_by_role("heading", name="Time-lapse").first
    heading.wait_for()
    charts = page.locator('[data-testid="stVegaLiteChart"]:visible')
    page.get_by_text("Similarity to the starting model at step 150").first.wait_for()
    assert charts.count() >= 4
    widths = [charts.nth(i).bounding_box()["width"] for i in range(charts.count())]
    assert min(widths) > 200, widths  # no chart drawn squashed
    assert "step 150" in slider_value(page)
    assert "it kept 6 of its 10 frames" in page.locator('[data-testid="stMain"]').inner_text()
    show_player(page)
    screenshot(page, "finetune_timelapse_step150")

    page.get_by_role("button", name="Play").click()
    page.get_by_text("Similarity to the starting model at step 250").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Play").wait_for(timeout=30_000)  # it stops at the last frame measured
    wait_for_app(page)
    assert "step 250" in slider_value(page)
    assert_no_streamlit_exception(page)
    show_player(page)
    screenshot(page, "finetune_timelapse_played")


def test_the_form_offers_a_time_lapse(page, app_url):
    page.goto(f"{app_url}/finetune")
    wait_for_app(page)
    box = page.get_by_text("Time-lapse", exact=True).filter(visible=True).first
    if not box.is_visible():  # the form's expander starts open only while there are no runs yet
        page.get_by_text("Start a run").first.click()
    box.wait_for()
    assert page.get_by_label("Frames").first.input_value() == "10"
    assert_no_streamlit_exception(page)
    box.evaluate("element => element.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(300)
    screenshot(page, "finetune_form_timelapse")
