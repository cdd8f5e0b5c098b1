"""Who is the teacher (core/classroom/access.py): the socket's peer address against BERTLENS_TEACHER_ADDRESSES,
never a header; and what class mode changes in the server's settings (app_pages/shell/class_server.py)."""

from __future__ import annotations

import pytest

from app_pages.shell.class_server import SERVING_ENV, network_environment
from core.classroom import access

LOOPBACKS = ["127.0.0.1", "127.4.5.6", "::1", "[::1]", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"]
OTHERS = ["192.0.2.1", "10.0.0.7", "192.168.1.20", "fe80::1%eth0", "2001:db8::1", "::ffff:192.0.2.1", "0.0.0.0",
          "::", None, "", "localhost", "not an address"]


@pytest.mark.parametrize("address", LOOPBACKS)
def test_loopback_is_the_teacher_by_default(address):
    assert access.is_teacher_address(address, environ={})


@pytest.mark.parametrize("address", OTHERS)
def test_anything_else_is_a_student_by_default(address):
    assert not access.is_teacher_address(address, environ={})


def test_teacher_addresses_from_the_environment():
    environ = {access.TEACHER_ENV: " 192.0.2.1, 198.51.100.0/24 ,[2001:db8::5]"}
    for teacher in ("192.0.2.1", "198.51.100.77", "::ffff:192.0.2.1", "2001:db8::5"):
        assert access.is_teacher_address(teacher, environ), teacher
    for student in ("127.0.0.1", "::1", "192.0.2.2", "198.51.101.1", "2001:db8::6"):
        assert not access.is_teacher_address(student, environ), student


def test_a_bad_teacher_address_is_named():
    with pytest.raises(ValueError, match=r"BERTLENS_TEACHER_ADDRESSES: 'teacher-laptop' is not an IP address"):
        access.teacher_networks({access.TEACHER_ENV: "127.0.0.1,teacher-laptop"})


@pytest.mark.parametrize("header", ["X-Forwarded-For", "x-forwarded-for", "Forwarded", "X-Real-IP"])
def test_a_forwarding_header_makes_a_student(header):
    """uvicorn replaces the peer address by X-Forwarded-For when the peer is 127.0.0.1 (its default trust), so a
    process on this machine could claim any address: a connection with such a header is only ever a student."""
    environ = {access.TEACHER_ENV: "192.0.2.1"}
    assert access.is_teacher_connection("192.0.2.1", [("host", "localhost:8501")], environ)
    assert not access.is_teacher_connection("192.0.2.1", [(header, "192.0.2.1")], environ)
    assert not access.is_teacher_connection("127.0.0.1", [(header, "127.0.0.1")], {})


def test_class_mode_switch():
    assert access.class_mode(["app.py", "--class"], {})
    assert access.class_mode(["app.py"], {access.CLASS_ENV: "1"})
    assert not access.class_mode(["app.py"], {})
    assert not access.class_mode(["app.py"], {access.CLASS_ENV: "0"})
    assert not access.class_mode(["--class"], {})  # argv[0] is the script


def test_allowed_hosts_are_this_machines_names_only():
    hosts = access.allowed_hosts("192.168.1.20", hostname="Teacher-Laptop")
    assert hosts == ["localhost", "127.0.0.1", "::1", "192.168.1.20", "teacher-laptop", "teacher-laptop.local"]
    assert access.allowed_hosts(None, hostname="pc.local") == ["localhost", "127.0.0.1", "::1", "pc.local"]
    assert not any("*" in host for host in hosts)


def test_join_url():
    assert access.join_url("192.168.1.20", 8501, "K7M2Q") == "http://192.168.1.20:8501/?class=K7M2Q"
    assert access.join_url("fd00::2", 8501, "K7M2Q") == "http://[fd00::2]:8501/?class=K7M2Q"


def test_qr_code_is_drawn_here():
    png = access.qr_png("http://192.168.1.20:8501/?class=K7M2Q")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert "█" in access.qr_text("http://192.168.1.20:8501/?class=K7M2Q")


def test_class_mode_server_settings():
    environment = network_environment({"PATH": "/bin"}, "192.168.1.20")
    assert environment["PATH"] == "/bin"
    assert environment["STREAMLIT_SERVER_ADDRESS"] == "0.0.0.0"
    assert environment["STREAMLIT_SERVER_ALLOWED_HOSTS"].split()[:4] == ["localhost", "127.0.0.1", "::1",
                                                                          "192.168.1.20"]
    assert environment["FORWARDED_ALLOW_IPS"] == ""  # uvicorn believes no X-Forwarded-For
    assert environment[SERVING_ENV] == "1" and environment[access.CLASS_ENV] == "1"


def _call(middleware_app, path: str, peer: str, headers=(), kind: str = "http", incoming=()):
    """Run the middleware once, in a fresh loop in its own thread (an earlier test, a sync Playwright browser, may
    leave this thread's loop running). `incoming`: the messages its `receive` gives, in order. Returns the paths
    the app behind it was reached with, what was sent back, and the messages the app received."""
    import asyncio
    import threading

    sent, reached, received = [], [], []
    queue = list(incoming)

    async def app(scope, receive, send):
        reached.append(scope["path"])
        while True:
            message = await receive()
            received.append(message)
            if message["type"] in ("websocket.disconnect", "http.disconnect"):
                return

    async def receive():
        return queue.pop(0) if queue else {"type": f"{kind}.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "path": path, "client": (peer, 50000),
             "headers": [(k.encode(), v.encode()) for k, v in headers]}
    worker = threading.Thread(target=lambda: asyncio.run(middleware_app(app)(scope, receive, send)))
    worker.start()
    worker.join()
    return reached, sent, received


def test_uploads_only_from_the_teacher(monkeypatch):
    from app_pages.shell.class_server import UPLOAD_REFUSED, StudentGate

    monkeypatch.setenv(access.TEACHER_ENV, "192.0.2.1")
    upload = "/_stcore/upload_file/session/file"
    reached, sent, _ = _call(StudentGate, upload, "192.0.2.1")
    assert reached == [upload] and sent == []
    for peer, headers in (("127.0.0.1", ()), ("192.0.2.7", ()), ("192.0.2.1", [("x-forwarded-for", "192.0.2.1")])):
        reached, sent, _ = _call(StudentGate, upload, peer, headers)
        assert reached == [] and sent[0]["status"] == 403 and sent[1]["body"] == UPLOAD_REFUSED
    reached, _, _ = _call(StudentGate, "/_stcore/health", "192.0.2.7")  # what the student view needs passes
    assert reached == ["/_stcore/health"]


@pytest.mark.parametrize("path", ["/_stcore/metrics", "/_stcore/agent/interact", "/_stcore/script-health-check",
                                  "/_stcore/bidi-components/x/y.js", "/_stcore/health/../metrics",
                                  "/base/_stcore/metrics", "/base/_stcore/upload_file/s/f"])
def test_streamlits_other_routes_are_the_teachers(monkeypatch, path):
    """Issue 44: /_stcore/metrics told students the cache names and session counts. Of Streamlit's own routes a
    student gets only health, host-config and the websocket (also under a server.baseUrlPath)."""
    from app_pages.shell.class_server import StudentGate

    monkeypatch.setenv(access.TEACHER_ENV, "127.0.0.1")
    reached, sent, _ = _call(StudentGate, path, "127.0.0.2")
    assert reached == [] and sent[0]["status"] == 403 and b"student" in sent[1]["body"]
    reached, sent, _ = _call(StudentGate, path, "127.0.0.1")  # the teacher's pass
    assert reached == [path] and sent == []
    reached, sent, _ = _call(StudentGate, path, "127.0.0.2", kind="websocket")  # nor as a websocket
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008}]
    for student_path in ("/_stcore/health", "/_stcore/host-config", "/", "/finetune", "/static/js/index.js",
                         "/media/icon.png"):
        reached, _, _ = _call(StudentGate, student_path, "127.0.0.2")
        assert reached == [student_path]


def _frame(**kind) -> dict:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    return {"type": "websocket.receive", "bytes": BackMsg(**kind).SerializeToString()}


def _kinds(received) -> list[str]:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    kinds = []
    for message in received:
        if message.get("bytes") is not None:
            parsed = BackMsg()
            try:
                parsed.ParseFromString(message["bytes"])
            except Exception:
                kinds.append(None)
            else:
                kinds.append(parsed.WhichOneof("type"))
    return kinds


def test_a_students_websocket_carries_answers_only(monkeypatch):
    """Issue 44, item 1: a student's session sent clear_cache and the server emptied every cache (the teacher's
    model loaded again). Its websocket now passes on a run of the student view and the heartbeat, nothing else;
    the teacher's passes everything."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

    from app_pages.shell.class_server import StudentGate

    monkeypatch.setenv(access.TEACHER_ENV, "127.0.0.1")
    answer = ClientState(query_string="class=K7M2Q", page_script_hash="other-page", page_name="finetune",
                         widget_states=WidgetStates(widgets=[WidgetState(id="class.choice.1.0", trigger_value=True)]),
                         fragment_id="fragment-1")
    frames = [{"type": "websocket.connect"}, _frame(rerun_script=answer), _frame(clear_cache=True),
              _frame(app_heartbeat=True), _frame(stop_script=True), _frame(set_run_on_save=True),
              _frame(load_git_info=True), _frame(debug_shutdown_runtime=True),
              _frame(debug_disconnect_websocket=True), _frame(file_urls_request={"file_names": ["a.csv"]}),
              _frame(backend_operation_request={"request_id": "r"}), _frame(clear_cache=True),
              {"type": "websocket.receive", "bytes": b"not a BackMsg \xff"}]
    reached, _, received = _call(StudentGate, "/_stcore/stream", "127.0.0.2", kind="websocket", incoming=frames)
    assert reached == ["/_stcore/stream"]
    assert _kinds(received) == ["rerun_script", "app_heartbeat", None]  # the last: Streamlit closes on it
    passed = BackMsg()
    passed.ParseFromString(received[1]["bytes"])
    assert passed.rerun_script.page_script_hash == "" and passed.rerun_script.page_name == ""  # no other page
    assert passed.rerun_script.query_string == "class=K7M2Q" and passed.rerun_script.fragment_id == "fragment-1"
    assert passed.rerun_script.widget_states == answer.widget_states  # the answer itself goes through
    assert received[0]["type"] == "websocket.connect" and received[-1]["type"] == "websocket.disconnect"
    _, _, teachers = _call(StudentGate, "/_stcore/stream", "127.0.0.1", kind="websocket", incoming=frames)
    assert _kinds(teachers) == ["rerun_script", "clear_cache", "app_heartbeat", "stop_script", "set_run_on_save",
                                "load_git_info", "debug_shutdown_runtime", "debug_disconnect_websocket",
                                "file_urls_request", "backend_operation_request", "clear_cache", None]
