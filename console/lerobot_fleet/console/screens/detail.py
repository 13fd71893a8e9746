"""One detail base for a robot or a server, and the two screens built on it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from lerobot_fleet.console import render

from ..export import record
from ..messages import ActionRequested
from ..view import ConsoleView, Detail
from .base import COMMON, LiveScreen


class DetailScreen(LiveScreen):
    """One detail layout for robots and servers: a summary, titled sections, the result line."""

    SECTIONS: tuple[tuple[str, str], ...] = ()  # (widget id, section title)
    KIND = ""

    def __init__(self, key: str, view: ConsoleView) -> None:
        super().__init__(view)
        self.key = key

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="summary", classes="detail-body")
            for wid, title in self.SECTIONS:
                yield Static(title, classes="section")
                yield Static(id=wid, classes="detail-body")
        yield Static(classes="result", id="result")
        yield Footer()

    @property
    def detail(self) -> Detail | None:
        """This screen's robot or server in the view (the app adds it to every view while the screen is open)."""
        return self.view.robot_detail(self.key) if self.KIND == "robot" else self.view.server_detail(self.key)

    def texts(self) -> dict[str, Text] | None:  # pragma: no cover - overridden
        """Text for "summary" and each section id; None when the target is unknown."""
        raise NotImplementedError

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        d = self.detail
        return {} if d is None else {self.KIND: [record(d.row)], "audit": [record(e) for e in d.audit]}

    def render_view(self) -> None:
        texts = self.texts()
        with self.app.batch_update():
            if texts is None:
                self.query_one("#summary", Static).update(
                    Text(f"{self.KIND} {self.key}: not known to the console", style="red")
                )
            else:
                for wid, text in texts.items():
                    self.query_one(f"#{wid}", Static).update(text)
            self.query_one("#result", Static).update(self.result_text())


class RobotDetailScreen(DetailScreen):
    KIND = "robot"
    SECTIONS = (
        ("history", "State history"),
        ("trends", "Trends (oldest → newest, about 3 minutes)"),
        ("audit", "Audit tail"),
    )
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reset", "Reset episode"),
        *COMMON,
    ]

    @property
    def robot_id(self) -> str:
        return self.key

    def texts(self) -> dict[str, Text] | None:
        d = self.view.robot_detail(self.key)
        if d is None:
            return None
        return {
            "summary": render.robot_summary_text(d),
            "history": render.history_text(d.history),
            "trends": render.robot_trends_text(d),
            "audit": render.audit_text(d.audit),
        }

    def action_reset(self) -> None:
        d = self.view.robot_detail(self.key)
        self.post_message(ActionRequested("reset", (d.row.key if d else self.key,)))


class ServerDetailScreen(DetailScreen):
    KIND = "server"
    SECTIONS = (
        ("sessions", "Sessions"),
        ("capacity", "Capacity (N_max = min(0.8/(r·t), (H·dt/2 − RTT)/t); room = min(N_max, cap) − active)"),
        ("metrics", "Metrics (/metrics, summed over labels)"),
        ("audit", "Audit tail"),
    )
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("d", "drain", "Drain server"),
        Binding("C", "cordon", "Cordon server (no new sessions)"),
        Binding("U", "uncordon", "Uncordon server"),
        *COMMON,
    ]

    @property
    def replica(self) -> str:
        return self.key

    def texts(self) -> dict[str, Text] | None:
        d = self.view.server_detail(self.key)
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

    def action_cordon(self) -> None:
        self.post_message(ActionRequested("cordon", (self.key,)))

    def action_uncordon(self) -> None:
        self.post_message(ActionRequested("uncordon", (self.key,)))
