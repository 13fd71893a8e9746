"""Messages screens post up to the app ("attributes down, messages up"): screens never call the app."""

from __future__ import annotations

from textual.message import Message


class ActionRequested(Message):
    """The operator asked for `kind` ("drain" | "cordon" | "uncordon" | "reset") on these targets (server replicas or
    robot keys), or for a rollout step ("rollout-start" on a model key, "rollout-promote" | "rollout-abort")."""

    def __init__(self, kind: str, targets: tuple[str, ...]) -> None:
        super().__init__()
        self.kind = kind
        self.targets = targets


class DetailRequested(Message):
    """Open the detail screen of one robot (row key) or server (replica)."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__()
        self.kind = kind
        self.key = key


class ScreenRequested(Message):
    """Open a fleet-wide screen by name: "help", "alerts", "events"."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class ModelsRequested(Message):
    """Open the per-model screen on one service ("": every service)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service


class PauseToggled(Message):
    """Freeze or unfreeze the view (the store keeps ingesting)."""


class ResultNoted(Message):
    """A line for the result bar (ok: True green, False red, None pending/hint)."""

    def __init__(self, text: str, ok: bool | None) -> None:
        super().__init__()
        self.text = text
        self.ok = ok


class ExportRequested(Message):
    """Write these tables (name -> records) as `fmt` ("json" | "csv") under a name starting with `stem`."""

    def __init__(self, fmt: str, stem: str, tables: dict[str, list[dict[str, object]]]) -> None:
        super().__init__()
        self.fmt = fmt
        self.stem = stem
        self.tables = tables


class ViewWanted(Message):
    """A screen is back on top (the one above it closed): hand it the latest view."""
