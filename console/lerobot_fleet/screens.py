"""Screens: the fleet overview, robot and server details, and the action confirmation dialog."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Static

from .model import (
    ROBOT_SORTS,
    AuditEntry,
    FleetSnapshot,
    RobotRow,
    ServerRow,
    fmt_age,
    robot_matches,
    server_matches,
    sort_robots,
    sort_servers,
    sparkline,
)
from .render import ROBOT_COLUMNS, SERVER_COLUMNS, header_text, robot_cells, server_cells
from .widgets import KeyedTable

if TYPE_CHECKING:
    from .app import FleetConsoleApp

SORT_ORDER = list(ROBOT_SORTS)


class LiveScreen(Screen[None]):
    """A screen the app's timer refreshes from the latest snapshot."""

    @property
    def fleet(self) -> FleetConsoleApp:
        return self.app  # type: ignore[return-value]

    def apply_snapshot(self, snap: FleetSnapshot) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def on_screen_resume(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("drain", "reset") and self.fleet.read_only:
            return False  # hidden from the footer and inert
        return True

    def result_text(self) -> Text:
        text, ok = self.fleet.last_result
        if not text:
            return Text("")
        return Text(text, style="green" if ok else ("bold red" if ok is False else "yellow"), no_wrap=True, overflow="ellipsis")


class FleetScreen(LiveScreen):
    BINDINGS = [
        Binding("enter", "open", "Details", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("f", "faults", "Faults only"),
        Binding("o", "sort", "Sort"),
        Binding("p", "pause", "Pause"),
        Binding("d", "drain", "Drain server"),
        Binding("r", "reset", "Reset episode"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_text = ""
        self.faults_only = False
        self.sort_key = "state"
        self._snap: FleetSnapshot | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static("Robots", classes="section", id="robots-title")
        yield KeyedTable(ROBOT_COLUMNS, id="robots")
        yield Static("Servers", classes="section", id="servers-title")
        yield KeyedTable(SERVER_COLUMNS, id="servers")
        yield Static(classes="result", id="result")
        yield Input(placeholder="filter: text matches robot/server/state/outcome; !text inverts; enter keeps, esc clears", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#robots", KeyedTable).focus()
        self.apply_snapshot(self.fleet.current_snapshot())

    # ------------------------------------------------------------ rendering

    def visible_robots(self, snap: FleetSnapshot) -> list[RobotRow]:
        rows = [r for r in snap.robots if robot_matches(r, self.query_text) and (not self.faults_only or r.state.is_fault)]
        return sort_robots(rows, self.sort_key)

    def visible_servers(self, snap: FleetSnapshot) -> list[ServerRow]:
        rows = [s for s in snap.servers if server_matches(s, self.query_text) and (not self.faults_only or s.health != "ok")]
        return sort_servers(rows)

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        self._snap = snap
        with self.app.batch_update():
            self.query_one("#header", Static).update(
                header_text(snap, ROBOT_SORTS[self.sort_key], self.query_text, self.faults_only, self.fleet.read_only, self.fleet.paused)
            )
            robots = self.visible_robots(snap)
            servers = self.visible_servers(snap)
            self.query_one("#robots", KeyedTable).reconcile([(r.robot_id, r) for r in robots], robot_cells)
            self.query_one("#servers", KeyedTable).reconcile([(s.replica, s) for s in servers], server_cells)
            self.query_one("#robots-title", Static).update(Text(f"Robots ({len(robots)} of {len(snap.robots)} shown)"))
            self.query_one("#servers-title", Static).update(Text(f"Servers ({len(servers)} of {len(snap.servers)} shown)"))
            self.query_one("#result", Static).update(self.result_text())

    def refresh_view(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    # ------------------------------------------------------------ actions

    def on_data_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        table = self.focused if isinstance(self.focused, KeyedTable) else self.query_one("#robots", KeyedTable)
        key = table.selected_key
        if key is None:
            return
        if table.id == "robots":
            self.app.push_screen(RobotDetailScreen(key))
        else:
            self.app.push_screen(ServerDetailScreen(key))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        box.value = self.query_text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("visible")
        self.query_one("#robots", KeyedTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("visible")
        self.query_text = ""
        self.query_one("#robots", KeyedTable).focus()
        self.refresh_view()

    def action_faults(self) -> None:
        self.faults_only = not self.faults_only
        self.refresh_view()

    def action_sort(self) -> None:
        self.sort_key = SORT_ORDER[(SORT_ORDER.index(self.sort_key) + 1) % len(SORT_ORDER)]
        self.refresh_view()

    def action_pause(self) -> None:
        self.fleet.paused = not self.fleet.paused
        self.refresh_view()

    def action_drain(self) -> None:
        servers = self.query_one("#servers", KeyedTable)
        if self.focused is not servers:
            self.fleet.set_result("drain: move the cursor to the servers table (tab) and pick a server first", None)
            self.refresh_view()
            return
        key = servers.selected_key
        if key is not None:
            self.fleet.confirm_drain(key)

    def action_reset(self) -> None:
        robots = self.query_one("#robots", KeyedTable)
        if self.focused is not robots:
            self.fleet.set_result("reset: move the cursor to the robots table (tab) and pick a robot first", None)
            self.refresh_view()
            return
        key = robots.selected_key
        if key is not None:
            self.fleet.confirm_reset(key)


def _audit_lines(entries: tuple[AuditEntry, ...], limit: int = 12) -> Text:
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


class RobotDetailScreen(LiveScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reset", "Reset episode"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, robot_id: str) -> None:
        super().__init__()
        self.robot_id = robot_id

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="summary", classes="detail-body")
            yield Static("State history", classes="section")
            yield Static(id="history", classes="detail-body")
            yield Static("Latency (RTT p50, ms)", classes="section")
            yield Static(id="latency", classes="detail-body")
            yield Static("Audit tail", classes="section")
            yield Static(id="audit", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        d = self.fleet.store.robot_detail(self.robot_id)
        summary = Text(no_wrap=True, overflow="ellipsis")
        if d is None:
            summary.append(f"robot {self.robot_id}: not known to the console", style="red")
            self.query_one("#summary", Static).update(summary)
            return
        r = d.row
        summary.append("robot ", style="bold")
        summary.append(r.robot_id, style="bold")
        summary.append("  ")
        summary.append(f" {r.state.name} ", style=r.state.style)
        summary.append(f"  token {'alive' if r.alive else ('gone' if r.alive is False else '—')}  seen {fmt_age(r.seen_age_s)} ago\n")
        summary.append(f"model {r.model_id or '—'}  rev {r.revision or '—'}  service {r.service or '—'}\n")
        summary.append(f"session {r.session_id or '—'}  server {r.replica or '—'}  episode {r.episode_id}  fps {r.fps:.1f}\n")
        summary.append(
            f"requests {r.requests}  superseded {r.superseded}  errors {r.errors}  fallbacks {r.fallback_count}  "
            f"delay {r.delay_steps if r.delay_steps is not None else '—'} steps  queue {r.queue_s if r.queue_s is not None else '—'} s  "
            f"staleness {r.staleness_s if r.staleness_s is not None else '—'} s\n"
        )
        summary.append("last outcome ")
        summary.append(r.last_outcome or "—", style="" if r.last_outcome in ("", "ok") else "yellow")
        hist = Text(no_wrap=True, overflow="ellipsis")
        for age, state in d.history[-8:]:
            hist.append(f"{fmt_age(age):>5} ago  ")
            hist.append(state + "\n")
        hist.rstrip()
        lat = Text(no_wrap=True)
        if d.rtt_history:
            lat.append(sparkline(d.rtt_history, 60), style="cyan")
            lat.append(f"  last {d.rtt_history[-1]:.0f}  min {min(d.rtt_history):.0f}  max {max(d.rtt_history):.0f}")
        else:
            lat.append("no latency samples yet", style="bright_black")
        with self.app.batch_update():
            self.query_one("#summary", Static).update(summary)
            self.query_one("#history", Static).update(hist)
            self.query_one("#latency", Static).update(lat)
            self.query_one("#audit", Static).update(_audit_lines(d.audit))
            self.query_one("#result", Static).update(self.result_text())

    def action_reset(self) -> None:
        self.fleet.confirm_reset(self.robot_id)


class ServerDetailScreen(LiveScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("d", "drain", "Drain server"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="summary", classes="detail-body")
            yield Static("Sessions", classes="section")
            yield Static(id="sessions", classes="detail-body")
            yield Static("Capacity (spec P10: N_max = min(0.8/(r·t), (H·dt/2 − RTT)/t))", classes="section")
            yield Static(id="capacity", classes="detail-body")
            yield Static("Metrics (/metrics, summed over labels)", classes="section")
            yield Static(id="metrics", classes="detail-body")
            yield Static("Audit tail", classes="section")
            yield Static(id="audit", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        d = self.fleet.store.server_detail(self.replica)
        summary = Text(no_wrap=True, overflow="ellipsis")
        if d is None:
            summary.append(f"server {self.replica}: not known to the console", style="red")
            self.query_one("#summary", Static).update(summary)
            return
        s = d.row
        summary.append("server ", style="bold")
        summary.append(s.replica, style="bold")
        summary.append(f"  health {s.health}  token {'alive' if s.alive else ('gone' if s.alive is False else '—')}")
        summary.append(f"  status {fmt_age(s.status_age_s)} ago\n")
        summary.append(f"model {s.model_id or '—'}  rev {s.revision or '—'}  service {s.service or '—'}\n")
        summary.append(f"sessions {s.active_sessions}/{s.max_sessions}  load {s.load:.2f}  inference p50 {s.inference_ms_p50:.1f} ms\n")
        summary.append(f"metrics {s.metrics_url or '—'}")
        for note in d.notes:
            summary.append(f"\n{note}", style="red")
        sess = Text(no_wrap=True, overflow="ellipsis")
        if d.sessions:
            sess.append(f"{'session':<24} {'robot':<14} {'ep':>4} {'requests':>9} {'sup':>5} {'err':>5}\n", style="bold")
            for x in d.sessions:
                sess.append(f"{x.session_id[:24]:<24} {x.client_uuid[:14]:<14} {x.episode_id:>4} {x.requests:>9} {x.superseded:>5} {x.errors:>5}\n")
            sess.rstrip()
        else:
            sess.append("no sessions", style="bright_black")
        cap = Text(no_wrap=True)
        for name, value in d.capacity_inputs:
            cap.append(f"{name:<34} {value}\n")
        cap.rstrip()
        met = Text(no_wrap=True, overflow="ellipsis")
        if d.metrics:
            met.append("  ".join(f"{k}={v:g}" for k, v in d.metrics))
        else:
            met.append("not scraped yet", style="bright_black")
        with self.app.batch_update():
            self.query_one("#summary", Static).update(summary)
            self.query_one("#sessions", Static).update(sess)
            self.query_one("#capacity", Static).update(cap)
            self.query_one("#metrics", Static).update(met)
            self.query_one("#audit", Static).update(_audit_lines(d.audit))
            self.query_one("#result", Static).update(self.result_text())

    def action_drain(self) -> None:
        self.fleet.confirm_drain(self.replica)


class ConfirmScreen(ModalScreen[bool]):
    """Names the target and what the action affects; Cancel has the focus, `y` confirms."""

    BINDINGS = [
        Binding("y", "confirm", "Confirm"),
        Binding("n,escape", "cancel", "Cancel"),
    ]

    def __init__(self, title: str, body: Text, confirm_label: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text), id="dialog-title")
            yield Static(self.body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel (n)", id="cancel", variant="default")
                yield Button(f"{self.confirm_label} (y)", id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


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
    peers = [p for p in snap.servers if p.replica != s.replica and p.model_id == s.model_id and p.service == s.service]
    room = [p for p in peers if p.health == "ok" and p.active_sessions < p.max_sessions]
    if room:
        t.append("Replicas with room: " + ", ".join(f"{p.replica} ({p.max_sessions - p.active_sessions} free)" for p in room))
    else:
        t.append("No other replica of this service has room: its robots will wait and back off.", style="bold red")
    return t


def reset_body(snap: FleetSnapshot, robot_id: str) -> Text:
    r = snap.robot(robot_id)
    t = Text()
    if r is None:
        t.append(f"Robot {robot_id} is not in the current view.")
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
