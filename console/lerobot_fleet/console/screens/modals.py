"""The help overlay and the confirmation dialog."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from lerobot_fleet.console import render


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
            yield Static(
                Text("ctrl+p opens the command palette (every action, searchable). esc closes.", style="bright_black")
            )

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
