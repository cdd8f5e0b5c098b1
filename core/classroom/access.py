"""Who is the teacher, and how students reach a class (issue 36).

The teacher is whoever connects from an address in BERTLENS_TEACHER_ADDRESSES (comma-separated addresses or
networks, e.g. "127.0.0.1,::1" or "192.168.1.0/24"; default: the loopback addresses, i.e. the computer the server
runs on). Any other connection is a student. The address is the TCP peer of the connection the server accepted,
never a header: a browser can put anything in a header, not in the socket's peer address. The server is told not
to believe X-Forwarded-For (app_pages/shell/class_server.py sets FORWARDED_ALLOW_IPS to nothing).

One answer per question per device, and a device is, by default, a network address: new browser sessions (a
reload, another tab, a script opening websockets) from one phone are still one vote. BERTLENS_CLASS_DEVICE=browser
makes each browser session a device instead: for a teacher trying a class with several tabs on one computer, or a
network where the phones reach this computer through one address (a proxy, or NAT between them).

Class mode (`streamlit run app.py -- --class`, or BERTLENS_CLASS=1) serves on the local network: `CLASS_BIND_ADDRESS`
on every interface, with the machine's own names added to the allowed Host names (`allowed_hosts`).
"""

from __future__ import annotations

import io
import ipaddress
import os
import socket
import sys
from urllib.parse import urlencode

import segno

TEACHER_ENV = "BERTLENS_TEACHER_ADDRESSES"
CLASS_ENV = "BERTLENS_CLASS"
DEVICE_ENV = "BERTLENS_CLASS_DEVICE"
DEVICE_MODES = ("address", "browser")  # the first is the default
CLASS_FLAG = "--class"
CLASS_BIND_ADDRESS = "0.0.0.0"  # every IPv4 interface: phones on a school network reach the teacher's laptop
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # .streamlit/config.toml's allowedHosts
FORWARDING_HEADERS = frozenset({"x-forwarded-for", "forwarded", "x-real-ip"})
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
# A documentation address (RFC 5737): "connecting" a UDP socket to it sends nothing and reveals which local
# address the default route would use, i.e. the one other devices on the network see.
_ROUTE_PROBE = ("192.0.2.254", 9)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def class_mode(argv: list[str] | None = None, environ=None) -> bool:
    """True when the app was started for a class: `streamlit run app.py -- --class` or BERTLENS_CLASS=1."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    return CLASS_FLAG in argv[1:] or _truthy(environ.get(CLASS_ENV))


def device_mode(environ=None) -> str:
    """What one device is for the one-answer rule (BERTLENS_CLASS_DEVICE, see the module docstring): "address"
    (default) or "browser"."""
    environ = os.environ if environ is None else environ
    mode = (environ.get(DEVICE_ENV) or DEVICE_MODES[0]).strip().lower()
    if mode not in DEVICE_MODES:
        raise ValueError(f"{DEVICE_ENV}: {mode!r} is not one of {', '.join(DEVICE_MODES)} (address: one answer per "
                         "network address; browser: one per browser session, for trying a class on one computer).")
    return mode


def teacher_networks(environ=None) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """BERTLENS_TEACHER_ADDRESSES as networks (an address is a network of one); the loopback ones when unset."""
    environ = os.environ if environ is None else environ
    raw = (environ.get(TEACHER_ENV) or "").strip()
    if not raw:
        return LOOPBACK
    networks = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
        except ValueError:
            raise ValueError(f"{TEACHER_ENV}: {item!r} is not an IP address or network "
                             "(e.g. 127.0.0.1,::1 or 192.168.1.0/24).") from None
    return tuple(networks)


def parse_address(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A peer address as the server reports it -> an address; IPv4 seen through an IPv6 socket (::ffff:a.b.c.d) as
    IPv4, an IPv6 zone (%eth0) dropped. None when missing or not an address."""
    if not address:
        return None
    try:
        parsed = ipaddress.ip_address(address.strip().strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def is_teacher_address(address: str | None, environ=None) -> bool:
    """Whether a connection from `address` gets the full app. An unknown address is a student's."""
    parsed = parse_address(address)
    if parsed is None:
        return False
    return any(parsed.version == network.version and parsed in network for network in teacher_networks(environ))


def is_teacher_connection(address: str | None, headers=(), environ=None) -> bool:
    """Whether a connection gets the full app: its peer `address` is a teacher's, and its handshake `headers`
    ((name, value) pairs) carry no forwarding header. A proxy (or anyone) may send X-Forwarded-For, and the server
    in front may have believed it and replaced the peer address with it; such a connection can only be a student's,
    so a spoofed header never turns a student into the teacher."""
    if any(str(name).lower() in FORWARDING_HEADERS for name, _ in headers):
        return False
    return is_teacher_address(address, environ)


def lan_address() -> str | None:
    """The address other devices on the local network reach this machine at; None without a network."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(_ROUTE_PROBE)
            address = probe.getsockname()[0]
        except OSError:
            address = None
    if address and not ipaddress.ip_address(address).is_loopback:
        return address
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return None if ipaddress.ip_address(address).is_loopback else address


def allowed_hosts(lan: str | None, hostname: str | None = None) -> list[str]:
    """The Host names the server accepts in class mode: this machine's local names, its network address and its
    own name (with the ".local" a phone may use on a network with mDNS). Only names of this machine: a page on
    another domain re-pointed at this address (DNS rebinding) still sends its own name and is still refused."""
    hostname = (socket.gethostname() if hostname is None else hostname).strip().lower().rstrip(".")
    names = [*LOCAL_HOSTS, *([lan] if lan else [])]
    if hostname and hostname != "localhost":
        names += [hostname] if hostname.endswith(".local") else [hostname, f"{hostname}.local"]
    return list(dict.fromkeys(names))


def server_address(host: str, port: int) -> str:
    """The app's root as a student types it: http://host:port (an IPv6 host in brackets)."""
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def join_url(host: str, port: int, code: str) -> str:
    """The link a student opens: the app's root with the class code, which fills the join box."""
    return f"{server_address(host, port)}/?{urlencode({'class': code})}"


def qr_png(url: str, *, scale: int = 6) -> bytes:
    """The join link as a QR code (PNG), drawn here: no image service is asked."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=scale, border=2)
    return out.getvalue()


def qr_text(url: str) -> str:
    """The join link as a QR code in text (two rows per line of block characters), for the server's terminal."""
    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True, border=2)
    return out.getvalue()
