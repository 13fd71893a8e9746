"""The real `lerobot-policy-server` process (manifest + CLI overrides, SIGTERM drain) and the drain query."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest

from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, free_port
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.data import ActionChunkMsg
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import DrainAck, DrainRequest, EventMsg


def _health(port: int) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def slow_diffusion(tmp_path_factory):
    """Seconds per chunk on this CPU (more under load): SIGTERM lands well inside the inference."""
    from lerobot_policy_remote.testing.policies import save_tiny_diffusion

    return save_tiny_diffusion(tmp_path_factory.mktemp("slow_diff"), num_inference_steps=400, num_train_timesteps=400)


@pytest.mark.slow
def test_cli_manifest_overrides_sigterm_drain_finishes_in_flight(router, zenoh_client, slow_diffusion, tmp_path):
    task = f"cli task {uuid.uuid4().hex[:6]}"
    port = free_port()
    manifest = tmp_path / "server.yaml"
    manifest.write_text(
        f'model:\n  repo_or_path: {slow_diffusion}\n  revision: main\ndefault_task: "{task}"\nmax_sessions: 3\n'
        f"warmup_inferences: 1\nhealth_port: {port}\nreplica_id: cli-replica\nzenoh:\n  mode: client\n"
        f'  connect_endpoints: ["{router.endpoint}"]\n'
    )
    proc = Proc(
        [str(VENV_BIN / "lerobot-policy-server"), "--manifest", str(manifest), "--trained_fps=25"],
        name="policy-server",
        max_seconds=180,
    )
    try:
        up = proc.wait_for("Policy server up:", timeout=120)
        keys = ServiceKeys.for_service(str(slow_diffusion), "main", task)
        assert keys.base in up and "replica=cli-replica" in up and "fingerprint=" in up
        assert "Warm-up inference 1/1" in proc.output() and "Loading" in proc.output()
        assert _health(port) == 200
        r = FakeRobot(zenoh_client(), keys, f"cli-{uuid.uuid4().hex[:6]}")
        [st] = r.statuses()
        assert st.trained_fps == 25.0 and st.max_sessions == 1 and st.serving_mode == "exclusive"  # diffusion: forced
        assert r.open("cli-replica", fps=25.0).ok
        seq = r.send(np.zeros(6))
        time.sleep(0.3)  # the worker is inside the slow inference now (it takes seconds)
        proc.signal_program(signal.SIGTERM)
        got = [r.recv(30), r.recv(30)]  # the draining notice and the in-flight request's chunk, both delivered
        events = [b for _, b in got if isinstance(b, EventMsg)]
        chunks = [(h, b) for h, b in got if isinstance(b, ActionChunkMsg)]
        assert [e.event for e in events] == ["draining"]
        assert isinstance(got[0][1], EventMsg), "the chunk came before the drain: the request was not in flight"
        assert chunks and chunks[0][0].seq_id == seq and chunks[0][1].chunk_robot.shape == (8, 6)
        assert "1 pending request" in proc.output()
        assert proc.wait(60) == 0
        assert "Drain complete" in proc.output()
    finally:
        proc.stop()


@pytest.mark.slow
def test_cli_bad_manifest_says_what_to_fix(router):
    proc = Proc(
        [str(VENV_BIN / "lerobot-policy-server"), "--default_task=x", f"--zenoh.connect_endpoints=[{router.endpoint}]"],
        name="bad-server",
        max_seconds=60,
    )
    assert proc.wait(60) == 2
    assert "model.repo_or_path is empty" in proc.output()


def test_drain_query_flips_health_and_refuses_sessions(server_factory, robots, zenoh_client, act_ckpt):
    server = server_factory(act_ckpt)
    a, b = robots(server, 2)
    opened = a.open(server.replica)
    # This checkpoint names no actions and the manifest sets none: dimension checked, order flagged.
    assert opened.ok and any("set action_feature_names in the server manifest" in w for w in opened.warnings)
    assert _health(server.health_port) == 200
    z = zenoh_client()
    alive = [
        rp.ok.key_expr for rp in z.liveliness().get(server.keys.server(server.replica, "alive"), timeout=2.0) if rp.ok
    ]
    assert alive
    [rp] = list(
        z.get(server.keys.server(server.replica, "drain"), payload=encode(DrainRequest("test", "pytest")), timeout=5.0)
    )
    ack = decode(DrainAck, rp.ok.payload.to_bytes())
    assert ack.ok and ack.sessions
    _, ev = a.wait_for(lambda h, body: isinstance(body, EventMsg), 10)
    assert ev.event == "draining"
    assert server.wait(10)
    assert _health(server.health_port) == 503
    refused = b.open(server.replica)
    assert not refused.ok and refused.code == "draining"
    [st] = [s for s in b.statuses() if s.replica == server.replica]
    assert st.draining
    time.sleep(0.3)
    assert not [rp for rp in z.liveliness().get(server.keys.server(server.replica, "alive"), timeout=2.0) if rp.ok]
