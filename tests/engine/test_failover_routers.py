"""Several router endpoints: losing the robot's router fails over to the next one, same session.

Two real routers (B connects to A, so they route between each other), a replica on B, the engine's
real Zenoh link connecting to [A, B] (it reaches A first). Killing A: the robot's session moves to B,
the replica's token comes back through B within `failover_grace_s`, and the robot keeps its session.
"""

from __future__ import annotations

import json
import threading

import lerobot.rollout  # noqa: F401
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing import Router, wait_until
from lerobot_policy_remote.testing.control_loop import ControlLoop
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

pytestmark = pytest.mark.slow  # starts router / server processes

NAMES = [f"j{i}.pos" for i in range(6)]
HW = {"observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES}}


def test_losing_the_first_router_keeps_the_session_through_the_second(tmp_path):
    a = Router().start()
    cfg_b = tmp_path / "b.json5"
    cfg_b.write_text(json.dumps({"connect": {"endpoints": [a.endpoint]}}))
    b = Router(extra=["--config", str(cfg_b)]).start()
    keys = ServiceKeys.for_service("failover-model", "main", "task")
    srv_session = open_session(ZenohSettings(mode="client", connect_endpoints=[b.endpoint]))
    server = FakeServer(srv_session, keys)
    cfg = RemoteInferenceConfig(
        connect_endpoints=[a.endpoint, b.endpoint],
        rtc=RTCConfig(enabled=False),
        request_timeout_s=1.0,
        failover_grace_s=3.0,
        reconnect_initial_backoff_s=0.2,
        reconnect_max_backoff_s=0.5,
    )
    e = RemoteInferenceEngine(
        cfg,
        hw_features=HW,
        ordered_action_keys=NAMES,
        task="task",
        fps=30,
        model_id="failover-model",
        shutdown_event=threading.Event(),
    )
    drv = None
    try:
        e.reset()
        e.start()
        e.resume()
        drv = ControlLoop(e, observe=lambda: {n: 1.0 for n in NAMES})
        wait_until(
            lambda: e.state is LinkState.STREAMING and len(drv.executed) > 10, 30, message="streaming through router A"
        )
        session, epoch, lost = e.session_id, e.session_epoch, e.counters["server_token_lost"]
        a.kill()
        wait_until(lambda: e.counters["server_token_lost"] > lost, 15, message="the robot noticed its router went away")
        executed = len(drv.executed)
        wait_until(
            lambda: e.state is LinkState.STREAMING and len(drv.executed) > executed + 10,
            30,
            message="streaming again through B",
        )
        assert (e.session_id, e.session_epoch) == (session, epoch), (
            "a new session was opened although the server stayed reachable"
        )
        assert not e.failed
    finally:
        if drv is not None:
            drv.stop()
        e.stop()
        server.close()
        srv_session.close()
        b.stop()
        a.stop()
