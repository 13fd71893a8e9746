"""Screens: the fleet overview, one detail base for robots and servers, help, and the confirmation dialog.

Screens render what the app hands down (`apply_snapshot`) with the pure functions of `render`, and post
messages up (`messages`) for everything the app owns: actions, other screens, pause, the result line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Static

from . import render
from .export import record
from .messages import ActionRequested, DetailRequested, ExportRequested, PauseToggled, ResultNoted, ScreenRequested
from .model import (
    ROBOT_SORT_KEYS,
    SERVER_SORT_KEYS,
    FleetSnapshot,
    RobotRow,
    ServerRow,
    event_matches,
    robot_matches,
    server_matches,
    sort_rows,
)
from .store import EVENT_HISTORY
from .widgets import KeyedTable

if TYPE_CHECKING:
    from .app import FleetConsoleApp

ACTIONS = ("drain", "reset")


class LiveScreen(Screen[None]):
    """A screen the app's timer refreshes from the latest snapshot."""

    @property
    def fleet(self) -> FleetConsoleApp:
        return self.app  # type: ignore[return-value]

    def apply_snapshot(self, snap: FleetSnapshot) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def ready(self) -> bool:
        """Composed: a timer tick or a resume can arrive before the widgets exist."""
        return self.is_mounted and bool(self.query("#result"))

    def on_screen_resume(self) -> None:
        if self.ready:
            self.apply_snapshot(self.fleet.current_snapshot())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTIONS and self.fleet.read_only:
            return False  # hidden from the footer and inert
        return True

    def key_help(self) -> list[tuple[str, str]]:
        """(keys, description) for every binding this screen answers (the `?` screen lists these)."""
        out = []
        for b in self.BINDINGS:
            if isinstance(b, Binding) and self.check_action(b.action, ()) is not False:
                out.append((render.key_label(b.key), b.description or b.action))
        return out

    def result_text(self) -> Text:
        return render.result_text(*self.fleet.last_result)

    def note(self, text: str, ok: bool | None = None) -> None:
        self.post_message(ResultNoted(text, ok))

    def action_help(self) -> None:
        self.post_message(ScreenRequested("help"))

    def action_pause(self) -> None:
        self.post_message(PauseToggled())

    def action_alerts(self) -> None:
        self.post_message(ScreenRequested("alerts"))

    def action_events(self) -> None:
        self.post_message(ScreenRequested("events"))

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        """What this screen shows, as records (overridden per screen)."""
        return {}

    def action_export(self, fmt: str = "json") -> None:
        self.post_message(ExportRequested(fmt, type(self).__name__.removesuffix("Screen").lower(), self.export_tables()))


COMMON = [
    Binding("x", "export('json')", "Export JSON", show=False),
    Binding("X", "export('csv')", "Export CSV", show=False),
    Binding("question_mark", "help", "Help"),
    Binding("q", "app.quit", "Quit"),
]


class FleetScreen(LiveScreen):
    BINDINGS = [
        Binding("enter", "open", "Details", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("f", "faults", "Faults only"),
        Binding("o", "sort", "Sort column"),
        Binding("O", "sort_reverse", "Reverse sort", show=False),
        Binding("space", "mark", "Mark", show=False),
        Binding("a", "mark_all", "Mark all shown", show=False),
        Binding("c", "clear_marks", "Clear marks", show=False),
        Binding("g", "group", "Group by server/namespace", show=False),
        Binding("z", "fold", "Fold/unfold group", show=False),
        Binding("p", "pause", "Pause", show=False),
        Binding("exclamation_mark", "alerts", "Alerts"),
        Binding("e", "events", "Events"),
        Binding("d", "drain", "Drain"),
        Binding("r", "reset", "Reset episode"),
        *COMMON,
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_text = ""
        self.faults_only = False
        self.sort_column = {"robots": "state", "servers": "health"}
        self.sort_reverse = {"robots": False, "servers": False}
        self.marks: dict[str, set[str]] = {"robots": set(), "servers": set()}
        self.group_by = ""  # "" | "server" | "namespace"
        self.folded: set[str] = set()
        self._snap: FleetSnapshot | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static("Robots", classes="section", id="robots-title")
        yield KeyedTable(render.ROBOT_COLUMNS, id="robots")
        yield Static("Servers", classes="section", id="servers-title")
        yield KeyedTable(render.SERVER_COLUMNS, id="servers")
        yield Static(classes="result", id="result")
        yield Input(placeholder="filter: text matches robot/server/state/outcome; !text inverts; enter keeps, esc clears", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#robots", KeyedTable).focus()
        self.apply_snapshot(self.fleet.current_snapshot())

    # ------------------------------------------------------------ rendering

    def visible_robots(self, snap: FleetSnapshot) -> list[RobotRow]:
        rows = [r for r in snap.robots if robot_matches(r, self.query_text) and (not self.faults_only or r.state.is_fault)]
        return sort_rows(rows, ROBOT_SORT_KEYS, self.sort_column["robots"], self.sort_reverse["robots"])

    def visible_servers(self, snap: FleetSnapshot) -> list[ServerRow]:
        rows = [s for s in snap.servers if server_matches(s, self.query_text) and (not self.faults_only or s.health != "ok")]
        return sort_rows(rows, SERVER_SORT_KEYS, self.sort_column["servers"], self.sort_reverse["servers"])

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        self._snap = snap
        robots = self.visible_robots(snap)
        servers = self.visible_servers(snap)
        marked_r, marked_s = self.marks["robots"], self.marks["servers"]
        alerting = self.fleet.alerts.targets()
        if self.group_by:
            rows = render.grouped(robots, self.group_by, self.folded)
        else:
            rows = [(r.key, r) for r in robots]

        def robot_cells(row: object) -> tuple:
            if isinstance(row, RobotRow):
                return render.robot_cells(row, row.key in marked_r, row.key in alerting)
            name, members = row  # a group header
            return render.group_cells(name, members, name in self.folded, sum(1 for m in members if m.key in alerting))

        with self.app.batch_update():
            self.query_one("#header", Static).update(
                render.header_text(
                    snap,
                    render.sort_label("robots", self.sort_column["robots"], self.sort_reverse["robots"]),
                    self.query_text, self.faults_only, self.fleet.read_only, self.fleet.paused,
                    marked=len(marked_r) + len(marked_s), alerts=self.fleet.alerts.open_count,
                )
            )
            self.query_one("#robots", KeyedTable).reconcile(rows, robot_cells)
            self.query_one("#servers", KeyedTable).reconcile(
                [(s.replica, s) for s in servers], lambda s: render.server_cells(s, s.replica in marked_s, s.replica in alerting)
            )
            self.query_one("#robots-title", Static).update(render.section_title("Robots", len(robots), len(snap.robots), len(marked_r)))
            self.query_one("#servers-title", Static).update(render.section_title("Servers", len(servers), len(snap.servers), len(marked_s)))
            self.query_one("#result", Static).update(self.result_text())

    def refresh_view(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def _table(self) -> KeyedTable:
        return self.focused if isinstance(self.focused, KeyedTable) else self.query_one("#robots", KeyedTable)

    # ------------------------------------------------------------ actions

    def on_data_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        table = self._table()
        key = table.selected_key
        if key is not None and key.startswith(render.GROUP_PREFIX):
            self.action_fold()
        elif key is not None:
            self.post_message(DetailRequested("robot" if table.id == "robots" else "server", key))

    def action_group(self) -> None:
        """Robots: no grouping -> by server -> by namespace (model / revision / service)."""
        order = ["", "server", "namespace"]
        self.group_by = order[(order.index(self.group_by) + 1) % len(order)]
        self.folded.clear()
        self.refresh_view()

    def action_fold(self) -> None:
        """Fold or unfold the group under the cursor (on a robot row: its group)."""
        if not self.group_by:
            self.note("fold: group the robots first (g)", None)
            self.refresh_view()
            return
        table = self.query_one("#robots", KeyedTable)
        key = table.selected_key or ""
        if key.startswith(render.GROUP_PREFIX):
            name = key[len(render.GROUP_PREFIX):]
        else:
            row = next((r for r in self.visible_robots(self.fleet.current_snapshot()) if r.key == key), None)
            if row is None:
                return
            name = render.group_name(row, self.group_by)
        self.folded.symmetric_difference_update({name})
        self.refresh_view()
        table.select_key(render.GROUP_PREFIX + name)

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        snap = self.fleet.current_snapshot()
        return {"robots": [record(r) for r in self.visible_robots(snap)], "servers": [record(s) for s in self.visible_servers(snap)]}

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
        """Next column of the focused table (every column sorts); `O` reverses."""
        name = self._table().id or "robots"
        order = list(ROBOT_SORT_KEYS if name == "robots" else SERVER_SORT_KEYS)
        self.sort_column[name] = order[(order.index(self.sort_column[name]) + 1) % len(order)]
        self.refresh_view()

    def action_sort_reverse(self) -> None:
        name = self._table().id or "robots"
        self.sort_reverse[name] = not self.sort_reverse[name]
        self.refresh_view()

    def action_mark(self) -> None:
        table = self._table()
        key = table.selected_key
        if key is None or key.startswith(render.GROUP_PREFIX):
            return
        marks = self.marks[table.id or "robots"]
        marks.symmetric_difference_update({key})
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
        self.refresh_view()

    def action_mark_all(self) -> None:
        """Marks every row the focused table shows (after filter and faults-only)."""
        table = self._table()
        snap = self.fleet.current_snapshot()
        if table.id == "servers":
            self.marks["servers"].update(s.replica for s in self.visible_servers(snap))
        else:
            self.marks["robots"].update(r.key for r in self.visible_robots(snap))
        self.refresh_view()

    def action_clear_marks(self) -> None:
        for marks in self.marks.values():
            marks.clear()
        self.refresh_view()

    def _targets(self, name: str, verb: str) -> tuple[str, ...] | None:
        if self.marks[name]:
            return tuple(sorted(self.marks[name]))
        table = self.query_one(f"#{name}", KeyedTable)
        if self.focused is not table or table.selected_key is None or table.selected_key.startswith(render.GROUP_PREFIX):
            self.note(f"{verb}: move the cursor to the {name} table (tab) and pick a row, or mark rows with space", None)
            self.refresh_view()
            return None
        return (table.selected_key,)

    def action_drain(self) -> None:
        targets = self._targets("servers", "drain")
        if targets:
            self.post_message(ActionRequested("drain", targets))

    def action_reset(self) -> None:
        targets = self._targets("robots", "reset")
        if targets:
            self.post_message(ActionRequested("reset", targets))


class DetailScreen(LiveScreen):
    """One detail layout for robots and servers: a summary, titled sections, the result line."""

    SECTIONS: tuple[tuple[str, str], ...] = ()  # (widget id, section title)
    KIND = ""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="summary", classes="detail-body")
            for wid, title in self.SECTIONS:
                yield Static(title, classes="section")
                yield Static(id=wid, classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def texts(self) -> dict[str, Text] | None:  # pragma: no cover - overridden
        """Text for "summary" and each section id; None when the target is unknown."""
        raise NotImplementedError

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        d = self.fleet.store.robot_detail(self.key) if self.KIND == "robot" else self.fleet.store.server_detail(self.key)
        return {} if d is None else {self.KIND: [record(d.row)], "audit": [record(e) for e in d.audit]}

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        texts = self.texts()
        with self.app.batch_update():
            if texts is None:
                self.query_one("#summary", Static).update(Text(f"{self.KIND} {self.key}: not known to the console", style="red"))
            else:
                for wid, text in texts.items():
                    self.query_one(f"#{wid}", Static).update(text)
            self.query_one("#result", Static).update(self.result_text())


class RobotDetailScreen(DetailScreen):
    KIND = "robot"
    SECTIONS = (("history", "State history"), ("trends", "Trends (oldest → newest, about 3 minutes)"), ("audit", "Audit tail"))
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reset", "Reset episode"),
        *COMMON,
    ]

    @property
    def robot_id(self) -> str:
        return self.key

    def texts(self) -> dict[str, Text] | None:
        d = self.fleet.store.robot_detail(self.key)
        if d is None:
            return None
        return {
            "summary": render.robot_summary_text(d),
            "history": render.history_text(d.history),
            "trends": render.robot_trends_text(d),
            "audit": render.audit_text(d.audit),
        }

    def action_reset(self) -> None:
        d = self.fleet.store.robot_detail(self.key)
        self.post_message(ActionRequested("reset", (d.row.key if d else self.key,)))


class ServerDetailScreen(DetailScreen):
    KIND = "server"
    SECTIONS = (
        ("sessions", "Sessions"),
        ("capacity", "Capacity (spec P10: N_max = min(0.8/(r·t), (H·dt/2 − RTT)/t); room = min(N_max, cap) − active)"),
        ("metrics", "Metrics (/metrics, summed over labels)"),
        ("audit", "Audit tail"),
    )
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("d", "drain", "Drain server"),
        *COMMON,
    ]

    @property
    def replica(self) -> str:
        return self.key

    def texts(self) -> dict[str, Text] | None:
        d = self.fleet.store.server_detail(self.key)
        if d is None:
            return None
        return {
            "summary": render.server_summary_text(d),
            "sessions": render.sessions_text(d.sessions),
            "capacity": render.pairs_text(d.capacity_inputs),
            "metrics": render.metrics_text(d.metrics),
            "audit": render.audit_text(d.audit),
        }

    def action_drain(self) -> None:
        self.post_message(ActionRequested("drain", (self.key,)))


class AlertsScreen(LiveScreen):
    """Open alerts (newest first), then cleared ones, with when they started and cleared."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("e", "events", "Events"), *COMMON]

    def compose(self) -> ComposeResult:
        yield Static(id="alerts-title", classes="section")
        with VerticalScroll():
            yield Static(id="alerts-body", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        book = self.fleet.alerts
        listing = book.listing()
        r = book.rules
        self.query_one("#alerts-title", Static).update(Text(
            f"Alerts: {book.open_count} open, {len(listing) - book.open_count} cleared   thresholds: staleness ≥ {r.staleness_s:g} s, "
            f"fault state ≥ {r.fault_s:g} s, errors ≥ {100 * r.error_rate:g}%, rtt p95 ≥ {r.rtt_p95_ms:g} ms, server load ≥ {r.server_load:g}"
        ))
        self.query_one("#alerts-body", Static).update(render.alerts_text(listing, self.fleet.store.clock()))
        self.query_one("#result", Static).update(self.result_text())

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        now = self.fleet.store.clock()
        return {"alerts": [a.as_dict(now) for a in self.fleet.alerts.listing()]}


class EventsScreen(LiveScreen):
    """The fleet event log, newest first, filtered by `robot:ID server:ID sev:warn kind:drain words`."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "filter", "Filter"),
        Binding("exclamation_mark", "alerts", "Alerts"),
        *COMMON,
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_text = ""

    def compose(self) -> ComposeResult:
        yield Static(id="events-title", classes="section")
        yield Input(placeholder="filter: robot:ID server:ID sev:warn kind:state|audit|drain|reset|alert|server, other words match the text",
                    id="events-filter", disabled=True)  # enabled by `/`, so keys act on the screen until then
        with VerticalScroll():
            yield Static(id="events-body", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.apply_snapshot(self.fleet.current_snapshot())

    def shown(self) -> list:
        return [e for e in self.fleet.store.events() if event_matches(e, self.query_text)]

    def apply_snapshot(self, snap: FleetSnapshot) -> None:
        events = self.shown()
        total = len(self.fleet.store.events())
        self.query_one("#events-title", Static).update(Text(f"Fleet events ({len(events)} of {total} shown, newest first; the last {EVENT_HISTORY} are kept)"))
        self.query_one("#events-body", Static).update(render.events_text(events))
        self.query_one("#result", Static).update(self.result_text())

    def action_filter(self) -> None:
        box = self.query_one("#events-filter", Input)
        box.disabled = False
        box.add_class("visible")
        box.focus()

    def action_back(self) -> None:
        box = self.query_one("#events-filter", Input)
        if self.focused is box:
            self._leave_filter(box)
        else:
            self.dismiss()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.apply_snapshot(self.fleet.current_snapshot())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._leave_filter(event.input)

    def _leave_filter(self, box: Input) -> None:
        self.set_focus(None)
        box.disabled = True
        if not box.value:
            box.remove_class("visible")

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        return {"events": [record(e) for e in self.shown()]}


class HelpScreen(ModalScreen[None]):
    """Every key of the screen below it, with what it does (`?`)."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "Close")]

    def __init__(self, title: str, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(Text(f"Keys: {self.title_text}", style="bold"), id="help-title")
            yield Static(render.help_text(self.keys), id="help-body")
            yield Static(Text("ctrl+p opens the command palette (every action, searchable). esc closes.", style="bright_black"))

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """Names every target and what the action affects; Cancel has the focus, `y` confirms."""

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
            with VerticalScroll(id="dialog-scroll"):
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
