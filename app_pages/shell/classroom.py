"""Live class in the app (issue 36): who gets the full app, the student view, and the teacher's class panel.

`student_gate()` runs first in every session's script (router.main), before any page code: a connection that is not
the teacher's (core.classroom.access.is_teacher_connection: the socket's peer address, never a header) gets only
the student view — no sidebar, no navigation, no page, job, upload, model load or run — whatever URL it opened.
The student view polls the class's current question (a fragment, every POLL_SECONDS), shows it with large buttons or
a text box, takes one answer per device, changeable until the reveal, then shows the right answer. A device is the
connection's network address (ClassStore.address_device), so a reload or a new tab is the same device; with
BERTLENS_CLASS_DEVICE=browser it is the browser session (a random id in st.session_state). A session is bound to
the class it joined by id and code: a class forgotten and another started, the phone joins again. Wrong codes are
throttled per address (ClassStore.join). A store that cannot write (full disk) is one sentence on the phone.
In class mode the teacher's sidebar gets the class panel: join link, QR code, class code, live number of students,
End class, Export the session (CSV), Forget this class.
"""

from __future__ import annotations

import secrets

import streamlit as st
from streamlit.runtime import exists, get_instance
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.classroom import access
from core.classroom.store import (MAX_ANSWER_CHARS, MAX_NICKNAME_CHARS, ClassInfo, ClassroomError, ClassStore,
                                  StorageError, shared_store)
from core.safe_text import markdown_text

DEVICE_KEY = "class.device"
CLASS_KEY = "class.joined"  # the id of the class this browser joined
CLASS_CODE_KEY = "class.joined_code"  # and its code: an id alone could name another class after a forget
TEACHER_ERROR_KEY = "class.teacher_error"  # what the last class-panel button could not do
NICKNAME_KEY = "class.nickname"
FEEDBACK_KEY = "class.feedback"  # (question id, "ok" | "rejected", text) of the last answer sent
CODE_INPUT_KEY = "class.code_input"
POLL_SECONDS = 2.0
# Phones: full-width buttons tall enough for a thumb, large text. A constant: no user text in it.
STUDENT_STYLE = ('<style>[data-testid="stButton"] button, [data-testid="stFormSubmitButton"] button '
                 '{min-height: 3.4rem;} [data-testid="stButton"] button p, [data-testid="stFormSubmitButton"] '
                 'button p {font-size: 1.3rem;} [data-testid="stSidebarCollapsedControl"] {display: none;}</style>')


def connection() -> tuple[str | None, list[tuple[str, str]]] | None:
    """The session's connection as the server accepted it: (peer address, handshake headers); None when the script
    runs without a server (a bare `python app.py`, or AppTest, whose runtime is a mock answering mocks)."""
    ctx = get_script_run_ctx()
    if ctx is None or not exists():
        return None
    client = get_instance().get_client(ctx.session_id)
    context = getattr(client, "client_context", None)
    # client_context.remote_ip is the raw TCP peer (st.context.ip_address hides loopback as None); a real server
    # gives a string, or None when it has no peer (then is_teacher_address says student).
    if context is None or not isinstance(context.remote_ip, (str, type(None))):
        return None
    return context.remote_ip, list(context.headers)


def is_teacher() -> bool:
    """Whether this session gets the full app. No browser connection at all (AppTest) counts as the teacher's, as
    before class mode existed; tests make a student by replacing this function."""
    seen = connection()
    if seen is None:
        return True
    address, headers = seen
    return access.is_teacher_connection(address, headers)


def student_gate() -> bool:
    """Draw the student view and return True for a student's session; False (nothing drawn) for the teacher's.
    A bad BERTLENS_TEACHER_ADDRESSES stops every session with its message: nobody is let in by a typo."""
    try:
        teacher = is_teacher()
        access.device_mode()  # a bad BERTLENS_CLASS_DEVICE is said here, not on the first student's phone only
    except ValueError as err:
        st.error(markdown_text(str(err)))
        st.stop()
    if teacher:
        return False
    student_view()
    return True


# --- the student's side ---

def student_view() -> None:
    st.set_page_config(page_title="BERT Lens class", page_icon="app_pages/assets/icon.png", layout="centered",
                       initial_sidebar_state="collapsed")
    st.markdown(STUDENT_STYLE, unsafe_allow_html=True)
    st.title("BERT Lens class")
    try:
        _student_page()
    except StorageError as err:  # the class's file cannot be read or written: one sentence, no path
        st.error(markdown_text(str(err)))


def student_address() -> str | None:
    """The connection's network address in one spelling (IPv4 seen through IPv6 as IPv4); None without a server
    (AppTest) or a peer address."""
    seen = connection()
    parsed = access.parse_address(seen[0]) if seen is not None else None
    return None if parsed is None else str(parsed)


def student_device(store: ClassStore, address: str | None) -> str:
    """This session's device id: its address's (the default), or the session's own random id with
    BERTLENS_CLASS_DEVICE=browser or when there is no address."""
    if address is not None and access.device_mode() == "address":
        st.session_state[DEVICE_KEY] = store.address_device(address)
    return st.session_state.setdefault(DEVICE_KEY, secrets.token_urlsafe(12))


def joined_class(store: ClassStore) -> ClassInfo | None:
    """The class this session joined, while it is still the class with the code it joined with."""
    if CLASS_KEY not in st.session_state:
        return None
    info = store.get_class(st.session_state[CLASS_KEY])
    if info is None or info.code != st.session_state.get(CLASS_CODE_KEY):
        st.session_state.pop(CLASS_KEY, None)
        st.session_state.pop(CLASS_CODE_KEY, None)
        return None
    return info


def _student_page() -> None:
    store = shared_store()
    address = student_address()
    device = student_device(store, address)
    joined = joined_class(store)
    if joined is None:
        link_code = st.query_params.get("class")
        if link_code and not st.session_state.get("class.link_tried"):
            st.session_state["class.link_tried"] = True  # a stale link is tried once, then the form is shown
            _join(link_code, device, address)
            joined = joined_class(store)
    if joined is None:
        _join_form(device, address)
        return
    question_panel(joined.id, joined.code, device)
    st.text_input("Nickname (optional)", key=NICKNAME_KEY, max_chars=MAX_NICKNAME_CHARS,
                  help="Shown to nobody but the teacher's export. Leave it empty to stay anonymous.")


def _join(code: str, device: str, address: str | None) -> None:
    try:
        info = shared_store().join(code, device, st.session_state.get(NICKNAME_KEY) or None, address=address)
    except ClassroomError as err:
        st.session_state[FEEDBACK_KEY] = (None, "rejected", str(err))
        return
    st.session_state[CLASS_KEY] = info.id
    st.session_state[CLASS_CODE_KEY] = info.code
    st.session_state.pop(FEEDBACK_KEY, None)


def _join_form(device: str, address: str | None) -> None:
    st.write("Type the class code shown on the teacher's screen.")
    with st.form("class.join", border=False):
        code = st.text_input("Class code", key=CODE_INPUT_KEY, max_chars=12, placeholder="e.g. K7M2Q")
        if st.form_submit_button("Join", type="primary", width="stretch"):
            _join(code, device, address)
            if CLASS_KEY in st.session_state:
                st.rerun()
    _feedback(None)


def _send(question_id: int, device: str, text: str, class_code: str) -> None:
    """A button's callback (it runs before the script, so it catches everything the store says, a full disk too)."""
    try:
        shared_store().answer(question_id, device, text, st.session_state.get(NICKNAME_KEY) or None,
                              class_code=class_code)
    except ClassroomError as err:
        st.session_state[FEEDBACK_KEY] = (question_id, "rejected", str(err))
        return
    st.session_state[FEEDBACK_KEY] = (question_id, "ok", text)


def _feedback(question_id: int | None) -> None:
    shown = st.session_state.get(FEEDBACK_KEY)
    if not shown or shown[0] != question_id:
        return
    _, kind, text = shown
    if kind == "rejected":
        st.warning(markdown_text(text))


@st.fragment(run_every=POLL_SECONDS)
def question_panel(class_id: int, code: str, device: str) -> None:
    """The class's current question, read again every POLL_SECONDS: new question, reveal and end show by themselves."""
    try:
        _question(class_id, code, device)
    except StorageError as err:
        st.error(markdown_text(str(err)))


def _question(class_id: int, code: str, device: str) -> None:
    store = shared_store()
    info = store.get_class(class_id)
    if info is None or info.code != code or not info.running:  # ended, or forgotten (its id may be another's)
        st.info("The class has ended. Thank you!")
        return
    current = store.current_question(class_id)
    if current is None:
        st.info("You are in. Waiting for the teacher's question…")
        return
    question = current.question
    st.subheader(markdown_text(question.prompt))
    mine = store.answer_of(current.id, device)
    if current.revealed:
        if current.correct is not None:
            st.success(f"The answer: **{markdown_text(current.correct)}**")
        else:
            st.info("Answers are closed.")
        if mine is not None:
            verdict = "" if current.correct is None else (" — right!" if mine.text == current.correct else "")
            st.write(f"You answered {markdown_text(mine.text)}{verdict}")
        return
    for i, choice in enumerate(question.choices):
        chosen = mine is not None and mine.text == choice
        st.button(markdown_text(choice), key=f"class.choice.{current.id}.{i}", width="stretch",
                  type="primary" if chosen else "secondary", icon=":material/check:" if chosen else None,
                  on_click=_send, args=(current.id, device, choice, code))
    if question.free_text:
        with st.form(f"class.free.{current.id}", border=False):
            text = st.text_input("Your answer", max_chars=MAX_ANSWER_CHARS, key=f"class.text.{current.id}")
            if st.form_submit_button("Send", type="primary", width="stretch"):
                _send(current.id, device, text, code)
                mine = store.answer_of(current.id, device)
    if mine is not None:
        st.success(f"Answer received: **{markdown_text(mine.text)}**. You can change it until the reveal.",
                   icon=":material/done:")
    _feedback(current.id)


# --- the teacher's side ---

def teacher_panel() -> None:
    """The sidebar's class panel, in class mode only."""
    if not access.class_mode():
        return
    with st.sidebar.expander("Live class", expanded=True, icon=":material/groups:"):
        failed = st.session_state.pop(TEACHER_ERROR_KEY, None)
        if failed:
            st.error(markdown_text(failed))
        try:
            _class_panel(shared_store())
        except StorageError as err:  # the teacher is told where: the file and what went wrong
            st.error(markdown_text(err.for_teacher))


def _safely(action, *args) -> None:
    """A class-panel button's callback: what the store says (a full disk) is shown in the panel, not as a traceback."""
    try:
        action(*args)
    except StorageError as err:
        st.session_state[TEACHER_ERROR_KEY] = err.for_teacher
    except ClassroomError as err:
        st.session_state[TEACHER_ERROR_KEY] = str(err)


def _class_panel(store: ClassStore) -> None:
    """The panel's body (teacher_panel draws it inside its expander)."""
    info = store.active_class()
    if info is None:
        st.caption("No class is running.")
        st.button("Start a class", key="class.start", type="primary", on_click=_safely, args=(store.start_class,))
        ended = store.classes()
        if ended:
            _export_and_forget(ended[-1].id, ended[-1].code, "the last class")
        return
    host, port = access.lan_address() or "localhost", int(st.get_option("server.port"))
    url = access.join_url(host, port, info.code)
    st.markdown(f"Class code: **{markdown_text(info.code)}**")
    # the address alone fits the sidebar's width; the whole link, wrapped there, broke inside the port number
    st.markdown(f"Students open **{markdown_text(access.server_address(host, port))}** and type "
                "the code, or scan:")
    st.image(access.qr_png(url), caption="Scan to join", width=200)
    st.code(url, language=None, wrap_lines=False)
    student_count(info.id)
    st.button("End class", key="class.end", on_click=_safely, args=(store.end_class, info.id),
              help="Students' code expires and answers close. The answers stay until you forget the class.")
    _export_and_forget(info.id, info.code, "this class")


@st.fragment(run_every=POLL_SECONDS)
def student_count(class_id: int) -> None:
    try:
        st.metric("Students", shared_store().student_count(class_id))
    except StorageError as err:
        st.error(markdown_text(err.for_teacher))


def _export_and_forget(class_id: int, code: str, which: str) -> None:
    store = shared_store()
    st.download_button("Export the session (CSV)", data=store.export_csv(class_id), file_name=f"class-{code}.csv",
                       mime="text/csv", key=f"class.export.{class_id}", on_click="ignore")
    with st.popover(f"Forget {which}"):
        st.write("Deletes its questions and every answer from this computer. This cannot be undone.")
        st.button("Delete it", key=f"class.forget.{class_id}", type="primary", on_click=_safely,
                  args=(store.forget, class_id))
