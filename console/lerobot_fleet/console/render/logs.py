"""The alerts and events screens' text."""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data.alerts import Alert
from lerobot_fleet.data.fmt import fmt_age
from lerobot_fleet.data.model import FleetEvent

from .common import SEVERITY_STYLE


def alerts_text(alerts: list[Alert], now: float, limit: int = 200) -> Text:
    """Open alerts first (newest first), then cleared ones, each with when it started and cleared."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not alerts:
        t.append("no alerts", style="bright_black")
        return t
    t.append(
        f"{'state':<8} {'rule':<12} {'role':<7} {'target':<18} {'started':>8} {'cleared':>8}  message\n", style="bold"
    )
    for a in alerts[:limit]:
        is_open = a.cleared_s is None
        style = "bold red" if is_open else "bright_black"
        t.append(f"{'OPEN' if is_open else 'cleared':<8}", style=style)
        t.append(f" {a.rule:<12} {a.role:<7} {a.name[:18]:<18} {fmt_age(now - a.started_s) + ' ago':>8} ")
        t.append(f"{'—' if a.cleared_s is None else fmt_age(now - a.cleared_s) + ' ago':>8}  ")
        t.append(a.message + "\n", style="" if is_open else "bright_black")
    t.rstrip()
    return t


def events_text(events: list[FleetEvent] | tuple[FleetEvent, ...], limit: int = 500) -> Text:
    """The fleet event log, newest first (the caller filters)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not events:
        t.append("no events match", style="bright_black")
        return t
    t.append(f"{'age':>5}  {'sev':<5} {'kind':<6} {'robot':<14} {'server':<12} what\n", style="bold")
    for e in events[:limit]:
        t.append(f"{fmt_age(e.age_s):>5}  ")
        t.append(f"{e.severity:<5}", style=SEVERITY_STYLE.get(e.severity, ""))
        t.append(f" {e.kind:<6} {e.robot[:14]:<14} {e.server[:12]:<12} ")
        t.append(e.text + "\n")
    t.rstrip()
    return t
