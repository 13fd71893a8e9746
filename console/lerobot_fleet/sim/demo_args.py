"""`lerobot-fleet demo`'s command line (argparse only: `--help` stays instant, and the demo's flags live beside it)."""

from __future__ import annotations

import argparse

__all__ = ["add_demo"]


def add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `demo` subcommand and its flags (run by `lerobot_fleet.sim.demo.run_demo`)."""
    demo = sub.add_parser(
        "demo",
        help="run a whole local fleet (router, 2 servers, simulated robots) with the console",
        description=(
            "Router + two policy-server replicas + N simulated arms (real lerobot-rollout processes) on loopback."
        ),
    )
    demo.add_argument("--robots", type=int, default=4, help="number of simulated robots (default 4)")
    demo.add_argument("--port", type=int, default=7447, help="router port on 127.0.0.1 (default 7447)")
    demo.add_argument("--duration", type=float, default=3600, help="seconds the robots run (default 3600)")
    demo.add_argument(
        "--no-console", action="store_true", help="keep the fleet running without the console (Ctrl-C stops it)"
    )
    demo.add_argument("--workdir", default=None, help="where the policy and the logs go (default: a new temp dir)")
    demo.add_argument(
        "--record-dir", default=None, help="each robot records its episodes (sentry) as a local dataset in DIR/<robot>"
    )
    demo.add_argument(
        "--policy",
        choices=("toy", "smolvla", "pi0", "pi05"),
        default="toy",
        help="what the two replicas serve: toy (default), a small RTC-capable policy built on the spot; smolvla, pi0 "
        "or pi05, a tiny offline checkpoint of that VLA family (random weights, built in the work dir, "
        "nothing downloaded; needs the vla extra) served with real-time chunking, which the robots use",
    )
    demo.add_argument(
        "--second-model",
        action="store_true",
        help="also serve other weights of the same policy under revision v2 (one replica, a seat for every robot), "
        "to try a rollout: lerobot-fleet rollout start --to v2, or m in the console",
    )
