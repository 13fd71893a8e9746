"""The per-model screen (`m`): the rollout above, the models of one service (or every service) side by side."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from lerobot_fleet.console import render
from lerobot_fleet.data.model_compare import ModelFigures

from ..messages import ActionRequested
from ..view import ConsoleView
from ..widgets import KeyedTable
from .base import COMMON, LiveScreen

ROLLOUT_ACTIONS = ("rollout_start", "rollout_promote", "rollout_abort")


class ModelsScreen(LiveScreen):
    """Old and new model side by side while a rollout moves robots; `s` starts one, `p` promotes, `a` aborts."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("v", "every_service", "This service / every service"),
        Binding("s", "rollout_start", "Start rollout to model (10% canary)"),
        Binding("p", "rollout_promote", "Promote"),
        Binding("a", "rollout_abort", "Abort rollout"),
        Binding("exclamation_mark", "alerts", "Alerts", show=False),
        Binding("e", "events", "Events", show=False),
        *COMMON,
    ]

    def __init__(self, view: ConsoleView, service: str = "") -> None:
        super().__init__(view)
        self.service = service  # "" : every service
        self.home_service = service

    def compose(self) -> ComposeResult:
        yield Static(id="rollout", classes="detail-body")
        yield Static(classes="section", id="models-title")
        yield KeyedTable(render.MODEL_COLUMNS, id="models")
        yield Static(classes="result", id="result")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#models", KeyedTable).focus()

    def shown(self) -> list[ModelFigures]:
        return [m for m in self.view.models if not self.service or m.service == self.service]

    def render_view(self) -> None:
        view = self.view
        models = self.shown()
        status = view.rollout.status
        self.query_one("#rollout", Static).update(render.rollout_text(view.rollout))
        where = f"service {self.service!r}" if self.service else "every service"
        self.query_one("#models-title", Static).update(
            Text(f"Models of {where} ({len(models)}; live robots only, errors and fallbacks over the last 30 s)")
        )
        self.query_one("#models", KeyedTable).reconcile(
            [(m.key, m) for m in models],
            lambda m: render.model_cells(m, render.model_role(m, status), view.model_trends.get(m.key, ())),
        )
        self.query_one("#result", Static).update(self.result_text())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ROLLOUT_ACTIONS and self.view.read_only:
            return False  # hidden from the footer and inert, like the fleet screen's actions
        return super().check_action(action, parameters)

    def action_every_service(self) -> None:
        self.service = "" if self.service else self.home_service
        self.render_view()

    def action_rollout_start(self) -> None:
        key = self.query_one("#models", KeyedTable).selected_key
        if key is None:
            self.note("start a rollout: pick the model to roll out to (↑/↓)", None)
            return
        self.post_message(ActionRequested("rollout-start", (key,)))

    def _rollout_id(self) -> str:
        status = self.view.rollout.status
        return status.rollout_id if status is not None and status.rollout_id else "rollout"

    def action_rollout_promote(self) -> None:
        self.post_message(ActionRequested("rollout-promote", (self._rollout_id(),)))

    def action_rollout_abort(self) -> None:
        self.post_message(ActionRequested("rollout-abort", (self._rollout_id(),)))

    def export_tables(self) -> dict[str, list[dict[str, object]]]:
        return {"models": [m.as_dict() for m in self.shown()]}
