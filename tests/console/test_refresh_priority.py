"""The UI's right of way at scale: ingest waits while a frame is built and drawn, and full garbage collections
run between frames, so a tick of 40 ms of CPU never waits behind decoding or an automatic GC pass."""

from __future__ import annotations

import gc
import threading
import time

from fleet_helpers import make_app, sync, until
from lerobot_fleet.console.gc_pacing import NEVER, GcPacer
from lerobot_fleet.data.ui_gate import UiGate


def test_gate_open_by_default_and_wait_returns_at_once():
    gate = UiGate()
    t0 = time.monotonic()
    gate.wait()
    assert time.monotonic() - t0 < 0.05
    assert gate.waits == 0


def test_ingest_waits_while_a_refresh_runs_and_goes_on_when_it_ends():
    gate = UiGate(max_hold_s=5.0)
    gate.close()
    passed = threading.Event()

    def ingest() -> None:
        gate.wait()
        passed.set()

    t = threading.Thread(target=ingest)
    t.start()
    assert not passed.wait(0.2)  # held while the frame is being drawn
    gate.open()
    assert passed.wait(2.0)
    t.join(2.0)
    assert gate.waits == 1


def test_a_refresh_that_never_ends_holds_ingest_at_most_max_hold():
    gate = UiGate(max_hold_s=0.2)
    gate.close()
    t0 = time.monotonic()
    gate.wait()
    assert 0.15 <= time.monotonic() - t0 < 1.0
    t1 = time.monotonic()
    gate.wait()  # it opened itself: no second wait
    assert time.monotonic() - t1 < 0.05


def test_pacer_turns_automatic_full_collections_off_and_gives_them_back():
    before = gc.get_threshold()
    pacer = GcPacer(full_every_s=60.0)
    pacer.start()
    try:
        assert gc.get_threshold()[2] == NEVER
        assert gc.get_threshold()[:2] == before[:2]  # young collections stay automatic
        assert gc.get_freeze_count() > 0  # what existed at start is never scanned again
    finally:
        pacer.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_pacer_collects_after_a_frame_only_once_the_period_passed():
    now = [100.0]
    pacer = GcPacer(full_every_s=20.0, clock=lambda: now[0])
    pacer.start()
    try:

        class Cycle:
            def __init__(self) -> None:
                self.me = self

        Cycle()  # unreachable cycle: only a full (or young) collection frees it
        pacer.after_frame()
        assert pacer.full_runs == 0
        now[0] += 20.0
        pacer.after_frame()
        assert pacer.full_runs == 1
        assert not any(type(o) is Cycle for o in gc.get_objects())
        pacer.after_frame()  # the next one waits for another period
        assert pacer.full_runs == 1
    finally:
        pacer.stop()


@sync
async def test_app_closes_the_gate_for_a_tick_and_opens_it_once_the_frame_is_drawn():
    app = make_app()
    closed_during_tick = []
    original = app.store.capture

    def capture():  # the tick reads the store while it builds the view
        closed_during_tick.append(not app.ui_gate.is_open)
        return original()

    app.store.capture = capture
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.gc_pacer.active
        app.tick()
        assert closed_during_tick and closed_during_tick[-1]
        await until(pilot, lambda: app.ui_gate.is_open, 5, "the gate open after the frame")
    assert not app.gc_pacer.active  # unmount gave the collector back
