"""Two meshed routers under mTLS + ACL: the server on router A, two real rollout robots on router B; everyone
also lists the other router.

The console (`lerobot-fleet status`) sees the whole fleet through either router. Then router B is SIGKILLed:
both robots must be executing fresh chunks again through A within a measured bound, and no action older than
--inference.max_action_age_s may execute in between. Last, B comes back and A dies: the server, the robots and
a running console (the console's own Zenoh source) all carry on through B.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import uuid

import pytest
from fleet_pki import acl_router, fleet_tls, make_pki, robot_tls, server_tls
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import SERVER_READY, VENV_BIN, Proc, free_port, policy_server
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.zenoh_config import ZenohSettings

pytestmark = pytest.mark.slow
FLEET = str(VENV_BIN / "lerobot-fleet")
ROBOTS = ("arm-a", "arm-b")
MAX_AGE_S = 1.5
EXEC = re.compile(r"executing session_id=(\S+) seq_id=(\d+) episode_id=\d+ replica=\S+ age=([0-9.]+)s")


def executed(proc: Proc) -> list[tuple[str, int, float]]:
    return [(m[1], int(m[2]), float(m[3])) for m in map(EXEC.search, list(proc.lines)) if m]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    model = save_tiny_act(tmp_path_factory.mktemp("mesh_act") / "act", seed=6)
    task = f"mesh pick {uuid.uuid4().hex[:6]}"
    ra = acl_router(pki, "router-a").start()
    rb = acl_router(pki, "router-b", connect=[ra.endpoint]).start()
    procs: list[Proc] = []
    try:
        server = policy_server(
            model,
            task,
            [ra.endpoint, rb.endpoint],
            "--replica_id=rep-1",
            "--max_sessions=4",
            *server_tls(pki, "rep-1"),
            health_port=free_port(),
            max_seconds=500,
            wait=False,
        )
        procs.append(server)
        server.wait_for(SERVER_READY, timeout=200)
        robots = {}
        for name in ROBOTS:
            robots[name] = Proc(
                [
                    str(VENV_BIN / "lerobot-rollout"),
                    "--strategy.type=base",
                    "--inference.type=remote",
                    "--robot.type=sim_arm",
                    f"--policy.path={model}",
                    f"--task={task}",
                    "--duration=400",
                    "--fps=30",
                    f"--inference.connect_endpoints=[{rb.endpoint},{ra.endpoint}]",
                    "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
                    f"--inference.client_uuid={name}",
                    *robot_tls(pki, name),
                    f"--inference.max_action_age_s={MAX_AGE_S}",
                    "--inference.request_timeout_s=2",
                    "--inference.reconnect_max_backoff_s=1",
                    "--inference.max_offline_s=120",
                    "--return_to_initial_position=false",
                ],
                name=name,
                max_seconds=500,
            )
            procs.append(robots[name])
        for p in robots.values():
            p.wait_for("executing session_id=", timeout=200)
        yield {"pki": pki, "ra": ra, "rb": rb, "server": server, "robots": robots}
    finally:
        for p in reversed(procs):
            p.stop()
        rb.stop()
        ra.stop()


def status_via(mesh, router) -> dict:
    out = subprocess.run(
        [FLEET, "status", "--json", "--wait", "3", "--router", router.endpoint, *fleet_tls(mesh["pki"], "alice")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_console_on_either_router_sees_the_whole_fleet(mesh):
    for router in (mesh["ra"], mesh["rb"]):

        def whole(router=router) -> dict | None:
            snap = status_via(mesh, router)
            robots = {r["robot_id"]: r for r in snap["robots"]}
            ok = (
                set(ROBOTS) <= set(robots)
                and [s["replica"] for s in snap["servers"]] == ["rep-1"]
                and all(robots[n]["replica"] == "rep-1" for n in ROBOTS)
            )
            return snap if ok else None

        snap = wait_until(whole, timeout=40, interval=1, message=f"the whole fleet through {router.endpoint}")
        assert snap["connection"] == "connected"
        assert len(snap.get("routers", [])) == 2, snap.get("routers")
        assert sum(1 for r in snap["routers"] if r["connected"]) == 1


def kill_and_time_recovery(mesh, router) -> tuple[dict[str, float], dict[str, int]]:
    """SIGKILL `router`; -> seconds until each robot executes a chunk it could only have asked for afterwards."""
    robots = mesh["robots"]
    before = {n: executed(p) for n, p in robots.items()}
    last_seq = {n: max(s for _, s, _ in before[n]) for n in ROBOTS}
    sessions = {n: {sid for sid, _, _ in before[n]} for n in ROBOTS}
    seen_lines = {n: len(before[n]) for n in ROBOTS}
    t0 = time.monotonic()
    router.proc.signal_group(signal.SIGKILL)
    back: dict[str, float] = {}

    def fresh(name: str) -> bool:
        # a chunk the robot could only have asked for after the kill: a new session, or a sequence number
        # beyond the one that may already have been in flight when the router died
        return any(
            sid not in sessions[name] or seq > last_seq[name] + 1
            for sid, seq, _ in executed(robots[name])[seen_lines[name] :]
        )

    def all_back() -> bool:
        for n in ROBOTS:
            if n not in back and fresh(n):
                back[n] = time.monotonic() - t0
        return len(back) == len(ROBOTS)

    wait_until(
        all_back, timeout=30, interval=0.02, message="both robots executing fresh chunks through the other router"
    )
    return back, seen_lines


def assert_fresh_only(mesh, seen_lines: dict[str, int]) -> None:
    for n, proc in mesh["robots"].items():
        ages = [age for _, _, age in executed(proc)[seen_lines[n] :]]
        assert ages and max(ages) <= MAX_AGE_S, f"{n} executed a stale action after the failover: ages {ages}"


def test_robots_fail_over_to_the_other_router(mesh, capsys):
    back, seen_lines = kill_and_time_recovery(mesh, mesh["rb"])
    with capsys.disabled():
        print(
            "\n[mesh failover] robots' router killed, streaming again after: "
            f"{', '.join(f'{n} {back[n]:.2f}s' for n in ROBOTS)}"
        )
    assert max(back.values()) < 10.0, back  # aim < 2 s on a quiet machine; generous bound for a shared 2-core CI box
    assert_fresh_only(mesh, seen_lines)
    snap = status_via(mesh, mesh["ra"])
    assert {r["robot_id"] for r in snap["robots"]} >= set(ROBOTS)


def test_server_robots_and_console_survive_the_server_router_dying(mesh, capsys):
    ra, rb = mesh["ra"], mesh["rb"]
    rb.kill()  # already dead: reap it, then start it again on the same port (it meshes with A)
    rb.start()
    pki = mesh["pki"]
    store = FleetStore()
    source = ZenohSource(
        ZenohSettings(
            mode="client",
            connect_endpoints=[ra.endpoint, rb.endpoint],
            connect_timeout_ms=3000,
            tls_root_ca_certificate=str(pki / "ca.crt"),
            tls_connect_certificate=str(pki / "alice.crt"),
            tls_connect_private_key=str(pki / "alice.key"),
        ),
        status_period_s=0.5,
    )
    source.start(store)
    try:

        def console_view(n_routers: int) -> list[str] | None:
            """The router(s) the console is linked through, once it sees both robots streaming (fresh telemetry)."""
            snap = store.snapshot()
            fresh = {
                r.robot_id
                for r in snap.robots
                if r.replica == "rep-1"
                and r.state.name in ("STREAMING", "DEGRADED")
                and r.seen_age_s is not None
                and r.seen_age_s < 2.0
            }
            linked = [r.zid for r in snap.routers if r.connected]
            ok = (
                fresh >= set(ROBOTS)
                and snap.server("rep-1") is not None
                and len(snap.routers) == n_routers
                and len(linked) == 1
            )
            return linked if ok else None

        before = wait_until(
            lambda: console_view(2), timeout=40, interval=0.25, message="the console seeing the fleet and both routers"
        )
        back, seen_lines = kill_and_time_recovery(mesh, ra)
        assert_fresh_only(mesh, seen_lines)
        after = wait_until(
            lambda: console_view(1),
            timeout=30,
            interval=0.25,
            message="the console seeing the fleet through router B alone",
        )
        assert after != before, f"the console should have moved from router A ({before}) to B ({after})"
        with capsys.disabled():
            print(
                f"\n[mesh failover] server's router killed, robots streaming again after: "
                f"{', '.join(f'{n} {back[n]:.2f}s' for n in ROBOTS)}"
            )
        assert max(back.values()) < 10.0, back
    finally:
        source.stop()
