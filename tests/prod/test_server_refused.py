"""A policy server the router's access control refuses says so and exits 2, before loading its model.

A real mTLS router with `--inventory` (fleet_pki.py), real `lerobot-policy-server` processes: one started with a
robot's certificate, one with a server certificate bound to another namespace. Each prints one line naming the
certificate's CN and role, the namespace it tried and the `pki issue` fix, within 20 s of its launch; its /healthz
never answers ok meanwhile. `router_refused=retry` keeps the process up with /healthz failing instead; the right
certificate serves, and its replica id is the certificate's CN when --replica_id is not given.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from fleet_pki import acl_fleet, server_tls

from lerobot_policy_remote.testing.procs import Proc, free_port, tool
from lerobot_policy_remote.testing.waiting import wait_until

pytestmark = pytest.mark.slow
LAUNCH_TO_EXIT_S = 20.0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with acl_fleet(tmp_path_factory, "refused", seed=3) as (pki, model, router):
        yield {"pki": pki, "model": model, "router": router, "task": f"refused pick {uuid.uuid4().hex[:6]}"}


def server(fleet, cert: str, *extra: str) -> tuple[Proc, int]:
    health = free_port()
    argv = [
        tool("lerobot-policy-server"),
        f"--model.repo_or_path={fleet['model']}",
        f"--default_task={fleet['task']}",
        f"--zenoh.connect_endpoints=[{fleet['router'].endpoint}]",
        f"--health_port={health}",
        *server_tls(fleet["pki"], cert),
        *extra,
    ]
    return Proc(argv, name=f"server-{cert}", max_seconds=240), health


def healthz(port: int) -> tuple[int, str] | None:
    """(status, body) of /healthz, or None when nothing answers."""
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0)
    except httpx.HTTPError:
        return None
    return r.status_code, r.text


def exits_refused(p: Proc, health: int) -> tuple[int, str, float]:
    """Exit status, output and seconds from launch to exit; /healthz is never ok meanwhile."""
    t0 = time.monotonic()
    while p.popen.poll() is None and time.monotonic() - t0 < LAUNCH_TO_EXIT_S + 30:
        answer = healthz(health)
        assert answer is None or answer[0] != 200, f"/healthz answered ok for a refused server: {answer}"
        time.sleep(0.2)
    took = time.monotonic() - t0
    rc = p.wait(30)
    return rc, p.output(), took


def test_a_server_with_a_robot_certificate_exits_2_naming_the_fix(fleet):
    p, health = server(fleet, "arm-a")
    try:
        rc, out, took = exits_refused(p, health)
    finally:
        p.stop()
    lines = [x for x in out.splitlines() if x.startswith("lerobot-policy-server: ")]
    assert rc == 2, out[-3000:]
    assert len(lines) == 1, out[-3000:]
    line = lines[0]
    assert "CN=arm-a (a robot certificate)" in line
    assert f"namespace 'model={fleet['model']},service={fleet['task']}'" in line
    assert "Only a server certificate may serve" in line
    assert (
        f"lerobot-fleet pki issue DIR NAME --role server --namespace 'model={fleet['model']},service={fleet['task']}'"
        in line
    )
    assert "Policy server up" not in out and "Traceback" not in out
    assert took <= LAUNCH_TO_EXIT_S, f"the refusal took {took:.1f}s from launch"


def test_a_server_outside_its_namespace_exits_2_naming_the_fix(fleet):
    p, health = server(fleet, "rogue")
    try:
        rc, out, took = exits_refused(p, health)
    finally:
        p.stop()
    line = [x for x in out.splitlines() if x.startswith("lerobot-policy-server: ")][-1]
    assert rc == 2, out[-3000:]
    assert "CN=rogue (a server certificate) may not serve" in line
    assert "replica rogue," in line  # the replica id is the certificate's CN when --replica_id is not given
    assert (
        f"lerobot-fleet pki issue DIR rogue --role server --namespace 'model={fleet['model']},service={fleet['task']}'"
        in line
    )
    assert "then restart the router with the updated DIR/inventory.yaml" in line
    assert "Policy server up" not in out
    assert took <= LAUNCH_TO_EXIT_S, f"the refusal took {took:.1f}s from launch"


def test_retry_keeps_healthz_failing_while_refused(fleet):
    p, health = server(fleet, "rogue", "--router_refused=retry")
    try:
        p.wait_for("lerobot-policy-server: warning: the router's access control refuses this replica", timeout=60)
        p.wait_for("Policy server up", timeout=200)
        status, body = wait_until(lambda: healthz(health), timeout=30, message="/healthz answering")
        assert status == 503 and "CN=rogue" in body, body
        time.sleep(6)  # a re-check ran (every 5 s): still refused, still failing, still running
        assert healthz(health)[0] == 503 and p.popen.poll() is None
    finally:
        p.stop()


def test_the_right_certificate_serves_as_its_cn(fleet):
    p, health = server(fleet, "rep-1")
    try:
        up = p.wait_for("Policy server up", timeout=200)
        assert "replica=rep-1 " in up
        assert wait_until(lambda: healthz(health), timeout=30, message="/healthz answering")[0] == 200
        assert "lerobot-policy-server: " not in p.output()
    finally:
        p.stop()
