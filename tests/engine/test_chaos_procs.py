"""Chaos with real processes: one engine streaming from a real `lerobot-policy-server` through a real router.

One rig (own router, one server process, one engine driven by a 30 Hz control thread on a sim arm) rides
through, in order:
1. forged NaN / wrong-shape chunks published by a separate Zenoh session on the robot's action key,
   with a correct-looking header for the request in flight: never executed;
2. SIGSTOP of the server (lease 10 s, so only the request-timeout path can notice): timeouts ->
   RECONNECTING, get_action never raises, no stale action; SIGCONT -> re-handshake -> STREAMING;
3. router restart: reconnect + fresh handshake (new epoch), streaming resumes, no DEAD;
4. SIGTERM drain: the robot rides its buffer, then reconnects to a replacement server process.
Invariants checked over the whole run: get_action never raised, every executed action is finite,
has the robot's shape, came from the real server (provenance), and was younger than max_action_age_s.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid

import lerobot.rollout  # noqa: F401
import numpy as np
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.utils.feature_utils import hw_to_dataset_features

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.sim.robot import SimArm, SimArmConfig, SimCameraConfig
from lerobot_policy_remote.testing import Proc, assert_never, policy_server, wait_until
from lerobot_policy_remote.testing.control_loop import ControlLoop
from lerobot_policy_remote.testing.fake_server import ChunkResponder, Faults
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

pytestmark = pytest.mark.slow
MAX_AGE = 1.0
CAM = (48, 64)
POISON = 12345.0  # value carried by every forged chunk; must never reach the motors


def start_server(model, endpoint: str, task: str, lease_ms: int = 10000) -> Proc:
    return policy_server(
        model,
        task,
        endpoint,
        f"--zenoh.lease_ms={lease_ms}",
        "--warmup_inferences=1",
        "--session_grace_s=2",
        max_seconds=240,
        ready_timeout=120,
    )


def states_since(e: RemoteInferenceEngine, t: float) -> list[LinkState]:
    return [s for (ts, s, _why) in list(e.states.history) if ts >= t]


def forger(session, engine: RemoteInferenceEngine) -> ChunkResponder:
    """The kit's chunk responder on every replica's obs key for this robot, claiming the robot's live session:
    it answers the request in flight with a poisoned chunk while the real server is still computing. Silent
    until a test switches its fault mode."""
    return ChunkResponder(
        session,
        engine.keys,
        "*",
        engine.client_uuid,
        action_dim=len(engine.action_names),
        fill=POISON,
        faults=Faults(mode="silent"),
        session_for=lambda robot: engine.session_id,
    )


def test_engine_rides_out_forgery_sigstop_router_restart_and_drain(own_router, tmp_path):
    task = f"pick {uuid.uuid4().hex[:6]}"
    # ACT, not rtc_toy: the server CLI imports lerobot_policy_remote before lerobot, so the plugin's
    # rtc_toy registration never runs in a `lerobot-policy-server` process (reported server bug).
    model = save_tiny_act(tmp_path / "act", cameras={"front": CAM})
    server = start_server(model, own_router.endpoint, task)
    replacement: Proc | None = None
    robot = SimArm(SimArmConfig(cameras={"front": SimCameraConfig(height=CAM[0], width=CAM[1])}))
    robot.connect()
    hw = hw_to_dataset_features(robot.observation_features, "observation")
    cfg = RemoteInferenceConfig(
        connect_endpoint=own_router.endpoint,
        rtc=RTCConfig(enabled=True, execution_horizon=8),
        max_action_age_s=MAX_AGE,
        request_timeout_s=0.5,
        degraded_after_s=0.5,
        max_offline_s=60,
        reconnect_initial_backoff_s=0.2,
        reconnect_max_backoff_s=1.0,
        buffer_time_s=0.4,
        # the forger answers the observations it reads on the router: on the direct link (one
        # host) they never cross it (test_direct_link.py covers that path's faults)
        direct_on_same_host=False,
    )
    e = RemoteInferenceEngine(
        cfg,
        hw_features=hw,
        ordered_action_keys=list(robot.action_features),
        task=task,
        fps=30,
        model_id=str(model),
        policy_type="act",
        shutdown_event=threading.Event(),
    )
    e.reset()
    e.start()
    e.resume()
    drv = ControlLoop(e, robot, max_action_age_s=MAX_AGE)
    forger_z = open_session(ZenohSettings(mode="client", connect_endpoints=[own_router.endpoint]))
    forged = forger(forger_z, e)
    try:
        wait_until(lambda: e.state is LinkState.STREAMING and len(drv.executed) > 10, 30, message="first streaming")
        first_session = e.session_id

        # 1) forged NaN / wrong-shape replies racing the real server: refused, never executed
        for mode in ("nan", "wrong_shape"):
            bad = e.counters["bad_chunk"]
            forged.faults.mode = mode
            wait_until(lambda: e.counters["bad_chunk"] >= bad + 3, 20, message=f"{mode} chunks refused")  # noqa: B023 (called within this iteration)
            forged.faults.mode = "silent"
        assert forged.sent >= 6
        wait_until(lambda: e.state is LinkState.STREAMING, 20, message="streaming after the forgery")

        # 2) SIGSTOP: only the request timeout can notice (server lease 10 s)
        epoch = e.session_epoch
        t_stop = time.monotonic()
        timeouts = e.counters["timeouts"]
        server.signal_program(signal.SIGSTOP)
        try:
            wait_until(lambda: e.state is LinkState.RECONNECTING, 15, message="RECONNECTING after request timeouts")
            assert e.counters["timeouts"] >= timeouts + 2
            assert LinkState.DEGRADED in states_since(e, t_stop) or LinkState.STALLED in states_since(e, t_stop)
            # every queued action answers an observation taken before t_stop: from t_dry on, all are stale
            t_dry = t_stop + MAX_AGE + 0.5
            assert_never(
                lambda: drv.executed_since(t_dry),
                max(0.5, t_dry + 0.5 - time.monotonic()),
                message="an action executed while the server was stopped and the queue stale",
            )
        finally:
            server.signal_program(signal.SIGCONT)
        wait_until(
            lambda: (
                e.state is LinkState.STREAMING
                and e.session_epoch > epoch
                and drv.executed_since(time.monotonic() - 0.2)
            ),
            30,
            message="a fresh handshake and streaming again after SIGCONT",
        )
        assert not e.failed

        # 3) router restart: liveliness lost / reconnect / fresh handshake, then streaming
        t_router = time.monotonic()
        epoch = e.session_epoch
        own_router.restart()
        wait_until(
            lambda: e.session_epoch > epoch and e.state is LinkState.STREAMING,
            45,
            message="re-handshake + streaming after router restart",
        )
        hist = states_since(e, t_router)
        assert LinkState.RECONNECTING in hist and LinkState.DEAD not in hist, hist
        t_fresh, fresh_session = time.monotonic(), e.session_id
        # a late DELETE storm must not tear the fresh session down again (a slow chunk on a loaded box may show
        # DEGRADED: that is not a teardown)
        assert_never(
            lambda: (
                e.session_id != fresh_session
                or e.failed
                or {LinkState.RECONNECTING, LinkState.DEAD} & set(states_since(e, t_fresh))
            ),
            2.0,
            message="the fresh session torn down after the router restart",
        )
        reconnects_router = states_since(e, t_router).count(LinkState.RECONNECTING)
        assert reconnects_router <= 2, f"spurious reconnects after one router restart: {states_since(e, t_router)}"

        # 4) SIGTERM drain: ride the buffer, then move to a replacement replica
        replacement = start_server(model, own_router.endpoint, task)
        wait_until(
            lambda: e.state is LinkState.STREAMING and drv.executed_since(time.monotonic() - 0.2),
            20,
            message="streaming before drain",
        )
        old_session, old_replica = e.session_id, e.replica
        t_drain = time.monotonic()
        server.signal_program(signal.SIGTERM)
        wait_until(
            lambda: e.replica != old_replica and e.state is LinkState.STREAMING,
            45,
            message="streaming from the replacement",
        )
        assert server.wait(30) == 0, server.output()[-2000:]
        ridden = [
            x
            for x in drv.executed_since(t_drain)
            if x.provenance is not None and x.provenance.session_id == old_session
        ]
        assert ridden, "did not ride the buffer after the drain began"
        assert any(x.provenance is not None and x.provenance.replica == e.replica for x in drv.executed_since(t_drain))
        assert first_session != e.session_id
    finally:
        drv.stop()
        forged.close()
        forger_z.close()
        e.stop()
        server.stop()
        if replacement is not None:
            replacement.stop()
        robot.disconnect()

    # invariants over the whole run
    assert not drv.errors, drv.errors[:3]
    assert drv.executed
    assert drv.unsafe == 0, (drv.stale, drv.nan, drv.foreign)
    for x in drv.executed:
        act, prov = np.asarray(x.values), x.provenance
        assert act.shape == (len(robot.action_features),) and np.isfinite(act).all()
        assert not np.any(act == POISON), "a forged chunk reached the motors"
        assert prov is not None and prov.session_id, "an action without server provenance"
        assert prov.source_age_s <= MAX_AGE
    assert e.counters["bad_chunk"] >= 6
