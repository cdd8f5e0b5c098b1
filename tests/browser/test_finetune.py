"""The fine-tuning page in a real browser with one finished run: the runs table, the comparison and the
confusion matrix draw without an exception."""

from __future__ import annotations

import random

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
