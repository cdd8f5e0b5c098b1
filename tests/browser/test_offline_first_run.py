"""A newcomer's first run with no network (issue 37): a server started with HF_HUB_OFFLINE=1, the default
bert-base-uncased absent from an empty models_cache, MiniLM in the shared data folder. The app opens on MiniLM
with a one-line notice; "Use bert-base-uncased" says plainly that it needs a download; nothing shows a traceback."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import StreamlitServer, assert_no_streamlit_exception, screenshot, wait_for_app

NOTICE = "Offline: bert-base-uncased needs a download, so this opened on all-MiniLM-L6-v2 (from the data folder)."


@pytest.fixture(scope="module")
def offline_url(browser_model, tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        server = StreamlitServer("bert-base-uncased", tmp_path_factory.mktemp("offline-cache"))
    yield server
    server.stop()


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def test_first_run_offline_opens_on_the_local_model_and_one_click_goes_back(page, offline_url):
    page.goto(f"{offline_url.url}/?{urlencode({'a': 'The cat sat on the mat.'})}")
    wait_for_app(page)
    sidebar(page).get_by_text(NOTICE).wait_for()
    page.get_by_text("Layers").first.wait_for()  # Home's metrics of the model in use
    assert_no_streamlit_exception(page)
    screenshot(page, "offline_first_run_home")

    page.goto(f"{offline_url.url}/masked")  # a new session, no sentence typed
    wait_for_app(page)
    page.get_by_text("no masked-word (MLM) head").wait_for()
    offer = page.get_by_role("button", name="Use bert-base-uncased").last
    assert offer.is_disabled()  # the page's offer: it cannot load now
    screenshot(page, "offline_masked_offers")

    sidebar(page).get_by_role("button", name="Use bert-base-uncased").click()
    wait_for_app(page)
    sidebar(page).get_by_text("needs a download").first.wait_for()
    assert "ModelUnavailable" not in page.locator("body").inner_text()
    assert_no_streamlit_exception(page)
    screenshot(page, "offline_default_needs_download")


def test_reproduce_offline_measures_a_local_model_shape_only(page, offline_url):
    page.goto(f"{offline_url.url}/reproduce")
    wait_for_app(page)
    page.get_by_text("Different model: shape only").first.wait_for()
    assert page.get_by_role("button", name="Run the study").is_enabled()
    assert_no_streamlit_exception(page)
    screenshot(page, "offline_reproduce")



def test_anisotropy_offline_says_why_once_and_offers_no_run(page, offline_url):
    page.goto(f"{offline_url.url}/anisotropy?model=bert-base-uncased")
    wait_for_app(page)
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("needs a download").first.wait_for()
    assert main.get_by_text("to pass the corpus through the chosen models").count() == 0  # the "Press Run" line
    assert page.get_by_role("button", name=re.compile("^Run")).count() == 0
    assert_no_streamlit_exception(page)
    screenshot(page, "offline_anisotropy_needs_download")
