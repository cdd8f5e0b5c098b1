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


def _call(middleware_app, path: str, peer: str, headers=()):
    import asyncio
    import threading

    sent, reached = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "client": (peer, 50000),
             "headers": [(k.encode(), v.encode()) for k, v in headers]}
    # A fresh loop in its own thread: an earlier test (a sync Playwright browser) may leave this thread's loop running.
    worker = threading.Thread(target=lambda: asyncio.run(middleware_app(app)(scope, None, send)))
    worker.start()
    worker.join()
    return reached, sent


def test_uploads_only_from_the_teacher(monkeypatch):
    from app_pages.shell.class_server import UPLOAD_REFUSED, TeacherOnlyUploads

    monkeypatch.setenv(access.TEACHER_ENV, "192.0.2.1")
    upload = "/_stcore/upload_file/session/file"
    reached, sent = _call(TeacherOnlyUploads, upload, "192.0.2.1")
    assert reached == [upload] and sent == []
    for peer, headers in (("127.0.0.1", ()), ("192.0.2.7", ()), ("192.0.2.1", [("x-forwarded-for", "192.0.2.1")])):
        reached, sent = _call(TeacherOnlyUploads, upload, peer, headers)
        assert reached == [] and sent[0]["status"] == 403 and sent[1]["body"] == UPLOAD_REFUSED
    reached, _ = _call(TeacherOnlyUploads, "/_stcore/health", "192.0.2.7")  # other requests pass
    assert reached == ["/_stcore/health"]
