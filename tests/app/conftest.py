"""Helpers for Streamlit AppTest: start the real app.py with a model and sentences, read chart data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP_FILE = str(Path(__file__).resolve().parents[2] / "app.py")


def _make_app(model: str, text_a: str = "", text_b: str = "", timeout: float = 180) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=timeout)
    at.session_state["model"] = model
    at.session_state["sentence_a"] = text_a
    at.session_state["sentence_b"] = text_b
    return at


def _chart_rows(at: AppTest, index: int = 0, dataset: int | None = None) -> list[dict]:
    """Data rows of the index-th altair chart on the page: all its datasets, or only the dataset-th.

    Streamlit ships chart data as Arrow IPC streams beside the spec; this decodes them.
    """
    import pyarrow as pa

    proto = at.get("vega_lite_chart")[index].proto
    chosen = proto.datasets if dataset is None else [proto.datasets[dataset]]
    rows: list[dict] = []
    for named in chosen:
        rows.extend(pa.ipc.open_stream(named.data.data).read_all().to_pylist())
    return rows


def chart_rows_titled(at: AppTest, title: str) -> list[dict]:
    """Data rows of the first chart whose spec mentions `title` (a page with several charts)."""
    import pyarrow as pa

    for element in at.get("vega_lite_chart"):
        if title in element.proto.spec:
            rows: list[dict] = []
            for named in element.proto.datasets:
                rows.extend(pa.ipc.open_stream(named.data.data).read_all().to_pylist())
            return rows
    raise AssertionError(f"no chart titled {title!r} on the page")


def _chart_spec(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("vega_lite_chart")[index].proto.spec)


@pytest.fixture
def make_app():
    """make_app(model, text_a="", text_b="") -> AppTest (not yet run). Use at.switch_page("app_pages/X.py")."""
    return _make_app


@pytest.fixture
def chart_spec():
    """chart_spec(at, index=0) -> the chart's vega-lite spec as a dict (without its data)."""
    return _chart_spec


@pytest.fixture
def chart_rows():
    """chart_rows(at, index=0, dataset=None) -> list of data rows of that chart."""
    return _chart_rows


class FakeProcess:
    """A job's worker process that never starts: its pid is this test's own (alive), so a run stays queued."""

    pid = os.getpid()

    def poll(self):
        return None

    def wait(self):
        return None
