"""Pure row renderers: model rows -> rich Text cells (never markup: wire strings are shown verbatim)."""

from __future__ import annotations

from rich.text import Text

from .model import (
    SERVER_HEALTH_STYLE,
    FleetSnapshot,
    RobotRow,
    RobotState,
    ServerRow,
    fmt_age,
    fmt_ms,
    fmt_num,
)

ROBOT_COLUMNS: list[tuple[str, str, int]] = [
    ("robot", "robot", 16),
    ("state", "state", 12),
    ("stale", "stale s", 7),
    ("queue", "queue s", 7),
    ("rtt", "rtt p50/p95", 11),
    ("delay", "delay", 5),
    ("episode", "ep", 4),
    ("server", "server", 14),
    ("sup", "sup%", 5),
    ("errors", "err", 4),
    ("outcome", "last outcome", 20),
    ("seen", "seen", 5),
]

SERVER_COLUMNS: list[tuple[str, str, int]] = [
    ("replica", "replica", 14),
    ("model", "model", 22),
    ("revision", "rev", 6),
    ("service", "service", 17),
    ("sessions", "sess", 5),
    ("load", "load", 5),
    ("rps", "req/s", 6),
    ("errors", "err", 5),
    ("superseded", "sup", 5),
    ("health", "health", 8),
    ("nmax", "N_max", 6),
    ("headroom", "room", 5),
]

AGE_STYLES = ((60.0, "bold red"), (10.0, "red"), (3.0, "yellow"))


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


def robot_cells(r: RobotRow) -> tuple[Cell, ...]:
    rtt = "—" if not r.rtt_p50_ms else f"{fmt_ms(r.rtt_p50_ms)}/{fmt_ms(r.rtt_p95_ms)}"
    sup = r.superseded_pct
    stale_style = "red" if (r.staleness_s or 0) >= 1.0 else ""
    return (
        _t(r.robot_id, "bold"),
        _t(r.state.name, r.state.style),
        _t(fmt_num(r.staleness_s, 2), stale_style),
        _t(fmt_num(r.queue_s, 2), "red" if r.queue_s == 0 and r.state is RobotState.STALLED else ""),
        _t(rtt),
        _t("—" if r.delay_steps is None else r.delay_steps),
        _t(r.episode_id),
        _t(r.replica or "—"),
        _t("—" if sup is None else f"{sup:.1f}"),
        _t(r.errors, "red" if r.errors else ""),
        _t(r.last_outcome or "—", "" if r.last_outcome in ("", "ok") else "yellow"),
        _t(fmt_age(r.seen_age_s), age_style(r.seen_age_s)),
    )


def server_cells(s: ServerRow) -> tuple[Cell, ...]:
    sessions = f"{s.active_sessions}/{s.max_sessions}" if s.max_sessions else f"{s.active_sessions}/—"
    room_style = "red" if s.headroom is not None and s.headroom < 0 else ("yellow" if s.headroom == 0 else "")
    return (
        _t(s.replica, "bold"),
        _t(s.model_id or "—"),
        _t(s.revision or "—"),
        _t(s.service or "—"),
        _t(sessions),
        _t(f"{s.load:.2f}"),
        _t(fmt_num(s.requests_per_s, 1)),
        _t("—" if s.errors is None else f"{s.errors:.0f}", "red" if s.errors else ""),
        _t("—" if s.superseded is None else f"{s.superseded:.0f}"),
        _t(s.health, SERVER_HEALTH_STYLE.get(s.health, "")),
        _t("—" if s.n_max is None else f"{s.n_max:.1f}"),
        _t("—" if s.headroom is None else f"{s.headroom:+d}", room_style),
    )


CONNECTION_STYLE = {
    "connected": "bold green",
    "disconnected": "bold white on red",
    "connecting": "bold yellow",
    "replay": "bold cyan",
    "fake": "bold cyan",
}


def header_text(snap: FleetSnapshot, sort: str, query: str, faults_only: bool, read_only: bool, paused: bool) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("lerobot-fleet", style="bold")
    t.append("  router ")
    t.append(snap.router or "—", style="bold")
    t.append("  ")
    t.append(f" {snap.connection.upper()} ", style=CONNECTION_STYLE.get(snap.connection, "bold"))
    t.append("  data age ")
    age = snap.data_age_s
    t.append("—" if age is None else f"{age:.1f}s", style=age_style(age) or "bold")
    if snap.routers:  # only live sources read the admin space
        via = next((r.zid[:8] for r in snap.routers if r.connected), "?")
        t.append(f"  routers {len(snap.routers)} via {via}")
    if read_only:
        t.append("  ")
        t.append(" READ-ONLY ", style="bold black on yellow")
    if paused:
        t.append("  ")
        t.append(" PAUSED ", style="bold black on cyan")
    t.append("\n")
    counts = snap.state_counts()
    t.append(f"robots {len(snap.robots)}:")
    for state in sorted(counts, key=lambda s: s.rank):
        t.append(" ")
        t.append(f"{counts[state]} {state.name}", style=state.style)
    health: dict[str, int] = {}
    for s in snap.servers:
        health[s.health] = health.get(s.health, 0) + 1
    t.append(f"   servers {len(snap.servers)}:")
    for h in sorted(health):
        t.append(" ")
        t.append(f"{health[h]} {h}", style=SERVER_HEALTH_STYLE.get(h, ""))
    t.append("\n")
    t.append(f"sort {sort}   filter {query or '—'}   faults only {'on' if faults_only else 'off'}", style="bright_black")
    return t
