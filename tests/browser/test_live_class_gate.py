"""A student's connection to a real server carries answers only (issue 44, items 1 and 7), probed as an attacker
would: a bare Streamlit websocket client (Streamlit's own BackMsg protobufs) and plain HTTP requests from a second
loopback address. The server runs with BERTLENS_TEACHER_ADDRESSES=127.0.0.1, so a socket bound to 127.0.0.2 is a
student's device and one from 127.0.0.1 the teacher's. No Chromium: what is probed is below the browser.

The server opens a tiny masked-word model (its warm-up loads it once: one "loading model" line in the log); a
student's clear_cache must leave it loaded, while the teacher's own clear_cache (the control) makes the next page
load it again.
"""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from core.classroom import access
from tests.browser.conftest import StreamlitServer
from tests.tiny_mlm import make_tiny_mlm

TEACHER, STUDENT = "127.0.0.1", "127.0.0.2"
SENTENCE = "the girl sat on the bank of the river ."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = make_tiny_mlm(tmp_path_factory.mktemp("gate-model") / "tiny-mlm")
    cache = tmp_path_factory.mktemp("gate-cache")
    started = StreamlitServer(str(folder), cache, env={access.TEACHER_ENV: TEACHER, access.CLASS_ENV: "1"})
    deadline = time.time() + 180
    while "warm-up done" not in started.log.read_text() and time.time() < deadline:
        time.sleep(0.5)
    assert model_loads(started) == 1, started.log.read_text()[-3000:]
    yield started
    started.stop()


def model_loads(server) -> int:
    return sum("loading model" in line for line in server.log.read_text().splitlines())


def connect(port: int, source: str, path: str = "/_stcore/stream"):
    """A Streamlit websocket session from `source` (the socket's own address, which the server sees as the peer)."""
    from websockets.sync.client import connect as ws_connect

    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return ws_connect(f"ws://localhost:{port}{path}", sock=sock, subprotocols=["streamlit"],
                      origin=f"http://localhost:{port}", open_timeout=30, max_size=None)


def send(ws, **kind) -> None:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    ws.send(BackMsg(**kind).SerializeToString())


def run(ws, query: str = "", page: str = "", timeout: float = 180) -> list[str]:
    """Ask for a run (as the browser does on load) and read the server's messages until the run has finished;
    returns the kinds of the messages."""
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    send(ws, rerun_script=ClientState(query_string=query, page_name=page))
    kinds, deadline = [], time.time() + timeout
    while time.time() < deadline:
        message = ForwardMsg()
        message.ParseFromString(ws.recv(timeout=deadline - time.time()))
        kinds.append(message.WhichOneof("type"))
        if kinds[-1] == "script_finished":
            return kinds
    raise AssertionError(f"no script_finished within {timeout} s: {kinds}")


def get(server, path: str, source: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60, source_address=(source, 0))
    try:
        connection.request("GET", path, headers={"Host": f"localhost:{server.port}"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_students_clear_cache_leaves_the_teachers_model_loaded(server):
    with connect(server.port, STUDENT) as student:
        run(student)  # the student view, as a phone opens it
        for _ in range(5):  # issue 44: in a loop it kept the teacher reloading
            send(student, clear_cache=True)
        send(student, file_urls_request={"request_id": "r", "file_names": ["big.csv"], "session_id": "x"})
        kinds = run(student, page="attention")  # handled in order: the messages above came first
    with connect(server.port, TEACHER) as teacher:
        run(teacher, query=f"a={SENTENCE.replace(' ', '+')}", page="attention")
        assert model_loads(server) == 1, "a student's clear_cache emptied the server's caches"
        assert "file_urls_response" not in kinds  # nor was a student given upload slots
        # The control: the teacher's own clear_cache still works, and the next page loads the model again, so the
        # count above would have seen a student's clear_cache taking effect.
        send(teacher, clear_cache=True)
        run(teacher, query=f"a={SENTENCE.replace(' ', '+')}", page="attention")
        assert model_loads(server) == 2


def test_metrics_and_uploads_are_closed_to_students(server):
    assert get(server, "/_stcore/metrics", STUDENT) == 403
    assert get(server, "/_stcore/metrics", TEACHER) == 200
    assert get(server, "/_stcore/health", STUDENT) == 200  # what the student view needs stays open
    assert get(server, "/_stcore/host-config", STUDENT) == 200
