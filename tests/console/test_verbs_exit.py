"""Every verb ends with exit code 0 or 2 and a message, whatever the router does: absent, killed mid-run,
starting mid-run. Also the session lifecycle that caused an `Aborted` (SIGABRT) of `status --wait 1`."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from lerobot_fleet.data.sources import zenoh_source
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, Router, free_port
from lerobot_policy_remote.zenoh_config import ZenohSettings

FLEET = str(VENV_BIN / "lerobot-fleet")


def _no_crash(out: subprocess.CompletedProcess) -> None:
    assert out.returncode in (0, 2), (out.returncode, out.stderr[-2000:])
    for bad in ("Traceback", "panicked", "Aborted", "fatal runtime error"):
        assert bad not in out.stderr, out.stderr[-2000:]


def test_session_opened_after_stop_is_closed_by_its_thread(router, monkeypatch):
    """Before the fix a connection that completed after stop() left its session open; zenoh then dropped it
    during interpreter finalization and could abort the process. Now the owning thread closes it."""
    gate = threading.Event()
    opened: list = []
    real_open = zenoh_source.open_session

    def slow_open(settings):
        gate.wait(30)  # the router answers late (it is starting, the machine is busy)
        s = real_open(settings)
        opened.append(s)
        return s

    monkeypatch.setattr(zenoh_source, "open_session", slow_open)
    monkeypatch.setattr(zenoh_source, "STOP_JOIN_S", 0.2)
    source = ZenohSource(ZenohSettings(mode="client", connect_endpoints=[router.endpoint], connect_timeout_ms=2000))
    source.start(FleetStore())
    assert source.stop() is False  # the session thread is still inside the connection attempt
    gate.set()
    wait_until(
        lambda: opened and opened[0].is_closed(),
        15,
        message="the session opened after stop() to be closed by its thread",
    )
    assert source.session is None


def test_status_against_no_router_exits_2_with_a_message():
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    out = subprocess.run(
        [FLEET, "status", "--json", "--wait", "1", "--router", endpoint], capture_output=True, text=True, timeout=60
    )
    _no_crash(out)
    assert out.returncode == 2 and json.loads(out.stdout)["connection"] == "disconnected"
    assert "not connected" in out.stderr
    for verb in (["drain", "gpu-x"], ["reset", "robot-x"]):
        out = subprocess.run(
            [FLEET, *verb, "--router", endpoint, "--timeout", "1"], capture_output=True, text=True, timeout=60
        )
        _no_crash(out)
        assert out.returncode == 2 and "router" in out.stderr


@pytest.mark.slow
def test_verbs_when_the_router_is_killed_mid_run():
    r = Router().start()
    try:
        status = Proc([FLEET, "status", "--json", "--wait", "3", "--router", r.endpoint], name="status", max_seconds=60)
        time.sleep(1.0)  # named: let the verb connect before the router dies
        r.kill()
        rc = status.wait(40)
        text = status.output()
        assert rc in (0, 2), (rc, text[-2000:])
        assert "panicked" not in text and "Traceback" not in text
    finally:
        r.stop()


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.3, 0.9, 1.5])
def test_status_while_the_router_is_starting(delay):
    """The reported SIGABRT: `status --json --wait 1` polled while a fleet (its router) was starting."""
    port = free_port()
    endpoint = f"tcp/127.0.0.1:{port}"
    status = Proc([FLEET, "status", "--json", "--wait", "1", "--router", endpoint], name="status", max_seconds=60)
    time.sleep(delay)  # named: the router comes up at different moments of the verb's life
    r = Router(port=port).start()
    try:
        rc = status.wait(40)
        text = status.output()
        assert rc in (0, 2), (rc, text[-2000:])
        assert "panicked" not in text and "Traceback" not in text and '"connection"' in text
    finally:
        r.stop()


def test_drain_with_no_server_answering_exits_2(router):
    out = subprocess.run(
        [FLEET, "drain", "no-such-replica", "--router", router.endpoint, "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _no_crash(out)
    assert out.returncode == 2 and "no server answered" in out.stdout


def test_status_json_and_watch_carry_alerts(router):
    """`status --json` and each `--watch` line have `alerts` (here: a router with no fleet, so none)."""
    out = subprocess.run(
        [FLEET, "status", "--json", "--wait", "1", "--router", router.endpoint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _no_crash(out)
    assert out.returncode == 0 and json.loads(out.stdout)["alerts"] == []
    out = subprocess.run(
        [FLEET, "status", "--watch", "--count", "2", "--interval", "0.3", "--wait", "1", "--router", router.endpoint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _no_crash(out)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 2 and all(line["alerts"] == [] and line["connection"] == "connected" for line in lines)


def test_status_json_alerts_schema_on_the_fake_fleet():
    """The same AlertBook as the console: open alerts with rule, target, message and age."""
    from lerobot_fleet.data.alerts import AlertRules
    from lerobot_fleet.data.sources.fake import FakeSource, ManualClock
    from lerobot_fleet.verbs.commands import _alerts_now, snapshot_json

    clock = ManualClock()
    store = FleetStore(clock=clock)
    FakeSource(clock).start(store)
    clock.advance(20.0)
    snap = store.snapshot()
    data = snapshot_json(snap, _alerts_now(snap, AlertRules(), now=clock()))
    by = {(a["rule"], a["target"]) for a in data["alerts"] if a["open"]}
    assert ("fault", "arm-07") in by and ("server_load", "gpu-p-0") in by
    assert ("rtt_p95", "arm-04") not in by  # 20 s without telemetry: old figures raise no figure alerts
    fault = next(a for a in data["alerts"] if a["rule"] == "fault" and a["target"] == "arm-07")
    assert fault["age_s"] >= 20 and fault["role"] == "robot" and "DEAD" in fault["message"]
    json.dumps(data)  # serialisable as is
