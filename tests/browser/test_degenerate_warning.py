"""The "learned (almost) nothing" warning as a user sees it: a run trained on labels that ignore the text, on the
fine-tuning page, and a bias experiment whose full run always answers one class (screenshots to look at)."""

from __future__ import annotations

import random

from core.training import Recipe, finetune
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

FLAG = "learned (almost) nothing"


def test_the_warning_is_drawn_on_the_finetune_and_bias_pages(page, app_server, app_url, tiny_bert_dir, tmp_path,
                                                             monkeypatch, data_dir):
    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))  # the server's own models_cache
    rng = random.Random(0)
    data = tmp_path / "noise.csv"
    data.write_text("text,label\n" + "".join(f"the {rng.choice(['cat', 'dog'])} sat on the mat,"
                                             f"{'a' if rng.random() < 0.7 else 'b'}\n" for _ in range(200)))
    finetune(Recipe(model=str(tiny_bert_dir), task=str(data), run_name="noise_run", epochs=2, lr=1e-3,
                    batch_size=16, max_length=16, cpu_threads=1))

    page.goto(f"{app_url}/finetune")
    wait_for_app(page)
    warning = page.locator('[data-testid="stAlert"]').filter(has_text=FLAG)
    warning.first.wait_for()
    assert_no_streamlit_exception(page)
    # the run name keeps its underscore: the page escapes Markdown, so it is not read as emphasis
    assert "noise_run: This run learned (almost) nothing" in warning.first.inner_text()
    warning.first.scroll_into_view_if_needed()
    screenshot(page, "finetune-degenerate")

    from tests.app.test_bias_page import write_finished_experiment

    write_finished_experiment("bias-flat", {"full": None, "biased": 0.9, "control": 0.9})
    page.goto(f"{app_url}/bias")
    wait_for_app(page)
    warning = page.locator('[data-testid="stAlert"]').filter(has_text=FLAG)
    warning.first.wait_for()
    assert_no_streamlit_exception(page)
    assert warning.count() == 1 and "The full (all data) run" in warning.first.inner_text()
    warning.first.scroll_into_view_if_needed()
    screenshot(page, "bias-degenerate")
