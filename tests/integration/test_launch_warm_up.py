"""The server's warm-up at launch (app_pages/shell/launch.py, issue 18 point 4): `streamlit run app.py` serves the st.App
whose lifespan starts it; it fills the model store sessions read, downloads nothing, and leaves the forward pass to
a session that has already started."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app_pages.widgets import common
from app_pages.shell import launch
from core.model.loading import model_version

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_launch(monkeypatch, tiny_bert_dir):
    """launch's per-process state reset, the tiny BERT as default model, and an empty model store."""
    monkeypatch.setattr(launch, "_imports_done", threading.Event())
    monkeypatch.setattr(launch, "_chart_modules_done", threading.Event())
    monkeypatch.setattr(launch, "_session_started", threading.Event())
    monkeypatch.setattr(launch, "_started", False)
    monkeypatch.setattr(launch, "timings", {})
    monkeypatch.setattr(launch, "MODULES", ("app_pages.widgets.common", "core.charts.attention"))  # already imported: fast
    monkeypatch.setenv("BERTLENS_MODEL", str(tiny_bert_dir))
    common._model_store().clear()
    yield str(tiny_bert_dir)
    common._model_store().clear()


def test_streamlit_run_serves_the_app_with_the_warm_up():
    """`streamlit run app.py` looks for an st.App by parsing the file: without it the warm-up never runs."""
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(REPO / "app.py")
    assert found.is_asgi_app and found.app_name == "app"
    assert "lifespan=launch.lifespan" in (REPO / "app.py").read_text()


def test_warm_up_loads_the_default_model_into_the_store_sessions_read(fresh_launch):
    launch.warm_up()
    store = common._model_store()
    assert store.keys() == [(fresh_launch, model_version(fresh_launch))]
    assert launch._imports_done.is_set()
    assert set(launch.timings) == {"imports_s", "model_s", "first_forward_and_chart_s", "total_s"}
    misses = store.misses
    lm = common.cached_model(fresh_launch, show_spinner=False)
    assert store.misses == misses  # a session's cached_model finds it: no second load
    assert lm.model.config.num_hidden_layers == 2


def test_warm_up_downloads_nothing(fresh_launch, monkeypatch, tmp_path):
    """A default model that is only a hub id is not fetched at launch (offline machines, slow links)."""
    import core.model.loading

    def no_download(ref):
        raise AssertionError(f"warm-up tried to download {ref}")

    monkeypatch.setattr(core.model.loading, "download", no_download)
    monkeypatch.setenv("BERTLENS_MODEL", "someone/not-downloaded-bert")
    monkeypatch.setenv("BERTLENS_DATA", str(tmp_path))  # no local model to open on instead
    launch.warm_up()
    assert common._model_store().keys() == []
    assert launch._imports_done.is_set() and "model_s" not in launch.timings


def test_warm_up_loads_the_local_model_a_first_run_offline_opens_on(fresh_launch, monkeypatch, tmp_path):
    """The default needs a download and the hub is unreachable: sessions open on the local model, so warm that."""
    import shutil

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLENS_MODEL", "someone/not-downloaded-bert")
    monkeypatch.setenv("BERTLENS_DATA", str(tmp_path))
    shutil.copytree(fresh_launch, tmp_path / "models" / "tiny")
    launch.warm_up()
    assert [key[0] for key in common._model_store().keys()] == ["tiny"]


def test_warm_up_leaves_the_forward_pass_to_a_session_that_has_started(fresh_launch):
    """On 2 cores a warm-up forward beside the first session's own would slow the chart it waits for."""
    assert launch.session_started() is False  # no warm-up running (AppTest, or BERTLENS_WARM_UP=0): nothing to wait for
    launch.warm_up()
    assert "model_s" in launch.timings and "first_forward_and_chart_s" not in launch.timings
    # ... but builds altair's schema validator while that session's forward runs in torch (issue 47, cold start)
    assert "chart_library_s" in launch.timings


def test_streamlit_runs_import_of_app_py_starts_the_warm_up(monkeypatch):
    """`streamlit run` imports app.py as the module `app` before it starts the server: the warm-up starts there,
    not in the lifespan, which runs after the server's own start (issue 47, cold start)."""
    import importlib.util

    calls = []
    monkeypatch.setattr(launch, "start", lambda: calls.append("start") or False)
    spec = importlib.util.spec_from_file_location("app", REPO / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert calls == ["start"] and module.app is not None


def test_a_session_waits_while_the_warm_up_imports(fresh_launch, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(launch, "importlib", type("SlowImport", (), {"import_module": staticmethod(lambda name: release.wait(10))}))
    assert launch.start() is True and launch.start() is False  # one warm-up per process
    assert launch.session_started() is True  # the script shows its spinner
    waiter = threading.Thread(target=launch.wait_for_imports)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()
    release.set()
    waiter.join(10)
    assert not waiter.is_alive()
    assert launch.session_started() is False
    for thread in threading.enumerate():  # it goes on to the model load: let it finish before the store is cleared
        if thread.name == launch.THREAD_NAME:
            thread.join(60)


def test_warm_up_can_be_turned_off(fresh_launch, monkeypatch):
    monkeypatch.setenv("BERTLENS_WARM_UP", "0")
    assert launch.start() is False
    assert launch.session_started() is False


def test_the_chart_modules_are_imported_first_and_say_so(fresh_launch, monkeypatch):
    """A waiting session may send its chart-code prefetch once pandas and pyarrow are in, long before torch is."""
    seen = []
    monkeypatch.setattr(launch, "MODULES", (*launch.CHART_MODULES, "torch"))
    monkeypatch.setattr(launch, "importlib", type("Recording", (), {"import_module": staticmethod(
        lambda name: seen.append((name, launch._chart_modules_done.is_set())))}))
    monkeypatch.setenv("BERTLENS_MODEL", "someone/not-downloaded-bert")  # no model step: only the imports matter here
    monkeypatch.setattr(launch, "_warm_default_model", lambda: None)
    launch.warm_up()
    assert seen == [("pandas", False), ("pyarrow", False), ("torch", True)]
    assert launch.wait_for_chart_modules(0) and launch._imports_done.is_set()


def test_a_session_waiting_for_the_imports_has_the_browser_load_the_chart_code(fresh_launch, monkeypatch):
    """While the warm-up imports, the first session's page holds a blank 1x1 chart: the browser fetches and compiles
    Streamlit's chart code then, not after the first forward pass. The blank chart is gone once the page is drawn."""
    from streamlit.delta_generator import DeltaGenerator
    from streamlit.testing.v1 import AppTest

    sent, original = [], DeltaGenerator.vega_lite_chart

    def recording(self, spec=None, *args, **kwargs):
        sent.append((spec, launch._imports_done.is_set()))
        return original(self, spec, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "vega_lite_chart", recording)
    monkeypatch.setattr(launch, "_started", True)  # a warm-up is importing
    launch._chart_modules_done.set()
    timer = threading.Timer(1.0, launch._imports_done.set)
    timer.start()
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    timer.join()
    assert not at.exception
    assert sent and sent[0][0]["width"] == sent[0][0]["height"] == 1 and sent[0][1] is False, sent[:1]
    drawn = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    assert all(spec.get("width") != 1 for spec in drawn), drawn
