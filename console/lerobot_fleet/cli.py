"""`lerobot-fleet`: router, console and the operator verbs."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lerobot-fleet", description="Operate a fleet of remote-inference robots.")
    sub = parser.add_subparsers(dest="command", required=True)

    router = sub.add_parser("router", help="run an embedded Zenoh router (laptops, tests, the demo)")
    router.add_argument("--listen", action="append", default=None, help="endpoint to listen on (repeatable); default tcp/127.0.0.1:7447")
    router.add_argument("--config", default=None, help="extra router config: a JSON5 file (TLS, ACL, ...) merged key by key")
    router.add_argument("--tls-cert", default=None, help="router certificate (PEM) for tls/ endpoints")
    router.add_argument("--tls-key", default=None, help="router private key (PEM)")
    router.add_argument("--tls-ca", default=None, help="CA (PEM) that client certificates must chain to: enables mTLS")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "router":
        from lerobot_policy_remote.zenoh_config import ZenohConfigError

        from .router import router_settings, run_router

        try:
            settings = router_settings(args.listen or ["tcp/127.0.0.1:7447"], args.config, args.tls_cert, args.tls_key, args.tls_ca)
            return run_router(settings)
        except ZenohConfigError as exc:
            print(f"lerobot-fleet router: {exc}", file=sys.stderr)
            return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
