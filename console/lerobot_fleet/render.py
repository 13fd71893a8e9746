"""Every piece of console text, built by pure functions from model rows (no Textual, no store, no clock).

Cells are (plain text, style) pairs and texts are rich `Text` built with `append`, never markup: wire
strings are shown verbatim. tests/console/test_render.py checks these on fixtures, without an app.
"""

from __future__ import annotations

from rich.text import Text

from . import capacity
from .alerts import DEFAULT_RULES, Alert
from .model import (
    ROBOT_SORT_KEYS,
    SERVER_HEALTH_STYLE,
    SERVER_SORT_KEYS,
    SEVERITY_STYLE,
    AuditEntry,
    FleetEvent,
    FleetSnapshot,
    RobotDetail,
    RobotRow,
    RobotState,
    ServerDetail,
    ServerRow,
    SessionEntry,
    fmt_age,
    fmt_ms,
    fmt_num,
    sparkline,
)

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
        _t(r.state.name, r.state.style),
        fig(fmt_num(r.staleness_s, 2), "red" if (r.staleness_s or 0) >= DEFAULT_RULES.staleness_threshold(r.max_action_age_s) else ""),
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


def server_cells(s: ServerRow, marked: bool = False, alerting: bool = False) -> tuple[Cell, ...]:
    """One server row. Gone/stale: health says since when, and the old figures are dimmed."""
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


CONNECTION_STYLE = {
    "connected": "bold green",
    "disconnected": "bold white on red",
    "connecting": "bold yellow",
    "replay": "bold cyan",
    "fake": "bold cyan",
}


def header_text(
    snap: FleetSnapshot, sort: str, query: str, faults_only: bool, read_only: bool, paused: bool, marked: int = 0, alerts: int = 0
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
    if marked:
        t.append(f"   marked {marked}", style="bold cyan")
    t.append("   alerts ")
    t.append(f" {alerts} open " if alerts else "0", style="bold white on red" if alerts else "bright_black")
    return t


# ---------------------------------------------------------------- sorting, titles, help


def sort_label(table: str, column: str, reverse: bool) -> str:
    keys = ROBOT_SORT_KEYS if table == "robots" else SERVER_SORT_KEYS
    return keys.get(column, ("?", None))[0] + (" (reversed)" if reverse else "")


def section_title(name: str, shown: int, total: int, marked: int = 0) -> Text:
    t = Text(f"{name} ({shown} of {total} shown)")
    if marked:
        t.append(f"  {marked} marked", style="bold cyan")
    return t


_KEY_NAMES = {"question_mark": "?", "slash": "/", "space": "space", "escape": "esc", "enter": "enter", "exclamation_mark": "!"}


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


# ---------------------------------------------------------------- detail screens


def _secs(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f} s"


def robot_summary_text(d: RobotDetail) -> Text:
    """The robot detail's head: identity, link, figures in rounded units, and why it waits (if it does)."""
    r = d.row
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("robot ", style="bold")
    t.append(r.robot_id, style="bold")
    t.append("  ")
    t.append(f" {r.state.name} ", style=r.state.style)
    token = "alive" if r.alive else ("gone" if r.alive is False else "—")
    t.append(f"  token {token}  seen {fmt_age(r.seen_age_s)} ago")
    if r.is_stale:
        t.append("  (figures below are the last received, not live)", style="bold red")
    t.append("\n")
    t.append(f"model {r.model_id or '—'}  rev {r.revision or '—'}  service {r.service or '—'}\n")
    t.append(f"session {r.session_id or '—'}  server {r.replica or '—'}  episode {r.episode_id}  fps {r.fps:.1f}  "
             f"rtc {rtc_text(r)}\n")
    delay = "—" if r.delay_steps is None else f"{r.delay_steps} steps"
    rtt = "—" if not r.rtt_p50_ms else f"{fmt_ms(r.rtt_p50_ms)}/{fmt_ms(r.rtt_p95_ms)} ms"
    t.append(
        f"requests {r.requests}  superseded {r.superseded}  errors {r.errors}  fallbacks {r.fallback_count}  "
        f"delay {delay}  queue {_secs(r.queue_s)}  staleness {_secs(r.staleness_s)}  rtt p50/p95 {rtt}\n"
    )
    if r.network_ms is not None:
        t.append(f"round trip split (median): server queue wait {fmt_ms(r.queue_wait_ms or 0.0)} ms  inference "
                 f"{fmt_ms(r.inference_ms or 0.0)} ms  network {fmt_ms(r.network_ms)} ms\n")
    if r.action_order == "unchecked":
        t.append("action order NOT checked: the policy names no actions, only the dimension was compared "
                 "(set action_feature_names in the server manifest)\n", style="bold yellow")
    t.append("last outcome ")
    t.append(r.last_outcome or "—", style="" if r.last_outcome in ("", "ok") else "yellow")
    if r.waiting:
        t.append("\n")
        t.append(r.waiting, style="bold yellow")
        t.append("\n  frees when a session ends on one of these, a drain is undone, or a replica is added", style="bright_black")
    return t


def history_text(history: tuple[tuple[float, str], ...], limit: int = 8) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    for age, state in history[-limit:]:
        t.append(f"{fmt_age(age):>5} ago  ")
        t.append(state + "\n", style=RobotState.parse(state).style)
    t.rstrip()
    return t


def trend_text(name: str, values: tuple[float, ...], unit: str, digits: int = 0, width: int = 60) -> Text:
    """One labelled sparkline with last/min/max in the given unit."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{name:<10} ", style="bold")
    if not values:
        t.append("no samples yet", style="bright_black")
        return t
    t.append(sparkline(values, width).ljust(width), style="cyan")
    t.append(f"  last {values[-1]:.{digits}f}  min {min(values):.{digits}f}  max {max(values):.{digits}f} {unit}")
    return t


def audit_text(entries: tuple[AuditEntry, ...], limit: int = 12) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if not entries:
        t.append("no audit lines received", style="bright_black")
        return t
    t.append(f"{'age':>5} {'replica':<10} {'robot':<12} {'seq':>6} {'ep':>4} {'queue':>6} {'infer':>6} {'sup':>3}  outcome\n", style="bold")
    for e in entries[-limit:]:
        t.append(f"{fmt_age(e.age_s):>5} {e.replica[:10]:<10} {e.client_uuid[:12]:<12} {e.seq_id:>6} {e.episode_id:>4} {e.queue_wait_ms:>6.1f} {e.inference_ms:>6.1f} {e.superseded:>3}  ")
        t.append(e.outcome, style="" if e.outcome == "ok" else "yellow")
        if e.error:
            t.append(f" {e.error}", style="red")
        t.append("\n")
    t.rstrip()
    return t


def server_summary_text(d: ServerDetail) -> Text:
    s = d.row
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("server ", style="bold")
    t.append(s.replica, style="bold")
    t.append("  health ")
    t.append(s.health, style=SERVER_HEALTH_STYLE.get(s.health, ""))
    token = "alive" if s.alive else ("gone" if s.alive is False else "—")
    t.append(f"  token {token}  status {fmt_age(s.status_age_s)} ago")
    if s.is_stale:
        t.append(f"  last heard {fmt_age(s.seen_age_s)} ago: figures below are old", style="bold red")
    t.append("\n")
    t.append(f"model {s.model_id or '—'}  rev {s.revision or '—'}  service {s.service or '—'}\n")
    t.append(f"sessions {s.active_sessions}/{s.max_sessions}  load {s.load:.2f}  inference p50 {s.inference_ms_p50:.1f} ms  room ")
    t.append(room_text(s))
    if s.room_limit:
        nm = "—" if s.n_max is None else f"{s.n_max:.1f}"
        why = {"draining": " (draining: takes no new robots)",
               "cordon": " (cordoned: takes no new robots; its sessions keep streaming; U uncordons)"}.get(s.room_limit)
        t.append(why or f" = min(N_max {nm}, cap {s.max_sessions or '—'}) − {s.active_sessions} active, limited by {s.room_limit}",
                 style="bright_black")
    t.append(f"\nmetrics {s.metrics_url or '—'}")
    for note in d.notes:
        t.append(f"\n{note}", style="red")
    return t


def sessions_text(sessions: tuple[SessionEntry, ...]) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if not sessions:
        t.append("no sessions", style="bright_black")
        return t
    t.append(f"{'session':<24} {'robot':<14} {'ep':>4} {'requests':>9} {'sup':>5} {'err':>5}\n", style="bold")
    for x in sessions:
        t.append(f"{x.session_id[:24]:<24} {x.client_uuid[:14]:<14} {x.episode_id:>4} {x.requests:>9} {x.superseded:>5} {x.errors:>5}\n")
    t.rstrip()
    return t


def pairs_text(pairs: tuple[tuple[str, str], ...], width: int = 34) -> Text:
    t = Text(no_wrap=True)
    for name, value in pairs:
        t.append(f"{name:<{width}} {value}\n")
    t.rstrip()
    return t


def metrics_text(metrics: tuple[tuple[str, float], ...]) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if metrics:
        t.append("  ".join(f"{k}={v:g}" for k, v in metrics))
    else:
        t.append("not scraped yet", style="bright_black")
    return t


def robot_trends_text(d: RobotDetail, width: int = 60) -> Text:
    t = trend_text("rtt p50", d.rtt_history, "ms", 0, width)
    t.append("\n")
    t.append_text(trend_text("staleness", d.staleness_history, "s", 2, width))
    t.append("\n")
    t.append_text(trend_text("queue", d.queue_history, "s", 2, width))
    return t


# ---------------------------------------------------------------- confirmations


def drain_body(snap: FleetSnapshot, replica: str) -> Text:
    s = snap.server(replica)
    t = Text()
    if s is None:
        t.append(f"Server {replica} is not in the current view.")
        return t
    t.append("Server ")
    t.append(s.replica, style="bold")
    t.append(f" serving {s.model_id} @ {s.revision}, service ")
    t.append(s.service, style="bold")
    t.append(".\n\nIt stops accepting new sessions, finishes requests in flight, and tells its robots to move.\n")
    if s.session_robots:
        t.append(f"{len(s.session_robots)} session(s) will move: ", style="bold")
        t.append(", ".join(s.session_robots))
        t.append("\n")
    else:
        t.append("It has no sessions: nothing moves.\n")
    t.append_text(_peers_room(snap, [s]))
    return t


def _peers_room(snap: FleetSnapshot, leaving: list[ServerRow], moving: bool = True) -> Text:
    """The other replicas of each namespace with room; with `moving` (a drain), how many of the robots that move will
    find none, by name. Room is the console's (`capacity.room`): min(N_max, cap) − active on healthy replicas."""
    t = Text()
    names = {s.replica for s in leaving}
    for ns in sorted({s.ns for s in leaving}):
        peers = [p for p in snap.servers if p.replica not in names and p.ns == ns]
        room = sorted((p for p in peers if p.health in ("ok", "cold") and (p.headroom or 0) > 0), key=lambda p: p.replica)
        if room:
            t.append("Replicas with room: " + ", ".join(f"{p.replica} ({room_text(p)})" for p in room) + "\n")
        else:
            t.append(f"No other replica of {ns.service or 'this service'} has room: "
                     + ("its robots will wait and back off.\n" if moving else "new robots will wait.\n"), style="bold red")
        if not moving:
            continue
        movers = sorted(r for s in leaving if s.ns == ns for r in s.session_robots)
        waiting = sorted(r.robot_id for r in snap.robots if r.ns == ns and r.waiting)
        free = sum(p.headroom or 0 for p in room)
        short = min(len(movers), len(movers) + len(waiting) - free)
        if movers and short > 0:
            who = ", ".join(movers) if short >= len(movers) else f"{short} of {', '.join(movers)} (room for {free}: whoever asks first)"
            t.append(f"{short} robot(s) will find no room and wait: {who}", style="bold red")
            if waiting:
                t.append(f"; {len(waiting)} already wait(s) for a seat: {', '.join(waiting)}", style="bold red")
            t.append("\n")
    t.rstrip()
    return t


def cordon_body(snap: FleetSnapshot, targets: tuple[str, ...], on: bool) -> Text:
    """Cordon: every target with the sessions that keep streaming, and where new robots go. Uncordon: the room back."""
    t = Text()
    rows = [snap.server(x) for x in targets]
    if on:
        t.append("These servers stop admitting new sessions; the sessions they have keep streaming:\n" if len(targets) > 1 else
                 "It stops admitting new sessions; the sessions it has keep streaming.\n")
    else:
        t.append("These servers admit new sessions again:\n" if len(targets) > 1 else "It admits new sessions again.\n")
    for x, s in zip(targets, rows, strict=True):
        t.append(f"  • {x}", style="bold")
        if s is None:
            t.append("  (not in the current view)\n")
            continue
        t.append(f"  {s.model_id} @ {s.revision}, service {s.service}: {s.active_sessions} session(s)")
        if on and s.session_robots:
            t.append(f" keep streaming ({', '.join(s.session_robots)})")
        if not on:
            t.append(f"; room once uncordoned {capacity.room_text(*capacity.room(s.n_max, s.max_sessions, s.active_sessions, s.draining))}")
        t.append("\n")
    if on:
        t.append("New robots of the service go to:\n")
        t.append_text(_peers_room(snap, [s for s in rows if s is not None], moving=False))
    t.rstrip()
    return t


def reset_body(snap: FleetSnapshot, key: str) -> Text:
    r = snap.robot(key)
    t = Text()
    if r is None:
        t.append(f"Robot {key} is not in the current view.")
        return t
    t.append("Robot ")
    t.append(r.robot_id, style="bold")
    t.append(f" is {r.state.name} in episode {r.episode_id}")
    if r.replica:
        t.append(f", session {r.session_id} on server {r.replica}")
    t.append(".\n\n")
    t.append(
        f"It ends episode {r.episode_id} at its next safe point and starts episode {r.episode_id + 1}: "
        "its action queue is cleared and the server resets the session's episode state. "
        "Other robots are not affected."
    )
    return t


ACTION_LABELS = {"drain": "Drain", "cordon": "Cordon", "uncordon": "Uncordon", "reset": "Reset episode"}


def confirm_title(kind: str, targets: tuple[str, ...], snap: FleetSnapshot) -> str:
    if kind in ("cordon", "uncordon"):
        return f"{ACTION_LABELS[kind]} server {targets[0]}?" if len(targets) == 1 else f"{ACTION_LABELS[kind]} {len(targets)} servers?"
    if len(targets) == 1:
        if kind == "drain":
            return f"Drain server {targets[0]}?"
        r = snap.robot(targets[0])
        return f"Reset the episode of robot {r.robot_id if r else targets[0]}?"
    return f"Drain {len(targets)} servers?" if kind == "drain" else f"Reset the episodes of {len(targets)} robots?"


def confirm_body(kind: str, targets: tuple[str, ...], snap: FleetSnapshot) -> Text:
    """One target: the full impact. Several: every target on its own line, then the shared impact."""
    if kind in ("cordon", "uncordon"):
        return cordon_body(snap, targets, kind == "cordon")
    if len(targets) == 1:
        return drain_body(snap, targets[0]) if kind == "drain" else reset_body(snap, targets[0])
    t = Text()
    if kind == "drain":
        rows = [snap.server(x) for x in targets]
        t.append("These servers stop accepting new sessions and tell their robots to move:\n")
        for x, s in zip(targets, rows, strict=True):
            t.append(f"  • {x}", style="bold")
            t.append(f"  {s.active_sessions} session(s), {s.service}\n" if s else "  (not in the current view)\n")
        t.append_text(_peers_room(snap, [s for s in rows if s is not None]))
    else:
        t.append("Each robot ends its episode at its next safe point and starts the next one:\n")
        for x in targets:
            r = snap.robot(x)
            t.append(f"  • {r.robot_id if r else x}", style="bold")
            t.append(f"  {r.state.name}, episode {r.episode_id} → {r.episode_id + 1}, server {r.replica or '—'}\n" if r else "  (not in the current view)\n")
        t.append("Other robots are not affected.")
    t.rstrip()
    return t


def results_text(kind: str, results: list[tuple[str, bool, str]]) -> tuple[str, bool]:
    """Per-target results of a (bulk) action as one result block, and whether all succeeded."""
    if len(results) == 1:
        return results[0][2], results[0][1]
    ok = sum(1 for _, good, _ in results if good)
    lines = [f"{kind}: {ok} of {len(results)} ok"] + [f"  {line}" for _, _, line in results]
    return "\n".join(lines), ok == len(results)


# ---------------------------------------------------------------- alerts, events, groups


def alerts_text(alerts: list[Alert], now: float, limit: int = 200) -> Text:
    """Open alerts first (newest first), then cleared ones, each with when it started and cleared."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not alerts:
        t.append("no alerts", style="bright_black")
        return t
    t.append(f"{'state':<8} {'rule':<12} {'role':<7} {'target':<18} {'started':>8} {'cleared':>8}  message\n", style="bold")
    for a in alerts[:limit]:
        is_open = a.cleared_s is None
        style = "bold red" if is_open else "bright_black"
        t.append(f"{'OPEN' if is_open else 'cleared':<8}", style=style)
        t.append(f" {a.rule:<12} {a.role:<7} {a.name[:18]:<18} {fmt_age(now - a.started_s) + ' ago':>8} ")
        t.append(f"{'—' if is_open else fmt_age(now - a.cleared_s) + ' ago':>8}  ")
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


GROUP_PREFIX = "\x1egroup:"  # row keys of group header rows (never a robot or server key)


def group_name(r: RobotRow, by: str) -> str:
    if by == "server":
        return r.replica or "(no server)"
    return " / ".join(x for x in r.ns if x) or "(unknown namespace)"


def group_cells(name: str, rows: list[RobotRow], folded: bool, alerting: int = 0) -> tuple[Cell, ...]:
    """A group header: one cell spanning the line."""
    faults = sum(1 for r in rows if r.state.is_fault)
    text = f"{'▸' if folded else '▾'} {name}  ({len(rows)} robots, {faults} in fault" + (f", {alerting} alerting" if alerting else "") + ")"
    return ((text, "bold reverse" if faults else "bold"),)


def grouped(rows: list[RobotRow], by: str, folded: set[str]) -> list[tuple[str, object]]:
    """(key, row) pairs with a header row per group, groups by name, rows in the given order, folded groups
    showing only their header."""
    groups: dict[str, list[RobotRow]] = {}
    for r in rows:
        groups.setdefault(group_name(r, by), []).append(r)
    out: list[tuple[str, object]] = []
    for name in sorted(groups):
        out.append((GROUP_PREFIX + name, (name, groups[name])))
        if name not in folded:
            out.extend((r.key, r) for r in groups[name])
    return out
