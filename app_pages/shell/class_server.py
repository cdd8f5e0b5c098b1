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


UPLOAD_PATH = "/_stcore/upload_file"
UPLOAD_REFUSED = b"Uploads are the teacher's: this device is a student's."


class TeacherOnlyUploads:
    """ASGI middleware (st.App's `middleware`): an upload from a connection that is not the teacher's is refused
    (403) before Streamlit reads its body. A student's session is a live session, and Streamlit would otherwise
    keep whatever it PUTs (up to server.maxUploadSize a file) in memory, although no student page has an upload
    box. Decided like the student gate: the socket's peer and the request's headers
    (core.classroom.access.is_teacher_connection)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").startswith(UPLOAD_PATH):
            peer = (scope.get("client") or (None,))[0]
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope.get("headers", [])]
            if not access.is_teacher_connection(peer, headers):
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send({"type": "http.response.body", "body": UPLOAD_REFUSED})
                return
        await self.app(scope, receive, send)
