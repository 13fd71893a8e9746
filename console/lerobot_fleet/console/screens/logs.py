"""The alerts and fleet-event screens."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input, Static

from lerobot_fleet.console import render
from lerobot_fleet.data.model import FleetEvent
from lerobot_fleet.data.store import EVENT_HISTORY

from ..export import record
from ..filters import event_matches
from ..view import ConsoleView
from .base import COMMON, LiveScreen


class AlertsScreen(LiveScreen):
    """Open alerts (newest first), then cleared ones, with when they started and cleared."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("e", "events", "Events"), *COMMON]

    def compose(self) -> ComposeResult:
        yield Static(id="alerts-title", classes="section")
        with VerticalScroll():
            yield Static(id="alerts-body", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def render_view(self) -> None:
        alerts = self.view.alerts
        listing = list(alerts.listing)
        r = alerts.rules
        self.query_one("#alerts-title", Static).update(
            Text(
                f"Alerts: {alerts.open_count} open, {len(listing) - alerts.open_count} cleared   "
                f"thresholds: {r.staleness_text()}, "
                f"fault state ≥ {r.fault_s:g} s, errors ≥ {100 * r.error_rate:g}%, rtt p95 ≥ {r.rtt_p95_ms:g} ms, "
                f"server load ≥ {r.server_load:g}"
            )
        )
        self.query_one("#alerts-body", Static).update(render.alerts_text(listing, self.view.now))
        self.query_one("#result", Static).update(self.result_text())

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        now = self.view.now
        return {"alerts": [a.as_dict(now) for a in self.view.alerts.listing]}


class EventsScreen(LiveScreen):
    """The fleet event log, newest first, filtered by `robot:ID server:ID sev:warn kind:drain words`."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "filter", "Filter"),
        Binding("exclamation_mark", "alerts", "Alerts"),
        *COMMON,
    ]

    def __init__(self, view: ConsoleView) -> None:
        super().__init__(view)
        self.query_text = ""

    def compose(self) -> ComposeResult:
        yield Static(id="events-title", classes="section")
        yield Input(
            placeholder=(
                "filter: robot:ID server:ID sev:warn kind:state|audit|drain|reset|alert|server, "
                "other words match the text"
            ),
            id="events-filter",
            disabled=True,
        )  # enabled by `/`, so keys act on the screen until then
        with VerticalScroll():
            yield Static(id="events-body", classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    def shown(self) -> list[FleetEvent]:
        return [e for e in self.view.events if event_matches(e, self.query_text)]

    def render_view(self) -> None:
        events = self.shown()
        total = len(self.view.event_log)
        self.query_one("#events-title", Static).update(
            Text(f"Fleet events ({len(events)} of {total} shown, newest first; the last {EVENT_HISTORY} are kept)")
        )
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
        self.render_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._leave_filter(event.input)

    def _leave_filter(self, box: Input) -> None:
        self.set_focus(None)
        box.disabled = True
        if not box.value:
            box.remove_class("visible")

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        return {"events": [record(e) for e in self.shown()]}
