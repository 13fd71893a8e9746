"""The status table stays aligned with a 32-character robot id; `demo` with its port
taken names --port (exit 2, before building anything); the mTLS router with its refusal-log filter stops on
a SIGTERM to its process group without "[Errno 32] Broken pipe"."""

from __future__ import annotations

import signal
import socket
import subprocess

import pytest
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore
from lerobot_fleet.verbs.commands import snapshot_text

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, free_port
from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry

NS = Namespace("lerobot/act", "main", "pick the cube")


def test_status_table_aligned_with_a_32_character_robot_id():
    store = FleetStore(clock=ManualClock())
    for rid, replica in (("a" * 32, "gpu-0"), ("arm-1", "replica-with-a-long-name-0")):
        store.on_robot_alive(rid, True, NS)
        store.on_telemetry(
            RobotTelemetry(client_uuid=rid, state="STREAMING", replica=replica, rtt_p50_ms=30.0, seq=1), NS
        )
    lines = snapshot_text(store.snapshot()).splitlines()
    start = lines.index("ROBOTS (2)")
    table = lines[start + 1 : start + 4]
    assert len(table) == 3
    # every column starts (or, right-aligned, ends) at the same offset in the header and in each row
    assert len({line.index(w) for line, w in zip(table, ("state", "STREAMING", "STREAMING"), strict=True)}) == 1, table
    assert len({table[0].index("rtt p50") + len("rtt p50"), *(line.index(" 30 ") + 3 for line in table[1:])}) == 1, (
        table
    )


def test_demo_with_its_port_taken_says_use_port_and_exits_2(tmp_path):
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        out = subprocess.run(
            [
                str(VENV_BIN / "python"),
                "-m",
                "lerobot_fleet.cli",
                "demo",
                "--port",
                str(port),
                "--no-console",
                "--workdir",
                str(tmp_path / "demo"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"port {port}" in out.stderr and "--port" in out.stderr and "Traceback" not in out.stderr
    assert "building" not in out.stdout  # said before anything was built or started


@pytest.mark.slow
def test_mtls_router_with_its_refusal_log_stops_on_sigterm_without_a_broken_pipe(tmp_path):
    from lerobot_fleet.router.pki import init_ca, issue

    init_ca(tmp_path)
    made = issue(tmp_path, "router-a", "router", ["127.0.0.1"])
    endpoint = f"tls/127.0.0.1:{free_port()}"
    router = Proc(
        [
            str(VENV_BIN / "lerobot-fleet"),
            "router",
            "--listen",
            endpoint,
            "--tls-cert",
            str(made.cert),
            "--tls-key",
            str(made.key),
            "--tls-ca",
            str(tmp_path / "ca.crt"),
            "--inventory",
            str(tmp_path / "inventory.yaml"),
        ],
        name="acl-router",
        max_seconds=None,
    )
    try:
        router.wait_for("Zenoh router up", 60)
        router.signal_group(signal.SIGTERM)  # a supervisor or Ctrl-C reaches the whole group, the log filter included
        code = router.wait(30)
    finally:
        router.stop()
    out = router.output()
    assert "Broken pipe" not in out and "BrokenPipeError" not in out, out[-2000:]
    assert "Zenoh router stopped" in out and code == 0, (code, out[-2000:])
