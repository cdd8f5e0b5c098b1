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
    # This run's warning: another test's run in the server's cache (ablate_modes) may be flagged too.
    warning = page.locator('[data-testid="stAlert"]').filter(has_text=FLAG).filter(has_text="noise_run")
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


def test_faithfulness_form_of_an_snli_run_and_the_bias_quick_demo(page, app_server, app_url, tiny_bert_dir,
                                                                 monkeypatch, data_dir):
    """The faithfulness form starts an SNLI run on SNLI dev pairs with one count; the quick demo fills the recipe
    form with the preset (threads, frozen layers). Screenshots to look at."""
    from urllib.parse import quote

    from core import bias

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    finetune(Recipe(model=str(tiny_bert_dir), task="snli", run_name="tiny_snli", epochs=1, train_limit=32,
                    eval_limit=16, batch_size=16, max_length=32, cpu_threads=1, data_source="local"))
    page.goto(f"{app_url}/explain?model=tiny_snli&a={quote('A man plays a guitar.')}&b={quote('Someone makes music.')}")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("How faithful is each explanation?").scroll_into_view_if_needed()
    assert main.get_by_role("spinbutton", name="Examples to score (a seeded sample)").count() == 1
    assert main.get_by_role("spinbutton", name="Examples to score (the first N)").count() == 0
    page.wait_for_timeout(300)
    screenshot(page, "explain-faithfulness-snli")

    page.goto(f"{app_url}/bias")
    wait_for_app(page)
    page.get_by_role("button", name="Quick demo").click()
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    threads = page.get_by_role("spinbutton", name="CPU threads (0 = all)")
    assert threads.input_value() == str(bias.QUICK_DEMO["cpu_threads"])
    assert page.get_by_role("spinbutton", name="Freeze layers 1 to N").input_value() == str(bias.QUICK_DEMO["freeze_layers"])
    threads.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    screenshot(page, "bias-quick-demo-form")
