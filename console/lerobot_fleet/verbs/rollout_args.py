"""`lerobot-fleet rollout`'s command line (argparse only: `--help` stays instant) and its `--canary` reading."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["add_rollout", "canary_share"]

CANARY_RULE = "--canary takes a share of the service's robots: 0 < c <= 1 (0.25) or a percentage (25%)"


def canary_share(text: str) -> float:
    """`0.25` or `25%` -> 0.25; ValueError (with the rule in words) for anything else or outside (0, 1]."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"{CANARY_RULE}, not {text!r}") from None
    if not 0 < value <= 1:
        raise ValueError(f"{CANARY_RULE}, not {text!r}")
    return value


def add_rollout(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], connect: Callable[[argparse.ArgumentParser], None]
) -> None:
    """The `rollout` subcommand and its actions; `connect` adds the router and TLS flags every verb takes."""
    rollout = sub.add_parser(
        "rollout",
        help="move the fleet's robots to a new model: start a canary, promote, abort; status",
        description="Ask the fleet router (`lerobot-fleet router`) to move a service's robots from their model to a "
        "new one: `start` moves a canary share, `promote` the rest, `abort` (or `rollback`) moves them back; `status` "
        "prints the rollout and each model's figures. Exit 0 when the router agreed, 1 when it refused, 2 when no "
        "router answered.",
    )
    actions = rollout.add_subparsers(dest="rollout_command", required=True)
    start = actions.add_parser(
        "start",
        help="start a rollout: move a canary share of the service's robots to --to",
        description="Start a rollout to the model --to names (a revision or a fingerprint, or its first characters, "
        "that a replica of the service serves): the router moves --canary of the service's robots now.",
    )
    start.add_argument("--to", required=True, help="the new model: a revision or a checkpoint fingerprint (prefix)")
    start.add_argument(
        "--canary", default="10%", help="share of the service's robots moved first: 0 < c <= 1 or N%% (default 10%%)"
    )
    start.add_argument(
        "--step", type=int, default=0, help="robots per promote/abort step (default 0: as many as the canary moved)"
    )
    start.add_argument(
        "--abort-if",
        default="",
        metavar="EXPR",
        help="the guard: the router aborts when one condition holds for the new model, e.g. "
        "'degraded_rate > 2x, rtt_p95_ms > 300' (Nx: N times the old model's; names: the model figures of "
        "`rollout status --json`; default: none)",
    )
    start.add_argument("--service", default="", help="the service, when the fleet runs several (default: its only one)")
    status = actions.add_parser(
        "status",
        help="print the rollout and each model's figures",
        description="Print the rollout (phase, from -> to, robots per state, message, latest events) and each "
        "model's figures as the console shows them (listening --wait seconds for the robots' telemetry).",
    )
    promote = actions.add_parser(
        "promote",
        help="move the robots still on the old model to the new one",
        description="Promote the rollout: the router moves the rest of the robots to the new model, step by step.",
    )
    abort = actions.add_parser(
        "abort",
        aliases=["rollback"],
        help="move every moved robot back to the old model",
        description="Abort the rollout: the router moves every robot it moved back to the old model.",
    )
    for p in (start, status, promote, abort):
        connect(p)
        p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the router's reply (default 5)")
        p.add_argument(
            "--wait",
            type=float,
            default=2.5,
            help="seconds to listen to the robots before printing their models' figures (default 2.5)",
        )
        p.add_argument("--json", action="store_true", help="machine-readable output: the rollout status and models")
