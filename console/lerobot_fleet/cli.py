"""`lerobot-fleet`: router, console and the operator verbs.

Only argparse is imported at module level, so `--help` is instant; each subcommand imports what it needs.
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_ROUTER = "tcp/127.0.0.1:7447"


def _add_connect(p: argparse.ArgumentParser) -> None:
    p.add_argument("--router", action="append", default=None, help=f"router endpoint to connect to (repeatable); default {DEFAULT_ROUTER}")
    p.add_argument("--tls-ca", default=None, help="CA (PEM) that signed the router certificate (for tls/ endpoints)")
    p.add_argument("--tls-cert", default=None, help="client certificate (PEM) for mTLS")
    p.add_argument("--tls-key", default=None, help="client private key (PEM) for mTLS")
    p.add_argument("--zenoh-config", default=None, help="extra zenoh config: a JSON5 file or inline text, merged last")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lerobot-fleet", description="Operate a fleet of remote-inference robots.")
    sub = parser.add_subparsers(dest="command", required=True)

    router = sub.add_parser("router", help="run an embedded Zenoh router (laptops, tests, the demo)")
    router.add_argument("--listen", action="append", default=None, help="endpoint to listen on (repeatable); default tcp/127.0.0.1:7447")
    router.add_argument("--config", default=None, help="extra router config: a JSON5 file (TLS, ACL, ...) merged key by key")
    router.add_argument("--tls-cert", default=None, help="router certificate (PEM) for tls/ endpoints")
    router.add_argument("--tls-key", default=None, help="router private key (PEM)")
    router.add_argument("--tls-ca", default=None, help="CA (PEM) that client certificates must chain to: enables mTLS")

    console = sub.add_parser("console", help="the live operator console (Textual)", description="Live view of robots and policy servers; drain a server, reset a robot's episode.")
    _add_connect(console)
    console.add_argument("--read-only", action="store_true", help="hide and disable drain and episode reset")
    console.add_argument("--refresh", type=float, default=1.0, help="seconds between screen refreshes (min 0.5; default 1.0)")
    console.add_argument("--replay", default=None, metavar="FILE.jsonl", help="replay a recorded fleet instead of connecting (read-only)")
    console.add_argument("--replay-speed", type=float, default=1.0, help="replay pace multiplier (0 loads everything at once)")
    console.add_argument("--fake", action="store_true", help="show a built-in fake fleet (demo, no router needed)")
    console.add_argument("--record", default=None, metavar="FILE.jsonl", help="also write what the console sees to a replay file")

    status = sub.add_parser("status", help="print the fleet once (text or --json) and exit")
    _add_connect(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--wait", type=float, default=2.5, help="seconds to listen before printing (telemetry arrives ~1 Hz)")

    drain = sub.add_parser("drain", help="drain one policy server replica (no confirmation: for scripts)")
    _add_connect(drain)
    drain.add_argument("server", help="server replica id (as shown in the console's replica column)")
    drain.add_argument("--reason", default="operator drain", help="recorded in the server's audit log")
    drain.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the acknowledgement")
    drain.add_argument("--json", action="store_true")

    reset = sub.add_parser("reset", help="start a new episode on one robot (no confirmation: for scripts)")
    _add_connect(reset)
    reset.add_argument("robot", help="robot client_uuid (as shown in the console's robot column)")
    reset.add_argument("--reason", default="operator episode reset", help="recorded by the robot")
    reset.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the acknowledgement")
    reset.add_argument("--json", action="store_true")
    doctor = sub.add_parser("doctor", help="check that everything a rollout needs is in place (pass/fail lines with fixes)",
                            description="Router reachable (TLS/mTLS with the given files), services, replicas and free sessions; "
                            "with --policy.path, --robot.type and --task: a server for that namespace accepts this robot "
                            "(dry-run session open, nothing moves). Exit 0 when everything passes.")
    _add_connect(doctor)
    doctor.add_argument("--policy.path", dest="policy_path", default=None, help="the rollout's --policy.path (loads lerobot)")
    doctor.add_argument("--robot.type", dest="robot_type", default=None, help="the rollout's --robot.type (built from defaults, never connected)")
    doctor.add_argument("--task", default=None, help="the rollout's --task")
    doctor.add_argument("--fps", type=float, default=30.0, help="the rollout's --fps (default 30)")
    doctor.add_argument("--inference.service_model_id", dest="service_model_id", default="", help="as in the rollout")
    doctor.add_argument("--inference.service_revision", dest="service_revision", default="main", help="as in the rollout")
    doctor.add_argument("--inference.service_task", dest="service_task", default="", help="as in the rollout")
    doctor.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for status replies (default 2)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    demo = sub.add_parser("demo", help="run a whole local fleet (router, 2 servers, simulated robots) with the console",
                          description="Router + two policy-server replicas + N simulated arms (real lerobot-rollout processes) on loopback.")
    demo.add_argument("--robots", type=int, default=4, help="number of simulated robots (default 4)")
    demo.add_argument("--port", type=int, default=7447, help="router port on 127.0.0.1 (default 7447)")
    demo.add_argument("--duration", type=float, default=3600, help="seconds the robots run (default 3600)")
    demo.add_argument("--no-console", action="store_true", help="keep the fleet running without the console (Ctrl-C stops it)")
    demo.add_argument("--workdir", default=None, help="where the policy and the logs go (default: a new temp dir)")
    return parser


def _settings(args: argparse.Namespace):  # -> ZenohSettings
    from lerobot_policy_remote.zenoh_config import ZenohSettings

    settings = ZenohSettings(
        mode="client",
        connect_endpoints=args.router or [DEFAULT_ROUTER],
        tls_root_ca_certificate=args.tls_ca,
        tls_connect_certificate=args.tls_cert,
        tls_connect_private_key=args.tls_key,
        extra_json5=args.zenoh_config,
        connect_timeout_ms=2000,
        lease_ms=2000,
    )
    settings.validate()
    return settings


def _run_console(args: argparse.Namespace) -> int:
    from .app import FleetConsoleApp
    from .sources.zenoh_source import operator_name

    if args.fake:
        import time

        from .sources.fake import FakeSource

        source = FakeSource(clock=time.monotonic, live=True)
        clock = source.clock
        app = FleetConsoleApp(source, clock=clock, read_only=args.read_only, refresh_s=args.refresh, operator=operator_name())
    elif args.replay:
        from .sources.replay import ReplaySource

        app = FleetConsoleApp(ReplaySource(args.replay, args.replay_speed), read_only=True, refresh_s=args.refresh)
    else:
        from .sources.zenoh_source import ZenohSource

        app = FleetConsoleApp(ZenohSource(_settings(args), record_path=args.record), read_only=args.read_only, refresh_s=args.refresh, operator=f"{operator_name()} via lerobot-fleet console")
    app.run()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from lerobot_policy_remote.zenoh_config import ZenohConfigError

    try:
        if args.command == "router":
            from .router import router_settings, run_router

            settings = router_settings(args.listen or ["tcp/127.0.0.1:7447"], args.config, args.tls_cert, args.tls_key, args.tls_ca)
            return run_router(settings)
        if args.command == "console":
            return _run_console(args)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(args.robots, args.port, args.duration, not args.no_console, args.workdir)
        if args.command == "doctor":
            from .doctor import run_doctor

            try:
                settings = _settings(args)
            except ZenohConfigError as exc:
                return run_doctor(exc, args)
            return run_doctor(settings, args)
        from . import verbs

        if args.command == "status":
            return verbs.run_status(_settings(args), args.json, args.wait)
        if args.command == "drain":
            return verbs.run_action(_settings(args), "drain", args.server, args.reason, args.timeout, args.json)
        if args.command == "reset":
            return verbs.run_action(_settings(args), "reset", args.robot, args.reason, args.timeout, args.json)
    except ZenohConfigError as exc:
        print(f"lerobot-fleet {args.command}: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
