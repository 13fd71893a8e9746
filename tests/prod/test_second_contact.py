"""Start-up and identity through a real mTLS router with the inventory's ACL, a real server and real
`lerobot-rollout` robots.

One fleet for the module (router-a with the ACL, replica rep-1 of a tiny real ACT); each test starts one
short-lived program and reads what it says: identity from the certificate's CN, missing and
wrong certificates named as such, quickly, and the router's refusal log naming the CN.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid

import pytest
from fleet_pki import acl_fleet, fleet_tls, robot_tls, server_tls

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, policy_server, rollout_argv, run
from lerobot_policy_remote.testing.waiting import wait_until

pytestmark = pytest.mark.slow
FLEET = str(VENV_BIN / "lerobot-fleet")
ENGINE_STARTS = "Starting inference engine"  # lerobot's line just before engine.start()
FAILED = "lerobot-rollout: Remote inference could not start: "


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    task = f"pick up the cube {uuid.uuid4().hex[:4]}"
    with acl_fleet(tmp_path_factory, "contact", seed=7) as (pki, model, router):
        server = policy_server(
            model,
            task,
            router.endpoint,
            "--replica_id=rep-1",
            *server_tls(pki, "rep-1"),
            max_seconds=500,
            ready_timeout=200,
        )
        try:
            yield {"pki": pki, "router": router, "server": server, "model": model, "task": task}
        finally:
            server.stop()


def rollout(fleet, *extra: str, duration: float = 3) -> Proc:
    argv = rollout_argv(
        fleet["model"],
        fleet["task"],
        fleet["router"].endpoint,
        "--fps=30",
        "--return_to_initial_position=false",
        *extra,
        duration=duration,
    )
    return Proc(argv, name="rollout", max_seconds=200)


def finish(p: Proc) -> tuple[int, str]:
    rc = p.wait(180)
    p.wait_for("Rollout finished" if rc == 0 else "lerobot-rollout", timeout=10)  # the reader saw the end of the output
    return rc, p.output()


def failed_fast(p: Proc) -> tuple[int, str, float]:
    """Exit code, output, and seconds from the engine's start to the final message."""
    p.wait_for(ENGINE_STARTS, timeout=120)
    t0 = time.monotonic()
    p.wait_for(FAILED, timeout=60)
    took = time.monotonic() - t0
    rc = p.wait(60)
    return rc, p.output(), took


def last_message(out: str) -> str:
    return [x for x in out.splitlines() if x.startswith("lerobot-rollout: ")][-1]


def test_robot_with_a_certificate_and_no_client_uuid_is_its_cn_and_streams(fleet):
    """Finding 1: the guide's command plus the certificate flags is enough; the robot's id is the CN."""
    rc, out = finish(rollout(fleet, *robot_tls(fleet["pki"], "arm-a")))
    assert "Robot id arm-a: the name (CN) of --inference.tls_cert" in out
    executed = re.search(r"Remote inference stopped \(executed=(\d+)", out)
    assert executed and int(executed.group(1)) > 0, out[-3000:]
    assert rc == 0


def test_client_uuid_that_differs_from_the_cn_is_refused_naming_both(fleet):
    """Finding 1: a mismatch is one line naming both, exit non-zero, before anything is sent."""
    rc, out, took = failed_fast(rollout(fleet, "--inference.client_uuid=arm-b", *robot_tls(fleet["pki"], "arm-a")))
    msg = last_message(out)
    assert rc != 0
    assert "--inference.client_uuid=arm-b" in msg and "CN=arm-a" in msg and "Drop --inference.client_uuid" in msg
    assert took < 3.0


def test_missing_client_certificate_is_named_within_3s(fleet):
    """Findings 3 and 5: an mTLS router and no client certificate: said at once, with our flags."""
    pki = fleet["pki"]
    rc, out, took = failed_fast(rollout(fleet, f"--inference.tls_ca={pki / 'ca.crt'}"))
    msg = last_message(out)
    assert rc != 0
    assert (
        "requires a client certificate (mTLS) and none was given: pass --inference.tls_cert and --inference.tls_key"
        in msg
    )
    assert "Start the router" not in msg and ".rs:" not in msg
    assert took < 3.0, f"took {took:.1f}s"


def test_certificate_from_another_ca_is_named(fleet):
    """Finding 3: a certificate the router does not trust is named as such (not 'start the router')."""
    from lerobot_fleet.router.pki import init_ca, issue

    pki = fleet["pki"]
    other = pki / "another-ca"
    other.mkdir(exist_ok=True)
    init_ca(other)
    issue(other, "arm-z", "robot")
    bad = [
        f"--inference.tls_ca={pki / 'ca.crt'}",
        f"--inference.tls_cert={other / 'arm-z.crt'}",
        f"--inference.tls_key={other / 'arm-z.key'}",
    ]
    rc, out, took = failed_fast(rollout(fleet, *bad))
    msg = last_message(out)
    assert rc != 0
    assert "refused the client certificate" in msg and "--inference.tls_cert" in msg, msg
    assert took < 3.0, f"took {took:.1f}s"


def test_unknown_cn_is_told_and_the_router_log_names_it(fleet):
    """Finding 1 (router log) and 7: a CA-signed certificate missing from the inventory sees no service; the robot
    says access control may hide them; every refusal the router logs names the CN, never a zid."""
    rc, out, took = failed_fast(rollout(fleet, *robot_tls(fleet["pki"], "mallory")))
    msg = last_message(out)
    assert rc != 0
    assert "CN=mallory" in msg and "inventory" in msg, msg
    assert took < 12.0  # an empty router is waited for (its server may still be loading): the connect timeout

    def refusals() -> list[str]:
        return [x for x in fleet["router"].proc.output().splitlines() if x.startswith("ACL refused:")]

    wait_until(
        lambda: any("CN=mallory" in x for x in refusals()), timeout=15, message="the router's refusal line for mallory"
    )
    assert any(x.startswith("ACL refused: CN=mallory is in no role of the inventory") for x in refusals()), refusals()
    assert not [x for x in refusals() if "zid=" in x], refusals()


def test_server_without_client_certificate_says_so_before_loading(fleet, tmp_path):
    """Finding 3: the server checks the router before it loads the model and names its own flag."""
    pki = fleet["pki"]
    p = Proc(
        [
            str(VENV_BIN / "lerobot-policy-server"),
            f"--model.repo_or_path={fleet['model']}",
            "--default_task=pick up the cube",
            f"--zenoh.connect_endpoints=[{fleet['router'].endpoint}]",
            f"--zenoh.tls_root_ca_certificate={pki / 'ca.crt'}",
            "--health_port=0",
            "--replica_id=rep-2",
        ],
        name="server-nocert",
        max_seconds=120,
    )
    rc = p.wait(110)
    out = p.output()
    assert rc == 2, out
    assert "Loading" not in out, out
    line = [x for x in out.splitlines() if x.startswith("lerobot-policy-server: error: ")][-1]
    assert "requires a client certificate" in line and "--zenoh.tls_connect_certificate" in line, line
    assert ".rs:" not in out


def test_status_without_client_certificate_names_it(fleet):
    """Finding 3: `status` says which certificate is missing, with its flags, exit 2."""
    pki = fleet["pki"]
    res = subprocess.run(
        [FLEET, "status", "--router", fleet["router"].endpoint, "--tls-ca", str(pki / "ca.crt"), "--wait", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "requires a client certificate" in res.stderr and "--tls-cert" in res.stderr, res.stderr
    assert "Unable to connect" not in res.stderr


def test_doctor_with_an_operator_certificate_skips_what_an_operator_may_not_do(fleet):
    """Finding 2: an operator may not open sessions: doctor says so and does not blame the server."""
    pki = fleet["pki"]
    _, out = run(  # the kit's run: doctor with a policy loads lerobot, so it starts warm
        [
            FLEET,
            "doctor",
            "--router",
            fleet["router"].endpoint,
            *fleet_tls(pki, "alice"),
            f"--policy.path={fleet['model']}",
            "--robot.type=sim_arm",
            f"--task={fleet['task']}",
        ],
        timeout=120,
    )
    assert "check the server's log" not in out, out
    assert re.search(r"SKIP\s+capabilities\s+.*CN=alice.*operator", out), out
    assert "robot certificate" in out
