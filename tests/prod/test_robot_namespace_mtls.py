"""Under mTLS a robot whose task matches no server it may see says which services its certificate may see, and the fix.

A real mTLS router with `--inventory` (fleet_pki.py), a real `lerobot-policy-server` (rep-1) serving TASK, and real
`lerobot-rollout` robots whose certificates are bound to one namespace each. The router answers a robot only in its
certificate's namespaces, so a robot asking elsewhere sees nothing through the router: it must say which namespaces
its certificate grants, what serves there, and name `--task=...` or the `pki issue` command, in one line, quickly.
"""

from __future__ import annotations

import time

import pytest
from fleet_pki import acl_router, make_pki, robot_tls, server_tls
from lerobot_fleet.router.inventory import NamespaceGrant
from lerobot_fleet.router.pki import issue

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import Proc, policy_server, rollout_argv

pytestmark = pytest.mark.slow
TASK = "pick up the cube"
OTHER = "stack the blocks"
LAUNCH_TO_EXIT_S = 20.0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    model = save_tiny_act(tmp_path_factory.mktemp("mismatch_act") / "act", seed=7)
    issue(pki, "arm-pick", "robot", namespaces=[NamespaceGrant(model=str(model), service=TASK)])
    issue(pki, "arm-stack", "robot", namespaces=[NamespaceGrant(model=str(model), service=OTHER)])
    router = acl_router(pki).start()
    server = None
    try:
        server = policy_server(
            model,
            TASK,
            router.endpoint,
            "--replica_id=rep-1",
            *server_tls(pki, "rep-1"),
            max_seconds=400,
            ready_timeout=200,
        )
        yield {"pki": pki, "model": model, "router": router}
    finally:
        if server is not None:
            server.stop()
        router.stop()


def rollout(fleet, robot: str, task: str) -> tuple[int, str, float]:
    """Exit status, output and seconds from launch to the one-line message."""
    t0 = time.monotonic()
    argv = rollout_argv(
        fleet["model"], task, fleet["router"].endpoint, "--fps=30", *robot_tls(fleet["pki"], robot), duration=20
    )
    p = Proc(argv, name=f"rollout-{robot}", max_seconds=200)
    try:
        p.wait_for("lerobot-rollout: ", timeout=120)
        took = time.monotonic() - t0
        rc = p.wait(60)
        p.wait_for("(LOG_LEVEL=DEBUG", timeout=5)
        return rc, p.output(), took
    finally:
        p.stop()


def message(out: str) -> list[str]:
    lines = out.splitlines()
    start = max(i for i, x in enumerate(lines) if x.startswith("lerobot-rollout: "))
    return lines[start:-1]


def refused_line(fleet, robot: str, task: str) -> tuple[str, str, float]:
    """The robot's one-line refusal, its whole output and seconds to it; the line never blames an empty router."""
    rc, out, took = rollout(fleet, robot, task)
    lines = message(out)
    assert rc != 0 and len(lines) == 1, out[-3000:]
    assert "the router has no policy server at all" not in lines[0]
    return lines[0], out, took


def test_a_task_outside_the_certificate_names_the_visible_service_and_both_fixes(fleet):
    line, out, took = refused_line(fleet, "arm-pick", OTHER)
    model = fleet["model"]
    assert (
        f"among what certificate CN=arm-pick may see: the router's access control answers it only in namespace "
        f"'model={model},service={TASK}', and this request is outside them"
    ) in line
    assert f"There it sees 1 service: model '{model}' revision 'main' task '{TASK}': 1 replica" in line
    assert f"To use it: --task='{TASK}'" in line
    assert (
        f"lerobot-fleet pki issue DIR arm-pick --role robot --namespace 'model={model},service={TASK}' "
        f"--namespace 'model={model},service={OTHER}', then restart the router"
    ) in line
    assert "Traceback" not in out
    assert took <= LAUNCH_TO_EXIT_S, f"the message took {took:.1f}s from launch"


def test_a_certificate_for_another_namespace_names_the_pki_fix(fleet):
    line, out, took = refused_line(fleet, "arm-stack", TASK)
    model = fleet["model"]
    assert f"answers it only in namespace 'model={model},service={OTHER}', and this request is outside them" in line
    assert "No server serves there; for a certificate in the namespace asked for" in line
    assert (
        f"for a certificate in the namespace asked for: lerobot-fleet pki issue DIR arm-stack --role robot "
        f"--namespace 'model={model},service={OTHER}' --namespace 'model={model},service={TASK}'"
    ) in line
    assert took <= LAUNCH_TO_EXIT_S, f"the message took {took:.1f}s from launch"


def test_a_certificate_for_any_namespace_still_gets_the_closest_task(fleet):
    rc, out, took = rollout(fleet, "arm-a", "pick up the cub")
    text = "\n".join(message(out))
    assert rc != 0
    assert f"To use it: --task='{TASK}'" in text
    assert "may see" not in text
    assert took <= LAUNCH_TO_EXIT_S, f"the message took {took:.1f}s from launch"
