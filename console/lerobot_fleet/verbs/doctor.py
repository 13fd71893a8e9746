"""`lerobot-fleet doctor`: is everything a rollout needs in place? One pass/fail line and a fix per check.

Router reachable (with the TLS/mTLS reason when not), which services and replicas exist with their
health and capacity, and, given a policy, robot type and task, whether a server serves that
namespace and accepts this robot: a dry-run session open (the server runs every capability check and
opens nothing). The router and service checks import no torch; only `--policy.path` loads lerobot.

Capacity (room, N_max, req/s) is read the way the console and `lerobot-fleet status` read it: doctor
listens to the fleet with the console's own source and store for a moment (`verbs.FleetWatch`), so the
three show the same figures (`capacity.py`), and a replica a robot would join past capacity is a WARN.

This module runs the checks in order (`doctor_checks.py`) and prints their report (`doctor_report.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from lerobot_fleet.data.model import FleetSnapshot
from lerobot_policy_remote.discovery import ServiceInfo, list_services
from lerobot_policy_remote.zenoh_config import FLEET_FLAGS, ZenohConfigError, ZenohSettings

from .doctor_checks import robot_checks, router_checks, service_checks
from .doctor_report import FAIL, Check, render, service_json

LISTEN_S = 1.5  # doctor hears the fleet at least this long: robots' telemetry (about 1 Hz) gives the capacity's RTT


def diagnose(
    settings: ZenohSettings, args: argparse.Namespace
) -> tuple[list[Check], list[ServiceInfo], FleetSnapshot | None, bool]:
    """The checks, the services, the fleet as the console sees it, and whether the fleet watch ended cleanly."""
    from .commands import FleetWatch

    checks, session = router_checks(settings, args)
    if session is None:
        return checks, [], None, True
    watch = FleetWatch(settings).start()
    try:
        services = list_services(session, timeout=args.timeout)
        replicas = {r.replica for svc in services for r in svc.replicas}

        def heard_all(snap: FleetSnapshot) -> bool:
            return replicas <= {s.replica for s in snap.servers if s.status_age_s is not None}

        heard: list[FleetSnapshot] = []

        def fleet() -> FleetSnapshot:
            if not heard:
                heard.append(watch.snapshot(LISTEN_S, until=heard_all, max_s=LISTEN_S + args.timeout))
            return heard[0]

        want = bool(args.policy_path)
        robot = robot_checks(session, services, args, fleet) if want else []  # the dry run first: it is what takes time
        checks += service_checks(services, want, fleet()) + robot
        fleet_snap = fleet()
    finally:
        session.close()
        clean = watch.stop()
    return checks, services, fleet_snap, clean


def run_doctor(settings_or_error: ZenohSettings | ZenohConfigError, args: argparse.Namespace) -> int:
    """Exit 0 when every check passes (SKIP lines do not fail), 1 otherwise, 2 for unusable arguments."""
    given = [args.policy_path, args.robot_type, args.task]
    if any(given) and not all(given):
        print(
            "lerobot-fleet doctor: give --policy.path, --robot.type and --task together "
            "(the robot check needs all three)",
            file=sys.stderr,
        )
        return 2
    if isinstance(settings_or_error, ZenohConfigError):  # unusable arguments: exit 2 (docs/console.md)
        print(f"lerobot-fleet doctor: {settings_or_error.in_words(FLEET_FLAGS)}", file=sys.stderr)
        return 2
    checks, services, fleet, clean = diagnose(settings_or_error, args)
    ok = all(c.status != FAIL for c in checks)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": ok,
                    "checks": [asdict(c) for c in checks],
                    "services": [service_json(s, fleet) for s in services],
                },
                indent=2,
            )
        )
    else:
        print(render(checks))
    from .commands import _exit

    return _exit(0 if ok else 1, clean)
