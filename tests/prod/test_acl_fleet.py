"""Who may do what, through a real mTLS router that enforces the ACL generated from a `lerobot-fleet pki` inventory.

A real `lerobot-policy-server` (replica rep-1, tiny real ACT) and a real `lerobot-rollout` (robot arm-b) run
under the ACL; robot arm-a's certificate, the viewer's, an operator's and an outsider's are then tried.
Order matters: the operator's drain runs last.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import httpx
import pytest
from fleet_pki import ROGUE_SERVICE, acl_fleet, fleet_tls, robot_tls, server_tls

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, free_port, policy_server, rollout_argv
from lerobot_policy_remote.testing.waiting import assert_never, wait_until
from lerobot_policy_remote.wire import ServiceKeys
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.codes import EventKind
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import (
    SCHEMA_VERSION,
    EventMsg,
    ResetAck,
    ResetRequest,
    SessionAck,
    SessionOpen,
)
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

pytestmark = pytest.mark.slow
FLEET = str(VENV_BIN / "lerobot-fleet")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    task = f"acl pick {uuid.uuid4().hex[:6]}"
    health = free_port()
    with acl_fleet(tmp_path_factory, "acl", seed=5) as (pki, model, router):
        server = policy_server(
            model,
            task,
            router.endpoint,
            "--replica_id=rep-1",
            *server_tls(pki, "rep-1"),
            health_port=health,
            max_seconds=500,
            ready_timeout=200,
        )
        rollout = None
        try:
            rollout = Proc(
                rollout_argv(
                    model,
                    task,
                    router.endpoint,
                    "--fps=30",
                    "--inference.client_uuid=arm-b",
                    *robot_tls(pki, "arm-b"),
                    "--inference.request_timeout_s=2",
                    "--inference.reconnect_max_backoff_s=1",
                    "--inference.max_offline_s=120",
                    "--return_to_initial_position=false",
                    duration=400,
                ),
                name="rollout",
                max_seconds=500,
            )
            rollout.wait_for("executing session_id=", timeout=200)
            yield {
                "pki": pki,
                "router": router,
                "server": server,
                "rollout": rollout,
                "health": health,
                "keys": ServiceKeys.for_service(str(model), "main", task),
            }
        finally:
            if rollout is not None:
                rollout.stop()
            server.stop()


def fleet_cmd(fleet, cert: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FLEET, *args, "--router", fleet["router"].endpoint, *fleet_tls(fleet["pki"], cert)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def status(fleet, cert: str) -> dict:
    out = fleet_cmd(fleet, cert, "status", "--json", "--wait", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def metrics(fleet) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{fleet['health']}/metrics", timeout=5).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("lerobot_policy_server_") and " " in line:
            name = line.split("{")[0].split(" ")[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def session_as(fleet, cert: str):
    pki = fleet["pki"]
    return open_session(
        ZenohSettings(
            mode="client",
            connect_endpoints=[fleet["router"].endpoint],
            connect_timeout_ms=3000,
            tls_root_ca_certificate=str(pki / "ca.crt"),
            tls_connect_certificate=str(pki / f"{cert}.crt"),
            tls_connect_private_key=str(pki / f"{cert}.key"),
        )
    )


def router_log(fleet) -> str:
    return fleet["router"].proc.output()


def logged(fleet, line: str, timeout: float = 10.0) -> bool:
    """The router's refusal line shows up: it passes through the log filter's process, which can lag a loaded box."""
    from lerobot_policy_remote.testing.waiting import WaitTimeout, wait_until

    try:
        return bool(wait_until(lambda: line in router_log(fleet), timeout=timeout, message=f"router log line {line!r}"))
    except WaitTimeout:
        return False


def labelled(fleet, name: str, label: str) -> float:
    """One labelled sample of the server's /metrics (0 when absent)."""
    text = httpx.get(f"http://127.0.0.1:{fleet['health']}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"lerobot_policy_server_{name}{{") and f'"{label}"' in line
    )


def b_session(fleet) -> str:
    """The full session id robot arm-b executes under (from its own provenance log)."""
    return re.findall(r"executing session_id=([0-9a-f]+)", fleet["rollout"].output())[-1]


def b_keeps_streaming(fleet, session_id: str, more: int = 15) -> None:
    """arm-b executes `more` further chunks, still under `session_id`: the attack never reached it."""
    out = fleet["rollout"].output
    before = out().count("executing session_id=")
    wait_until(
        lambda: out().count("executing session_id=") >= before + more,
        timeout=30,
        message=f"arm-b executing {more} more chunks after the attack",
    )
    assert b_session(fleet) == session_id, "arm-b's session was replaced"


def test_normal_path_streams_under_the_acl_with_no_refusal(fleet):
    before = fleet["rollout"].output().count("executing session_id=")
    wait_until(
        lambda: fleet["rollout"].output().count("executing session_id=") >= before + 20,
        timeout=30,
        message="the robot executing 20 more chunks under the ACL",
    )
    snap = status(fleet, "wall")
    robot = next(r for r in snap["robots"] if r["robot_id"] == "arm-b")
    assert robot["state"] in ("STREAMING", "DEGRADED") and robot["replica"] == "rep-1"
    assert [s["replica"] for s in snap["servers"]] == ["rep-1"]
    log = router_log(fleet)
    assert "ACL refused: CN=arm-b" not in log and "ACL refused: CN=rep-1" not in log, log[-3000:]
    # the honest path trips none of the identity checks
    assert labelled(fleet, "errors_total", "identity_mismatch") == 0
    assert labelled(fleet, "sessions_rejected_total", "identity_mismatch") == 0
    assert "foreign" not in fleet["rollout"].output() and "Ignored a draining event" not in fleet["rollout"].output()


def test_robot_a_cannot_publish_as_robot_b(fleet):
    """arm-a's own observation key reaches the server (counted as unknown client); B's never does."""
    keys = fleet["keys"]
    a = session_as(fleet, "arm-a")
    op = session_as(fleet, "alice")  # an operator sees every observation the router forwards
    marker = b"injected-by-arm-a-" + uuid.uuid4().hex.encode()
    seen: list[bytes] = []
    sub = op.declare_subscriber(keys.obs("rep-1", "*"), lambda s: seen.append(s.payload.to_bytes()[: len(marker)]))
    try:
        unknown = "lerobot_policy_server_dropped_unknown_client_total"
        m0 = metrics(fleet).get(unknown, 0)

        def own_key_arrives() -> bool:
            a.put(keys.obs("rep-1", "arm-a"), b"own-" + marker)  # allowed: a's own key
            return metrics(fleet).get(unknown, 0) > m0

        # the positive control: without it the negative check below would prove nothing
        wait_until(own_key_arrives, timeout=20, interval=0.2, message="arm-a's allowed observation reaching the server")
        m1 = metrics(fleet)
        for _ in range(30):
            a.put(keys.obs("rep-1", "arm-b"), marker)
        assert_never(lambda: marker in seen, duration=1.5, message="arm-a's observation forwarded on arm-b's key")
        m2 = metrics(fleet)
        assert m2.get("lerobot_policy_server_errors_total", 0) == m1.get("lerobot_policy_server_errors_total", 0)
        assert logged(fleet, f"ACL refused: CN=arm-a put (ingress) on {keys.obs('rep-1', 'arm-b')}")
    finally:
        sub.undeclare()
        a.close()
        op.close()


def test_robot_a_cannot_drain_nor_reset_b(fleet):
    ep_before = next(r for r in status(fleet, "wall")["robots"] if r["robot_id"] == "arm-b")["episode_id"]
    drain = fleet_cmd(fleet, "arm-a", "drain", "rep-1", "--timeout", "2")
    assert drain.returncode == 2, drain.stdout + drain.stderr
    assert "access control refused this certificate (CN=arm-a) to send drain" in drain.stdout
    reset = fleet_cmd(fleet, "arm-a", "reset", "arm-b", "--timeout", "2")
    assert reset.returncode == 2 and "CN=arm-a" in reset.stdout, reset.stdout + reset.stderr
    snap = status(fleet, "wall")
    assert next(s for s in snap["servers"] if s["replica"] == "rep-1")["health"] == "ok"
    assert next(r for r in snap["robots"] if r["robot_id"] == "arm-b")["episode_id"] == ep_before
    assert "Operator episode reset applied" not in fleet["rollout"].output()
    assert logged(fleet, "ACL refused: CN=arm-a query (ingress) on @lerobot/*/*/*/server/rep-1/drain")
    assert logged(fleet, "ACL refused: CN=arm-a query (ingress) on @lerobot/*/*/*/robot/arm-b/episode_reset")


def test_viewer_reads_status_but_cannot_drain(fleet):
    snap = status(fleet, "wall")
    assert any(r["robot_id"] == "arm-b" for r in snap["robots"]) and any(
        s["replica"] == "rep-1" for s in snap["servers"]
    )
    drain = fleet_cmd(fleet, "wall", "drain", "rep-1", "--timeout", "2")
    assert drain.returncode == 2 and "CN=wall" in drain.stdout
    assert status(fleet, "wall")["servers"][0]["health"] == "ok"


def test_unknown_common_name_gets_nothing(fleet):
    snap = status(fleet, "mallory")  # the TLS link itself is fine: same CA
    assert snap["robots"] == [] and snap["servers"] == []
    drain = fleet_cmd(fleet, "mallory", "drain", "rep-1", "--timeout", "2")
    assert drain.returncode == 2
    s = session_as(fleet, "mallory")
    try:
        assert [r for r in s.get("@/*/router", timeout=1.5) if r.ok is not None] == []
        assert [r for r in s.liveliness().get(ServiceKeys.any().robot("*", "alive"), timeout=1.5) if r.ok] == []
    finally:
        s.close()


def _open_for(client: str, fleet) -> bytes:
    return encode(
        SessionOpen(
            client_uuid=client, action_names=["j0"], model_id=fleet["keys"].model, service=fleet["keys"].service
        )
    )


def test_robot_a_cannot_open_or_replace_b_session(fleet):
    """A's certificate asks for a session as B, on B's key (the ACL) and on its own key (the server)."""
    keys, sid = fleet["keys"], b_session(fleet)
    a = session_as(fleet, "arm-a")
    try:
        replies = [
            r
            for r in a.get(keys.session("rep-1", "arm-b"), payload=_open_for("arm-b", fleet), timeout=2)
            if r.ok is not None
        ]
        assert replies == []  # the router never forwards it: B's session key is B's alone
        assert logged(fleet, f"ACL refused: CN=arm-a query (ingress) on {keys.session('rep-1', 'arm-b')}")
        # on its own key, naming B in the body: the server answers (positive control: the query did get through) and
        # refuses
        acks = [
            decode(SessionAck, r.ok.payload.to_bytes())
            for r in a.get(keys.session("rep-1", "arm-a"), payload=_open_for("arm-b", fleet), timeout=5)
            if r.ok is not None
        ]
        assert len(acks) == 1 and not acks[0].ok and acks[0].code == "identity_mismatch", acks
        assert "arm-a" in acks[0].message and "arm-b" in acks[0].message
    finally:
        a.close()
    assert labelled(fleet, "sessions_rejected_total", "identity_mismatch") >= 1
    b_keeps_streaming(fleet, sid)


def test_made_up_ids_cannot_fill_the_replica(fleet):
    keys = fleet["keys"]
    sessions_before = status(fleet, "wall")["servers"][0]
    a = session_as(fleet, "arm-a")
    try:
        for i in range(20):
            ghost = f"ghost-{i}"
            assert [
                r for r in a.get(keys.session("rep-1", ghost), payload=_open_for(ghost, fleet), timeout=0.5) if r.ok
            ] == []
    finally:
        a.close()
    after = status(fleet, "wall")["servers"][0]
    assert after["active_sessions"] == sessions_before["active_sessions"]
    assert logged(fleet, "ACL refused: CN=arm-a query (ingress) on " + keys.session("rep-1", "ghost-"))


def test_robot_a_cannot_reset_b_episode_even_knowing_its_session_id(fleet):
    keys, sid = fleet["keys"], b_session(fleet)
    ep_before = next(r for r in status(fleet, "wall")["robots"] if r["robot_id"] == "arm-b")["episode_id"]
    errors0 = labelled(fleet, "errors_total", "identity_mismatch")
    a = session_as(fleet, "arm-a")
    try:
        req = encode(ResetRequest(sid, ep_before + 1))
        assert [r for r in a.get(keys.reset("rep-1", "arm-b"), payload=req, timeout=2) if r.ok is not None] == []
        acks = [
            decode(ResetAck, r.ok.payload.to_bytes())
            for r in a.get(keys.reset("rep-1", "arm-a"), payload=req, timeout=5)
            if r.ok is not None
        ]
        assert len(acks) == 1 and not acks[0].ok and "unknown session" in acks[0].message
    finally:
        a.close()
    assert labelled(fleet, "errors_total", "identity_mismatch") == errors0 + 1
    assert logged(fleet, f"ACL refused: CN=arm-a query (ingress) on {keys.reset('rep-1', 'arm-b')}")
    assert next(r for r in status(fleet, "wall")["robots"] if r["robot_id"] == "arm-b")["episode_id"] == ep_before
    b_keeps_streaming(fleet, sid)


def test_status_replies_do_not_hand_out_session_ids(fleet):
    sid = b_session(fleet)
    a = session_as(fleet, "arm-a")
    try:
        raw = b"".join(
            r.ok.payload.to_bytes() for r in a.get(fleet["keys"].server("*", "status"), timeout=3) if r.ok is not None
        )
    finally:
        a.close()
    assert sid[:8].encode() in raw and sid.encode() not in raw  # a name to tell sessions apart, never the id that acts


def test_a_rogue_server_cannot_drain_the_fleet_nor_answer_outside_its_namespace(fleet):
    """Server certificate `rogue` is bound to service ROGUE_SERVICE: in the fleet's namespace it can neither announce
    itself, answer discovery, nor send arm-b a draining event; in its own namespace it works (positive control)."""
    keys, sid = fleet["keys"], b_session(fleet)
    own = ServiceKeys(keys.model, keys.revision, ServiceKeys.for_service("m", "main", ROGUE_SERVICE).service)
    rogue, wall = session_as(fleet, "rogue"), session_as(fleet, "wall")
    decls = []
    try:
        for k in (keys, own):
            decls.append(
                rogue.declare_queryable(
                    k.server("rogue", "status"), lambda q: q.reply(str(q.key_expr), b"rogue-status")
                )
            )
            decls.append(rogue.liveliness().declare_token(k.server("rogue", "alive")))
        wait_until(
            lambda: [r for r in wall.get(own.server("rogue", "status"), timeout=1) if r.ok is not None] != [],
            timeout=10,
            message="the rogue server answering in its own namespace",
        )
        assert [r for r in wall.get(keys.server("rogue", "status"), timeout=1.5) if r.ok is not None] == []
        assert [r for r in wall.liveliness().get(keys.server("rogue", "alive"), timeout=1.5) if r.ok is not None] == []
        header = Header(SCHEMA_VERSION, MsgType.EVENT, 0, 0, 0, 1).pack()
        for _ in range(10):
            rogue.put(
                keys.robot("arm-b", "action"),
                encode(EventMsg(EventKind.DRAINING, "come to me", session_id=sid)),
                attachment=header,
            )
        b_keeps_streaming(fleet, sid)
        assert "draining" not in fleet["rollout"].output().lower()
        assert logged(fleet, f"ACL refused: CN=rogue put (ingress) on {keys.robot('arm-b', 'action')}")
        assert logged(fleet, "ACL refused: CN=rogue declare_queryable (ingress) on " + keys.server("rogue", "status"))
    finally:
        for d in decls:
            d.undeclare()
        rogue.close()
        wall.close()


def test_only_an_operator_may_cordon(fleet):
    """Cordon and uncordon are operator queries: a robot's and a viewer's are refused by the router (the replica never
    hears them), an operator's cordons the replica (its robot keeps streaming) and uncordons it."""
    for who in ("arm-a", "wall"):
        refused = fleet_cmd(fleet, who, "cordon", "rep-1", "--timeout", "2")
        assert (
            refused.returncode == 2
            and f"access control refused this certificate (CN={who}) to send cordon" in refused.stdout
        ), refused.stdout + refused.stderr
        assert logged(fleet, f"ACL refused: CN={who} query (ingress) on @lerobot/*/*/*/server/rep-1/cordon")
    assert next(s for s in status(fleet, "wall")["servers"] if s["replica"] == "rep-1")["health"] == "ok"
    cordon = fleet_cmd(fleet, "alice", "cordon", "rep-1", "--json")
    assert cordon.returncode == 0 and json.loads(cordon.stdout)["cordoned"] is True, cordon.stdout + cordon.stderr
    assert next(s for s in status(fleet, "wall")["servers"] if s["replica"] == "rep-1")["health"] == "cordoned"
    before = fleet["rollout"].output().count("executing session_id=")
    wait_until(
        lambda: fleet["rollout"].output().count("executing session_id=") >= before + 5,
        timeout=30,
        message="arm-b streaming on the cordoned replica",
    )
    uncordon = fleet_cmd(fleet, "alice", "uncordon", "rep-1", "--json")
    assert uncordon.returncode == 0 and json.loads(uncordon.stdout)["cordoned"] is False, (
        uncordon.stdout + uncordon.stderr
    )


def test_operator_resets_and_drains(fleet):
    ep_before = next(r for r in status(fleet, "alice")["robots"] if r["robot_id"] == "arm-b")["episode_id"]
    reset = fleet_cmd(fleet, "alice", "reset", "arm-b", "--json")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert json.loads(reset.stdout)["episode_id"] == ep_before + 1
    fleet["rollout"].wait_for("Operator episode reset applied", timeout=15)
    drain = fleet_cmd(fleet, "alice", "drain", "rep-1", "--json", "--reason", "acl test")
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert json.loads(drain.stdout)["ok"] is True
    fleet["server"].wait_for("Draining", timeout=15)


def test_only_operators_read_the_router_list(fleet):
    """The admin space (sessions and links of the mesh) is for routers and operators; a viewer's
    router list is empty, which the console words as unknown."""
    from lerobot_fleet.data.sources.routers import routers_line

    assert status(fleet, "alice")["routers"] != []
    assert status(fleet, "wall")["routers"] == []
    assert routers_line(()).startswith("routers: unknown")
    assert logged(fleet, "ACL refused: CN=wall query (ingress) on @/")
