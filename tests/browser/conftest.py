"""Browser tests: `streamlit run app.py` on localhost, driven by Playwright in Debian's headless Chromium.

Chromium comes from Debian's `chromium` package (/usr/bin/chromium, or CHROMIUM_PATH); Playwright's own browser
download is never used. Without Chromium or the small model these tests skip, except under CI=true.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from core import views
from tests.conftest import require_data

REPO = Path(__file__).resolve().parents[2]
# One folder per test run (UTC start time), so a run's screenshots are looked at together and none is overwritten.
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        message = "Chromium not found: apt-get install chromium (or set CHROMIUM_PATH)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def page_url_paths() -> list[str]:
    """The url_path of every page the router registers (the view registry, core/views/; Home's "" left out), so a
    new page is covered without editing tests."""
    return [v.url_path for v in views.all_views() if v.url_path]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamlitServer:
    """A fresh `streamlit run app.py` on localhost; stopped by .stop(). `config_only`: no settings on the command
    line but the port, so the server runs with .streamlit/config.toml alone (the settings test checks that file).
    `env`: more environment variables (e.g. BERTLENS_TEACHER_ADDRESSES); `script_args`: the app's own arguments,
    after `--` (e.g. ["--class"]); `repo`: the checkout whose app.py is served (a bench compares two)."""

    def __init__(self, model: str, cache: Path, *, config_only: bool = False, env: dict | None = None,
                 script_args: list[str] | tuple[str, ...] = (), repo: Path = REPO):
        self.port = _free_port()
        self.url = f"http://localhost:{self.port}"
        env = dict(os.environ, BERTLENS_MODEL=model, BERTLENS_CACHE=str(cache), PYTHONUNBUFFERED="1", **(env or {}))
        self.log = cache / "streamlit.log"
        flags = [] if config_only else ["--server.address", "localhost", "--server.headless", "true",
                                        "--browser.gatherUsageStats", "false"]
        after = ["--", *script_args] if script_args else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port), *flags, *after],
            cwd=repo, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"streamlit did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="session")
def browser_model(data_dir) -> str:
    return str(require_data(data_dir / "models" / "all-MiniLM-L6-v2", "the MiniLM-L6 model"))


@pytest.fixture(scope="session")
def app_server(browser_model, tmp_path_factory):
    server = StreamlitServer(browser_model, tmp_path_factory.mktemp("browser-cache"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def app_url(app_server) -> str:
    return app_server.url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A new browser context (a new Streamlit session) per test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(120_000)
    yield page
    context.close()


def wait_for_app(page) -> None:
    """Until Streamlit has finished running the script (the status widget is gone)."""
    page.wait_for_selector('[data-testid="stSidebar"]')
    page.wait_for_timeout(500)
    # While a rerun is under way Streamlit shows its status widget and greys out the old elements.
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-stale=\"true\"]')",
        timeout=120_000,
    )
    page.wait_for_timeout(300)


def assert_no_streamlit_exception(page) -> None:
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


def each_page(page, base_url: str, query: str):
    """Open every page of the registry in turn with the URL query `query` (presenter mode on the built-in lesson's
    first step), wait until it has drawn, check it shows no exception and yield its View."""
    from tests.browser.test_lessons import wait_for_slide

    for view in views.all_views():
        extra = "&lesson=bert-in-ten-views&step=1" if view.name == "present" else ""
        page.goto(f"{base_url}/{view.url_path}?{query}{extra}")
        wait_for_slide(page) if view.name == "present" else wait_for_app(page)
        assert_no_streamlit_exception(page)
        yield view


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def enter_sentences(page, text_a: str, text_b: str = "") -> None:
    """Type into the shared sidebar and commit each text area (Ctrl+Enter), as a user would."""
    for label, text in (("Sentence A", text_a), ("Sentence B (optional)", text_b)):
        area = page.get_by_label(label)
        area.fill(text)
        area.press("Control+Enter")
        wait_for_app(page)


def run_study_on_sidebar_model(page, items: int = 40) -> None:
    """On the Reproduce page: measure the sidebar's model on `items` items and press Run (the results still to come)."""
    page.get_by_role("button", name="Measure the sidebar's model").click()
    wait_for_app(page)
    box = page.get_by_label("Items (0 = default)")
    box.fill(str(items))
    box.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name="Run the study").click()


def run_anisotropy_on_first(page, sentences: int = 60) -> None:
    """On the anisotropy page: the corpus cut to its first `sentences`, then Run (the chart still to come)."""
    page.get_by_text("Settings").click()
    limit = page.get_by_label("Use only the first N sentences (0 = all)")
    limit.fill(str(sentences))
    limit.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name="Run on 1 model").click()


RANDOM_RUN = "minilm-random-copy"


@pytest.fixture(scope="session")
def random_run(app_server, browser_model) -> str:
    """A finished 'run' in the server's models_cache: MiniLM's architecture and tokenizer, random weights; its name."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = app_server.log.parent / "runs" / RANDOM_RUN
    if not (folder / "config.json").exists():
        torch.manual_seed(0)
        AutoModel.from_config(AutoConfig.from_pretrained(browser_model)).save_pretrained(folder, safe_serialization=True)
        AutoTokenizer.from_pretrained(browser_model).save_pretrained(folder)
    return RANDOM_RUN
