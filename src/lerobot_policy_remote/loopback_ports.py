"""Free TCP ports on 127.0.0.1 for the servers, routers and robots a program starts on one host (the demo, the
fleet simulator, a direct-mode server, the test kit), chosen where nothing else is handed them.

Why not `bind(("127.0.0.1", 0))`: the kernel picks that port from its ephemeral range, frees it when the probe
closes, and may hand it to the next `connect()` or `bind(0)` anywhere on the host before its user binds it (under a
busy test run, a server then failed to start: "the health port ... is already in use"). Ports below that range are
never handed out by the kernel, so only another caller of this module could meet one: each process walks them from
its own starting point, skipping those it handed out and those it cannot bind.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000  # below: well-known and registered services' ports


class _Walk:
    """This process's walk over the ports: where it is, and what it handed out."""

    def __init__(self, pid: int, start: int) -> None:
        self.pid = pid
        self.next = start
        self.handed: set[int] = set()


_lock = threading.Lock()
_walk: _Walk | None = None


def _below_ephemeral() -> range:
    """Ports from `_LOWEST` up to the kernel's ephemeral range (empty when that range starts lower)."""
    try:
        first = int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768  # Linux's default
    return range(_LOWEST, max(_LOWEST, first))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that the kernel will not hand to anyone else: below
    its ephemeral range when there is room, else one the kernel picks."""
    global _walk
    ports = _below_ephemeral()
    with _lock:
        if _walk is None or _walk.pid != os.getpid():  # a forked child walks from its own point, not its parent's
            _walk = _Walk(os.getpid(), (os.getpid() * 7919) % max(len(ports), 1))
        for _ in range(min(len(ports), 512)):
            port = ports[_walk.next % len(ports)]
            _walk.next += 1
            if port not in _walk.handed and _bindable(port):
                _walk.handed.add(port)
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
