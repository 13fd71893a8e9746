"""The checks `lerobot-fleet doctor` runs, each a pass/fail line with its fix.

Router reachable (with the TLS/mTLS reason when not), which services and replicas exist with their
health and capacity, and, given a policy, robot type and task, whether a server serves that
namespace and accepts this robot: a dry-run session open (the server runs every capability check and
opens nothing). Only the robot check imports lerobot (lazily), the rest import no torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lerobot_fleet.data.capacity import room_text
from lerobot_fleet.data.model import FleetSnapshot, ServerRow
from lerobot_policy_remote.advice import closest, contract_advice, fix_for
from lerobot_policy_remote.discovery import ServiceInfo
from lerobot_policy_remote.router_probe import CERT_PROBLEMS, Problem, probe_router
from lerobot_policy_remote.wire.codes import CONTRACT_REFUSALS, Refusal
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import (
    FLEET_FLAGS,
    ZenohConfigError,
    ZenohSettings,
    certificate_cn,
    open_session,
    without_rust_paths,
)

from .doctor_report import FAIL, INFO, PASS, SKIP, WARN, Check

if TYPE_CHECKING:
    from lerobot_policy_remote.engine.handshake import HandshakeError


PROBLEM_FIX = {
    Problem.REFUSED: "start the router (lerobot-fleet router --listen <endpoint>) or fix --router",
    Problem.UNREACHABLE: "check the host, the port and the firewall, or fix --router",
    Problem.ROUTER_CERT: (
        "pass --tls-ca the CA (PEM) that signed the router's certificate "
        "(and a router certificate whose subjectAltName names the host you dial)"
    ),
    Problem.CERT_REQUIRED: (
        "the router requires a client certificate (mTLS): pass --tls-cert/--tls-key signed by the CA "
        "the router trusts; for the robot checks, the robot's own certificate"
    ),
    Problem.CERT_REFUSED: "pass --tls-cert/--tls-key signed by the CA the router trusts (its --tls-ca), not expired",
    Problem.TLS_FILES: "check the paths and that --tls-cert and --tls-key are a matching PEM pair",
    Problem.NOT_TLS: "use tcp/ for that port, or the router's tls/ port",
}


def router_checks(settings: ZenohSettings, args: argparse.Namespace) -> tuple[list[Check], Any]:
    checks: list[Check] = []
    endpoints = settings.connect_endpoints
    problem = probe_router(settings, FLEET_FLAGS)
    if problem is not None:
        name = "tls" if problem.problem in CERT_PROBLEMS else "router"
        checks.append(
            Check(name, FAIL, problem.in_words(FLEET_FLAGS), PROBLEM_FIX.get(problem.problem, "fix --router"))
        )
        return checks, None
    tls = [ep for ep in endpoints if ep.startswith("tls/")]
    if tls:
        who = f" (mTLS as CN={cert_name(args.tls_cert)})" if args.tls_cert else ""
        checks.append(Check("tls", PASS, f"{', '.join(tls)}: TLS handshake{who} works with the given files"))
    try:
        session = open_session(settings)
    except ZenohConfigError as exc:
        reason = without_rust_paths(str(exc.__cause__ or exc))
        checks.append(
            Check(
                "router",
                FAIL,
                f"cannot reach the router at {', '.join(endpoints)}: {reason}",
                "start the router (lerobot-fleet router --listen <endpoint>) or fix --router; "
                "for tls/ endpoints pass --tls-ca (and --tls-cert/--tls-key for mTLS)",
            )
        )
        return checks, None
    checks.append(Check("router", PASS, f"router reachable at {', '.join(endpoints)}"))
    return checks, session


def cert_name(cert: str | None) -> str:
    """The CN of --tls-cert ('' without one or when unreadable)."""
    if not cert:
        return ""
    try:
        return certificate_cn(cert)
    except (OSError, ValueError):
        return ""


def cert_role(args: argparse.Namespace) -> tuple[str, str]:
    """(CN, role) of --tls-cert; the role from the dev PKI's inventory.yaml next to --tls-ca ('' when not known)."""
    cn = cert_name(args.tls_cert)
    if not cn or not args.tls_ca:
        return cn, ""
    inventory = Path(args.tls_ca).parent / "inventory.yaml"
    try:
        from lerobot_fleet.router.inventory import load_inventory

        member = load_inventory(inventory).get(cn) if inventory.is_file() else None
    except Exception:  # a courtesy: an unreadable inventory only means the role is unknown
        member = None
    return cn, member.role if member is not None else ""


def role_skip(cn: str, role: str) -> Check:
    """A SKIP for the dry run: only a robot's certificate may open a session, so another role cannot check it."""
    article = "an" if role[0] in "aeiou" else "a"
    return Check(
        "capabilities",
        SKIP,
        f"the dry-run session open needs a robot certificate; CN={cn} is {article} {role}"
        " and the router's access control lets only robots open sessions",
        "to check this robot against the server, run doctor with the robot's own certificate: --tls-cert "
        "DIR/<robot>.crt --tls-key DIR/<robot>.key",
    )


def capacity_text(row: ServerRow | None) -> str:
    """`room +2 (N_max), N_max 4.8, 1.9 req/s`: the console's figures for a replica ('' when it has none)."""
    if row is None or row.is_stale:
        return ""
    nm = "—" if row.n_max is None else f"{row.n_max:.1f}"
    rps = "—" if row.requests_per_s is None else f"{row.requests_per_s:.1f}"
    return f"room {room_text(row.headroom, row.room_limit)}, N_max {nm}, {rps} req/s"


def capacity_checks(rows: list[ServerRow]) -> list[Check]:
    """A WARN for each live replica that a robot joining would run past capacity: its latency/utilisation model
    (N_max) leaves no room, whatever its session cap says. Its robots would get their chunks late and stall."""
    checks = []
    for row in sorted(rows, key=lambda r: r.replica):
        if row.is_stale or row.room_limit != "N_max" or row.headroom is None or row.headroom > 0 or row.n_max is None:
            continue
        past = "past" if row.headroom < 0 else "at"
        rps = "—" if row.requests_per_s is None else f"{row.requests_per_s:.1f}"
        why = (
            f"one inference pass ({row.inference_ms_p50:.0f} ms) does not fit in half a chunk "
            "minus the network round trip"
            if row.n_max == 0
            else f"inference p50 {row.inference_ms_p50:.0f} ms, {rps} req/s"
        )
        checks.append(
            Check(
                "capacity",
                WARN,
                f"replica {row.replica} is {past} capacity: {row.active_sessions} session(s), N_max {row.n_max:.1f} "
                f"(room {room_text(row.headroom, row.room_limit)}; {why}): a robot that joins it gets its chunks late "
                "and its robots may stall",
                f"add a replica of this service or a faster one; keep new robots off it with "
                f"`lerobot-fleet cordon {row.replica}` (the console's server detail lists the capacity inputs)",
            )
        )
    return checks


def service_checks(
    services: list[ServiceInfo], want_namespace: bool, fleet: FleetSnapshot | None = None
) -> list[Check]:
    if not services:
        return [
            Check(
                "services",
                FAIL,
                "the router has no policy server",
                "start one: lerobot-policy-server --model.repo_or_path=<checkpoint> --default_task=<task> "
                "--zenoh.connect_endpoints=[<router endpoint>]",
            )
        ]
    n = len(services)
    checks = [Check("services", PASS, f"{n} service{'s' if n != 1 else ''} on the router")]
    for svc in services:
        checks.append(Check("service", INFO, svc.describe()))
        for r in svc.replicas:
            cap = capacity_text(fleet.server(r.replica) if fleet else None)
            checks.append(
                Check(
                    "replica",
                    INFO,
                    f"  replica {r.replica}: {r.health}, {r.active_sessions}/{r.max_sessions} "
                    f"sessions, {cap or f'{r.free_sessions} free'}, load {r.load:.2f}",
                )
            )
    if not want_namespace and not any(s.free_sessions for s in services):
        checks.append(
            Check("free sessions", FAIL, "no service has a free session", contract_advice(Refusal.SERVER_FULL))
        )
    if not want_namespace and fleet is not None:
        checks += capacity_checks(list(fleet.servers))
    return checks


def refusal_checks(exc: HandshakeError) -> list[Check]:
    """What a refused dry-run session open says about the robot, matched on the error's code (never its text)."""
    why = exc.refusal
    if why in CONTRACT_REFUSALS:
        return [Check("capabilities", FAIL, str(exc), contract_advice(why))]
    if why == Refusal.SERVER_FULL:  # capacity is checked last: the contract passed
        return [
            Check("capabilities", PASS, "the robot's features, action names and fps pass the server's checks"),
            Check("free session", FAIL, f"no replica has a free session ({exc})", contract_advice(Refusal.SERVER_FULL)),
        ]
    if why == Refusal.CORDONED:  # admission is checked after the contract: it passed
        return [
            Check("capabilities", PASS, "the robot's features, action names and fps pass the server's checks"),
            Check("free session", FAIL, f"no replica admits new sessions ({exc})", contract_advice(Refusal.CORDONED)),
        ]
    if why == Refusal.DRAINING:
        return [Check("free session", FAIL, f"every replica is draining ({exc})", contract_advice(Refusal.DRAINING))]
    return [Check("capabilities", FAIL, str(exc), "check the server's log; retry when it has warmed up")]


def robot_checks(
    session: Any,
    services: list[ServiceInfo],
    args: argparse.Namespace,
    fleet: Callable[[], FleetSnapshot | None] = lambda: None,
) -> list[Check]:
    """`fleet()`: the fleet as the console sees it, read only after the dry run (it may wait to hear the fleet)."""
    from lerobot_policy_remote.engine.dry_run import DryRunError, describe
    from lerobot_policy_remote.engine.handshake import HandshakeError
    from lerobot_policy_remote.engine.handshake import open_session as open_remote

    try:
        robot = describe(
            args.policy_path,
            args.robot_type,
            args.task,
            args.fps,
            args.service_model_id,
            args.service_revision,
            args.service_task,
        )
    except DryRunError as exc:
        return [Check("robot", FAIL, str(exc), "fix --policy.path / --robot.type")]
    req = robot.request
    checks = [
        Check(
            "robot",
            PASS,
            f"{robot.robot_type}: actions {robot.action_names}, "
            f"features {sorted(robot.features)}, {args.fps:g} fps; policy {robot.policy_type}",
        )
    ]
    mine = [s for s in services if (s.model_id, s.revision, s.service) == (req.model_id, req.revision, req.service)]
    if not mine:
        match = closest(services, req.model_id, req.revision, req.service, req.policy_type)
        asked = f"no server serves model {req.model_id!r} revision {req.revision!r} task {req.service!r}"
        if match:
            detail, fix = (
                f"{asked}; closest: {match.describe()}",
                f"use it: {fix_for(match, req.model_id, req.revision, req.service)}",
            )
        else:
            detail = f"{asked}, and no service on the router is close"
            fix = (
                f"start a server: lerobot-policy-server --model.repo_or_path={req.model_id} "
                f"--default_task={req.service!r}"
            )
        checks.append(Check("namespace", FAIL, detail, fix))
        return checks
    svc = mine[0]
    checks.append(Check("namespace", PASS, f"a server serves this robot's namespace: {svc.describe()}"))
    cn, role = cert_role(args)
    if role and role != "robot":
        return checks + [role_skip(cn, role)]
    keys = ServiceKeys.for_service(req.model_id, req.revision, req.service)
    try:
        opened = open_remote(session, keys, req, timeout_s=5.0)
    except HandshakeError as exc:
        if (
            cn and exc.code == Refusal.REFUSED and exc.last is None
        ):  # the replica answered its status, not the session query
            return checks + [
                Check(
                    "capabilities",
                    SKIP,
                    f"replica answered its status but not the session open: the router's "
                    f"access control refuses CN={cn} sessions unless it is a robot in the inventory (the router logs "
                    f"'ACL refused: CN={cn} query ...')",
                    role_skip(cn, "certificate other than a robot's").fix,
                )
            ]
        return checks + refusal_checks(exc)
    ack = opened.ack
    snap = fleet()
    checks.append(
        Check(
            "capabilities",
            PASS,
            f"replica {ack.replica} accepts this robot: features, action names and fps "
            "pass its checks (dry run, no session opened)",
        )
    )
    checks.append(free_session_check(ack, snap.server(ack.replica) if snap is not None else None))
    rows = [row for r in svc.replicas if snap is not None and (row := snap.server(r.replica)) is not None]
    checks += capacity_checks(rows)
    checks.append(action_order_check(ack))
    checks += [Check("warning", INFO, w) for w in ack.warnings if "could not be verified" not in w]
    return checks


def free_session_check(ack: Any, row: ServerRow | None) -> Check:
    """The replica that would take this robot: its free seats and, from the console's figures, its room. A replica with
    a seat but no room (N_max) takes the robot past capacity: WARN."""
    seats = f"{ack.max_sessions - ack.active_sessions} of {ack.max_sessions} sessions free"
    cap = capacity_text(row)
    if row is not None and cap and row.headroom is not None and row.headroom <= 0 and row.room_limit == "N_max":
        return Check(
            "free session",
            WARN,
            f"replica {ack.replica}: {seats}, but {cap}: this robot would run it past capacity",
            f"start another replica of this service, or cordon this one (`lerobot-fleet cordon {ack.replica}`) so "
            "robots go to one with room",
        )
    return Check("free session", PASS, f"replica {ack.replica}: {seats}" + (f", {cap}" if cap else ""))


def action_order_check(ack: Any) -> Check:
    """Whether the server compared this robot's action names and order with the policy's, or only the dimension."""
    if ack.action_names_checked or ack.action_names:
        return Check(
            "action order",
            PASS,
            f"the server checked this robot's action names and order ({len(ack.action_names)} actions)",
        )
    return Check(
        "action order",
        WARN,
        "NOT checked: the policy names no actions, so only the action dimension was compared; "
        "a policy trained with another joint order would move the wrong joints",
        "set action_feature_names in the server manifest (the training dataset's meta/info.json "
        "features.action.names, in order), or strict_action_names: true to refuse such robots",
    )
