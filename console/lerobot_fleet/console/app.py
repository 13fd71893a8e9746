"""The Textual app: builds one frozen view per tick and hands it to the screen on top.

Data flows one way: sources -> store (any thread, under a lock) -> derived rows -> view (UI thread, once
per tick: `tick` -> `_advance`, the only place alerts open and clear) -> screens. Screens render the
`ConsoleView` they are handed and post messages up (`messages`); the app owns the screen stack, the
confirmations and the operator actions, which run in thread workers whose results come back through
`on_worker_state_changed`. The app only reads the store: its own events (alerts, action results) stay in
its own log and join the store's in each view. Nothing outside the UI thread touches a widget.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from lerobot_fleet.console import render
from lerobot_fleet.data.alerts import Alert, AlertBook, AlertRules
from lerobot_fleet.data.model import EventLog, FleetSnapshot, split_robot_key
from lerobot_fleet.data.model_compare import ModelWindow
from lerobot_fleet.data.sources.base import ActionResult, FleetSource
from lerobot_fleet.data.store import EVENT_HISTORY, FleetStore
from lerobot_fleet.data.ui_gate import UiGate

from .export import write
from .gc_pacing import GcPacer
from .messages import (
    ActionRequested,
    DetailRequested,
    ExportRequested,
    ModelsRequested,
    PauseToggled,
    ResultNoted,
    ScreenRequested,
    ViewWanted,
)
from .result_claim import ResultClaim
from .rollout_actions import ROLLOUT_KINDS, run_rollout
from .screens import (
    AlertsScreen,
    ConfirmScreen,
    DetailScreen,
    EventsScreen,
    FleetScreen,
    HelpScreen,
    LiveScreen,
    ModelsScreen,
    RobotDetailScreen,
    ServerDetailScreen,
)
from .view import ConsoleView, Detail

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
        self.models = ModelWindow()  # the model figures' windows and trends, advanced by the tick only
        self.export_dir = Path(export_dir)
        self._exports = 0
        self.last_result: tuple[str, bool | None] = ("", None)
        self._claim: ResultClaim | None = None  # the state the result line says its targets are in
        self._view = ConsoleView.empty(self.store.router, self.read_only)
        self.gc_pacer = GcPacer()
        self.ui_gate: UiGate = getattr(source, "ui_gate", None) or UiGate()  # the source's ingest yields to each frame
        self._events: deque[tuple[float, str, str, str, str, str]] = deque(
            maxlen=EVENT_HISTORY
        )  # alerts, action results
        self.tick_times: list[float] = []  # seconds per UI refresh (bench/console.py reads these)

    def on_mount(self) -> None:
        self.gc_pacer.start()
        self.source.start(self.store)
        self.push_screen(FleetScreen(self._advance()))  # the first tick's view
        self.set_interval(self.refresh_s, self.tick)

    def on_unmount(self) -> None:
        self.source.stop()
        self.gc_pacer.stop()

    # ------------------------------------------------------------ the view

    @property
    def view(self) -> ConsoleView:
        """The latest view (built by the last tick; frozen). Reading it changes nothing."""
        return self._view

    def current_snapshot(self) -> FleetSnapshot:
        """The fleet data of the latest view (the frozen one while paused). Side-effect free: only a tick
        builds views and advances alerts."""
        return self._view.fleet

    def tick(self) -> None:
        """One UI refresh: the next view, handed to the screen on top. Skipped while a dialog is open (it
        would repaint under the modal)."""
        screen = self.screen
        if not isinstance(screen, LiveScreen) or not screen.ready:
            return
        start = time.perf_counter()
        self.ui_gate.close()  # ingest waits until this frame is drawn (ui_gate.py)
        self.call_after_refresh(self._after_frame)
        screen.apply_view(self._advance())
        self.tick_times.append(time.perf_counter() - start)
        if len(self.tick_times) > 10_000:
            del self.tick_times[:5_000]

    def _after_frame(self) -> None:
        self.gc_pacer.after_frame()  # a paced full collection runs now, between two frames (gc_pacing.py)
        self.ui_gate.open()

    def _advance(self) -> ConsoleView:
        """Build the next view: the one place alerts advance. A new store snapshot is checked against the
        alert rules, alerts that opened or cleared go to the event log, and the view freezes all of it.
        While paused the fleet data, alerts and events stay as they were; only the result line moves."""
        wanted = self._wanted_details()
        if self.paused:
            view = self._with_app_state(self._view)
            kept = tuple(d for d in view.details if (d[0], d[1]) in wanted)
            self._view = replace(view, details=kept + self._details([w for w in wanted if not view.has_detail(*w)]))
            return self._view
        cap = self.store.capture()
        snap, (models, trends) = self.store.derive(cap), self.models.advance(cap)
        now = self.store.clock()
        self._check_claim(snap)
        opened, cleared = self.alerts.update(snap, now)
        for a in opened:
            self._event(
                now,
                "error" if a.rule == "fault" else "warn",
                "alert",
                f"alert opened: {a.name} {a.message}",
                *self._who(a),
            )
        for a in cleared:
            self._event(now, "info", "alert", f"alert cleared: {a.name} {a.rule}", *self._who(a))
        self._view = ConsoleView(
            fleet=snap,
            alerts=self.alerts.snapshot(),
            event_log=self._event_log(),
            now=now,
            details=self._details(wanted),
            read_only=self.read_only,
            paused=self.paused,
            result=self.last_result,
            models=models,
            model_trends=trends,
            rollout=self.store.rollout(),
        )
        return self._view

    def _event(self, at: float, severity: str, kind: str, text: str, robot: str = "", server: str = "") -> None:
        """A line of the app's own event log (alerts, action results), shown with the store's."""
        self._events.append((at, severity, kind, text, robot, server))

    def _event_log(self) -> EventLog:
        """The store's event log with the app's own lines, oldest first (the newest EVENT_HISTORY of both)."""
        log = self.store.event_log()
        if not self._events:
            return log
        return EventLog(log.now, tuple(sorted((*log.records, *self._events), key=lambda e: e[0])[-EVENT_HISTORY:]))

    def _show(self) -> None:
        """Hand the latest view again, with the current result line and pause flag, to the screen on top.
        No new data: nothing is read from the store and no alert moves."""
        self._view = self._with_app_state(self._view)
        screen = self.screen
        if isinstance(screen, LiveScreen) and screen.ready:
            screen.apply_view(self._view)

    def _with_app_state(self, view: ConsoleView) -> ConsoleView:
        return replace(view, read_only=self.read_only, paused=self.paused, result=self.last_result)

    def _wanted_details(self) -> list[tuple[str, str]]:
        """(kind, key) of every open detail screen: the view carries their details."""
        return [(s.KIND, s.key) for s in self.screen_stack if isinstance(s, DetailScreen)]

    def _details(self, wanted: list[tuple[str, str]]) -> tuple[tuple[str, str, Detail | None], ...]:
        return tuple(
            (kind, key, self.store.robot_detail(key) if kind == "robot" else self.store.server_detail(key))
            for kind, key in wanted
        )

    @staticmethod
    def _who(a: Alert) -> tuple[str, str]:
        return (a.name, "") if a.role == "robot" else ("", a.name)

    def set_result(self, text: str, ok: bool | None, claim: ResultClaim | None = None) -> None:
        self.last_result = (text, ok)
        self._claim = claim

    def _check_claim(self, snap: FleetSnapshot) -> None:
        """A result line whose targets changed since (another operator's verb, a script, a restart) says so and
        stops being green: it no longer describes the rows under it."""
        if self._claim is None:
            return
        note = self._claim.changed_since({s.replica: s for s in snap.servers})
        if note:
            self.set_result(f"{self.last_result[0]} (earlier; {note})", None)

    # ------------------------------------------------------------ messages from screens

    def on_view_wanted(self, message: ViewWanted) -> None:
        self._show()

    def on_result_noted(self, message: ResultNoted) -> None:
        self.set_result(message.text, message.ok)
        self._show()

    def on_pause_toggled(self, message: PauseToggled) -> None:
        self.paused = not self.paused
        self.tick()

    def on_detail_requested(self, message: DetailRequested) -> None:
        """The detail screen opens on the latest view, with its robot's or server's detail added (read
        from the store now); from the next tick on, every view carries it while the screen is open."""
        kind, key = message.kind, message.key
        if not self._view.has_detail(kind, key):
            self._view = replace(self._view, details=self._view.details + self._details([(kind, key)]))
        self.push_screen(RobotDetailScreen(key, self._view) if kind == "robot" else ServerDetailScreen(key, self._view))

    def on_screen_requested(self, message: ScreenRequested) -> None:
        if message.name == "help":
            screen = self.screen
            keys = screen.key_help() if isinstance(screen, LiveScreen) else []
            self.push_screen(HelpScreen(type(screen).__name__.removesuffix("Screen"), keys))
        elif message.name == "alerts" and not isinstance(self.screen, AlertsScreen):
            self.push_screen(AlertsScreen(self._view))
        elif message.name == "events" and not isinstance(self.screen, EventsScreen):
            self.push_screen(EventsScreen(self._view))

    def on_models_requested(self, message: ModelsRequested) -> None:
        if not isinstance(self.screen, ModelsScreen):
            self.push_screen(ModelsScreen(self._view, message.service))

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
        self._show()  # the result line only: exporting what is shown advances nothing

    def on_action_requested(self, message: ActionRequested) -> None:
        """One confirmation naming every target; on yes, one worker runs them and reports each."""
        if self.read_only or not message.targets:
            return
        kind, targets = message.kind, message.targets
        if kind in ROLLOUT_KINDS:
            return self._confirm_rollout(kind, targets[0])
        snap = self.store.snapshot()
        label = render.ACTION_LABELS.get(kind, kind)

        def done(ok: bool | None) -> None:
            if ok:
                self._start_action(kind, targets)

        self.push_screen(
            ConfirmScreen(render.confirm_title(kind, targets, snap), render.confirm_body(kind, targets, snap), label),
            done,
        )

    # Screen[Any]: whichever screen is current, whatever result type it dismisses with (as App declares it)
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers every key action of the current screen, plus the built-ins."""
        yield from super().get_system_commands(screen)
        if isinstance(screen, LiveScreen):
            for b in screen.BINDINGS:
                if not isinstance(b, Binding):  # a (key, action[, description]) tuple: not offered, as before
                    continue
                action = b.action
                if not action or action.startswith("app.") or screen.check_action(action, ()) is False:
                    continue
                yield SystemCommand(
                    f"{b.description or action} ({render.key_label(b.key)})",
                    f"screen action {action}",
                    lambda a=action, s=screen: s.run_action(a),
                )

    # ------------------------------------------------------------ actions

    def _confirm_rollout(self, kind: str, target: str) -> None:
        """A rollout step from the per-model screen: confirmed like a drain, sent on a worker."""
        model = next((m for m in self._view.models if m.key == target), None)
        title, body = render.rollout_confirm(kind, model, self._view.rollout)

        def done(ok: bool | None) -> None:
            if ok:
                self.set_result(f"{kind.replace('-', ' ')}: sent, waiting for the reply…", None)
                work = partial(run_rollout, self.source, kind, target, model, self.operator)
                self.run_worker(work, thread=True, group="actions", name=f"{kind}:1", exit_on_error=False)
                self.tick()

        self.push_screen(ConfirmScreen(title, body, render.ROLLOUT_LABELS[kind]), done)

    def _start_action(self, kind: str, targets: tuple[str, ...]) -> None:
        self.set_result(
            f"{kind} {', '.join(self._target_name(t) for t in targets)}: sent, waiting for the reply…", None
        )
        reason = "operator action from lerobot-fleet console"

        def one(target: str) -> ActionResult:
            if kind == "drain":
                return self.source.drain(target, reason, self.operator)
            if kind in ("cordon", "uncordon"):
                return self.source.cordon(target, kind == "cordon", reason, self.operator)
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
            self.set_result(text, ok, ResultClaim(kind, tuple(t for t, good, _ in worker.result if good)))
            for target, good, line in worker.result:
                name = self._target_name(target)
                self._event(
                    self.store.clock(),
                    "info" if good else "error",
                    kind,
                    line,
                    *((name, "") if kind == "reset" else ("", "" if kind in ROLLOUT_KINDS else name)),
                )
        elif event.state == WorkerState.ERROR:
            self.set_result(f"{worker.name}: FAILED — {worker.error}", False)
        else:
            return
        self.tick()
