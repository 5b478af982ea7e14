"""Loopback ports leased to fleet members until they stop.

Binding port 0 and closing hands out a port from the ephemeral range, the one outgoing
connections use too, and another worker may take it before the server binds it. So
ports come from below the ephemeral range, and each is leased with an exclusive ``flock`` on a
file in a folder every xdist worker of the run shares: no other test or worker of this run can
take it, and the kernel drops the lease if the leasing process dies.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
from dataclasses import dataclass
from pathlib import Path

from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError

_FALLBACK_EPHEMERAL_LOW = 32768
_LOWEST = 20000


def ephemeral_low() -> int:
    """The first port of the range outgoing connections use (Linux: ip_local_port_range)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(text[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_EPHEMERAL_LOW  # macOS uses 49152 and up: below 32768 is safe too


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((host, port))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def port_owner(port: int) -> str:
    """Who listens on ``port`` (best effort: 'pid N (name)'), for messages."""
    try:
        import psutil

        for connection in psutil.net_connections(kind="tcp"):
            if connection.laddr and connection.laddr.port == port and connection.status == "LISTEN":
                if connection.pid:
                    name = psutil.Process(connection.pid).name()
                    return f"pid {connection.pid} ({name})"
                return "another process"
    except Exception:
        pass
    return "another process"


@dataclass
class Lease:
    port: int
    _descriptor: int | None

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the descriptor drops the flock
            self._descriptor = None


class PortLeases:
    """Hands out leased loopback ports; ``folder`` must be shared by every worker of the run."""

    def __init__(self, folder: Path, seed: int | None = None) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._random = random.Random(seed)

    def _try(self, port: int) -> Lease | None:
        path = self.folder / f"{port}.lease"
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise
        if not port_is_free(port):
            os.close(descriptor)
            return None
        return Lease(port, descriptor)

    def lease(self, count: int) -> list[Lease]:
        candidates = list(range(_LOWEST, ephemeral_low()))
        self._random.shuffle(candidates)
        leases: list[Lease] = []
        for port in candidates:
            lease = self._try(port)
            if lease is not None:
                leases.append(lease)
                if len(leases) == count:
                    return leases
        for lease in leases:
            lease.release()
        raise StartupGuardError(
            f"no {count} free loopback ports between {_LOWEST} and {ephemeral_low()}"
        )

    def lease_exactly(self, ports: list[int], where: str = "ports") -> list[Lease]:
        """Lease the ports a test asked for by number; a port in use is a clear error."""
        leases: list[Lease] = []
        for position, port in enumerate(ports):
            if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                for lease in leases:
                    lease.release()
                raise InvalidArgumentError(
                    f"invalid port {port!r} ({where}[{position}]): expected 1-65535"
                )
            taken = self._try(port)
            if taken is None:
                for held in leases:
                    held.release()
                owner = port_owner(port) if not port_is_free(port) else "another test of this run"
                raise StartupGuardError(
                    f"port {port} ({where}[{position}]) is in use on 127.0.0.1 by {owner};"
                    " leave ports= out to get free ones leased for you"
                )
            leases.append(taken)
        return leases
