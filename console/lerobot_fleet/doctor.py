"""`lerobot-fleet doctor`: is everything a rollout needs in place? One pass/fail line and a fix per check.

Router reachable (with the TLS/mTLS reason when not), which services and replicas exist with their
health and free sessions, and, given a policy, robot type and task, whether a server serves that
namespace and accepts this robot: a dry-run session open (the server runs every capability check and
opens nothing). The router and service checks import no torch; only `--policy.path` loads lerobot.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lerobot_policy_remote.advice import contract_advice
from lerobot_policy_remote.discovery import ServiceInfo, closest, fix_for, list_services
from lerobot_policy_remote.wire.codes import CONTRACT_REFUSALS, Refusal
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohConfigError, ZenohSettings, open_session

if TYPE_CHECKING:
    from lerobot_policy_remote.engine.handshake import HandshakeError

PASS, FAIL, INFO, WARN = "PASS", "FAIL", "INFO", "WARN"  # WARN: works, but the operator should act


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | WARN | INFO
    detail: str
    fix: str = ""


def tls_probe(endpoint: str, ca: str | None, cert: str | None, key: str | None, timeout: float = 3.0) -> str:
    """A TLS handshake with Python's ssl: '' when it works, else why (zenoh itself only says 'timeout')."""
    hostport = endpoint.split("/", 1)[1].split("#", 1)[0]
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    try:
        ctx = ssl.create_default_context(cafile=ca)
        if cert and key:
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot load the TLS files: {exc}"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw, ctx.wrap_socket(raw, server_hostname=host) as tls:
            tls.settimeout(0.5)
            try:
                tls.recv(1)  # TLS 1.3 reports a refused client certificate only after the handshake
            except TimeoutError:
                pass
    except ssl.SSLCertVerificationError as exc:
        return f"the router's certificate does not verify against --tls-ca {ca}: {exc.verify_message}"
    except ssl.SSLError as exc:
        return f"the router refused the TLS handshake: {exc.reason or exc}"
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"
    return ""


TLS_FIX = {
    "does not verify": "pass --tls-ca the CA (PEM) that signed the router's certificate (and a router certificate whose "
                       "subjectAltName names the host you dial)",
    "refused": "the router requires a client certificate (mTLS): pass --tls-cert/--tls-key signed by the CA the router trusts",
    "cannot load": "check the paths and that --tls-cert and --tls-key are a matching PEM pair",
    "cannot connect": "start the router (lerobot-fleet router --listen <endpoint>) or fix --router",
}


def _router_checks(settings: ZenohSettings, args: Any) -> tuple[list[Check], Any]:
    checks: list[Check] = []
    endpoints = settings.connect_endpoints
    for ep in endpoints:
        if ep.startswith("tls/"):
            why = tls_probe(ep, args.tls_ca, args.tls_cert, args.tls_key)
            mtls = " (mTLS)" if args.tls_cert else ""
            if why:
                fix = next((f for k, f in TLS_FIX.items() if k in why), TLS_FIX["cannot connect"])
                checks.append(Check("tls", FAIL, f"{ep}: {why}", fix))
                return checks, None
            checks.append(Check("tls", PASS, f"{ep}: TLS handshake{mtls} works with the given files"))
    try:
        session = open_session(settings)
    except ZenohConfigError as exc:
        reason = str(exc.__cause__ or exc).split(" at /", 1)[0]
        checks.append(Check("router", FAIL, f"cannot reach the router at {', '.join(endpoints)}: {reason}",
                            "start the router (lerobot-fleet router --listen <endpoint>) or fix --router; "
                            "for tls/ endpoints pass --tls-ca (and --tls-cert/--tls-key for mTLS)"))
        return checks, None
    checks.append(Check("router", PASS, f"router reachable at {', '.join(endpoints)}"))
    return checks, session


def _service_checks(services: list[ServiceInfo], want_namespace: bool) -> list[Check]:
    if not services:
        return [Check("services", FAIL, "the router has no policy server",
                      "start one: lerobot-policy-server --model.repo_or_path=<checkpoint> --default_task=<task> "
                      "--zenoh.connect_endpoints=[<router endpoint>]")]
    n = len(services)
    checks = [Check("services", PASS, f"{n} service{'s' if n != 1 else ''} on the router")]
    for svc in services:
        checks.append(Check("service", INFO, svc.describe()))
        for r in svc.replicas:
            checks.append(Check("replica", INFO, f"  replica {r.replica}: {r.health}, {r.active_sessions}/{r.max_sessions} "
                                                 f"sessions, {r.free_sessions} free, load {r.load:.2f}"))
    if not want_namespace and not any(s.free_sessions for s in services):
        checks.append(Check("free sessions", FAIL, "no service has a free session", contract_advice(Refusal.SERVER_FULL)))
    return checks


def refusal_checks(exc: HandshakeError) -> list[Check]:
    """What a refused dry-run session open says about the robot, matched on the error's code (never its text)."""
    why = exc.refusal
    if why in CONTRACT_REFUSALS:
        return [Check("capabilities", FAIL, str(exc), contract_advice(why))]
    if why == Refusal.SERVER_FULL:  # capacity is checked last: the contract passed
        return [Check("capabilities", PASS, "the robot's features, action names and fps pass the server's checks"),
                Check("free session", FAIL, f"no replica has a free session ({exc})", contract_advice(Refusal.SERVER_FULL))]
    if why == Refusal.DRAINING:
        return [Check("free session", FAIL, f"every replica is draining ({exc})", contract_advice(Refusal.DRAINING))]
    return [Check("capabilities", FAIL, str(exc), "check the server's log; retry when it has warmed up")]


def _robot_checks(session: Any, services: list[ServiceInfo], args: Any) -> list[Check]:
    from lerobot_policy_remote.engine.dry_run import DryRunError, describe
    from lerobot_policy_remote.engine.handshake import HandshakeError
    from lerobot_policy_remote.engine.handshake import open_session as open_remote

    try:
        robot = describe(args.policy_path, args.robot_type, args.task, args.fps, args.service_model_id,
                         args.service_revision, args.service_task)
    except DryRunError as exc:
        return [Check("robot", FAIL, str(exc), "fix --policy.path / --robot.type")]
    req = robot.request
    checks = [Check("robot", PASS, f"{robot.robot_type}: actions {robot.action_names}, "
                                   f"features {sorted(robot.features)}, {args.fps:g} fps; policy {robot.policy_type}")]
    mine = [s for s in services if (s.model_id, s.revision, s.service) == (req.model_id, req.revision, req.service)]
    if not mine:
        match = closest(services, req.model_id, req.revision, req.service)
        asked = f"no server serves model {req.model_id!r} revision {req.revision!r} task {req.service!r}"
        if match:
            detail, fix = f"{asked}; closest: {match.describe()}", f"use it: {fix_for(match, req.model_id, req.revision, req.service)}"
        else:
            detail = f"{asked}, and no service on the router is close"
            fix = f"start a server: lerobot-policy-server --model.repo_or_path={req.model_id} --default_task={req.service!r}"
        checks.append(Check("namespace", FAIL, detail, fix))
        return checks
    svc = mine[0]
    checks.append(Check("namespace", PASS, f"a server serves this robot's namespace: {svc.describe()}"))
    keys = ServiceKeys.for_service(req.model_id, req.revision, req.service)
    try:
        opened = open_remote(session, keys, req, timeout_s=5.0)
    except HandshakeError as exc:
        return checks + refusal_checks(exc)
    ack = opened.ack
    checks.append(Check("capabilities", PASS, f"replica {ack.replica} accepts this robot: features, action names and fps "
                                              "pass its checks (dry run, no session opened)"))
    checks.append(Check("free session", PASS, f"replica {ack.replica}: {ack.max_sessions - ack.active_sessions} of "
                                              f"{ack.max_sessions} sessions free"))
    checks.append(action_order_check(ack))
    checks += [Check("warning", INFO, w) for w in ack.warnings if "could not be verified" not in w]
    return checks


def action_order_check(ack: Any) -> Check:
    """Whether the server compared this robot's action names and order with the policy's, or only the dimension."""
    if ack.action_names_checked or ack.action_names:
        return Check("action order", PASS, f"the server checked this robot's action names and order ({len(ack.action_names)} actions)")
    return Check("action order", WARN, "NOT checked: the policy names no actions, so only the action dimension was compared; "
                 "a policy trained with another joint order would move the wrong joints",
                 "set action_feature_names in the server manifest (the training dataset's meta/info.json "
                 "features.action.names, in order), or strict_action_names: true to refuse such robots")


def diagnose(settings: ZenohSettings, args: Any) -> tuple[list[Check], list[ServiceInfo]]:
    checks, session = _router_checks(settings, args)
    if session is None:
        return checks, []
    try:
        services = list_services(session, timeout=args.timeout)
        want = bool(args.policy_path)
        checks += _service_checks(services, want)
        if want:
            checks += _robot_checks(session, services, args)
        return checks, services
    finally:
        session.close()


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        if c.status == INFO:
            lines.append(f"      {c.detail}")
            continue
        lines.append(f"{c.status}  {c.name:<13} {c.detail}")
        if c.fix:
            lines.append(f"      fix: {c.fix}")
    ok = all(c.status != FAIL for c in checks)
    lines.append("Everything a rollout needs is in place." if ok else "Not ready: fix the FAIL lines above, in order.")
    return "\n".join(lines)


def run_doctor(settings_or_error: ZenohSettings | ZenohConfigError, args: Any) -> int:
    """Exit 0 when every check passes, 1 otherwise (2 for unusable arguments)."""
    given = [args.policy_path, args.robot_type, args.task]
    if any(given) and not all(given):
        print("lerobot-fleet doctor: give --policy.path, --robot.type and --task together (the robot check needs all three)",
              file=sys.stderr)
        return 2
    if isinstance(settings_or_error, ZenohConfigError):
        checks = [Check("config", FAIL, str(settings_or_error), "fix the --router / --tls-* / --zenoh-config flags")]
        services: list[ServiceInfo] = []
    else:
        checks, services = diagnose(settings_or_error, args)
    ok = all(c.status != FAIL for c in checks)
    if args.json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks], "services": [s.to_dict() for s in services]}, indent=2))
    else:
        print(render(checks))
    return 0 if ok else 1
