"""Under ``hub_remote`` no process of the test reaches an address other than loopback.

The child runtime reports, once ``record_footprint`` was asked, every ``socket.connect`` and
every ``socket.getaddrinfo`` a Python process makes (``runtime/footprint.py``). A connect to an
internet address outside 127.0.0.0/8, ``::1`` and the unspecified addresses, or a lookup of a
name that is not this machine's own (``localhost``, its host name), is a process trying to
reach the network: a library that kept ``huggingface.co`` as its endpoint, telemetry, an
update check. Without a network the lookup is usually all there is to see, so both count.

What is not seen: the test process itself (the child runtime watches only its file accesses),
processes that are not Python or run without the runtime, and connects made in C without an
audit event (a native HTTP client).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pytest_startup_guard.runtime.controller import RuntimeController

_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _own_names() -> set[str]:
    names = set(_LOCAL_NAMES)
    try:
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    except OSError:  # pragma: no cover - a machine without a host name
        pass
    return names


def _is_local_host(host: str, own: set[str]) -> bool:
    host = host.strip("[]").lower()
    if host in own or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _connect_host(path: str) -> str | None:
    """The host of a connect's ``host:port`` / ``[host]:port``; None for a Unix socket."""
    if path.startswith(("/", "@")) or ":" not in path:
        return None
    return path.rsplit(":", 1)[0]


def off_loopback(controller: RuntimeController, url: str) -> list[str]:
    """One line per process and address other than loopback it connected to or looked up."""
    own = _own_names()
    hub = urlsplit(url).netloc
    seen: dict[tuple[int, str, str], None] = {}
    for event in list(controller.footprint):
        if event.op == "socket.connect":
            host = _connect_host(event.path)
            if host is None or _is_local_host(host, own):
                continue
            seen[(event.pid, "connected to", event.path)] = None
        elif event.op == "socket.getaddrinfo":
            if _is_local_host(event.path, own):
                continue
            seen[(event.pid, "looked up", event.path)] = None
    problems = []
    for pid, verb, address in seen:
        record = controller.processes.get(pid)
        who = f"process {pid}"
        if record is not None:
            who += f" ({'member ' + record.member + ', ' if record.member else ''}"
            command = " ".join(" ".join(record.argv).split())  # one line, whatever argv holds
            who += f"{command[:80]})"
        problems.append(
            f"{who} {verb} {address}: under hub_remote a process reaches loopback only (the"
            f" test's hub is {hub}); point the code at HF_ENDPOINT, or turn off what calls out"
        )
    return problems
