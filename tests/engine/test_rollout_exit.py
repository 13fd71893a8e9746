"""A remote rollout's process ends soon after lerobot logs `Rollout finished`.

Zenoh runs the callbacks of a session's declarations on threads that are not daemons and end only when that
session closes, so one session left open keeps the interpreter waiting at exit for ever (the rollout's last line
printed, the process still there, its liveliness token still on the network). The robot closes its sessions when
the engine stops; a worker that outlived the stop used to be able to open the direct-link session after that
(now refused: `LinkClosed`), and whatever else leaves one open is ended by the exit watchdog.

The slow tests time a real `lerobot-rollout` from `Rollout finished` to its exit: a normal run, and one with a
zenoh session left open on purpose (a `sitecustomize` that opens one at start and never closes it).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from lerobot_policy_remote.engine import hook
from lerobot_policy_remote.engine.request import feature_specs
from lerobot_policy_remote.engine.zenoh_link import LinkClosed, ZenohLink
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, policy_server
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import SessionOpen
from lerobot_policy_remote.zenoh_config import ZenohSettings

NORMAL_EXIT_S = 10.0
LEAKED_EXIT_S = getattr(hook, "EXIT_GRACE_S", 10.0) + 8.0

LEAK = """
import os
if os.environ.get("LEAK_ZENOH_ROUTER"):
    import zenoh
    _c = zenoh.Config()
    _c.insert_json5("mode", '"client"')
    _c.insert_json5("scouting/multicast/enabled", "false")
    _c.insert_json5("connect/endpoints", '["%s"]' % os.environ["LEAK_ZENOH_ROUTER"])
    _leaked = zenoh.open(_c)
    _sub = _leaked.declare_subscriber("leak/**", lambda sample: None)  # a callback thread that is not a daemon
"""


def rollout_exit(router, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Seconds from `Rollout finished` to the process's exit (bounded by the test), its status and output."""
    task = f"exit {os.urandom(3).hex()}"
    model = save_tiny_act(tmp_path / "act", cameras={"front": (96, 128)})
    server = policy_server(model, task, router.endpoint, max_seconds=240, ready_timeout=150)
    p = Proc(
        [
            str(VENV_BIN / "lerobot-rollout"),
            "--strategy.type=base",
            "--inference.type=remote",
            "--robot.type=sim_arm",
            f"--policy.path={model}",
            f"--task={task}",
            "--duration=4",
            "--fps=30",
            f"--inference.connect_endpoint={router.endpoint}",
            "--return_to_initial_position=false",
        ],
        name="rollout",
        env=env,
        max_seconds=240,
    )
    try:
        p.wait_for("Rollout finished", timeout=180)
        t0 = time.monotonic()
        deadline = t0 + LEAKED_EXIT_S + 30
        while p.popen.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        took = time.monotonic() - t0
        return took, p.popen.poll(), p.output()
    finally:
        p.stop()
        server.stop()


@pytest.mark.slow
def test_a_rollout_exits_soon_after_it_finished(router, tmp_path):
    took, rc, out = rollout_exit(router, tmp_path)
    assert rc == 0, out[-3000:]
    assert took <= NORMAL_EXIT_S, f"{took:.1f}s from 'Rollout finished' to exit"
    assert "still running" not in out


@pytest.mark.slow
def test_a_session_left_open_cannot_keep_a_finished_rollout_alive(router, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LEAK)
    env = {
        "LEAK_ZENOH_ROUTER": router.endpoint,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    took, rc, out = rollout_exit(router, tmp_path, env)
    assert rc == 0, out[-3000:]
    assert took <= LEAKED_EXIT_S, f"{took:.1f}s from 'Rollout finished' to exit"
    last = [x for x in out.splitlines() if x.startswith("lerobot-rollout: still running")]
    assert last and "pyo3-closure" in last[0] and "exiting now with status 0" in last[0], out[-2000:]


def test_a_closed_link_opens_and_binds_nothing(router):
    task = f"t{uuid.uuid4().hex[:6]}"
    names = ["j0.pos", "j1.pos"]
    settings = ZenohSettings(mode="client", connect_endpoints=[router.endpoint], shared_memory=True)
    manifest = Manifest(
        model=ModelSpec(repo_or_path="stub"),
        default_task=task,
        health_port=0,
        direct_link=True,
        replica_id=f"rep-{uuid.uuid4().hex[:6]}",
        zenoh=settings,
    )
    server = PolicyServer(manifest, backend=StubBackend(0.0, names, chunk_size=4), progress=lambda t: None).start()
    link = ZenohLink(settings, ServiceKeys.for_service("stub", "main", task), "r1")
    try:
        link.open(lambda: None)
        state = {"observation.state": {"dtype": "float32", "shape": (2,), "names": names}}
        ask = SessionOpen(client_uuid="r1", action_names=names, features=feature_specs(state))
        opened = link.handshake(ask, 5.0, "")
        # the replica on this host offered its direct link: bind would dial it
        assert opened.same_host and opened.ack.direct_endpoints and link.direct_allowed
        link.close()
        with pytest.raises(LinkClosed):
            link.bind(opened.ack.replica)  # a worker that outlived stop(): no session is opened after close()
        with pytest.raises(LinkClosed):
            link.handshake(None, 1.0, "")  # type: ignore[arg-type]
        assert not link.direct and not link.holds_session
        link.close()  # idempotent
    finally:
        link.close()
        server.stop()


def test_the_watchdog_is_armed_only_for_the_real_cli(monkeypatch):
    import types

    armed = []
    monkeypatch.setattr(hook, "_bound_exit", armed.append)
    monkeypatch.setattr(hook, "_built", [types.SimpleNamespace(executed_count=3)])
    monkeypatch.setattr("sys.argv", ["lerobot-rollout", "--inference.type=remote"])
    script = types.SimpleNamespace(rollout=lambda: None)  # not lerobot.scripts.lerobot_rollout: a caller in-process
    hook.wrap_rollout(script)
    script.rollout()
    assert armed == []
    cli = types.ModuleType("lerobot.scripts.lerobot_rollout")
    cli.rollout = lambda: None
    hook.wrap_rollout(cli)
    cli.rollout()
    assert armed == []  # lerobot's own rollout, called by this program (pytest), which goes on after it
    program = types.ModuleType("__main__")
    program.__file__ = "/venv/bin/lerobot-rollout"
    monkeypatch.setitem(sys.modules, "__main__", program)
    cli.rollout()
    assert armed == [0]
