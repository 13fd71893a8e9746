"""A rollout on a live fleet: 2 replicas of model A, 1 of model B, 8 robots.

`rollout start --to v2 --canary 25%` moves exactly 2 robots, `promote` the rest in steps of 2; a second rollout back
to A is aborted in the middle and every robot returns to B. Through all of it no robot executes a stale, NaN or
foreign action, none goes longer than a chunk period (plus the move) without a fresh action, and each robot's
executed actions switch model exactly once per move.

Real parts: the router process (which keeps the rollout), the product's server with a stub backend as replicas (two
fingerprints in two namespaces), the product's engine as robots (the fleet simulator's robot host), the real verb.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from lerobot_fleet.data.ops import send_rollout

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, Router
from lerobot_policy_remote.testing.waiting import WaitTimeout, wait_until
from lerobot_policy_remote.wire.codec import decode
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import RobotTelemetry
from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

pytestmark = pytest.mark.slow
PY = str(VENV_BIN / "python")
FP = {"v1": "a1" * 32, "v2": "b2" * 32}
REPLICAS = (("roll-a1", "v1"), ("roll-a2", "v1"), ("roll-b1", "v2"))
ROBOTS = 8
HOST_SECONDS = 120.0
CHUNK_PERIOD_S = 1.0  # the simulator's chunk: 30 actions at 30 fps


def replica(endpoint: str, name: str, revision: str) -> Proc:
    argv = [PY, "-m", "lerobot_policy_remote.testing.simfleet", "replica", "--endpoint", endpoint]
    argv += ["--replica-id", name, "--revision", revision, "--fingerprint", FP[revision], "--max-sessions", "8"]
    argv += ["--max-batch", "8", "--infer-ms", "10", "--seconds", "300"]
    return Proc(argv, name=name, max_seconds=320)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("rollout")
    router = Router().start()
    procs: list[Proc] = []
    session = None
    try:
        procs += [replica(router.endpoint, name, rev) for name, rev in REPLICAS]
        for p in procs:
            p.wait_for("REPLICA READY", timeout=120)
        argv = [PY, "-m", "lerobot_policy_remote.testing.simfleet", "robots", "--endpoint", router.endpoint]
        argv += ["--count", str(ROBOTS), "--prefix", "roll-arm", "--revision", "v1", "--seconds", str(HOST_SECONDS)]
        argv += ["--out", str(out / "robots.json"), "--report-file", str(out / "report-now")]
        host = Proc(argv, name="robots", max_seconds=HOST_SECONDS + 120)
        procs.append(host)
        host.wait_for("ROBOTS READY", timeout=180)
        session = open_session(ZenohSettings(mode="client", connect_endpoints=[router.endpoint]))
        yield {"router": router, "host": host, "out": out, "session": session}
    finally:
        if session is not None:
            session.close()
        for p in reversed(procs):
            p.stop()
        router.stop()


def verb(endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["timeout", "-s", "KILL", "60", str(VENV_BIN / "lerobot-fleet"), "rollout", *args, "--router", endpoint],
        capture_output=True,
        text=True,
        timeout=70,
    )


def status(session) -> RolloutStatus:
    return send_rollout(session, RolloutCommand("status"), 2.0).status


def wait_for(session, what: str, ok, timeout: float) -> RolloutStatus:
    """The rollout's status once `ok` holds; on timeout, the last status read says where it stood."""
    last: list[RolloutStatus] = []

    def reached() -> RolloutStatus | None:
        last[:] = [status(session)]
        return last[0] if ok(last[0]) else None

    try:
        return wait_until(reached, timeout=timeout, interval=0.2, message=what)
    except WaitTimeout:
        st = last[-1]
        raise AssertionError(f"{what} within {timeout:g} s: {st.phase} {st.message}\n" + "\n".join(st.events)) from None


def states(st: RolloutStatus) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in st.robots:
        out[r.state] = out.get(r.state, 0) + 1
    return out


def fingerprints(session) -> dict[str, str]:
    """Each robot's model as its own telemetry says (asked of the robots, not of the rollout)."""
    out = {}
    for reply in session.get(ServiceKeys.any().robot("*", "telemetry"), timeout=2.0):
        if reply.ok is not None:
            t = decode(RobotTelemetry, reply.ok.payload.to_bytes())
            out[t.client_uuid] = t.fingerprint
    return out


def test_a_canary_then_promote_then_an_aborted_rollout_never_mixes_models(fleet):
    ep, session = fleet["router"].endpoint, fleet["session"]
    assert set(fingerprints(session).values()) == {FP["v1"]}

    t0 = time.monotonic()
    started = verb(ep, "start", "--to", "v2", "--canary", "25%")
    assert started.returncode == 0, started.stdout + started.stderr
    st = wait_for(session, "the canary's 2 robots moved", lambda s: states(s).get("moved") == 2, 10.0)
    assert time.monotonic() - t0 <= 10.0 and st.phase == "canary" and len(st.robots) == ROBOTS
    time.sleep(2.0)  # the canary holds: nobody else moves until promote
    on = fingerprints(session)
    assert sorted(on.values()).count(FP["v2"]) == 2 and states(status(session)).get("moved") == 2

    assert verb(ep, "promote").returncode == 0
    st = wait_for(session, "the rollout complete", lambda s: s.phase == "complete", 60.0)
    steps = [e for e in st.events if " step " in e and ": moving " in e]
    assert len(steps) == 4 and all(e.count("roll-arm-") == 2 for e in steps), st.events  # 2 per step, 4 steps
    assert set(fingerprints(session).values()) == {FP["v2"]}

    # back to A, aborted in the middle: every robot returns to B
    assert verb(ep, "start", "--to", "v1", "--canary", "25%").returncode == 0
    wait_for(session, "the second canary moved", lambda s: states(s).get("moved") == 2, 20.0)
    assert verb(ep, "promote").returncode == 0
    wait_for(session, "the middle of the promote", lambda s: states(s).get("moved", 0) >= 4, 30.0)
    aborted = verb(ep, "abort")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    st = wait_for(session, "the rollout aborted", lambda s: s.phase == "aborted", 60.0)
    assert set(fingerprints(session).values()) == {FP["v2"]}, st.events
    moved_back = {r.robot for r in st.robots if r.state == "returned"}
    assert len(moved_back) >= 4

    # the robots' own record of every action they executed
    time.sleep(1.0)  # a last chunk period on B after the abort's final move
    (fleet["out"] / "report-now").touch()
    fleet["host"].wait_for("ROBOTS MEASURED", timeout=HOST_SECONDS + 60)
    report = json.loads((fleet["out"] / "robots.json").read_text())
    assert len(report["robots"]) == ROBOTS
    for r in report["robots"]:
        expected_moves = 3 if r["robot"] in moved_back else 1
        assert r["stale_actions"] == 0 and r["nan_actions"] == 0, r
        assert set(r["fingerprints"]) <= set(FP.values()), r  # nothing foreign
        assert r["moves"] == expected_moves and r["switches"] == expected_moves, r
        assert r["max_gap_s"] <= CHUNK_PERIOD_S + 0.5, r
        assert r["state"] == "STREAMING", r
