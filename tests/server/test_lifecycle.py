"""The server's collaborators on their own: lifecycle, load gauge, Backend defaults, worker and housekeeper
built from fakes. Pure and fast: no zenoh session, no router, no process."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import zenoh

from lerobot_policy_remote.server.audit import Auditor
from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.backend_base import Backend, ObsContractError
from lerobot_policy_remote.server.housekeeping import Housekeeper
from lerobot_policy_remote.server.lifecycle import Lifecycle
from lerobot_policy_remote.server.load import LoadGauge
from lerobot_policy_remote.server.metrics import ServerMetrics
from lerobot_policy_remote.server.scheduler import RoundRobin
from lerobot_policy_remote.server.sessions import Mail, Registry, Session
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.server.worker import Worker
from lerobot_policy_remote.wire.codec import decode
from lerobot_policy_remote.wire.data import ObservationMsg, decode_chunk, encode_observation
from lerobot_policy_remote.wire.errors import Reason
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.limits import WireLimits
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION, EventMsg

NAMES = [f"joint_{i}.pos" for i in range(6)]  # six actions, like the sim arm (without importing torch for it)


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# ====================================================================== Lifecycle
def test_lifecycle_serving_then_draining_then_drained():
    clock = Clock()
    lc = Lifecycle(clock)
    assert (lc.draining, lc.drained, lc.stopped) == (False, False, False)
    assert lc.drain_elapsed() == 0.0
    assert lc.begin_drain() is True
    assert lc.begin_drain() is False  # a second drain request is a repeat, not a restart
    assert lc.draining and not lc.drained
    clock.t += 2.5
    assert lc.drain_elapsed() == pytest.approx(2.5)
    assert not lc.wait_drained(0)
    assert lc.mark_drained() is True
    assert lc.mark_drained() is False  # drained only once (worker and housekeeper may both try)
    assert lc.draining and lc.drained and lc.wait_drained(0)
    assert not lc.stopped


def test_lifecycle_cannot_be_drained_without_a_drain():
    lc = Lifecycle()
    with pytest.raises(RuntimeError):
        lc.mark_drained()
    assert not lc.drained


def test_lifecycle_stop_is_final_and_once():
    lc = Lifecycle()
    assert not lc.wait_stopped(0)
    assert lc.stop() is True
    assert lc.stop() is False  # teardown runs once
    assert lc.stopped and lc.wait_stopped(0)
    assert not lc.draining  # stopping is not draining: a stop without a drain leaves drain state alone


def test_lifecycle_wait_drained_wakes_a_waiter():
    lc = Lifecycle()
    lc.begin_drain()
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(lc.wait_drained(10)))
    t.start()
    lc.mark_drained()
    t.join(10)
    assert got == [True]


# ====================================================================== LoadGauge
def test_load_gauge_samples_once_a_window():
    clock = Clock(0.0)
    g = LoadGauge(window_s=1.0, clock=clock)
    g.add_busy(0.25)
    clock.t = 0.5
    assert g.update() is False and g.value == 0.0  # not a full window yet
    clock.t = 1.0
    assert g.update() is True and g.value == pytest.approx(0.25)
    g.add_busy(5.0)
    clock.t = 2.0
    assert g.update() and g.value == 1.0  # clamped
    clock.t = 3.0
    assert g.update() and g.value == 0.0  # idle window
    assert g.busy_s == pytest.approx(5.25)


# ====================================================================== Backend
class Minimal(Backend):
    """Only the required methods: everything optional comes from the base class."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def new_session_state(self) -> Any:
        return {}

    def on_session_open(self, state: Any) -> None:
        pass

    def reset_session(self, state: Any) -> None:
        pass

    def validate_obs(self, obs: ObservationMsg) -> None:
        pass

    def infer(self, state: Any, obs: ObservationMsg, rtc: Any) -> tuple[np.ndarray, np.ndarray]:
        v = float(obs.state["s"][0])
        self.calls.append(v)
        return np.full((2, 1), v, np.float32), np.full((2, 1), v + 1, np.float32)


def _obs(v: float) -> ObservationMsg:
    return ObservationMsg(state={"s": np.array([v], np.float32)}, images={})


def test_backend_defaults_for_a_minimal_subclass():
    b = Minimal()
    assert b.can_batch({}, _obs(1.0), None) is False
    out = b.infer_batch([({}, _obs(1.0), None), ({}, _obs(2.0), None), ({}, _obs(3.0), None)])
    assert b.calls == [1.0, 2.0, 3.0]  # one single inference per item, in order
    assert [float(robot[0, 0]) for _, robot in out] == [2.0, 3.0, 4.0]
    assert b.warmup(5, progress=b.calls.append) is None and b.calls == [
        1.0,
        2.0,
        3.0,
    ]  # no-op: nothing inferred or said


def test_backend_is_abstract_and_the_real_backends_subclass_it():
    with pytest.raises(TypeError):
        Backend()  # type: ignore[abstract]
    assert issubclass(LerobotBackend, Backend) and issubclass(StubBackend, Backend)
    stub = StubBackend(0.0, NAMES)
    assert stub.can_batch({}, _obs(0.0), None) is False  # no per_robot_s: cannot batch
    assert StubBackend(0.0, NAMES, per_robot_s=0.0).can_batch({}, _obs(0.0), None) is True


# ====================================================================== Worker and Housekeeper with fakes
class Pub:
    """A session publisher that records what would go on the wire."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []

    def put(self, payload: bytes, attachment: bytes) -> None:
        self.sent.append((payload, attachment))


def _worker(backend: Backend, **kw: Any) -> tuple[Worker, dict[str, Any]]:
    parts: dict[str, Any] = dict(
        lifecycle=Lifecycle(),
        load=LoadGauge(),
        registry=Registry(),
        scheduler=RoundRobin(),
        backend=backend,
        metrics=ServerMetrics("rep"),
        replica="rep",
        limits=WireLimits(max_payload_bytes=1 << 20),
    )
    audit: list[str] = []
    progress: list[str] = []
    parts.update(kw)
    # max_lines=1: each line is published at once, so a test counts a request's line as soon as it is served
    w = Worker(auditor=Auditor(audit.append, max_lines=1), progress=progress.append, **parts)
    return w, {**parts, "audit": audit, "progress": progress}


def _session(reg: Registry, cid: str = "robot-1") -> Session:
    s = Session("sid-" + cid, cid, {}, None, SCHEMA_VERSION)
    s.pub = Pub()
    reg.add(s)
    return s


def _deposit(s: Session, state: np.ndarray, seq: int = 1) -> None:
    payload = encode_observation(ObservationMsg(state={"observation.state": state}, images={}))
    att = Header(SCHEMA_VERSION, MsgType.OBS, seq, 0, 123, 1).pack()
    s.mailbox.deposit(Mail(payload, att, 0.0, len(payload)))


def test_worker_serves_a_request_from_fakes_and_finishes_a_drain():
    w, p = _worker(StubBackend(0.0, NAMES))
    s = _session(p["registry"])
    _deposit(s, np.arange(6, dtype=np.float32))
    w.serve(p["registry"].ready_in_ring_order())
    [(payload, att)] = s.pub.sent
    assert Header.unpack(att, expect=MsgType.CHUNK).seq_id == 1
    chunk = decode_chunk(payload)
    np.testing.assert_allclose(chunk.chunk_robot[0], np.arange(6))
    assert s.requests == 1 and len(w.stats.recent()) == 1 and w.in_flight == 0
    assert p["metrics"].value("requests_total", client="robot-1") == 1.0
    assert len(p["audit"]) == 1 and '"outcome":"ok"' in p["audit"][0].replace(" ", "")
    assert p["load"].busy_s > 0  # the worker's time feeds the gauge
    # Draining with nothing pending: the loop marks the lifecycle drained and returns.
    p["lifecycle"].begin_drain()
    w.run()
    assert p["lifecycle"].drained and p["progress"] == ["Drain complete: all pending requests served"]


def test_worker_refuses_a_bad_observation_to_that_robot_only():
    w, p = _worker(StubBackend(0.0, NAMES))
    s = _session(p["registry"])
    _deposit(s, np.zeros(3, dtype=np.float32))  # the stub wants 6 values
    w.serve(p["registry"].ready_in_ring_order())
    [(payload, _)] = s.pub.sent
    ev = decode(EventMsg, payload)
    assert ev.event == "bad_request" and "does not fit the policy" in ev.message
    assert p["metrics"].value("errors_total", reason=Reason.CONTRACT.value) == 1.0 and s.errors == 1
    with pytest.raises(ObsContractError):
        w.backend.validate_obs(ObservationMsg(state={}, images={}))


def _housekeeper(**kw: Any) -> tuple[Housekeeper, dict[str, Any]]:
    sent: list[tuple[str, bytes, bytes]] = []
    closed: list[tuple[str, str]] = []
    progress: list[str] = []
    registry = Registry()
    parts: dict[str, Any] = dict(
        lifecycle=Lifecycle(),
        load=LoadGauge(),
        registry=registry,
        metrics=ServerMetrics("rep"),
        keys=ServiceKeys.for_service("m", "main", "svc"),
        worker_alive=lambda: True,
        session_grace_s=0.0,
        drain_timeout_s=30.0,
    )
    parts.update(kw)

    def close(s: Session, reason: str) -> None:
        registry.remove(s.client_uuid)
        closed.append((s.client_uuid, reason))

    h = Housekeeper(
        publish=lambda k, b, a: sent.append((k, b, a)), close_session=close, progress=progress.append, **parts
    )
    return h, {**parts, "sent": sent, "closed": closed, "progress": progress}


def test_a_batched_pass_queues_its_chunks_and_flushes_them_with_the_last():
    """Each express put is a socket write of its own: a pass of three sends two queued chunks and one express one
    (which flushes the queue they share); every robot gets its own chunk, counted and audited."""
    from lerobot_policy_remote.server.scheduler import MicroBatch

    w, p = _worker(StubBackend(0.0, NAMES, per_robot_s=0.0), scheduler=MicroBatch(8), batch_limit=8)
    sessions = [_session(p["registry"], f"robot-{i}") for i in range(3)]
    for s in sessions:
        s.pub_batched = Pub()
        _deposit(s, np.full(6, float(len(s.client_uuid)), np.float32))
    w.serve(p["registry"].ready_in_ring_order())
    assert [len(s.pub_batched.sent) for s in sessions] == [1, 1, 0]
    assert [len(s.pub.sent) for s in sessions] == [0, 0, 1]
    assert w.stats.recent() and w.stats.recent()[-1][0] == 3  # one pass for the three
    assert [p["metrics"].value("requests_total", client=s.client_uuid) for s in sessions] == [1.0, 1.0, 1.0]
    assert len(p["audit"]) == 3 and p["metrics"].value("inference_seconds_count") == 3.0


def test_housekeeper_replies_to_unknown_robots_at_most_once_a_second():
    h, p = _housekeeper()
    h.unknown.extend([("ghost", 3), ("ghost", 3), ("other", 7)])
    h.tick()
    keys = [k for k, _, _ in p["sent"]]
    assert keys == [p["keys"].robot("ghost", "action"), p["keys"].robot("other", "action")]
    assert decode(EventMsg, p["sent"][0][1]).event == "unknown_session"
    # the event carries the epoch of the robot's own observation: the robot acts on it (epoch 0 it would ignore)
    assert [Header.unpack(att).session_epoch for _, _, att in p["sent"]] == [3, 7]
    assert p["metrics"].value("dropped_unknown_client_total") == 3.0


def test_housekeeper_collects_sessions_whose_robot_left_but_not_live_ones():
    h, p = _housekeeper()
    reg = p["registry"]
    live, gone = _session(reg, "live"), _session(reg, "gone")
    key = p["keys"].robot("live", "alive")
    h.on_robot_alive(type("Sample", (), {"key_expr": key, "kind": zenoh.SampleKind.PUT})())
    h.tick()  # "gone" has no token: its grace period starts
    assert gone.gone_since is not None and live.gone_since is None and not p["closed"]
    h.tick()  # grace 0 s: collected on the next round
    assert p["closed"] == [("gone", "liveliness_lost")] and reg.count() == 1
    assert p["metrics"].value("active_sessions") == 1.0


def test_housekeeper_ends_a_drain_when_the_worker_is_gone_or_the_deadline_passes():
    alive = [True]
    h, p = _housekeeper(worker_alive=lambda: alive[0])
    lc = p["lifecycle"]
    h.tick()
    assert not lc.drained  # not draining: nothing to end
    lc.begin_drain()
    h.tick()
    assert not lc.drained  # the worker still runs and the deadline is far
    alive[0] = False
    h.tick()
    assert lc.drained and p["progress"] == []

    clock = Clock()
    h2, p2 = _housekeeper(lifecycle=Lifecycle(clock), drain_timeout_s=5.0)
    p2["lifecycle"].begin_drain()
    clock.t += 5.1
    h2.tick()
    assert p2["lifecycle"].drained and p2["progress"] == ["Drain timeout reached; exiting with work still pending"]
