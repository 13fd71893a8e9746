"""`lerobot-fleet`: router, console and the operator verbs.

Only argparse is imported at module level, so `--help` is instant; each subcommand imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from lerobot_fleet.cli_parser import DEFAULT_ROUTER, build_parser

if TYPE_CHECKING:
    import zenoh

    from lerobot_fleet.data.alerts import AlertRules
    from lerobot_policy_remote.zenoh_config import ZenohSettings

__all__ = ["DEFAULT_ROUTER", "build_parser", "main", "entry", "subcommand_options"]


def _alert_rules(args: argparse.Namespace) -> AlertRules:
    from lerobot_fleet.data.alerts import AlertRules

    return AlertRules.load(
        args.alerts_config,
        staleness_s=args.alert_staleness,
        fault_s=args.alert_fault,
        error_rate=args.alert_error_rate,
        rtt_p95_ms=args.alert_rtt_p95,
        server_load=args.alert_load,
        namespace_drops=args.alert_namespace_drops,
    )


def _settings(args: argparse.Namespace) -> ZenohSettings:
    from lerobot_policy_remote.zenoh_config import CONSOLE_MAX_MESSAGE_BYTES, ZenohSettings

    settings = ZenohSettings(
        mode="client",
        max_message_bytes=CONSOLE_MAX_MESSAGE_BYTES,  # status, telemetry, audit: nothing the console reads is larger
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
    from lerobot_fleet.console.app import FleetConsoleApp
    from lerobot_fleet.data.ops import operator_name

    common = {"alert_rules": _alert_rules(args), "export_dir": args.export_dir}

    if args.fake:
        import time

        from lerobot_fleet.data.sources.fake import FakeSource

        source = FakeSource(clock=time.monotonic, live=True)
        clock = source.clock
        app = FleetConsoleApp(
            source, clock=clock, read_only=args.read_only, refresh_s=args.refresh, operator=operator_name(), **common
        )
    elif args.replay:
        from lerobot_fleet.data.sources.replay import ReplaySource

        app = FleetConsoleApp(
            ReplaySource(args.replay, args.replay_speed), read_only=True, refresh_s=args.refresh, **common
        )
    else:
        from lerobot_fleet.data.sources.zenoh_source import ZenohSource

        app = FleetConsoleApp(
            ZenohSource(_settings(args), record_path=args.record),
            read_only=args.read_only,
            refresh_s=args.refresh,
            operator=f"{operator_name()} via lerobot-fleet console",
            **common,
        )
    app.run()
    return 0


def _rollouts(
    path: str | None, inventory: str | None, listen: list[str]
) -> Callable[[zenoh.Session], Callable[[], None]]:
    """What the router serves besides routing: the fleet's rollout, on the router's own session."""

    def serve(session: zenoh.Session) -> Callable[[], None]:
        from pathlib import Path

        from lerobot_fleet.rollout.controller import RolloutController
        from lerobot_fleet.rollout.state_file import default_path

        state = Path(path) if path else default_path(inventory, listen)
        return RolloutController(session, state, say=lambda line: print(line, flush=True)).start().stop

    return serve


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from lerobot_fleet.router.inventory import InventoryError
    from lerobot_fleet.router.pki import PkiError
    from lerobot_policy_remote.zenoh_config import ZenohConfigError

    try:
        if args.command == "router":
            from lerobot_fleet.router.router import acl_or_none, check_exposure, router_settings, run_router

            acl = acl_or_none(args.inventory)
            if args.print_acl:
                import json

                print(json.dumps(acl or {}, indent=2))
                return 0
            listen = args.listen or ["tcp/127.0.0.1:7447"]
            warning = check_exposure(listen, args.inventory, args.insecure)
            settings = router_settings(
                listen, args.config, args.tls_cert, args.tls_key, args.tls_ca, connect=args.connect, acl=acl
            )
            return run_router(
                settings,
                inventory=args.inventory,
                insecure_warning=warning,
                serve=None if args.no_rollouts else _rollouts(args.rollout_state, args.inventory, listen),
            )
        if args.command == "pki":
            from lerobot_fleet.router.pki_cli import run_pki

            return run_pki(args)
        if args.command == "console":
            return _run_console(args)
        if args.command == "demo":
            from lerobot_fleet.sim.demo import run_demo

            return run_demo(
                args.robots,
                args.port,
                args.duration,
                not args.no_console,
                args.workdir,
                args.record_dir,
                args.policy,
                args.second_model,
            )
        if args.command == "simulate":
            from lerobot_fleet.sim.simulate import main as run_simulate

            return run_simulate(args)
        if args.command == "doctor":
            from lerobot_fleet.verbs.doctor import run_doctor

            try:
                settings = _settings(args)
            except ZenohConfigError as exc:
                return run_doctor(exc, args)
            return run_doctor(settings, args)
        if args.command == "exporter":
            from lerobot_fleet.verbs.exporter import run_exporter

            return run_exporter(_settings(args), args.listen, args.forget, ready=lambda line: print(line, flush=True))
        if args.command == "rollout":
            from lerobot_fleet.verbs.rollout import run_rollout

            return run_rollout(_settings(args), args)
        from lerobot_fleet.verbs import commands as verbs

        if args.command == "status":
            if args.watch:
                return verbs.run_watch(_settings(args), _alert_rules(args), args.wait, args.interval, args.count)
            return verbs.run_status(_settings(args), args.json, args.wait, _alert_rules(args))
        if args.command == "drain":
            return verbs.run_action(_settings(args), "drain", args.server, args.reason, args.timeout, args.json)
        if args.command in ("cordon", "uncordon"):
            return verbs.run_action(_settings(args), args.command, args.server, args.reason, args.timeout, args.json)
        if args.command == "reset":
            return verbs.run_action(_settings(args), "reset", args.robot, args.reason, args.timeout, args.json)
    except ZenohConfigError as exc:
        from lerobot_policy_remote.zenoh_config import FLEET_FLAGS

        print(f"lerobot-fleet {args.command}: {exc.in_words(FLEET_FLAGS)}", file=sys.stderr)
        return 2
    except (InventoryError, PkiError, ValueError, OSError) as exc:
        print(f"lerobot-fleet {args.command}: {exc}", file=sys.stderr)
        return 2
    return 2


def entry() -> None:
    """The `lerobot-fleet` program. Once zenoh is loaded, leave without interpreter finalization: a zenoh
    runtime thread that drops a Python callback while the interpreter finalizes is told to exit by
    Python, unwinds through Rust frames and aborts the process ("FATAL: exception not rethrown", exit
    -6) after the verb has already printed its answer (docs/decisions.md)."""
    code = main()
    if "zenoh" not in sys.modules:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        pass
    os._exit(code)


def subcommand_options(parser: argparse.ArgumentParser, words: list[str]) -> set[str] | None:
    """The option strings of the subcommand `words` names (`["status"]`, `["pki", "issue"]`); None when `parser`
    has no such subcommand. Public because argparse keeps its subcommand table private: the check that every
    documented `lerobot-fleet` command parses (tests/test_doc_commands.py) reads each command's flags here."""
    cmd = parser
    for word in words:
        table = next((a for a in cmd._actions if isinstance(a, argparse._SubParsersAction)), None)
        if table is None or word not in table.choices:
            return None
        cmd = table.choices[word]
    return {o for a in cmd._actions for o in a.option_strings}


if __name__ == "__main__":
    entry()
