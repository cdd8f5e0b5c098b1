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


def test_cross_site_protection_is_written_out(config):
    """Streamlit's defaults, stated in the file so that switching one off is a visible diff."""
    assert config["server"]["enableXsrfProtection"] is True
    assert config["server"]["enableCORS"] is True  # CORS *protection*: no `Access-Control-Allow-Origin: *`
    assert config["server"]["corsAllowedOrigins"] == []
    assert config["server"]["enableStaticServing"] is False
    assert config["server"]["allowedHosts"] == ["localhost", "127.0.0.1", "::1"]  # DNS rebinding
    assert config["global"]["developmentMode"] is False  # development mode allows every origin


# --- A running server, started with the file alone (no settings on its command line but the port). Cheap: the
# warm-up finds no model on disk, so nothing heavy loads. ---

FOREIGN = "http://evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.browser.conftest import StreamlitServer

    started = StreamlitServer("no-such-model-for-the-settings-test", tmp_path_factory.mktemp("settings-server"),
                              config_only=True)
    yield started
    started.stop()


def _request(server, method: str, path: str, headers: dict | None = None):
    import http.client

    connection = http.client.HTTPConnection("localhost", server.port, timeout=60)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _websocket_handshake(server, origin: str | None, host: str | None = None) -> int:
    import base64
    import os

    headers = {"Host": host or f"localhost:{server.port}", "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(), "Sec-WebSocket-Protocol": "streamlit"}
    if origin:
        headers["Origin"] = origin
    return _request(server, "GET", "/_stcore/stream", headers)[0]


def test_running_server_listens_on_loopback_only(server):
    import ipaddress

    import psutil

    listening = [c.laddr for c in psutil.Process(server.process.pid).net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN]
    assert any(address.port == server.port for address in listening), listening
    assert all(ipaddress.ip_address(address.ip).is_loopback for address in listening), listening


def test_websocket_from_another_origin_is_refused(server):
    assert _websocket_handshake(server, FOREIGN) == 403
    assert _websocket_handshake(server, f"{FOREIGN}:{server.port}") == 403
    # DNS rebinding: a page on evil.example, re-pointed at 127.0.0.1, sends a matching Origin and Host.
    assert _websocket_handshake(server, f"{FOREIGN}:{server.port}", host=f"evil.example:{server.port}") == 403
    # The control: the app's own origin is let in, so the 403 above is the origin check and not a broken request.
    assert _websocket_handshake(server, server.url) == 101
    for host in ("127.0.0.1", "[::1]"):  # urlparse gives ::1 for [::1], the form server.allowedHosts lists
        assert _websocket_handshake(server, f"http://{host}:{server.port}", host=f"{host}:{server.port}") == 101


def test_no_cors_header_for_another_origin(server):
    status, headers, body = _request(server, "GET", "/_stcore/health", {"Origin": FOREIGN})
    assert status == 200 and body == b"ok"
    assert not any(name.lower() == "access-control-allow-origin" for name in headers), headers


def test_uploads_need_the_xsrf_token(server):
    # The browser gets its token as a cookie with the health check it makes before opening the websocket.
    status, headers, _ = _request(server, "GET", "/_stcore/health")
    assert status == 200 and "_streamlit_xsrf=" in headers.get("set-cookie", "")
    status, _, _ = _request(server, "PUT", "/_stcore/upload_file/some-session/some-file",
                            {"Origin": FOREIGN, "Content-Type": "multipart/form-data; boundary=x"})
    assert status == 403


def test_uploads_are_capped(config):
    """Issue 44: Streamlit's default takes 200 MB a file; a parsed table costs several times its file."""
    assert 0 < config["server"]["maxUploadSize"] <= 25
