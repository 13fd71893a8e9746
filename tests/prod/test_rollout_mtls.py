"""Only an operator may start, promote or abort a rollout, through a real mTLS router enforcing the inventory's ACL.

Real parts: the router (which keeps the rollout), two real `lerobot-policy-server` replicas of two tiny ACT
checkpoints (rep-1 serves model A, rep-2 model B under revision v2, one service), and a real `lerobot-rollout` robot
(arm-b) on A. A robot's and a viewer's certificate are refused by the router's access control (logged, nothing
changes); an operator's rollout moves arm-b to B under the same ACL, over its own `move` key.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from fleet_pki import acl_fleet, fleet_tls, robot_tls, server_tls

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, policy_server, rollout_argv
from lerobot_policy_remote.testing.waiting import wait_until

pytestmark = pytest.mark.slow
FLEET = str(VENV_BIN / "lerobot-fleet")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    task = f"rollout pick {uuid.uuid4().hex[:6]}"
    with acl_fleet(tmp_path_factory, "rollout_acl", seed=7) as (pki, model_a, router):
        model_b = save_tiny_act(tmp_path_factory.mktemp("rollout_b") / "act", seed=8)
        procs: list[Proc] = []
        try:
            procs.append(policy_server(model_a, task, router.endpoint, "--replica_id=rep-1", *server_tls(pki, "rep-1")))
            procs.append(
                policy_server(
                    model_b,
                    task,
                    router.endpoint,
                    "--replica_id=rep-2",
                    "--model.revision=v2",
                    *server_tls(pki, "rep-2"),
                    name="server-b",
                )
            )
            robot = Proc(
                rollout_argv(
                    model_a,
                    task,
                    router.endpoint,
                    "--fps=30",
                    "--inference.client_uuid=arm-b",
                    *robot_tls(pki, "arm-b"),
                    "--return_to_initial_position=false",
                    duration=300,
                ),
                name="rollout",
                max_seconds=400,
            )
            procs.append(robot)
            robot.wait_for("executing session_id=", timeout=200)
            yield {"pki": pki, "router": router, "robot": robot}
        finally:
            for p in reversed(procs):
                p.stop()


def rollout(fleet, cert: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FLEET, "rollout", *args, "--router", fleet["router"].endpoint, *fleet_tls(fleet["pki"], cert)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def phase(fleet) -> str:
    out = rollout(fleet, "alice", "status", "--json", "--wait", "0")
    assert out.returncode == 0, out.stdout + out.stderr
    return str(json.loads(out.stdout)["phase"])


def refused_in_router_log(fleet, cn: str) -> bool:
    line = f"ACL refused: CN={cn} query (ingress) on @lerobot/fleet/rollout/control"
    return bool(wait_until(lambda: line in fleet["router"].proc.output(), timeout=10, message=line))


def test_a_robot_or_a_viewer_cannot_start_a_rollout_an_operator_can_and_promote_it(fleet):
    for cert in ("arm-a", "wall"):
        out = rollout(fleet, cert, "start", "--to", "v2", "--canary", "100%")
        assert out.returncode == 2 and "no fleet router answered" in out.stdout + out.stderr, out.stdout + out.stderr
        assert refused_in_router_log(fleet, cert)
    assert phase(fleet) == ""  # nothing started
    read = rollout(fleet, "wall", "status", "--wait", "0")  # a viewer may read it
    assert read.returncode == 0, read.stdout + read.stderr

    started = rollout(fleet, "alice", "start", "--to", "v2", "--canary", "100%")
    assert started.returncode == 0, started.stdout + started.stderr
    fleet["robot"].wait_for("Moved to model", timeout=60)  # over its own move key, under the ACL
    wait_until(lambda: phase(fleet) == "canary", timeout=30, message="the canary settled")

    out = rollout(fleet, "wall", "promote")
    assert out.returncode == 2 and refused_in_router_log(fleet, "wall")
    assert phase(fleet) == "canary"
    promoted = rollout(fleet, "alice", "promote")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    wait_until(lambda: phase(fleet) == "complete", timeout=30, message="the rollout complete")
    assert "ERROR" not in fleet["robot"].output()
