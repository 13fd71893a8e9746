"""`lerobot-fleet rollout start|status|promote|abort`: one rollout command to the fleet router, and the models'
figures as the console shows them.

The figures come from the console's own code: a `FleetWatch` (the console's Zenoh source feeding a store) listens
`--wait` seconds while a `ModelWindow` samples its captures, then `compare_models` computes them, so the verb, the
console and the router's guard read the same numbers. The command goes through the watch's session.
Exit codes: 0 the router agreed, 1 it refused, 2 no router answered or no connection (one line says what to do).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from lerobot_fleet.data.model_compare import FIGURE_HEADS, ModelFigures, ModelWindow, figure_texts
from lerobot_fleet.data.ops import operator_name
from lerobot_fleet.data.rollout_read import summary_lines
from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutReply
from lerobot_policy_remote.zenoh_config import ZenohSettings

from .commands import FleetWatch, _exit, _why_not_connected
from .rollout_args import canary_share

__all__ = ["NOBODY", "command_of", "report_json", "report_text", "run_rollout"]

NOBODY = "no fleet router answered"  # the start of `ops.send_rollout`'s message when nothing answered
EVENTS_SHOWN = 8


def command_of(args: argparse.Namespace) -> RolloutCommand:
    """The command the arguments ask for; ValueError (one line) for a bad --canary."""
    action = "abort" if args.rollout_command in ("abort", "rollback") else args.rollout_command
    by = f"{operator_name()} via lerobot-fleet rollout"
    if action != "start":
        return RolloutCommand(action, requested_by=by)
    return RolloutCommand(
        "start",
        to=args.to,
        service=args.service,
        canary=canary_share(args.canary),
        step=max(0, args.step),
        abort_if=args.abort_if,
        requested_by=by,
    )


def report_text(reply: RolloutReply, models: tuple[ModelFigures, ...]) -> str:
    """The rollout (phase, from -> to, robots per state, message, latest events) and the models' figures table."""
    status = reply.status
    lines = summary_lines(status) if reply.ok or status.rollout_id else [f"rollout: {reply.message}"]
    lines += [f"  {e}" for e in status.events[-EVENTS_SHOWN:]]
    width = max([26, *(len(m.label) for m in models)])
    lines.append(f"MODELS ({len(models)})")
    lines.append(f"  {'service':<18} {'model':<{width}} " + " ".join(f"{h:>12}" for h in FIGURE_HEADS))
    for m in models:
        cells = " ".join(f"{c:>12}" for c in figure_texts(m))
        lines.append(f"  {m.service[:18]:<18} {m.label:<{width}} {cells}")
    if not models:
        lines.append("  no live robot reported a model yet")
    return "\n".join(lines)


def report_json(reply: RolloutReply, models: tuple[ModelFigures, ...]) -> dict[str, object]:
    """The `RolloutStatus` as a dict, with `ok` and the reply's `reply` message, plus `models`: `ModelFigures`."""
    return {**asdict(reply.status), "ok": reply.ok, "reply": reply.message, "models": [m.as_dict() for m in models]}


def run_rollout(settings: ZenohSettings, args: argparse.Namespace) -> int:
    verb = f"lerobot-fleet rollout {args.rollout_command}"
    try:
        command = command_of(args)
    except ValueError as exc:
        print(f"{verb}: {exc}", file=sys.stderr)
        return 2
    watch = FleetWatch(settings, period_s=max(0.5, args.wait / 2))
    window = ModelWindow()
    reply = None
    models: tuple[ModelFigures, ...] = ()
    try:
        watch.start()
        while time.monotonic() < watch.started + args.wait:  # the figures' window: sample as the console ticks
            window.observe(watch.store.capture())
            time.sleep(0.25)
        snap = watch.snapshot(0.0)  # a pending connection attempt is let finish
        if snap.connection == "connected":
            reply = watch.source.rollout(command, args.timeout)
            cap = watch.store.capture()
            window.observe(cap)
            models = window.figures(cap, reply.status.service or command.service or None)
    except Exception as exc:  # the router went away mid-query: the verbs promise an exit code, not a traceback
        print(f"{verb}: lost the router: {exc}. Check the router and try again.", file=sys.stderr)
        return _exit(2, watch.stop())
    clean = watch.stop()
    if reply is None:
        why = _why_not_connected(settings) or (snap.notes[-1] if snap.notes else "no answer")
        print(f"{verb}: not connected to {watch.store.router}: {why}", file=sys.stderr)
        return _exit(2, clean)
    print(json.dumps(report_json(reply, models), indent=2) if args.json else report_text(reply, models))
    if reply.ok:
        return _exit(0, clean)
    nobody = reply.message.startswith(NOBODY)
    if nobody:
        print(f"{verb}: {reply.message}", file=sys.stderr)
    else:
        print(f"{verb}: the router refused: {reply.message} (see `lerobot-fleet rollout status`)", file=sys.stderr)
    return _exit(2 if nobody else 1, clean)
