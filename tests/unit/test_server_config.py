"""The server settings users get from `.streamlit/config.toml`: local only, and none of the developer conveniences
that cost every session time (ARCHITECTURE.md, "Data flow of a page", point 4)."""

import tomllib
from pathlib import Path

import pytest

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


@pytest.fixture(scope="module")
def config() -> dict:
    return tomllib.loads(CONFIG.read_text())


def test_server_stays_on_this_machine(config):
    assert config["server"]["address"] == "localhost"
    assert config["browser"]["serverAddress"] == "localhost"
    assert config["browser"]["gatherUsageStats"] is False


def test_no_file_watcher_and_no_post_run_gc(config):
    assert config["server"]["fileWatcherType"] == "none"
    assert config["runner"]["postScriptGC"] is False


def test_streamlit_knows_every_option(config):
    """A misspelt or retired option is ignored by Streamlit with only a log line: check each against its registry."""
    from streamlit import config as streamlit_config

    known = streamlit_config._config_options_template
    for section, options in config.items():
        for name in options:
            assert f"{section}.{name}" in known, f"{section}.{name} is not a Streamlit option"
