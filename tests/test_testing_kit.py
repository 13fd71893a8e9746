"""The test kit itself: bounded waits fail clearly, processes are ended by PID, and the fake robot and fake
server speak the real wire to each other through the real router."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from lerobot_policy_remote.testing import Proc, WaitTimeout, assert_never, free_port, wait_until, wait_until_async
from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.fake_server import FakeServer, Faults
from lerobot_policy_remote.testing.fleet import FleetPublisher
from lerobot_policy_remote.testing.procs import NotReady
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.data import ActionChunkMsg
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import DrainAck, DrainRequest, RobotTelemetry, ServerStatus

# ------------------------------------------------------------------ imports


def test_kit_imports_no_torch_and_its_package_only_the_stdlib():
    probe = (
        "import sys; heavy = ('torch', 'lerobot', 'cv2', 'numpy', 'zenoh'); "
        "import lerobot_policy_remote.testing; print('PKG', sorted(m for m in heavy if m in sys.modules)); "
        "import lerobot_policy_remote.testing.fleet; print('FAKES', sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "PKG []" in out, out
    assert "torch" not in out and "lerobot" not in out, out


# ------------------------------------------------------------------ waits


def test_wait_until_returns_the_truthy_value():
    calls = iter([0, None, "", "done"])
    assert wait_until(lambda: next(calls), timeout=5, interval=0.001) == "done"


def test_wait_until_times_out_with_a_clear_message():
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.3s waiting for the door to open \(last value: 0\)"):
        wait_until(lambda: 0, timeout=0.3, message="the door to open")
    assert 0.3 <= time.monotonic() - t0 < 2.0
    assert issubclass(WaitTimeout, AssertionError)  # pytest reports it as a failed assertion


def test_wait_until_checks_once_more_at_the_deadline():
    start = time.monotonic()
    # a poll interval longer than the timeout: the second (last) check happens at the deadline and sees success
    assert wait_until(lambda: time.monotonic() - start >= 0.2, timeout=0.2, interval=10) is True


def test_assert_never_watches_for_the_whole_duration():
    t0 = time.monotonic()
    assert_never(lambda: False, 0.3, message="nothing")
    assert time.monotonic() - t0 >= 0.3
    flag = threading.Event()
    threading.Timer(0.1, flag.set).start()
    with pytest.raises(AssertionError, match="the alarm happened"):
        assert_never(flag.is_set, 5, message="the alarm")


def test_wait_until_async_yields_to_the_loop():
    async def body() -> str:
        box: list[str] = []
        asyncio.get_running_loop().call_later(0.05, box.append, "set by the loop")
        return (await wait_until_async(lambda: box, timeout=5))[0]

    assert asyncio.run(body()) == "set by the loop"
    with pytest.raises(WaitTimeout, match="never"):
        asyncio.run(wait_until_async(lambda: None, timeout=0.1, message="never"))


# ------------------------------------------------------------------ ports and processes


def test_free_port_can_be_bound():
    port = free_port()
    assert 1024 <= port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_proc_waits_for_ready_logs_and_stops_by_pid(tmp_path):
    log = tmp_path / "child.log"
    child = Proc(
        [sys.executable, "-c", "import time; print('warming'); print('ready now'); time.sleep(60)"],
        name="child",
        max_seconds=30,
        log=log,
    )
    try:
        assert child.wait_for("ready", timeout=30) == "ready now"
        assert child.popen.poll() is None
    finally:
        code = child.stop(timeout=10)
    assert code is not None and code != 0  # ended by SIGTERM, long before its own 60 s
    assert log.read_text().splitlines() == ["warming", "ready now"]


def test_proc_that_exits_early_is_reported_with_its_output():
    child = Proc(
        [sys.executable, "-c", "print('config error: no model'); raise SystemExit(3)"], name="early", max_seconds=30
    )
    t0 = time.monotonic()
    with pytest.raises(
        NotReady, match=r"(?s)early did not become ready \('up' exited with 3\).*config error: no model"
    ):
        child.wait_for("up", timeout=30)
    assert time.monotonic() - t0 < 20  # noticed the exit, did not wait out the timeout


def test_a_child_that_exits_on_its_own_is_reaped_without_a_wait():
    """A demo replica that drains and exits leaves no zombie while the demo runs on (nobody calls `wait`)."""
    p = Proc([sys.executable, "-c", "print('bye')"], name="quick", max_seconds=None)
    pid = p.popen.pid
    wait_until(lambda: p.popen.returncode is not None, timeout=10, message="the child reaped by its reader")
    assert p.popen.returncode == 0
    assert not Path(f"/proc/{pid}").exists()  # a zombie keeps its /proc entry until it is reaped


def test_output_after_wait_has_the_last_line():
    """`wait()` returns once the child is reaped, possibly before the reader drained the pipe: `output()` then
    reads to the end (a `--json` verb's one line was once read as empty on a loaded box)."""
    burst = "print('\\n'.join(['x' * 100] * 600)); print('{\"last\": 1}')"  # 60 kB: fits the pipe, the child exits
    child = Proc([sys.executable, "-c", burst], name="burst", max_seconds=30)
    try:
        with child.reader_held():  # the reader can record no line until output() waits: the slow reader, made certain
            assert child.wait(timeout=20) == 0
            out = child.output()
        assert out.splitlines()[-1] == '{"last": 1}' and len(out.splitlines()) == 601
    finally:
        child.stop()


# ------------------------------------------------------------------ fake robot <-> fake server through the router


@pytest.fixture
def pair(zenoh_client):
    keys = ServiceKeys.for_service(f"kit/model-{uuid.uuid4().hex[:6]}", "main", "kit task")
    server = FakeServer(zenoh_client(), keys, replica="kit-1", chunk=8)
    robot = FakeRobot(zenoh_client(), keys, "kit-robot")
    yield robot, server
    robot.close()
    server.close()


def test_fake_robot_and_fake_server_exchange_the_real_wire(pair, zenoh_client):
    robot, server = pair
    statuses = wait_until(robot.statuses, timeout=15, message="the fake replica's status")
    assert [s.replica for s in statuses] == ["kit-1"] and statuses[0].model.repo_or_path.startswith("kit/model-")

    ack = robot.open()
    assert ack.ok and ack.session_id and ack.replica == "kit-1" and ack.chunk_size == 8
    assert server.sessions == {"kit-robot": ack.session_id}

    chunk = wait_until(lambda: _request(robot), timeout=15, message="a chunk for an observation")
    seq = robot.seq
    assert chunk.session_id == ack.session_id and chunk.seq_id_echo == seq
    np.testing.assert_allclose(chunk.chunk_robot[:, 0], seq + 0.01 * np.arange(8), rtol=0, atol=1e-4)
    header, obs = server.obs_seen[-1]
    assert header.seq_id == seq and obs.state["observation.state"].shape == (6,)

    assert robot.reset(1).ok and server.resets == 1

    # status carries the session; drain answers with it and flips the status
    console = zenoh_client()
    replies = list(
        console.get(robot.keys.server("kit-1", "drain"), payload=encode(DrainRequest(reason="kit")), timeout=5)
    )
    drain = decode(DrainAck, replies[0].ok.payload.to_bytes())
    assert drain.ok and drain.sessions == [ack.session_id] and server.drains[-1].reason == "kit"
    status = decode(
        ServerStatus, list(console.get(robot.keys.server("kit-1", "status"), timeout=5))[0].ok.payload.to_bytes()
    )
    assert status.draining and [s.client_uuid for s in status.sessions] == ["kit-robot"]


def test_fake_server_faults_reach_the_robot_as_the_wire_carries_them(pair):
    robot, server = pair
    wait_until(robot.statuses, timeout=15, message="the fake replica's status")
    assert robot.open().ok

    server.faults.mode = "nan"
    robot.send(np.zeros(6))
    header, body = robot.recv(timeout=15)
    assert header is None and isinstance(body, WireError), body  # the robot's codec refused the non-finite chunk
    assert ("chunk_model" in str(body) or "chunk_robot" in str(body)) and "NaN or Inf" in str(body)

    server.faults.mode = "silent"
    robot.send(np.zeros(6))
    wait_until(lambda: len(server.obs_seen) >= 2, timeout=15, message="the silent replica receiving the observation")
    assert_never(lambda: not robot.inbox.empty(), 0.5, message="a reply from a silent replica")

    robot.send_raw(b"\xc1 not msgpack", b"short header")  # hostile bytes: counted, never a crash
    wait_until(lambda: server.responder.bad_obs == 1, timeout=15, message="the hostile observation counted")

    server.faults = Faults(mode="foreign_session")  # replacing the switches reaches the chunk responder too
    chunk = _request(robot)
    assert isinstance(chunk, ActionChunkMsg) and chunk.session_id == "someone-else"


def test_fleet_publisher_feeds_a_listener(router, zenoh_client):
    fleet = FleetPublisher(router.endpoint, robots=5, servers=2, service=f"kit fleet {uuid.uuid4().hex[:6]}")
    listener = zenoh_client()
    seen: dict[str, RobotTelemetry] = {}
    sub = listener.declare_subscriber(
        fleet.keys.robot("*", "telemetry"),
        lambda s: seen.update({str(s.key_expr): decode(RobotTelemetry, s.payload.to_bytes())}),
    )
    stop = threading.Event()
    pump = threading.Thread(target=fleet.run, args=(20.0, 60.0, stop), daemon=True)
    pump.start()
    try:
        wait_until(lambda: len(seen) == 5, timeout=20, message="telemetry from all five robots")
        assert {t.replica for t in seen.values()} == {"bench-gpu-00", "bench-gpu-01"}
        for key, t in list(seen.items()):  # the pre-built field maps carry exactly the round's telemetry
            i = fleet.robot_ids.index(t.client_uuid)
            assert key == fleet.keys.robot(t.client_uuid, "telemetry")
            assert t == dataclasses.replace(fleet.telemetry(i, t.client_uuid, t.requests), seq=t.seq)
        statuses = [
            decode(ServerStatus, r.ok.payload.to_bytes())
            for r in listener.get(fleet.keys.server("*", "status"), timeout=5)
            if r.ok
        ]
        assert sorted(s.replica for s in statuses) == ["bench-gpu-00", "bench-gpu-01"]
        assert sum(s.active_sessions for s in statuses) == 5
        text = wait_until(
            lambda: (
                (body := httpx.get(statuses[0].metrics_url, timeout=5).text) and "requests_total 0" not in body and body
            ),
            timeout=15,
            message="a request counter above zero",
        )
        assert "lerobot_policy_server_requests_total" in text
    finally:
        stop.set()
        pump.join(10)
        sub.undeclare()
        fleet.close()
    assert fleet.rounds > 0


def _request(robot: FakeRobot) -> ActionChunkMsg | None:
    """One observation -> its chunk, or None when the reply did not come (the first puts may race the subscription)."""
    import queue

    try:
        return robot.request(np.zeros(6), timeout=2)
    except queue.Empty:
        return None
