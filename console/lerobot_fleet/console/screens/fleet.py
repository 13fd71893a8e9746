"""The fleet overview: robots and servers tables, filter, sort, marks, grouping."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input, Static

from lerobot_fleet.console import render
from lerobot_fleet.data.model import FleetSnapshot, RobotRow, ServerRow
from lerobot_fleet.data.sorting import ROBOT_SORT_KEYS, SERVER_SORT_KEYS, sort_rows

from ..export import record
from ..filters import robot_matches, server_matches
from ..messages import ActionRequested, DetailRequested, ModelsRequested
from ..view import ConsoleView
from ..widgets import KeyedTable
from .base import COMMON, LiveScreen


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
        Binding("m", "models", "Models / rollout", show=False),
        Binding("d", "drain", "Drain"),
        Binding("C", "cordon", "Cordon server (no new sessions)", show=False),
        Binding("U", "uncordon", "Uncordon server", show=False),
        Binding("r", "reset", "Reset episode"),
        *COMMON,
    ]

    def __init__(self, view: ConsoleView) -> None:
        super().__init__(view)
        self.query_text = ""
        self.faults_only = False
        self.sort_column = {"robots": "state", "servers": "health"}
        self.sort_reverse = {"robots": False, "servers": False}
        self.marks: dict[str, set[str]] = {"robots": set(), "servers": set()}
        self.group_by = ""  # "" | "server" | "namespace"
        self.folded: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static("Robots", classes="section", id="robots-title")
        yield KeyedTable(render.ROBOT_COLUMNS, id="robots")
        yield Static("Servers", classes="section", id="servers-title")
        yield KeyedTable(render.SERVER_COLUMNS, id="servers")
        yield Static(classes="result", id="result")
        yield Input(
            placeholder="filter: text matches robot/server/state/outcome; !text inverts; enter keeps, esc clears",
            id="filter",
        )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#robots", KeyedTable).focus()  # then LiveScreen.on_mount renders the view

    # ------------------------------------------------------------ rendering

    def visible_robots(self, snap: FleetSnapshot) -> list[RobotRow]:
        rows = snap.robots
        if self.query_text.strip() or self.faults_only:
            rows = tuple(
                r for r in rows if robot_matches(r, self.query_text) and (not self.faults_only or r.state.is_fault)
            )
        return sort_rows(rows, ROBOT_SORT_KEYS, self.sort_column["robots"], self.sort_reverse["robots"])

    def visible_servers(self, snap: FleetSnapshot) -> list[ServerRow]:
        rows = [
            s for s in snap.servers if server_matches(s, self.query_text) and (not self.faults_only or s.health != "ok")
        ]
        return sort_rows(rows, SERVER_SORT_KEYS, self.sort_column["servers"], self.sort_reverse["servers"])

    def render_view(self) -> None:
        view = self.view
        snap = view.fleet
        robots = self.visible_robots(snap)
        servers = self.visible_servers(snap)
        marked_r, marked_s = self.marks["robots"], self.marks["servers"]
        alerting = view.alerts.targets
        rows: list[tuple[str, RobotRow | render.GroupHeader]]
        if self.group_by:
            rows = render.grouped(robots, self.group_by, self.folded)
        else:
            rows = [(r.key, r) for r in robots]

        def robot_cells(row: RobotRow | render.GroupHeader) -> tuple[render.Cell, ...]:
            if isinstance(row, RobotRow):
                return render.robot_cells(row, row.key in marked_r, row.key in alerting)
            name, members = row  # a group header
            return render.group_cells(name, members, name in self.folded, sum(1 for m in members if m.key in alerting))

        with self.app.batch_update():
            # robot ids (up to 64 characters, and a `?order` mark) whole when the terminal has the room
            self.query_one("#robots", KeyedTable).fit(
                "robot", max((render.robot_id_width(r) for r in robots), default=0)
            )
            self.query_one("#servers", KeyedTable).fit("replica", render.server_replica_width(servers))
            self.query_one("#header", Static).update(
                render.header_text(
                    snap,
                    render.sort_label("robots", self.sort_column["robots"], self.sort_reverse["robots"]),
                    self.query_text,
                    self.faults_only,
                    view.read_only,
                    view.paused,
                    marked=len(marked_r) + len(marked_s),
                    alerts=view.alerts.open_count,
                )
            )
            self.query_one("#robots", KeyedTable).reconcile(rows, robot_cells)
            self.query_one("#servers", KeyedTable).reconcile(
                [(s.replica, s) for s in servers],
                lambda s: render.server_cells(s, s.replica in marked_s, s.replica in alerting),
            )
            self.query_one("#robots-title", Static).update(
                render.section_title("Robots", len(robots), len(snap.robots), len(marked_r))
            )
            self.query_one("#servers-title", Static).update(
                render.section_title("Servers", len(servers), len(snap.servers), len(marked_s))
            )
            self.query_one("#result", Static).update(self.result_text())

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

    def action_models(self) -> None:
        """The models of the selected robot's (or server's) service side by side, with the rollout."""
        table = self._table()
        key = table.selected_key or ""
        snap = self.view.fleet
        row = snap.robot(key) if table.id == "robots" else snap.server(key)
        self.post_message(ModelsRequested(row.service if row is not None else ""))

    def action_group(self) -> None:
        """Robots: no grouping -> by server -> by namespace (model / revision / service)."""
        order = ["", "server", "namespace"]
        self.group_by = order[(order.index(self.group_by) + 1) % len(order)]
        self.folded.clear()
        self.render_view()

    def action_fold(self) -> None:
        """Fold or unfold the group under the cursor (on a robot row: its group)."""
        if not self.group_by:
            self.note("fold: group the robots first (g)", None)
            return
        table = self.query_one("#robots", KeyedTable)
        key = table.selected_key or ""
        if key.startswith(render.GROUP_PREFIX):
            name = key[len(render.GROUP_PREFIX) :]
        else:
            row = next((r for r in self.visible_robots(self.view.fleet) if r.key == key), None)
            if row is None:
                return
            name = render.group_name(row, self.group_by)
        self.folded.symmetric_difference_update({name})
        self.render_view()
        table.select_key(render.GROUP_PREFIX + name)

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        snap = self.view.fleet
        return {
            "robots": [record(r) for r in self.visible_robots(snap)],
            "servers": [record(s) for s in self.visible_servers(snap)],
        }

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        box.value = self.query_text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.render_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("visible")
        self.query_one("#robots", KeyedTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("visible")
        self.query_text = ""
        self.query_one("#robots", KeyedTable).focus()
        self.render_view()

    def action_faults(self) -> None:
        self.faults_only = not self.faults_only
        self.render_view()

    def action_sort(self) -> None:
        """Next column of the focused table (every column sorts); `O` reverses."""
        name = self._table().id or "robots"
        order = list(ROBOT_SORT_KEYS if name == "robots" else SERVER_SORT_KEYS)
        self.sort_column[name] = order[(order.index(self.sort_column[name]) + 1) % len(order)]
        self.render_view()

    def action_sort_reverse(self) -> None:
        name = self._table().id or "robots"
        self.sort_reverse[name] = not self.sort_reverse[name]
        self.render_view()

    def action_mark(self) -> None:
        table = self._table()
        key = table.selected_key
        if key is None or key.startswith(render.GROUP_PREFIX):
            return
        marks = self.marks[table.id or "robots"]
        marks.symmetric_difference_update({key})
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
        self.render_view()

    def action_mark_all(self) -> None:
        """Marks every row the focused table shows (after filter and faults-only)."""
        table = self._table()
        snap = self.view.fleet
        if table.id == "servers":
            self.marks["servers"].update(s.replica for s in self.visible_servers(snap))
        else:
            self.marks["robots"].update(r.key for r in self.visible_robots(snap))
        self.render_view()

    def action_clear_marks(self) -> None:
        for marks in self.marks.values():
            marks.clear()
        self.render_view()

    def _targets(self, name: str, verb: str) -> tuple[str, ...] | None:
        if self.marks[name]:
            return tuple(sorted(self.marks[name]))
        table = self.query_one(f"#{name}", KeyedTable)
        if (
            self.focused is not table
            or table.selected_key is None
            or table.selected_key.startswith(render.GROUP_PREFIX)
        ):
            self.note(
                f"{verb}: move the cursor to the {name} table (tab) and pick a row, or mark rows with space", None
            )
            return None
        return (table.selected_key,)

    def action_drain(self) -> None:
        targets = self._targets("servers", "drain")
        if targets:
            self.post_message(ActionRequested("drain", targets))

    def action_cordon(self) -> None:
        targets = self._targets("servers", "cordon")
        if targets:
            self.post_message(ActionRequested("cordon", targets))

    def action_uncordon(self) -> None:
        targets = self._targets("servers", "uncordon")
        if targets:
            self.post_message(ActionRequested("uncordon", targets))

    def key_help(self) -> list[tuple[str, str]]:
        """Textual's own focus keys first: they move between the two tables (drain and cordon act on the servers')."""
        return [("tab/shift+tab", "switch between the robots and servers tables"), *super().key_help()]

    def action_reset(self) -> None:
        targets = self._targets("robots", "reset")
        if targets:
            self.post_message(ActionRequested("reset", targets))
