"""The fleet screen's text: robot and server rows, the header, group headers."""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data import capacity
from lerobot_fleet.data.alerts import DEFAULT_RULES
from lerobot_fleet.data.fmt import fmt_age, fmt_ms, fmt_num
from lerobot_fleet.data.model import FleetSnapshot, RobotRow, RobotState, ServerRow

from .common import CONNECTION_STYLE, OLD, SERVER_HEALTH_STYLE, STATE_STYLE, Cell, _t, age_style

ROBOT_COLUMNS: list[tuple[str, str, int]] = [
    ("mark", "", 1),
    ("robot", "robot", 20),
    ("state", "state", 12),
    ("stale", "stale s", 7),
    ("queue", "queue s", 7),
    ("rtt", "rtt p50/p95", 11),
    ("net", "net ms", 6),
    ("delay", "delay", 5),
    ("rtc", "rtc", 5),
    ("episode", "ep", 4),
    ("server", "server", 14),
    ("sup", "sup%", 5),
    ("errors", "err", 4),
    ("outcome", "last outcome / waiting", 22),
    ("seen", "seen", 5),
]

SERVER_COLUMNS: list[tuple[str, str, int]] = [
    ("mark", "", 1),
    ("replica", "replica", 14),
    ("model", "model", 22),
    ("revision", "rev", 6),
    ("service", "service", 17),
    ("sessions", "sess", 5),
    ("load", "load", 5),
    ("rps", "req/s", 6),
    ("errors", "err", 5),
    ("superseded", "sup", 5),
    ("health", "health", 10),
    ("nmax", "N_max", 6),
    ("headroom", "room", 9),
]


MARK: Cell = ("●", "bold cyan")
NO_MARK: Cell = ("", "")
ALERT: Cell = ("!", "bold white on red")


def _mark(marked: bool, alerting: bool) -> Cell:
    return MARK if marked else (ALERT if alerting else NO_MARK)


UNCHECKED_ORDER_MARK = " ?order"  # after the robot id: the server compared only the action dimension, not names/order


def robot_cells(r: RobotRow, marked: bool = False, alerting: bool = False) -> tuple[Cell, ...]:
    """One robot row. A gone or stale robot keeps its last figures, dimmed, with its last-seen age.
    `net` is the network share of the round trip (RTT - server queue wait - inference); a robot whose action
    order the server could not check carries UNCHECKED_ORDER_MARK after its id."""
    rtt = "—" if not r.rtt_p50_ms else f"{fmt_ms(r.rtt_p50_ms)}/{fmt_ms(r.rtt_p95_ms)}"
    sup = r.superseded_pct
    old = r.is_stale

    def fig(value: object, style: str = "") -> Cell:
        return _t(value, OLD if old else style)

    outcome = r.waiting.replace("waiting: no replica with room", "no room") if r.waiting else (r.last_outcome or "—")
    outcome_style = "yellow" if r.waiting or r.last_outcome not in ("", "ok") else ""
    return (
        _mark(marked, alerting),
        _robot_id(r, alerting),
        _t(r.state.name, STATE_STYLE[r.state]),
        fig(
            fmt_num(r.staleness_s, 2),
            "red" if (r.staleness_s or 0) >= DEFAULT_RULES.staleness_threshold(r.max_action_age_s) else "",
        ),
        fig(fmt_num(r.queue_s, 2), "red" if r.queue_s == 0 and r.state is RobotState.STALLED else ""),
        fig(rtt),
        fig("—" if r.network_ms is None else fmt_ms(r.network_ms)),
        fig("—" if r.delay_steps is None else r.delay_steps),
        fig(rtc_cell(r)),
        fig(r.episode_id),
        fig(r.replica or "—"),
        fig("—" if sup is None else f"{sup:.1f}"),
        fig(r.errors, "red" if r.errors else ""),
        fig(outcome, outcome_style),
        _t(fmt_age(r.seen_age_s), "bold red" if old else age_style(r.seen_age_s)),
    )


def rtc_cell(r: RobotRow) -> str:
    """`d=2`: the session runs real-time chunking with a 2-step inference delay; `off`: chunks are appended
    (the server's policy has no RTC, or the robot turned it off); `—` before a session or from an older robot."""
    if r.rtc == "on":
        return f"d={r.delay_steps or 0}"
    return "off" if r.rtc == "off" else "—"


def rtc_text(r: RobotRow) -> str:
    """The detail screen's words for the same thing."""
    if r.rtc == "on":
        return f"on, inference delay {r.delay_steps or 0} steps"
    if r.rtc == "off":
        return "off (chunks are appended)"
    return "—"


def robot_id_width(r: RobotRow) -> int:
    """Characters the robot cell needs to show the id whole (with its `?order` mark)."""
    return len(r.robot_id) + (len(UNCHECKED_ORDER_MARK) if r.action_order == "unchecked" else 0)


def _robot_id(r: RobotRow, alerting: bool) -> Cell:
    if r.action_order != "unchecked":
        return _t(r.robot_id, "bold red" if alerting else "bold")
    return _t(r.robot_id + UNCHECKED_ORDER_MARK, "bold red" if alerting else "bold yellow")


def room_text(s: ServerRow) -> str:
    """`+2 cap` / `+87 N_max` / `0 drain` / `0 cordon`; the word names what limits the room."""
    return capacity.room_text(s.headroom, s.room_limit)


def server_replica_text(s: ServerRow) -> str:
    """The replica, and for a server the router refuses the certificate it was refused (`CN=...`)."""
    return f"{s.replica} CN={s.cn}" if s.is_refused and s.cn else s.replica


def server_replica_width(rows: list[ServerRow]) -> int:
    """The replica column a refused row's `CN=...` needs (0: the column's own width does)."""
    return max((len(server_replica_text(s)) for s in rows if s.is_refused), default=0)


def server_cells(s: ServerRow, marked: bool = False, alerting: bool = False) -> tuple[Cell, ...]:
    """One server row. Gone/stale: health says since when, and the old figures are dimmed. Refused: the router drops
    its declarations, so its figures are unknown (`—`, never zeros) and health says how recently it was refused."""
    if s.is_refused:
        unknown = _t("—", OLD)
        return (
            _mark(marked, alerting),
            _t(server_replica_text(s), "bold red"),
            _t(s.model_id or "—"),
            _t(s.revision or "—"),
            _t(s.service or "—"),
            *(unknown,) * 5,
            _t(f"refused {fmt_age(s.seen_age_s)}", SERVER_HEALTH_STYLE["refused"]),
            unknown,
            unknown,
        )
    sessions = f"{s.active_sessions}/{s.max_sessions}" if s.max_sessions else f"{s.active_sessions}/—"
    room_style = "red" if s.headroom is not None and s.headroom < 0 else ("yellow" if s.headroom == 0 else "")
    old = s.is_stale

    def fig(value: object, style: str = "") -> Cell:
        return _t(value, OLD if old else style)

    health = f"{s.health} {fmt_age(s.seen_age_s)}" if old else s.health
    return (
        _mark(marked, alerting),
        _t(s.replica, "bold red" if alerting else "bold"),
        _t(s.model_id or "—"),
        _t(s.revision or "—"),
        _t(s.service or "—"),
        fig(sessions),
        fig(f"{s.load:.2f}"),
        fig(fmt_num(s.requests_per_s, 1)),
        fig("—" if s.errors is None else f"{s.errors:.0f}", "red" if s.errors else ""),
        fig("—" if s.superseded is None else f"{s.superseded:.0f}"),
        _t(health, SERVER_HEALTH_STYLE.get(s.health, "")),
        fig("—" if s.n_max is None else f"{s.n_max:.1f}"),
        _t(room_text(s), room_style),
    )


def header_text(
    snap: FleetSnapshot,
    sort: str,
    query: str,
    faults_only: bool,
    read_only: bool,
    paused: bool,
    marked: int = 0,
    alerts: int = 0,
) -> Text:
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
        t.append(f"{counts[state]} {state.name}", style=STATE_STYLE[state])
    health: dict[str, int] = {}
    for s in snap.servers:
        health[s.health] = health.get(s.health, 0) + 1
    t.append(f"   servers {len(snap.servers)}:")
    for h in sorted(health):
        t.append(" ")
        t.append(f"{health[h]} {h}", style=SERVER_HEALTH_STYLE.get(h, ""))
    t.append("\n")
    t.append(
        f"sort {sort}   filter {query or '—'}   faults only {'on' if faults_only else 'off'}", style="bright_black"
    )
    if marked:
        t.append(f"   marked {marked}", style="bold cyan")
    t.append("   alerts ")
    t.append(f" {alerts} open " if alerts else "0", style="bold white on red" if alerts else "bright_black")
    return t


GROUP_PREFIX = "\x1egroup:"  # row keys of group header rows (never a robot or server key)
GroupHeader = tuple[str, list[RobotRow]]  # a group header row: (group name, the group's robots)


def group_name(r: RobotRow, by: str) -> str:
    if by == "server":
        return r.replica or "(no server)"
    return " / ".join(x for x in r.ns if x) or "(unknown namespace)"


def group_cells(name: str, rows: list[RobotRow], folded: bool, alerting: int = 0) -> tuple[Cell, ...]:
    """A group header: one cell spanning the line."""
    faults = sum(1 for r in rows if r.state.is_fault)
    text = (
        f"{'▸' if folded else '▾'} {name}  ({len(rows)} robots, {faults} in fault"
        + (f", {alerting} alerting" if alerting else "")
        + ")"
    )
    return ((text, "bold reverse" if faults else "bold"),)


def grouped(rows: list[RobotRow], by: str, folded: set[str]) -> list[tuple[str, RobotRow | GroupHeader]]:
    """(key, row) pairs with a header row per group, groups by name, rows in the given order, folded groups
    showing only their header."""
    groups: dict[str, list[RobotRow]] = {}
    for r in rows:
        groups.setdefault(group_name(r, by), []).append(r)
    out: list[tuple[str, RobotRow | GroupHeader]] = []
    for name in sorted(groups):
        out.append((GROUP_PREFIX + name, (name, groups[name])))
        if name not in folded:
            out.extend((r.key, r) for r in groups[name])
    return out
