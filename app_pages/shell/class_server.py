"""Class mode, server side: what app.py does when the server imports it for `streamlit run app.py -- --class` (or
with BERTLENS_CLASS=1). Without class mode it does nothing: the server stays on localhost (.streamlit/config.toml).

Streamlit 1.67 binds its socket before it imports app.py (streamlit.web.server.starlette.starlette_server:
UvicornRunner.run binds, then uvicorn imports "app:app"), so app.py cannot change the address of the process it
is imported in. In class mode the first import therefore runs the same command line again (`sys.orig_argv`, same
process id: `os.execve`) with the network settings in the environment variables the `streamlit` command reads
like its flags:
  STREAMLIT_SERVER_ADDRESS=0.0.0.0         listen on every interface, so phones on the room's network connect;
  STREAMLIT_SERVER_ALLOWED_HOSTS           localhost, 127.0.0.1, ::1, this machine's network address and name
                                           (core.classroom.access.allowed_hosts: still only this machine's names,
                                           so the DNS-rebinding protection stays);
  FORWARDED_ALLOW_IPS=""                   uvicorn believes no X-Forwarded-For header from anyone (by default it
                                           believes one from 127.0.0.1), so a peer address is always the socket's.
The second import (SERVING_ENV set) opens the running class, or starts one, and prints its join link, QR code
and code. Light on purpose: app.py imports this module before the server answers.
"""

from __future__ import annotations

import os
import sys

from streamlit import config as streamlit_config
from streamlit.logger import get_logger
from streamlit.proto.BackMsg_pb2 import BackMsg  # already loaded by streamlit's server

from core.classroom import access
from core.classroom.store import shared_store

SERVING_ENV = "BERTLENS_CLASS_SERVING"
_log = get_logger("bertlens.class")


def network_environment(environ, lan: str | None) -> dict[str, str]:
    """`environ` plus the settings that serve the class on the network (the module docstring lists them)."""
    return {**environ, "STREAMLIT_SERVER_ADDRESS": access.CLASS_BIND_ADDRESS,
            "STREAMLIT_SERVER_ALLOWED_HOSTS": " ".join(access.allowed_hosts(lan)), "FORWARDED_ALLOW_IPS": "",
            access.CLASS_ENV: "1", SERVING_ENV: "1"}


def prepare() -> None:
    """Called once by app.py as the server imports it. Class mode: serve on the network (re-running the command
    once, see above), then announce the class. Otherwise nothing."""
    if not access.class_mode():
        return
    if os.environ.get(SERVING_ENV) != "1":
        environment = network_environment(os.environ, access.lan_address())
        sys.stdout.flush()
        sys.stderr.flush()
        # Streamlit made its listening socket inheritable; the new image must not keep it, or its own bind of the
        # same port fails. Nothing else is open that the new image needs beyond stdin, stdout and stderr.
        os.closerange(3, _highest_fd())
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)
    address = streamlit_config.get_option("server.address")
    if address != access.CLASS_BIND_ADDRESS:  # a --server.address flag beats the environment: say so, go on
        _log.warning("class mode: the server listens on %s only (a --server.address flag?), so phones may not "
                     "reach it; start it with `streamlit run app.py -- --class` and no --server.address.", address)
    announce()


def _highest_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the C runtime's usual limit
        return 8192


def announce() -> None:
    """Open (or resume, after a restart) the class and print how students join."""
    store = shared_store()
    info = store.active_class() or store.start_class()
    lan = access.lan_address()
    url = access.join_url(lan or "localhost", int(streamlit_config.get_option("server.port")), info.code)
    lines = ["", "BERT Lens class mode: students open", f"    {url}",
             f"or type the class code {info.code} at http://{lan or 'localhost'}:"
             f"{streamlit_config.get_option('server.port')}/", access.qr_text(url)]
    if lan is None:
        lines.append("This computer has no network address: connect it to the room's network (Wi-Fi) first.")
    print("\n".join(lines), flush=True)


# What a student's browser needs of Streamlit's own routes (/_stcore/...): the health check and host config it polls,
# and the websocket its session runs on. Every other one (metrics with cache names and session counts, uploads,
# custom-component files, the agent API, and any route a later Streamlit adds) is the teacher's.
STUDENT_CORE_ROUTES = frozenset({"health", "host-config", "stream"})
STREAM_ROUTE = "stream"
UPLOAD_ROUTE = "upload_file"
# What a student's session may ask of the server over its websocket: a run of the student view (with its widget
# values, query string and fragment) and the heartbeat that keeps the connection alive. Not clear_cache (it empties
# every session's caches: the teacher's model would load again), stop_script, set_run_on_save, load_git_info,
# file_urls_request (upload slots), backend_operation_request (dataframe chunks) or the debug messages.
STUDENT_BACK_MSGS = frozenset({"rerun_script", "app_heartbeat"})
UPLOAD_REFUSED = b"Uploads are the teacher's: this device is a student's."
STUDENT_REFUSED = b"This is the teacher's: this device is a student's."


def core_route(path: str) -> str | None:
    """The part of a request path after Streamlit's "/_stcore/" (any server.baseUrlPath before it), e.g. "metrics"
    or "upload_file/SESSION/FILE"; None for a path outside it (the page, its static files, media)."""
    _, found, route = path.partition("/_stcore/")
    return route if found else None


def student_back_msg(data: bytes) -> bytes | None:
    """A student's websocket frame as the server may see it, or None to drop it. A run keeps everything but the page
    it names: the student view is the app's main script whatever page is asked (app_pages/shell/classroom.py), and
    a page name or hash would only change which page Streamlit thinks is open. A frame that is not a BackMsg goes on
    as it is: Streamlit closes the connection on it."""
    message = BackMsg()
    try:
        message.ParseFromString(data)
    except Exception:  # protobuf's DecodeError, or worse: Streamlit's own parse says so and closes
        return data
    kind = message.WhichOneof("type")
    if kind not in STUDENT_BACK_MSGS:
        return None
    if kind == "rerun_script" and (message.rerun_script.page_script_hash or message.rerun_script.page_name):
        message.rerun_script.ClearField("page_script_hash")
        message.rerun_script.ClearField("page_name")
        return message.SerializeToString()
    return data


class StudentGate:
    """ASGI middleware (st.App's `middleware`) that keeps a student's connection to what the student view needs,
    decided like the student gate, by the socket's peer and the request's headers
    (core.classroom.access.is_teacher_connection):
    - of Streamlit's routes only STUDENT_CORE_ROUTES; any other (/_stcore/metrics, an upload, ...) answers 403
      before Streamlit reads the request (Streamlit would otherwise keep whatever a student PUTs, up to
      server.maxUploadSize a file, in memory, although no student page has an upload box);
    - on the session's websocket only STUDENT_BACK_MSGS (student_back_msg): any other message is dropped before
      Streamlit sees it, so a student cannot clear the server's caches (issue 44).
    The teacher's connections pass untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        route = core_route(scope.get("path", "")) if scope["type"] in ("http", "websocket") else None
        if route is None or _is_teacher(scope):
            await self.app(scope, receive, send)
        elif route not in STUDENT_CORE_ROUTES:
            await _refuse(scope, send, UPLOAD_REFUSED if route.startswith(UPLOAD_ROUTE) else STUDENT_REFUSED)
        elif scope["type"] == "websocket" and route == STREAM_ROUTE:
            await self.app(scope, _answers_only(receive, scope), send)
        else:
            await self.app(scope, receive, send)


def _is_teacher(scope) -> bool:
    peer = (scope.get("client") or (None,))[0]
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope.get("headers", [])]
    return access.is_teacher_connection(peer, headers)


async def _refuse(scope, send, body: bytes) -> None:
    if scope["type"] == "websocket":  # closing before the handshake is accepted: the server answers 403
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": body})


def _answers_only(receive, scope):
    """`receive` for a student's websocket: the frames student_back_msg lets through, the others dropped (the first
    one of a connection is logged, not each: a loop of them would fill the log)."""
    logged = False

    async def receive_answers():
        nonlocal logged
        while True:
            message = await receive()
            if message["type"] != "websocket.receive" or message.get("bytes") is None:
                return message
            data = student_back_msg(message["bytes"])
            if data is not None:
                return {**message, "bytes": data}
            if not logged:
                logged = True
                _log.warning("class mode: dropped a message a student's connection (%s) may not send",
                             (scope.get("client") or ("?",))[0])

    return receive_answers
