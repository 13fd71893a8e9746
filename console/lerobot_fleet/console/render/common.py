"""What every screen's text shares: styles, cells, ages, titles, key names, the result line.

Cells are (plain text, style) pairs and texts are rich `Text` built with `append`, never markup: wire
strings are shown verbatim. Styles live here, with the renderers; the rows they colour carry none.
"""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data.model import RobotState

STATE_STYLE = {
    RobotState.DEAD: "bold white on red",
    RobotState.GONE: "bold bright_black",
    RobotState.STALLED: "bold red",
    RobotState.RECONNECTING: "magenta",
    RobotState.DEGRADED: "yellow",
    RobotState.CONNECTING: "cyan",
    RobotState.UNKNOWN: "bright_black",
    RobotState.STREAMING: "green",
}
SERVER_HEALTH_STYLE = {
    "refused": "bold white on red",
    "gone": "bold bright_black",
    "stale": "bold red",
    "draining": "magenta",
    "cordoned": "bold yellow",
    "full": "yellow",
    "cold": "cyan",
    "ok": "green",
}
SEVERITY_STYLE = {"info": "", "warn": "yellow", "error": "bold red"}
CONNECTION_STYLE = {
    "connected": "bold green",
    "disconnected": "bold white on red",
    "connecting": "bold yellow",
    "replay": "bold cyan",
    "fake": "bold cyan",
}

AGE_STYLES = ((60.0, "bold red"), (10.0, "red"), (3.0, "yellow"))
OLD = "dim"  # figures of a gone or stale row: last known, not live

Cell = tuple[str, str]  # (plain text, rich style): joined into one Text line by KeyedTable, never markup


def _t(value: object, style: str = "") -> Cell:
    """Wire text -> a cell; control characters are made visible (they would break the line)."""
    s = str(value)
    if not s.isprintable():
        s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return (s, style)


def age_style(age: float | None) -> str:
    if age is None:
        return "bright_black"
    for limit, style in AGE_STYLES:
        if age >= limit:
            return style
    return ""


ROBOT_SORT_LABELS = {
    "state": "state severity",
    "robot": "robot id",
    "stale": "staleness",
    "queue": "queue",
    "rtt": "RTT p95 (slowest first)",
    "net": "network time (slowest first)",
    "delay": "delay",
    "rtc": "rtc (on first)",
    "episode": "episode",
    "server": "server",
    "sup": "superseded %",
    "errors": "errors (most first)",
    "outcome": "last outcome",
    "seen": "data age (oldest first)",
}
SERVER_SORT_LABELS = {
    "health": "health",
    "replica": "replica",
    "model": "model",
    "revision": "revision",
    "service": "service",
    "sessions": "sessions (most first)",
    "load": "load (highest first)",
    "rps": "req/s",
    "errors": "errors",
    "superseded": "superseded",
    "nmax": "N_max",
    "headroom": "room (least first)",
}


def sort_label(table: str, column: str, reverse: bool) -> str:
    labels = ROBOT_SORT_LABELS if table == "robots" else SERVER_SORT_LABELS
    return labels.get(column, "?") + (" (reversed)" if reverse else "")


def section_title(name: str, shown: int, total: int, marked: int = 0) -> Text:
    t = Text(f"{name} ({shown} of {total} shown)")
    if marked:
        t.append(f"  {marked} marked", style="bold cyan")
    return t


_KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "space": "space",
    "escape": "esc",
    "enter": "enter",
    "exclamation_mark": "!",
}


def key_label(keys: str) -> str:
    return "/".join(_KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def help_text(keys: list[tuple[str, str]]) -> Text:
    t = Text(no_wrap=True)
    width = max([10, *(len(key) for key, _ in keys)])
    for key, what in keys:
        t.append(f"{key:>{width}}", style="bold cyan")
        t.append(f"  {what}\n")
    t.rstrip()
    return t


def result_text(text: str, ok: bool | None) -> Text:
    if not text:
        return Text("")
    return Text(text, style="green" if ok else ("bold red" if ok is False else "yellow"), overflow="ellipsis")
