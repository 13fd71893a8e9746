"""The screen base: a live screen that renders the view it is handed, the keys every screen shares."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.screen import Screen

from lerobot_fleet.console import render

from ..messages import ExportRequested, PauseToggled, ResultNoted, ScreenRequested, ViewWanted
from ..view import ConsoleView

ACTIONS = ("drain", "cordon", "uncordon", "reset")


class LiveScreen(Screen[None]):
    """A screen the app's timer refreshes: it renders the `ConsoleView` it was handed (`view`) and
    posts messages for everything else. It never reads the store or the app's state."""

    def __init__(self, view: ConsoleView) -> None:
        super().__init__()
        self.view = view

    def on_mount(self) -> None:
        self.apply_view(self.view)

    def apply_view(self, view: ConsoleView) -> None:
        """Keep `view` and show it."""
        self.view = view
        self.render_view()

    def render_view(self) -> None:  # pragma: no cover - overridden
        """Show `self.view` (again after a change of the screen's own state: filter, sort, marks, folds)."""
        raise NotImplementedError

    @property
    def ready(self) -> bool:
        """Composed: a timer tick or a resume can arrive before the widgets exist."""
        return self.is_mounted and bool(self.query("#result"))

    def on_screen_resume(self) -> None:
        if self.ready:
            self.post_message(ViewWanted())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTIONS and self.view.read_only:
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
        return render.result_text(*self.view.result)

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
        self.post_message(
            ExportRequested(fmt, type(self).__name__.removesuffix("Screen").lower(), self.export_tables())
        )


COMMON = [
    Binding("x", "export('json')", "Export JSON", show=False),
    Binding("X", "export('csv')", "Export CSV", show=False),
    Binding("question_mark", "help", "Help"),
    Binding("q", "app.quit", "Quit"),
]
