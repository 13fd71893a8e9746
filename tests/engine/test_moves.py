"""Moving a robot to another model (a fleet rollout's `MoveCommand`), through the in-memory link: make before break,
never two models mixed in what the motors execute, a failed move leaves the robot where it was; and `pick()` with
two checkpoints in one namespace. The same move through a real router is the last test."""

from __future__ import annotations

import logging
import threading
import time

import lerobot.rollout  # noqa: F401  (loads lerobot so the plugin registers)
import numpy as np
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.handshake import HandshakeError, pick
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.sim.robot import SimArm, SimArmConfig
from lerobot_policy_remote.testing.memory_link import MemoryLink, MemoryReplica
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.header import Header
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus, SessionAck
from lerobot_policy_remote.wire.rollout import MoveAck, MoveCommand

ENGINE_LOG = "lerobot_policy_remote.engine.remote"
HOME = ServiceKeys.for_service("m", "main", "t")  # where the test robot starts (model_id m, task t)
NEW = ServiceKeys.for_service("m2", "v2", "t")
TO_B = MoveCommand(model_id="m2", revision="v2", service="t", fingerprint="fp-B", rollout_id="r1")


def arm() -> SimArm:
    robot = SimArm(SimArmConfig(cameras={}))
    robot.connect()
    return robot


NAMES = list(arm().action_features)
HW = {"observation.state": {"dtype": "float32", "shape": (len(NAMES),), "names": NAMES}}
OBS = {n: 1.0 for n in NAMES}


def two_models(*extra: MemoryReplica, target: MemoryReplica | None = None) -> MemoryLink:
    """Replica `a` serves fp-A at home; `target` (default `b`, fp-B in NEW) is where moves go. A chunk's values
    name its model: 1.x from fp-A, 2.x from fp-B (row i adds i/100)."""
    link = MemoryLink(
        MemoryReplica("a", fingerprint="fp-A"),
        target or MemoryReplica("b", fingerprint="fp-B", keys=NEW),
        *extra,
        keys=HOME,
    )

    def respond(header: Header, _obs: object) -> np.ndarray:
        base = 2.0 if link.replicas[link.bound].fingerprint == "fp-B" else 1.0
        return np.full((10, len(NAMES)), base, np.float32) + np.arange(10, dtype=np.float32)[:, None] / 100

    link.respond = respond
    return link


def engine(link: MemoryLink, **kw: object) -> RemoteInferenceEngine:
    cfg = RemoteInferenceConfig(**{"rtc": RTCConfig(enabled=False), "buffer_time_s": 0.1, **kw})
    e = RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task="t", fps=30, model_id="m", transport=link
    )
    e.start(worker=False)
    e.resume()
    e.notify_observation(OBS)
    return e


def tick(e: RemoteInferenceEngine, robot: SimArm) -> float | None:
    """One control tick: the engine's action reaches the simulated motors, which record its provenance."""
    action = e.get_action()
    if action is None:
        return None
    robot.send_action(dict(zip(NAMES, action.tolist(), strict=True)))
    return float(action[0])


def fingerprints(robot: SimArm) -> list[str]:
    return [c["provenance"]["fingerprint"] for c in robot.commands if c["provenance"]]


def switches(seq: list[str]) -> int:
    return sum(a != b for a, b in zip(seq, seq[1:], strict=False))


def streaming(e: RemoteInferenceEngine) -> None:
    e.step()  # send
    e.step()  # merge
    assert e.state is LinkState.STREAMING and e.fingerprint == "fp-A"


# ---------------------------------------------------------------- a move that succeeds
def test_a_move_switches_namespace_and_fingerprint_and_the_motors_switch_model_once(caplog):
    link, robot = two_models(), arm()
    e = engine(link)
    streaming(e)
    for _ in range(3):
        assert tick(e, robot) == pytest.approx(1.0, abs=0.1)
    caplog.set_level(logging.INFO, logger=ENGINE_LOG)
    q = link.move(TO_B)
    e.step()  # acked at once; the session in NEW opened before the old one is left; its first request goes
    assert q.ack == MoveAck(ok=True, message="moving to m2@v2 (fp-B)", fingerprint="fp-A")
    assert link.retargets == [NEW] and link.keys == NEW and link.bound == "b" and e.keys == NEW
    opened = link.replicas["b"].sessions[-1]
    assert (opened.model_id, opened.revision, opened.service, opened.expect_fingerprint) == ("m2", "v2", "t", "fp-B")
    assert e.fingerprint == "fp-B" and e.counters["moves"] == 0  # pinned now; completed at the first chunk
    assert tick(e, robot) == pytest.approx(1.0, abs=0.1)  # until then the old model's queue keeps playing
    e.step()  # the new model's first chunk merges and replaces the queue
    assert {m.fingerprint for m in e.queue.meta} == {"fp-B"}
    for _ in range(6):
        e.step()
        assert tick(e, robot) == pytest.approx(2.0, abs=0.1)
    seq = fingerprints(robot)
    assert seq[0] == "fp-A" and seq[-1] == "fp-B" and switches(seq) == 1
    assert e.counters["moves"] == 1 and e.model_id == "m2"
    moved = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Moved to model")]
    assert moved == ["Moved to model m2@v2 (fp-B) on replica b: first chunk replaced the queue"]
    report = e.telemetry()
    assert (report.model_id, report.revision, report.fingerprint, report.moves) == ("m2", "v2", "fp-B", 1)
    assert link.telemetry[-1].fingerprint == "fp-B"
    e.stop()


def test_after_a_move_re_handshakes_stay_in_the_new_namespace_pinned_to_the_new_model():
    link, robot = two_models(), arm()
    e = engine(link, reconnect_initial_backoff_s=0.001, reconnect_max_backoff_s=0.001)
    streaming(e)
    link.move(TO_B)
    e.step()
    e.step()
    link.add_replica(MemoryReplica("b2", fingerprint="fp-B", keys=NEW))
    link.remove_replica("b")  # the new model's replica goes: the robot fails over within NEW, never back home
    for _ in range(50):
        e.step()
        tick(e, robot)
        if e.replica == "b2" and e.state is LinkState.STREAMING:
            break
    assert e.replica == "b2" and e.fingerprint == "fp-B" and not e.failed
    opened = link.replicas["b2"].sessions[-1]
    assert (opened.model_id, opened.revision, opened.expect_fingerprint) == ("m2", "v2", "fp-B")
    assert len(link.replicas["a"].sessions) == 1  # the old model's replica was never asked again
    e.stop()


def test_the_first_request_to_the_new_model_carries_no_rtc_prefix_and_its_chunk_replaces_the_queue():
    rtc = RTCConfig(enabled=True, execution_horizon=5)
    link = two_models(target=MemoryReplica("b", fingerprint="fp-B", keys=NEW, rtc=True))
    link.replicas["a"].rtc = True
    e = engine(link, rtc=rtc, buffer_time_s=1.0)  # 30 actions of buffer: every step asks for a chunk
    robot = arm()
    streaming(e)
    tick(e, robot)
    e.step()
    _, on_a = link.requests[-1]
    assert on_a.prefix_model is not None  # the same model: its leftovers guide it
    e.step()  # merged
    left = e.queue.qsize()
    assert left > 0
    link.move(TO_B)
    e.step()
    _, first = link.requests[-1]
    assert link.bound == "b" and first.prefix_model is None and first.prefix_robot is None
    e.step()  # the new model's first chunk: it replaces the old model's queue, it is not appended to it
    assert e.queue.qsize() == 10 - e.queue.last_trim and {m.fingerprint for m in e.queue.meta} == {"fp-B"}
    assert tick(e, robot) == pytest.approx(2.0, abs=0.1)
    e.step()
    _, second = link.requests[-1]
    assert second.prefix_model is not None and np.all(second.prefix_model >= 2.0)  # its own actions only
    e.stop()


def test_a_late_chunk_of_the_old_session_is_never_merged():
    link, robot = two_models(), arm()
    e = engine(link)
    streaming(e)
    old_session = e.session_id
    respond, link.respond = link.respond, None  # the old model's replica is slow: the request stays in flight
    for _ in range(12):
        tick(e, robot)
        e.step()
    old_request = link.requests[-1][0]
    assert e.requests.current is not None and e.requests.current.seq_id == old_request.seq_id
    link.move(TO_B)
    e.step()
    new_request = link.requests[-1][0]
    assert link.bound == "b" and new_request.seq_id > old_request.seq_id
    dropped = e.counters["late_dropped"]
    link.reply(old_request, np.full((10, len(NAMES)), 1.5, np.float32), session_id=old_session)  # the old model, late
    e.step()
    assert e.counters["late_dropped"] == dropped + 1 and e.counters["chunks"] == 1
    assert all(m.fingerprint == "fp-A" for m in e.queue.meta)
    link.reply(new_request, respond(new_request, None))
    e.step()
    assert tick(e, robot) == pytest.approx(2.0, abs=0.1)
    assert 1.5 not in [c["action"][NAMES[0]] for c in robot.commands]
    e.stop()


def test_a_move_within_one_namespace_binds_only_a_replica_of_the_new_checkpoint():
    link = two_models()
    e = engine(link)
    streaming(e)
    link.add_replica(MemoryReplica("a2", fingerprint="fp-B"))  # two checkpoints now share the robot's namespace
    e.step()
    q = link.move(MoveCommand(model_id="m", revision="main", service="t", fingerprint="fp-B"))
    e.step()
    assert q.ack is not None and q.ack.ok
    assert link.retargets == [] and e.keys == HOME and e.replica == "a2" and e.fingerprint == "fp-B"
    e.step()
    assert e.counters["moves"] == 1 and e.queue.head_meta().fingerprint == "fp-B"
    e.stop()


# ---------------------------------------------------------------- a move that fails, or is not one
@pytest.mark.parametrize(
    "target, code",
    [
        (None, "no replica answered there"),
        (MemoryReplica("b", fingerprint="fp-B", keys=NEW, refuse=Refusal.SERVER_FULL), "server full"),
        (MemoryReplica("b", fingerprint="fp-C", keys=NEW), "different model"),
    ],
    ids=["no_replica", "full", "other_checkpoint"],
)
def test_a_failed_move_leaves_the_robot_streaming_from_its_model_with_one_warning(caplog, target, code):
    link = two_models(target=target or MemoryReplica("elsewhere", keys=ServiceKeys.for_service("x", "y", "z")))
    e, robot = engine(link), arm()
    streaming(e)
    session, epoch = e.session_id, e.session_epoch
    caplog.set_level(logging.WARNING, logger=ENGINE_LOG)
    q = link.move(TO_B)
    e.step()
    assert q.ack is not None and q.ack.ok  # acked at once; the outcome shows in telemetry
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("Move to model m2@v2 (fp-B) (service t) failed: ")
    assert code in warnings[0] and "Still on model m@main (fp-A) on replica a" in warnings[0], warnings
    assert e.counters["move_failed"] == 1 and e.counters["moves"] == 0 and not e.failed
    assert (e.session_id, e.session_epoch, e.keys, e.fingerprint, link.retargets) == (session, epoch, HOME, "fp-A", [])
    for _ in range(12):
        e.step()
        assert tick(e, robot) == pytest.approx(1.0, abs=0.1)
    assert e.state is LinkState.STREAMING and set(fingerprints(robot)) == {"fp-A"}
    assert e.telemetry().fingerprint == "fp-A" and e.telemetry().revision == "main"
    e.stop()


@pytest.mark.parametrize(
    "payload, why",
    [
        (b"\xc1 not msgpack", "malformed move command"),
        (None, "malformed move command"),
        (encode({"model_id": "m2", "revision": "v2"}), "service"),
        (encode(MoveCommand(model_id="", revision="v2", service="t", fingerprint="fp-B")), "model_id"),
        (encode(MoveCommand(model_id="m2", revision="v2", service="t", fingerprint="")), "fingerprint"),
        (encode(MoveCommand(model_id="m2", revision="v2", service="t", fingerprint="fp\nB")), "fingerprint"),
    ],
    ids=["garbage", "empty", "missing_fields", "empty_model", "no_fingerprint", "control_chars"],
)
def test_a_malformed_move_is_refused_and_changes_nothing(payload, why):
    link = two_models()
    e = engine(link)
    streaming(e)
    before = (e.session_id, e.session_epoch, e.keys, e.fingerprint, len(link.handshakes))
    q = link.move(payload)
    e.step()
    assert q.ack is not None and not q.ack.ok and q.ack.fingerprint == "fp-A"
    assert why in q.ack.message and "\n" not in q.ack.message
    assert e.counters["move_refused"] == 1 and e.counters["move_failed"] == 0
    assert (e.session_id, e.session_epoch, e.keys, e.fingerprint, len(link.handshakes)) == before
    assert link.retargets == [] and e.state is LinkState.STREAMING
    e.stop()


def test_a_move_to_the_model_it_runs_is_a_no_op():
    link = two_models()
    e = engine(link)
    streaming(e)
    before = (e.session_id, e.session_epoch, len(link.handshakes))
    q = link.move(MoveCommand(model_id="m", revision="main", service="t", fingerprint="fp-A"))
    e.step()
    assert q.ack == MoveAck(ok=True, message="already on m@main (fp-A)", fingerprint="fp-A")
    assert (e.session_id, e.session_epoch, len(link.handshakes)) == before and link.retargets == []
    assert e.counters["moves"] == 0 and e.counters["move_failed"] == 0
    e.stop()


# ---------------------------------------------------------------- pick(): two checkpoints in one namespace
def serving(replica: str, fingerprint: str) -> ServerStatus:
    return ServerStatus(replica=replica, model=ModelInfo(fingerprint=fingerprint), max_sessions=4)


def test_pick_binds_a_pinned_robot_only_to_its_own_checkpoint():
    statuses = [serving("a", "fp-A"), serving("b", "fp-B"), serving("c", "fp-A"), serving("d", "fp-B")]
    asked: list[str] = []

    def ask(st: ServerStatus) -> SessionAck:
        asked.append(st.replica)
        return SessionAck(ok=True, session_id="s", replica=st.replica)

    for _ in range(30):  # the order is drawn at random: every draw must skip the other checkpoint
        opened = pick(statuses, ask, expect_fingerprint="fp-B")
        assert opened.status.replica in ("b", "d")
    assert set(asked) == {"b", "d"}


def test_pick_moves_past_a_full_replica_of_its_checkpoint_but_never_to_the_other_one():
    statuses = [serving("a", "fp-A"), serving("b", "fp-B")]
    with pytest.raises(HandshakeError) as info:
        pick(statuses, lambda st: SessionAck(ok=False, code="server_full"), expect_fingerprint="fp-B")
    assert not info.value.fatal and info.value.refusal is Refusal.SERVER_FULL


def test_pick_with_no_replica_of_the_pinned_checkpoint_stays_fatal():
    asked: list[str] = []
    with pytest.raises(HandshakeError) as info:
        pick(
            [serving("a", "fp-A"), serving("c", "fp-C")],
            lambda st: asked.append(st.replica) or SessionAck(ok=True, replica=st.replica),
            expect_fingerprint="fp-B",
        )
    assert info.value.fatal and info.value.code is Refusal.MODEL_MISMATCH and asked == []
    assert "different model" in str(info.value)


def test_pick_asks_a_replica_that_names_no_checkpoint():
    opened = pick(
        [serving("a", "fp-A"), serving("old", "")],
        lambda st: SessionAck(ok=True, replica=st.replica),
        expect_fingerprint="fp-B",
    )
    assert opened.status.replica == "old"  # the server itself checks expect_fingerprint


# ---------------------------------------------------------------- through a real router
@pytest.fixture
def two_servers(router, zenoh_client, request):
    from lerobot_policy_remote.testing.fake_server import FakeServer, Faults

    model_a, model_b = f"move-a-{request.node.name}", f"move-b-{request.node.name}"
    home = ServiceKeys.for_service(model_a, "main", "task")
    target = ServiceKeys.for_service(model_b, "v2", "task")
    a = FakeServer(zenoh_client(), home, action_dim=len(NAMES), replica="fake-a", faults=Faults(fingerprint="fp-A"))
    b = FakeServer(zenoh_client(), target, action_dim=len(NAMES), replica="fake-b", faults=Faults(fingerprint="fp-B"))
    yield router, model_a, model_b, a, b
    a.close()
    b.close()


def test_a_robot_moves_between_two_servers_in_two_namespaces_through_a_router(two_servers, zenoh_client):
    from lerobot_policy_remote.engine import provenance
    from lerobot_policy_remote.testing import wait_until
    from lerobot_policy_remote.wire.codec import decode

    router, model_a, model_b, a, b = two_servers
    home = ServiceKeys.for_service(model_a, "main", "task")
    target = ServiceKeys.for_service(model_b, "v2", "task")
    cfg = RemoteInferenceConfig(
        connect_endpoint=router.endpoint, rtc=RTCConfig(enabled=False), request_timeout_s=1.0, handshake_jitter_s=0.0
    )
    e = RemoteInferenceEngine(
        cfg,
        hw_features=HW,
        ordered_action_keys=NAMES,
        task="task",
        fps=30,
        model_id=model_a,
        shutdown_event=threading.Event(),
    )
    e.start()
    e.resume()
    seen: list[str] = []
    stop = threading.Event()

    def control() -> None:
        while not stop.is_set():
            e.notify_observation(OBS)
            if e.get_action() is not None:
                p = provenance.latest()
                seen.append(p.fingerprint if p else "")
            time.sleep(1 / 30)

    loop = threading.Thread(target=control, daemon=True)
    loop.start()
    op = zenoh_client()
    try:
        wait_until(lambda: "fp-A" in seen, timeout=10)
        cmd = MoveCommand(model_id=model_b, revision="v2", service="task", fingerprint="fp-B")
        replies = list(op.get(home.robot(e.client_uuid, "move"), payload=encode(cmd), timeout=3.0))
        ack = decode(MoveAck, replies[0].ok.payload.to_bytes())
        assert ack.ok and ack.message.startswith("moving to move-b-") and ack.fingerprint == "fp-A"
        wait_until(lambda: seen and seen[-1] == "fp-B" and e.counters["moves"] == 1, timeout=10)
        assert e.replica == "fake-b" and e.keys == target and not e.failed
        again = list(op.get(target.robot(e.client_uuid, "move"), payload=encode(cmd), timeout=3.0))
        assert decode(MoveAck, again[0].ok.payload.to_bytes()).message.startswith("already on")
        assert list(op.get(home.robot(e.client_uuid, "move"), payload=encode(cmd), timeout=0.5)) == []
    finally:
        stop.set()
        loop.join(timeout=2)
        e.stop()
    assert switches([fp for fp in seen if fp]) == 1
