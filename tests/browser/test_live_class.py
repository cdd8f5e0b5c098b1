"""Live class with a real server and Chromium (issue 36): the connection's address decides teacher or student
(BERTLENS_TEACHER_ADDRESSES=192.0.2.1 makes this loopback browser a student; a spoofed X-Forwarded-For changes
nothing), a student opening /finetune gets the student view, answers survive `kill -9` and a restart mid-question,
and class mode (`-- --class`) listens on the network with this machine's names allowed, while the default stays
on localhost (tests/unit/test_server_config.py::test_running_server_listens_on_loopback_only).

The servers get a model name that is not on disk: the warm-up then loads nothing, and the student view needs none.
"""

from __future__ import annotations

import ipaddress
import time

import pytest

from core.classroom import ClassStore, Question, access
from tests.browser.conftest import StreamlitServer, assert_no_streamlit_exception, chromium_path, screenshot

NO_MODEL = "no-such-model-for-the-class-test"
STUDENT_ENV = {access.TEACHER_ENV: "192.0.2.1"}  # a documentation address: this machine's loopback is not it
# Several phones from this one machine: one device per browser session (the default is one per address).
PHONES_HERE_ENV = {**STUDENT_ENV, access.DEVICE_ENV: "browser"}
PHONE = {"width": 390, "height": 844}


def store_of(server: StreamlitServer) -> ClassStore:
    """The server's classroom file, opened from this process (SQLite in WAL mode: two processes share it)."""
    return ClassStore(server.log.parent / "classroom.sqlite3")


def open_as(browser, url: str, headers: dict | None = None, viewport: dict = PHONE):
    context = browser.new_context(viewport=viewport, extra_http_headers=headers or {})
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(url)
    return page


def wait_for_student_view(page) -> None:
    page.get_by_role("heading", name="BERT Lens class").wait_for()
    page.wait_for_timeout(300)


def is_student_view(page) -> bool:
    return (page.get_by_role("heading", name="BERT Lens class").count() == 1
            and page.locator('[data-testid="stSidebar"]').count() == 0
            and page.locator('[data-testid="stSidebarNav"]').count() == 0)


@pytest.fixture(scope="module")
def student_server(tmp_path_factory):
    chromium_path()
    server = StreamlitServer(NO_MODEL, tmp_path_factory.mktemp("class-students"), env=STUDENT_ENV)
    yield server
    server.stop()


def test_student_opening_finetune_gets_the_student_view(browser, student_server):
    page = open_as(browser, f"{student_server.url}/finetune")
    wait_for_student_view(page)
    assert is_student_view(page)
    page.get_by_label("Class code").wait_for()
    assert page.get_by_text("Fine-tune", exact=False).count() == 0
    assert_no_streamlit_exception(page)
    screenshot(page, "class_student_join")
    page.context.close()


def test_spoofed_forwarded_for_does_not_make_a_teacher(browser, student_server):
    """The browser claims the teacher's address in X-Forwarded-For (which uvicorn believes from 127.0.0.1): still a
    student. test_forwarded_for_reaches_the_server shows the header does reach the server."""
    page = open_as(browser, f"{student_server.url}/finetune", {"X-Forwarded-For": "192.0.2.1"})
    wait_for_student_view(page)
    assert is_student_view(page)
    page.context.close()


def test_student_answers_on_a_phone(browser, student_server):
    store = store_of(student_server)
    info = store.start_class()
    qid = store.ask(info.id, Question("masked", "Which word fills [MASK]? “The [MASK] sat on the mat.”",
                                      ("cat", "dog", "bank"), page="masked"))
    page = open_as(browser, access.join_url("localhost", student_server.port, info.code).replace("/?", "/finetune?"))
    page.get_by_text("Which word fills [MASK]?", exact=False).wait_for()
    assert is_student_view(page)
    page.get_by_role("button", name="dog").click()
    page.get_by_text("Answer received").wait_for()
    assert store.counts(qid) == {"cat": 0, "dog": 1, "bank": 0}
    screenshot(page, "class_student_answered")
    store.reveal(qid, "cat")
    page.get_by_text("The answer:").wait_for(timeout=15_000)  # the view polls the store every 2 s
    assert page.get_by_role("button", name="cat").count() == 0
    screenshot(page, "class_student_revealed")
    store.end_class(info.id)
    page.get_by_text("The class has ended").wait_for(timeout=15_000)
    page.context.close()
    store.close()


def test_new_browser_sessions_from_one_address_are_one_vote(browser, student_server):
    """Issue 44: each new websocket was a new phone (200 extra votes from one address). Three browser sessions
    from this machine's one address answer: one answer counts, the last, as a changed answer would."""
    store = store_of(student_server)
    info = store.start_class()
    qid = store.ask(info.id, Question("direction", "Up or down with depth?", ("up", "down")))
    for pick in ("up", "up", "down"):
        page = open_as(browser, access.join_url("localhost", student_server.port, info.code))
        page.get_by_role("button", name=pick).click()
        page.get_by_text(f"Answer received: {pick}").wait_for()  # not the last session's answer, shown on load
        page.wait_for_timeout(1100)  # the next session is the same device: past its one-answer-a-second limit
        page.context.close()
    assert store.counts(qid) == {"up": 0, "down": 1} and store.student_count(info.id) == 1
    store.end_class(info.id)
    store.close()


def test_answers_survive_kill_and_restart(browser, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    server = StreamlitServer(NO_MODEL, cache, env=PHONES_HERE_ENV)
    store = ClassStore(cache / "classroom.sqlite3")
    info = store.start_class()
    qid = store.ask(info.id, Question("direction", "Up or down with depth?", ("up", "down")))
    try:
        for pick in ("up", "down", "up"):  # three phones through the browser
            page = open_as(browser, access.join_url("localhost", server.port, info.code))
            page.get_by_role("button", name=pick).click()
            page.get_by_text("Answer received").wait_for()
            page.context.close()
        for i in range(20):  # and a crowd through the store, as other sessions of the server would
            store.answer(qid, f"store-phone-{i}", ("up", "down")[i % 2])
        before = store.counts(qid)
        assert before == {"up": 2 + 10, "down": 1 + 10}
        server.process.kill()  # SIGKILL mid-question: no shutdown, no checkpoint
        server.process.wait(timeout=30)
    finally:
        server.stop()
    store.close()
    assert ClassStore(cache / "classroom.sqlite3").counts(qid) == before
    restarted = StreamlitServer(NO_MODEL, cache, env=PHONES_HERE_ENV)
    try:
        page = open_as(browser, access.join_url("localhost", restarted.port, info.code))
        page.get_by_text("Up or down with depth?").wait_for()  # same class, same code, same open question
        page.get_by_role("button", name="down").click()
        page.get_by_text("Answer received").wait_for()
        page.context.close()
    finally:
        restarted.stop()
    after = ClassStore(cache / "classroom.sqlite3").counts(qid)
    assert after == {"up": before["up"], "down": before["down"] + 1}


@pytest.fixture(scope="module")
def class_server(tmp_path_factory):
    """`streamlit run app.py --server.port N -- --class`, with .streamlit/config.toml (which says localhost)."""
    chromium_path()
    server = StreamlitServer(NO_MODEL, tmp_path_factory.mktemp("class-mode"), config_only=True, script_args=["--class"])
    yield server
    server.stop()


def test_class_mode_listens_on_the_network_and_announces_the_class(class_server):
    import psutil

    from tests.unit.test_server_config import _websocket_handshake

    deadline = time.time() + 30
    while "students open" not in class_server.log.read_text() and time.time() < deadline:
        time.sleep(0.5)
    log = class_server.log.read_text()
    info = store_of(class_server).active_class()
    lan = access.lan_address()
    assert info is not None and f"class code {info.code}" in log
    assert access.join_url(lan or "localhost", class_server.port, info.code) in log
    process = psutil.Process(class_server.process.pid)  # the same process: the command ran again in place
    listening = [c.laddr for c in process.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert [a.ip for a in listening if a.port == class_server.port] == [access.CLASS_BIND_ADDRESS], listening
    assert ipaddress.ip_address(access.CLASS_BIND_ADDRESS).is_unspecified
    if lan:  # this machine's network address is an allowed Host; another name still is not (DNS rebinding)
        assert _websocket_handshake(class_server, f"http://{lan}:{class_server.port}",
                                    host=f"{lan}:{class_server.port}") == 101
    assert _websocket_handshake(class_server, f"http://evil.example:{class_server.port}",
                                host=f"evil.example:{class_server.port}") == 403


def test_class_mode_teacher_here_student_over_the_network(browser, class_server):
    """Default teacher addresses: this machine's browser on localhost is the teacher; the same browser through the
    machine's network address is another device to the server, so it gets the student view."""
    lan = access.lan_address()
    if lan is None:
        pytest.skip("this machine has no network address")
    info = store_of(class_server).active_class()
    teacher = open_as(browser, f"{class_server.url}/", viewport={"width": 1400, "height": 1000})
    teacher.locator('[data-testid="stSidebar"]').get_by_text("Live class").wait_for()
    teacher.get_by_text(f"Class code: {info.code}").wait_for()
    student = open_as(browser, access.join_url(lan, class_server.port, info.code))
    student.get_by_text("Waiting for the teacher").wait_for()
    assert is_student_view(student)
    teacher.get_by_text("Students", exact=True).wait_for()  # the count; "Students open …" is the join line
    teacher.get_by_text("Export the session").scroll_into_view_if_needed()
    teacher.wait_for_timeout(500)
    screenshot(teacher, "class_teacher_panel")
    teacher.context.close()
    student.context.close()


def test_forwarded_for_reaches_the_server(browser, class_server):
    """The control for test_spoofed_forwarded_for_does_not_make_a_teacher: the teacher's own browser on localhost,
    sending X-Forwarded-For, is only a student, so the header does reach the server's connection."""
    page = open_as(browser, f"{class_server.url}/", {"X-Forwarded-For": "127.0.0.1"})
    wait_for_student_view(page)
    assert is_student_view(page)
    page.context.close()


def test_a_student_cannot_upload(student_server, class_server):
    """The running app refuses a student's upload before Streamlit reads it (app.py's StudentGate,
    app_pages/shell/class_server.py); the teacher's own upload without an XSRF token is refused by Streamlit itself,
    with another message."""
    from app_pages.shell.class_server import UPLOAD_REFUSED
    from tests.unit.test_server_config import _request

    headers = {"Content-Type": "multipart/form-data; boundary=x"}
    status, _, body = _request(student_server, "PUT", "/_stcore/upload_file/some-session/some-file", headers)
    assert (status, body) == (403, UPLOAD_REFUSED)
    status, _, body = _request(class_server, "PUT", "/_stcore/upload_file/some-session/some-file", headers)
    assert status == 403 and body != UPLOAD_REFUSED
