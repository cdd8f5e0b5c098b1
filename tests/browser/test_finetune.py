"""The fine-tuning page in a real browser with one finished run: the runs table, the comparison and the
confusion matrix draw without an exception."""

from __future__ import annotations

import random
import re

from core.training import Recipe, finetune
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'


def test_finetune_page_with_a_finished_run(page, app_server, app_url, tiny_bert_dir, tmp_path, monkeypatch):
    # Train into the server's own models_cache, so the page lists the run.
    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    rng = random.Random(0)
    data = tmp_path / "animals.csv"
    data.write_text("text,label\n" + "".join(
        f"the {a} sat on the mat,{a}\n" for a in (rng.choice(["cat", "dog"]) for _ in range(120))))
    finetune(Recipe(model=str(tiny_bert_dir), task=str(data), run_name="browser-run", epochs=8, lr=2e-3,
                    batch_size=16, max_length=16, cpu_threads=1))

    page.goto(f"{app_url}/finetune")
    wait_for_app(page)
    page.get_by_text("Side by side").first.wait_for()
    page.wait_for_selector(CHART)
    assert_no_streamlit_exception(page)
    # The sidebar's navigation names the page too: only the main area's heading says the page itself rendered.
    main = page.locator('[data-testid="stMain"]')
    assert main.get_by_role("heading", level=1, name="Fine-tuning comparison").count() == 1
    page.get_by_text("Confusion matrices").first.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    screenshot(page, "finetune")


def test_runs_table_follows_the_progress_line(page, app_server, app_url, tiny_bert_dir, monkeypatch):
    """Issue 37: the runs table said "queued" while the progress line said "loading model" (the table was drawn
    once; only the progress fragment refreshed), and the line began with "loss nan, 0.0 examples/s". The worker is
    faked: this test writes the run's status.json as the engine would, with its own (living) pid."""
    import os

    from playwright.sync_api import expect

    from core.training.runs import RunFolder, delete_run

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    folder = RunFolder.create(Recipe(model=str(tiny_bert_dir), task="snli", run_name="browser-phase"))
    try:
        folder.write_status(state="running", phase="loading model", pid=os.getpid(), step=0, loss=None,
                            examples_per_second=0.0)
        page.goto(f"{app_url}/finetune")
        page.get_by_text("browser-phase — loading model…").wait_for()
        cells = page.locator('[data-testid="stDataFrame"] td')  # the grid's accessible copy of its cells
        expect(cells.filter(has_text=re.compile(r"^loading model$"))).to_have_count(1, timeout=30_000)
        assert not page.get_by_text("nan").count() and not page.get_by_text("0.0 examples/s").count()
        page.get_by_role("heading", name="Runs", exact=True).scroll_into_view_if_needed()
        screenshot(page, "finetune_progress_loading")

        folder.write_status(phase="training", step=3, total_steps=10, epoch=1, epochs=1, loss=0.5,
                            examples_per_second=5.0, losses=[[1, 0.7], [2, 0.6], [3, 0.5]])
        page.get_by_text("browser-phase — training, step 3/10").wait_for(timeout=30_000)
        expect(cells.filter(has_text=re.compile(r"^training$"))).to_have_count(1, timeout=30_000)
        expect(cells.filter(has_text=re.compile(r"^loading model$"))).to_have_count(0)
        assert_no_streamlit_exception(page)
        page.get_by_role("heading", name="Runs", exact=True).scroll_into_view_if_needed()
        screenshot(page, "finetune_progress_training")
    finally:
        folder.end("cancelled", "the test is over")
        delete_run("browser-phase")
