"""Loopback ports (loopback_ports.py): taken below the kernel's ephemeral range, so no outgoing connection or
`bind(0)` elsewhere on the host is handed one before its user binds it; never the same one twice in a process."""

from __future__ import annotations

import socket
from pathlib import Path

from lerobot_policy_remote import loopback_ports
from lerobot_policy_remote.loopback_ports import free_loopback_port


def _ephemeral_first() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_ports_come_from_below_the_ephemeral_range_and_bind():
    first = _ephemeral_first()
    ports = [free_loopback_port() for _ in range(20)]
    assert len(set(ports)) == 20  # never handed out twice
    assert all(10000 <= p < first for p in ports), (first, ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # free to bind for its user


def test_ports_someone_holds_are_skipped():
    last = free_loopback_port()
    held = []
    try:
        for port in range(last + 1, last + 6):  # the ports this process walks to next: held by someone else
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        port = free_loopback_port()
        assert port not in {s.getsockname()[1] for s in held}
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    finally:
        for s in held:
            s.close()


def test_with_no_room_below_the_ephemeral_range_the_kernel_picks(monkeypatch, tmp_path):
    fake = tmp_path / "range"
    fake.write_text("1024\t65535\n")
    monkeypatch.setattr(loopback_ports, "_EPHEMERAL", fake)
    port = free_loopback_port()
    assert 1024 <= port <= 65535
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
