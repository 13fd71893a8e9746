"""The Textual app: pulls a store snapshot on a timer and hands it to the active screen.

Data flows one way: sources -> store (any thread, under a lock) -> snapshot (UI thread, timer) ->
widgets. Operator actions run in thread workers; their result comes back on the UI thread through
`on_worker_state_changed`. Nothing outside the UI thread touches a widget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.worker import Worker, WorkerState

from .model import FleetSnapshot
from .screens import ConfirmScreen, FleetScreen, LiveScreen, drain_body, reset_body
from .sources.base import ActionResult, FleetSource
from .store import FleetStore

MIN_REFRESH_S = 0.5


class FleetConsoleApp(App[None]):
    TITLE = "lerobot-fleet console"
    CSS_PATH = Path(__file__).with_name("console.tcss")
    ENABLE_COMMAND_PALETTE = False

    def __init__(
        self,
        source: FleetSource,
        *,
        clock: Callable[[], float] = time.monotonic,
        store: FleetStore | None = None,
        read_only: bool = False,
        refresh_s: float = 1.0,
        operator: str = "operator",
    ) -> None:
        super().__init__()
        self.source = source
        self.store = store or FleetStore(clock=clock, router=getattr(source, "label", ""))
        self.read_only = read_only or not getattr(source, "can_act", False)
        self.refresh_s = max(MIN_REFRESH_S, refresh_s)
        self.operator = operator
        self.paused = False
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
        if self._snapshot is None or not self.paused:
            self._snapshot = self.store.snapshot()
        return self._snapshot

    def tick(self) -> None:
        """One UI refresh: skipped while a dialog is open (it would repaint under the modal)."""
        screen = self.screen
        if not isinstance(screen, LiveScreen):
            return
        start = time.perf_counter()
        screen.apply_snapshot(self.current_snapshot())
        self.tick_times.append(time.perf_counter() - start)
        if len(self.tick_times) > 10_000:
            del self.tick_times[:5_000]

    def set_result(self, text: str, ok: bool | None) -> None:
        self.last_result = (text, ok)

    # ------------------------------------------------------------ actions

    def confirm_drain(self, replica: str) -> None:
        if self.read_only:
            return
        snap = self.store.snapshot()

        def done(ok: bool | None) -> None:
            if ok:
                self._start_action("drain", replica)

        self.push_screen(ConfirmScreen(f"Drain server {replica}?", drain_body(snap, replica), "Drain"), done)

    def confirm_reset(self, robot_id: str) -> None:
        if self.read_only:
            return
        snap = self.store.snapshot()

        def done(ok: bool | None) -> None:
            if ok:
                self._start_action("reset", robot_id)

        self.push_screen(ConfirmScreen(f"Reset the episode of robot {robot_id}?", reset_body(snap, robot_id), "Reset episode"), done)

    def _start_action(self, kind: str, target: str) -> None:
        self.set_result(f"{kind} {target}: sent, waiting for the reply…", None)
        reason = "operator action from lerobot-fleet console"

        def work() -> ActionResult:
            if kind == "drain":
                return self.source.drain(target, reason, self.operator)
            return self.source.reset_episode(target, reason, self.operator)

        self.run_worker(work, thread=True, group="actions", name=f"{kind}:{target}", exit_on_error=False)
        self.tick()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "actions":
            return
        if event.state == WorkerState.SUCCESS and isinstance(worker.result, ActionResult):
            self.set_result(worker.result.summary(), worker.result.ok)
        elif event.state == WorkerState.ERROR:
            self.set_result(f"{worker.name}: FAILED — {worker.error}", False)
        else:
            return
        self.tick()
