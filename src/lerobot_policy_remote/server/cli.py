"""`lerobot-policy-server` entry point: parse the manifest, load, serve, drain on SIGTERM, exit 0."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

from .manifest_args import parse_manifest, split_manifest, take_option

if TYPE_CHECKING:  # for the checker only: the CLI imports these once it needs them (`--help` loads none)
    from .manifest import Manifest
    from .router_check import RouterWatch
    from .service import PolicyServer

USAGE = """\
usage: lerobot-policy-server [--manifest server.yaml] [--FIELD=VALUE ...] [--audit_log=off|stderr|PATH] [--verbose]
       lerobot-policy-server replay CAPTURE_DIR [--FIELD=VALUE ...] [--verbose]

Serve one pre-warmed lerobot policy to many robots over Zenoh.
Every manifest field below can be set in the YAML manifest or on the command line (dotted names for
nested fields: --model.repo_or_path=/ckpt --zenoh.connect_endpoints='[tcp/router:7447]').

options (not manifest fields):
  --manifest FILE           YAML manifest; command-line fields override it
  --audit_log=off|stderr|PATH
                            where this process keeps one JSON audit line per request [default: stderr];
                            off keeps them on Zenoh only (B/server/<replica>/audit); PATH appends bare JSON lines
  --verbose, -v             startup errors with the traceback (also LOG_LEVEL=DEBUG)
  replay CAPTURE_DIR        re-run the requests a debug.capture_dir holds through the same pipeline and
                            compare the chunks byte for byte (the manifest is read from CAPTURE_DIR)

manifest fields:
{fields}

Docs: docs/server.md (fields, metrics), docs/runbook.md (operations, forensics)."""


def usage() -> str:
    from .manifest import manifest_help

    return USAGE.format(fields=manifest_help())


def preflight(manifest: Manifest) -> str:
    """What would fail after loading the model, found before it: the router (refused port, certificates) and the
    health port. "" when both look fine (zenoh itself still connects after the load)."""
    import errno
    import socket

    from ..router_probe import probe_router
    from ..zenoh_config import SERVER_FLAGS

    problem = probe_router(manifest.zenoh, SERVER_FLAGS)
    if problem is not None:
        return problem.in_words(SERVER_FLAGS)
    if manifest.health_port:
        with socket.socket(socket.AF_INET6 if ":" in manifest.health_host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((manifest.health_host, manifest.health_port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    return (
                        f"cannot listen on {manifest.health_host}:{manifest.health_port} for /healthz and /metrics: "
                        f"{exc.strerror}"
                    )
                return (
                    f"the health port {manifest.health_port} on {manifest.health_host} is already in use (another "
                    "lerobot-policy-server on this host?): pass --health_port=<a free port> (each server on a host "
                    "needs its own), or --health_port=0 to serve no /healthz and /metrics"
                )
    return ""


def watch_router(server: PolicyServer, manifest: Manifest) -> RouterWatch:
    """router_refused=retry: check the router again until it accepts this replica; /healthz turns ok then."""
    from .router_check import RouterWatch, router_accepts

    settings, key = manifest.zenoh_settings(), manifest.keys().server(manifest.replica(), "status")

    def accepted() -> None:
        server.router_refusal = ""
        print(f"The router accepts replica {manifest.replica()} now: robots can find it (/healthz ok)", flush=True)

    return RouterWatch(lambda: router_accepts(settings, key), accepted).start()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(usage())
        return 0
    if args[0] == "replay":
        from .replay import main as replay_main

        return replay_main(args[1:])
    from ..heap import settle_after_startup
    from ..zenoh_config import ZenohConfigError
    from .audit import AUDIT_LOG_DEFAULT, configure_audit_log
    from .startup_errors import explain, verbose_requested

    verbose, args = verbose_requested(args)
    audit_target, args = take_option(args, "audit_log")
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        audit_where = configure_audit_log(audit_target or AUDIT_LOG_DEFAULT)
    except (OSError, ValueError) as exc:
        print(
            f"lerobot-policy-server: error: --audit_log: {exc} (use off, stderr or a writable file path)",
            file=sys.stderr,
            flush=True,
        )
        return 2

    def fail(exc: BaseException, manifest: Manifest | None = None, code: int = 2) -> int:
        """One short message; the traceback only when asked for."""
        if verbose:
            logging.getLogger("lerobot.policy_server").error("startup failed", exc_info=exc)
        print(
            f"lerobot-policy-server: error: {explain(exc, manifest, split_manifest(args)[0])}",
            file=sys.stderr,
            flush=True,
        )
        return code

    try:
        manifest = parse_manifest(args)
    except SystemExit as exc:  # draccus reports bad flags itself
        return int(exc.code or 2)
    except Exception as exc:  # a missing / unreadable manifest, a value of the wrong type
        return fail(exc)
    try:
        manifest.validate()
        problem = preflight(manifest)  # the router and the health port, before minutes of loading
        if problem:
            print(f"lerobot-policy-server: error: {problem}", file=sys.stderr, flush=True)
            return 2
        from .router_check import router_refusal

        refused = router_refusal(manifest)  # would robots find this replica through the router's access control?
        if refused and manifest.router_refused == "exit":
            print(f"lerobot-policy-server: error: {refused}", file=sys.stderr, flush=True)
            return 2
        if refused:
            print(
                f"lerobot-policy-server: warning: {refused} (router_refused=retry: /healthz fails until the router "
                "accepts this replica; checking again every few seconds)",
                file=sys.stderr,
                flush=True,
            )
        from .service import PolicyServer

        server = PolicyServer(
            manifest,
            progress=lambda text: print(text, flush=True),
            audit_where=audit_where,
            settle=settle_after_startup,
        )  # the model's objects stay out of every later full collection
        server.router_refusal = refused
    except Exception as exc:  # bad checkpoint path, unreachable hub id, refused policy, bad zenoh config, ...
        return fail(exc, manifest)

    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if stop_requested.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop_requested.set()
        server.drain(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.start()
    except Exception as exc:  # router unreachable, warm-up failed: the model cannot run with this manifest
        server.stop()
        return fail(exc, manifest, 2 if isinstance(exc, ZenohConfigError) else 1)
    watch = watch_router(server, manifest) if server.router_refusal else None
    try:
        while not server.wait(0.5):
            pass
    except KeyboardInterrupt:
        print("Interrupted twice: exiting without finishing the drain", flush=True)
    if watch is not None:
        watch.stop()
    server.stop()
    print("Policy server stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
