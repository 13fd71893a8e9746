"""`lerobot-fleet doctor` against a real router and a real `lerobot-policy-server`.

All green on a good setup; the right FAIL line (and fix) for a wrong task, a robot type that does not
fit the policy, a full server, a wrong CA, a missing client certificate and a router that is down.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from test_cli_help import _fleet_modules
from test_tls import _ca, _leaf

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import SERVER_READY, VENV_BIN, Router, free_port, policy_server, run

pytestmark = pytest.mark.slow
TASK = "pick up the cube"


def doctor(*args: str) -> tuple[int, str]:
    return run([str(VENV_BIN / "lerobot-fleet"), "doctor", *args], timeout=120)


def line(out: str, status: str, name: str) -> str:
    found = [x for x in out.splitlines() if x.startswith(f"{status}  {name} ")]
    assert len(found) == 1, out
    return found[0]


def fix_after(out: str, check_line: str) -> str:
    lines = out.splitlines()
    return lines[lines.index(check_line) + 1].strip()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A router and one server (1 session max) for the policy; the model path is the namespace's model id."""
    model = save_tiny_act(tmp_path_factory.mktemp("doctor") / "act", seed=1)
    router = Router().start()
    server = policy_server(
        model, TASK, router.endpoint, "--max_sessions=1", "--replica_id=cube-1", max_seconds=600, wait=False
    )
    try:
        server.wait_for(SERVER_READY, timeout=120)
        yield router, model
    finally:
        server.stop()
        router.stop()


def robot_args(model: Path, robot: str = "sim_arm", task: str = TASK) -> list[str]:
    return [f"--policy.path={model}", f"--robot.type={robot}", f"--task={task}"]


def test_good_setup_is_all_green(fleet):
    router, model = fleet
    rc, out = doctor("--router", router.endpoint, *robot_args(model))
    assert rc == 0, out
    assert "FAIL" not in out
    for name in ("router", "services", "robot", "namespace", "capabilities", "free session"):
        line(out, "PASS", name)
    assert f"model '{model}' revision 'main' task '{TASK}': 1 replica, 1 free session" in out
    assert "replica cube-1: ok, 0/1 sessions, room +1 cap, N_max " in out  # the console's figures (capacity.py)
    assert out.rstrip().endswith("Everything a rollout needs is in place.")
    rc, out = doctor("--router", router.endpoint, *robot_args(model), "--json")
    report = json.loads(out)
    assert rc == 0 and report["ok"] is True
    replica = report["services"][0]["replicas"][0]
    assert {
        k: replica[k]
        for k in (
            "replica",
            "health",
            "active_sessions",
            "max_sessions",
            "free_sessions",
            "load",
            "room",
            "room_limit",
            "requests_per_s",
            "rate_source",
        )
    } == {
        "replica": "cube-1",
        "health": "ok",
        "active_sessions": 0,
        "max_sessions": 1,
        "free_sessions": 1,
        "load": 0.0,
        "room": 1,
        "room_limit": "cap",
        "requests_per_s": 0.0,
        "rate_source": "server",
    }
    assert replica["n_max"] is None or replica["n_max"] > 1  # unknown until the replica has served a request


def test_router_and_service_checks_load_no_torch(fleet):
    router, _ = fleet
    code, loaded, output = _fleet_modules("doctor", "--router", router.endpoint)
    assert code == 0, output
    assert "PASS  services" in output
    assert loaded == [], f"`lerobot-fleet doctor` loaded {loaded}"


def test_wrong_task_points_at_the_closest_service(fleet):
    router, model = fleet
    rc, out = doctor("--router", router.endpoint, *robot_args(model, task="pick up the cub"))
    assert rc == 1
    bad = line(out, "FAIL", "namespace")
    assert bad == (
        f"FAIL  namespace     no server serves model '{model}' revision 'main' task 'pick up the cub'; closest: "
        f"model '{model}' revision 'main' task '{TASK}': 1 replica, 1 free session"
    )
    assert fix_after(out, bad) == f"fix: use it: --task='{TASK}' (or --inference.service_task='{TASK}')"


def test_robot_type_that_does_not_fit_gets_the_contract_fix(fleet):
    router, model = fleet
    rc, out = doctor("--router", router.endpoint, *robot_args(model, robot="sim_base"))
    assert rc == 1
    line(out, "PASS", "namespace")
    bad = line(out, "FAIL", "capabilities")
    assert bad.endswith(
        "(action_mismatch): Action name/order mismatch between server policy and this robot: the policy "
        "outputs 6 actions, the robot has 3 (['x.vel', 'y.vel', 'theta.vel'])"
    )
    assert fix_after(out, bad).startswith("fix: run the robot type the policy was trained on (same joints, same order)")


def test_full_server(fleet):
    """A real session (a protocol client with its liveliness token) takes the only slot."""
    from lerobot_policy_remote.engine.dry_run import describe
    from lerobot_policy_remote.engine.handshake import open_session as open_remote
    from lerobot_policy_remote.wire.keys import ServiceKeys
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    router, model = fleet
    req = describe(str(model), "sim_arm", TASK, 30.0).request
    req = replace(req, dry_run=False, client_uuid=uuid.uuid4().hex)
    keys = ServiceKeys.for_service(req.model_id, req.revision, req.service)
    z = open_session(ZenohSettings(mode="client", connect_endpoints=[router.endpoint]))
    try:
        token = z.liveliness().declare_token(keys.robot(req.client_uuid, "alive"))
        assert open_remote(z, keys, req, timeout_s=5.0).ack.ok
        rc, out = doctor("--router", router.endpoint, *robot_args(model))
        assert rc == 1
        line(out, "PASS", "capabilities")
        bad = line(out, "FAIL", "free session")
        assert (
            bad
            == "FAIL  free session  no replica has a free session (replica cube-1: server full: 1/1 sessions active)"
        )
        assert fix_after(out, bad).startswith("fix: wait for a free session, start another replica of this server")
        assert "replica cube-1: full, 1/1 sessions, room +0 cap, N_max " in out
        token.undeclare()
    finally:
        z.close()


def test_router_down():
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    rc, out = doctor("--router", endpoint)
    assert rc == 1
    bad = line(out, "FAIL", "router")
    assert bad == (
        f"FAIL  router        nothing listens at {endpoint} (connection refused): start the router there "
        f"(lerobot-fleet router --listen {endpoint}) or fix --router"
    )
    assert fix_after(out, bad) == "fix: start the router (lerobot-fleet router --listen <endpoint>) or fix --router"


def test_unusable_tls_arguments_exit_2_naming_our_flags():
    """A tls/ endpoint without --tls-ca is an argument error (exit 2), worded with --tls-ca."""
    rc, out = doctor("--router", f"tls/127.0.0.1:{free_port()}")
    assert rc == 2
    assert "--tls-ca" in out and "tls_root_ca_certificate" not in out


def test_tls_wrong_ca_and_missing_client_certificate(tmp_path):
    for name in ("ca", "rogue-ca"):
        _ca(tmp_path, name)
    _leaf(tmp_path, "router", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _leaf(tmp_path, "robot-01", "ca", "extendedKeyUsage=clientAuth\n")
    router = Router(
        extra=[
            "--tls-cert",
            str(tmp_path / "router.pem"),
            "--tls-key",
            str(tmp_path / "router.key"),
            "--tls-ca",
            str(tmp_path / "ca.pem"),
        ]
    )
    router.endpoint = f"tls/127.0.0.1:{router.port}"
    router.start()
    client = ["--tls-cert", str(tmp_path / "robot-01.pem"), "--tls-key", str(tmp_path / "robot-01.key")]
    try:
        rc, out = doctor("--router", router.endpoint, "--tls-ca", str(tmp_path / "rogue-ca.pem"), *client)
        assert rc == 1
        bad = line(out, "FAIL", "tls")
        assert bad.startswith(
            f"FAIL  tls           the router's certificate at {router.endpoint} does not verify against "
            f"--tls-ca {tmp_path / 'rogue-ca.pem'} ("
        )
        assert fix_after(out, bad).startswith("fix: pass --tls-ca the CA (PEM) that signed the router's certificate")

        rc, out = doctor("--router", router.endpoint, "--tls-ca", str(tmp_path / "ca.pem"))
        assert rc == 1
        bad = line(out, "FAIL", "tls")
        assert "requires a client certificate (mTLS) and none was given: pass --tls-cert and --tls-key" in bad
        assert fix_after(out, bad).startswith("fix: the router requires a client certificate (mTLS)")

        rc, out = doctor("--router", router.endpoint, "--tls-ca", str(tmp_path / "ca.pem"), *client)
        assert line(out, "PASS", "tls").endswith("TLS handshake (mTLS as CN=robot-01) works with the given files")
        line(out, "PASS", "router")
        assert rc == 1 and line(out, "FAIL", "services").endswith("the router has no policy server")
    finally:
        router.stop()
