"""The Textual app: pulls a store snapshot on a timer and hands it to the active screen.

Data flows one way: sources -> store (any thread, under a lock) -> snapshot (UI thread, timer) ->
screens. Screens post messages up (`messages`); the app owns the screen stack, the confirmations and
the operator actions, which run in thread workers whose results come back through
`on_worker_state_changed`. Nothing outside the UI thread touches a widget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from . import render
from .alerts import AlertBook, AlertRules
from .export import write
from .messages import ActionRequested, DetailRequested, ExportRequested, PauseToggled, ResultNoted, ScreenRequested
from .model import FleetSnapshot, split_robot_key
from .screens import (
    AlertsScreen,
    ConfirmScreen,
    EventsScreen,
    FleetScreen,
    HelpScreen,
    LiveScreen,
    RobotDetailScreen,
    ServerDetailScreen,
)
from .sources.base import ActionResult, FleetSource
from .store import FleetStore

MIN_REFRESH_S = 0.1


class FleetConsoleApp(App[None]):
    TITLE = "lerobot-fleet console"
    CSS_PATH = Path(__file__).with_name("console.tcss")

    def __init__(
        self,
        source: FleetSource,
        *,
        clock: Callable[[], float] = time.monotonic,
        store: FleetStore | None = None,
        read_only: bool = False,
        refresh_s: float = 1.0,
        operator: str = "operator",
        alert_rules: AlertRules | None = None,
        export_dir: str | Path = ".",
    ) -> None:
        super().__init__()
        self.source = source
        self.store = store or FleetStore(clock=clock, router=getattr(source, "label", ""))
        self.read_only = read_only or not getattr(source, "can_act", False)
        self.refresh_s = max(MIN_REFRESH_S, refresh_s)
        self.operator = operator
        self.paused = False
        self.alerts = AlertBook(alert_rules)
        self.export_dir = Path(export_dir)
        self._exports = 0
        self.last_result: tuple[str, bool | None] = ("", None)
        self._snapshot: FleetSnapshot | None = None
        self.tick_times: list[float] = []  # seconds per UI refresh (bench/console.py reads these)

    def on_mount(self) -> None:
        self.source.start(self.store)
        self.push_screen(FleetScreen())
        self.set_interval(self.refresh_s, self.tick)

    def on_unmount(self) -> None:
        self.source.stop()

    def current_snapshot(self) -> FleetSnapshot:
        """The latest snapshot (the frozen one while paused); alerts follow every new snapshot."""
        if self._snapshot is None or not self.paused:
            self._snapshot = self.store.snapshot()
            opened, cleared = self.alerts.update(self._snapshot, self.store.clock())
            for a in opened:
                self.store.event("error" if a.rule == "fault" else "warn", "alert", f"alert opened: {a.name} {a.message}", *self._who(a))
            for a in cleared:
                self.store.event("info", "alert", f"alert cleared: {a.name} {a.rule}", *self._who(a))
        return self._snapshot

    @staticmethod
    def _who(a) -> tuple[str, str]:
        return (a.name, "") if a.role == "robot" else ("", a.name)

    def tick(self) -> None:
        """One UI refresh: skipped while a dialog is open (it would repaint under the modal)."""
        screen = self.screen
        if not isinstance(screen, LiveScreen) or not screen.ready:
            return
        start = time.perf_counter()
        screen.apply_snapshot(self.current_snapshot())
        self.tick_times.append(time.perf_counter() - start)
        if len(self.tick_times) > 10_000:
            del self.tick_times[:5_000]

    def set_result(self, text: str, ok: bool | None) -> None:
        self.last_result = (text, ok)

    # ------------------------------------------------------------ messages from screens

    def on_result_noted(self, message: ResultNoted) -> None:
        self.set_result(message.text, message.ok)

    def on_pause_toggled(self, message: PauseToggled) -> None:
        self.paused = not self.paused
        self.tick()

    def on_detail_requested(self, message: DetailRequested) -> None:
        self.push_screen(RobotDetailScreen(message.key) if message.kind == "robot" else ServerDetailScreen(message.key))

    def on_screen_requested(self, message: ScreenRequested) -> None:
        if message.name == "help":
            screen = self.screen
            keys = screen.key_help() if isinstance(screen, LiveScreen) else []
            self.push_screen(HelpScreen(type(screen).__name__.removesuffix("Screen"), keys))
        elif message.name == "alerts" and not isinstance(self.screen, AlertsScreen):
            self.push_screen(AlertsScreen())
        elif message.name == "events" and not isinstance(self.screen, EventsScreen):
            self.push_screen(EventsScreen())

    def on_export_requested(self, message: ExportRequested) -> None:
        """Writes next to where the console runs (or --export-dir); the result line names the files."""
        self._exports += 1
        try:
            paths = write(message.tables, self.export_dir, f"fleet-{message.stem}-{self._exports}", message.fmt)
        except OSError as exc:
            self.set_result(f"export failed: {exc}. Pick a writable folder with --export-dir.", False)
        else:
            rows = sum(len(v) for v in message.tables.values())
            self.set_result(f"exported {rows} rows to {', '.join(str(p) for p in paths)}", True)
        self.tick()

    def on_action_requested(self, message: ActionRequested) -> None:
        """One confirmation naming every target; on yes, one worker runs them and reports each."""
        if self.read_only or not message.targets:
            return
        kind, targets = message.kind, message.targets
        snap = self.store.snapshot()
        label = "Drain" if kind == "drain" else "Reset episode"

        def done(ok: bool | None) -> None:
            if ok:
                self._start_action(kind, targets)

        self.push_screen(ConfirmScreen(render.confirm_title(kind, targets, snap), render.confirm_body(kind, targets, snap), label), done)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers every key action of the current screen, plus the built-ins."""
        yield from super().get_system_commands(screen)
        if isinstance(screen, LiveScreen):
            for b in screen.BINDINGS:
                action = getattr(b, "action", "")
                if not action or action.startswith("app.") or screen.check_action(action, ()) is False:
                    continue
                yield SystemCommand(f"{b.description or action} ({render.key_label(b.key)})", f"screen action {action}",
                                    lambda a=action, s=screen: s.run_action(a))

    # ------------------------------------------------------------ actions

    def _start_action(self, kind: str, targets: tuple[str, ...]) -> None:
        self.set_result(f"{kind} {', '.join(self._target_name(t) for t in targets)}: sent, waiting for the reply…", None)
        reason = "operator action from lerobot-fleet console"

        def one(target: str) -> ActionResult:
            if kind == "drain":
                return self.source.drain(target, reason, self.operator)
            parsed = split_robot_key(target)
            if parsed is None:
                return self.source.reset_episode(target, reason, self.operator)
            return self.source.reset_episode(parsed[1], reason, self.operator, ns=parsed[0])

        def work() -> list[tuple[str, bool, str]]:
            out = []
            for target in targets:
                try:
                    r = one(target)
                    out.append((target, r.ok, r.summary()))
                except Exception as exc:  # one target failing never stops the others
                    out.append((target, False, f"{kind} {self._target_name(target)}: FAILED — {exc}"))
            return out

        self.run_worker(work, thread=True, group="actions", name=f"{kind}:{len(targets)}", exit_on_error=False)
        self.tick()

    @staticmethod
    def _target_name(target: str) -> str:
        parsed = split_robot_key(target)
        return parsed[1] if parsed else target

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "actions":
            return
        if event.state == WorkerState.SUCCESS and isinstance(worker.result, list):
            kind = worker.name.split(":")[0]
            text, ok = render.results_text(kind, worker.result)
            self.set_result(text, ok)
            for target, good, line in worker.result:
                name = self._target_name(target)
                self.store.event("info" if good else "error", kind, line, *((name, "") if kind == "reset" else ("", name)))
        elif event.state == WorkerState.ERROR:
            self.set_result(f"{worker.name}: FAILED — {worker.error}", False)
        else:
            return
        self.tick()
