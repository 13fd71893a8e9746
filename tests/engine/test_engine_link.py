"""The engine over real Zenoh (shared router) against a fault-injecting test double of one replica."""

from __future__ import annotations

import threading
import time

import lerobot.rollout  # noqa: F401
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.keys import ServiceKeys

NAMES = [f"j{i}.pos" for i in range(6)]
HW = {"observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES}}


def obs() -> dict:
    return {n: 1.0 for n in NAMES}


def wait(pred, timeout=10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def rig(router, zenoh_client, request):
    model = f"fake-model-{request.node.name}"
    keys = ServiceKeys.for_service(model, "main", "task")
    server = FakeServer(zenoh_client(), keys)
    engines = []

    def make(**kw):
        cfg = RemoteInferenceConfig(
            connect_endpoint=router.endpoint,
            rtc=RTCConfig(enabled=False),
            request_timeout_s=1.0,
            reconnect_initial_backoff_s=0.2,
            reconnect_max_backoff_s=0.5,
            **kw,
        )
        shutdown = threading.Event()
        e = RemoteInferenceEngine(
            cfg, hw_features=HW, ordered_action_keys=NAMES, task="task", fps=30, model_id=model, shutdown_event=shutdown
        )
        e.shutdown = shutdown
        e.reset()
        e.start()
        e.resume()
        engines.append(e)
        return e

    yield server, make
    for e in engines:
        e.stop()
    server.close()


def drive(e: RemoteInferenceEngine, seconds: float) -> list:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        e.notify_observation(obs())
        out.append(e.get_action(None))
        time.sleep(1 / 30)
    return out


def test_streams_chunks_and_stamps_provenance(rig):
    server, make = rig
    e = make()
    acts = drive(e, 1.5)
    got = [a for a in acts if a is not None]
    assert got, "no action executed"
    assert e.state in (LinkState.STREAMING, LinkState.DEGRADED)
    assert server.obs_seen[0][1].episode_start is True
    assert all(float(a[0]) >= 1.0 for a in got)  # every executed action came from a server chunk (seq >= 1)
    assert e.telemetry().last_outcome == "ok"  # how the last request ended, not the link state
    assert (
        e.telemetry().max_action_age_s == e.cfg.max_action_age_s > 0
    )  # its hard bound, for the console's staleness alert


@pytest.mark.parametrize("mode", ["nan", "wrong_shape"])
def test_bad_chunks_are_never_executed(rig, mode):
    server, make = rig
    server.faults.mode = mode
    e = make()
    acts = drive(e, 1.2)
    assert all(a is None for a in acts)
    assert e.counters["bad_chunk"] >= 1
    assert e.counters["chunks"] == 0
    assert e.telemetry().last_outcome in ("bad_chunk", "timeout")


def test_foreign_session_chunk_is_a_lost_session_not_a_bad_chunk(rig):
    """A chunk naming another session (the server replaced ours) is never executed and re-handshakes at once."""
    server, make = rig
    server.faults.mode = "foreign_session"
    e = make()
    epoch0 = e.session_epoch
    acts = drive(e, 1.2)
    assert all(a is None for a in acts)
    assert e.counters["chunks"] == 0 and e.counters["bad_chunk"] == 0
    assert e.counters["foreign_session"] >= 1
    assert e.session_epoch > epoch0  # a fresh handshake, not a wait for DEAD on a session the server dropped


def test_silent_server_times_out_then_reconnects(rig):
    server, make = rig
    e = make()
    drive(e, 0.5)
    server.faults.mode = "silent"
    assert wait(lambda: (drive(e, 0.1), e.state)[1] is LinkState.RECONNECTING or e.counters["timeouts"] >= 2, timeout=8)
    server.faults.mode = "ok"
    assert wait(lambda: (drive(e, 0.1), e.state)[1] is LinkState.STREAMING, timeout=10)
    assert not e.failed


def test_model_change_on_reconnect_is_dead_and_sets_shutdown(rig):
    server, make = rig
    e = make()
    drive(e, 0.5)
    server.faults.fingerprint = "fp-B"
    server.faults.mode = "silent"
    assert wait(lambda: (drive(e, 0.1), e.failed)[1], timeout=10)
    assert e.state is LinkState.DEAD and e.shutdown.is_set()
    assert "different model" in e.states.dead_reason


def test_operator_episode_reset_via_queryable(rig, zenoh_client):
    from lerobot_policy_remote.wire.codec import decode, encode
    from lerobot_policy_remote.wire.messages import EpisodeResetAck, EpisodeResetCommand

    server, make = rig
    e = make()
    drive(e, 0.3)
    ep = e.episode_id
    op = zenoh_client()
    replies = list(
        op.get(
            e.keys.robot(e.client_uuid, "episode_reset"),
            payload=encode(EpisodeResetCommand(reason="test")),
            timeout=3.0,
        )
    )
    ack = decode(EpisodeResetAck, replies[0].ok.payload.to_bytes())
    assert ack.ok and ack.episode_id == ep + 1 == e.episode_id
    assert wait(lambda: server.resets >= 1)


def test_a_reader_gets_the_robots_telemetry_at_once_from_one_wildcard_query(rig, zenoh_client):
    """The telemetry key answers queries: a console connecting later need not wait for the next report (here a
    minute away) to show the robot."""
    from lerobot_policy_remote.wire.codec import decode
    from lerobot_policy_remote.wire.messages import RobotTelemetry

    _server, make = rig
    e = make(telemetry_period_s=60.0)
    drive(e, 0.5)
    t0 = time.monotonic()
    replies = [r for r in zenoh_client().get(ServiceKeys.any().robot("*", "telemetry"), timeout=3.0) if r.ok]
    assert time.monotonic() - t0 < 1.0  # answered by the worker's next pass, not at the query's timeout
    assert [str(r.ok.key_expr) for r in replies] == [e.keys.robot(e.client_uuid, "telemetry")]
    t = decode(RobotTelemetry, replies[0].ok.payload.to_bytes())
    assert t.client_uuid == e.client_uuid and t.state == e.state.value and t.requests >= 1
