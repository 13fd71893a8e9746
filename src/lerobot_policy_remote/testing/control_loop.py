"""`ControlLoop`: a robot's control thread around a `RemoteInferenceEngine`, with everything it executed.

Observe -> `notify_observation` -> `get_action` -> send, at a fixed rate, as lerobot's rollout loop does;
each executed action is kept with its provenance (which session, replica and observation it came from),
and the invariants a robot must keep are counted as it runs: never an action older than the bound,
never a NaN, never one from a session this robot did not open. Used by the chaos tests and
`bench/failover.py`. Loads nothing itself: the engine and the robot are handed in.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine import provenance
from ..engine.provenance import Provenance


@dataclass(frozen=True)
class Executed:
    """One action the loop handed to the robot."""

    t: float  # monotonic time of the tick
    values: tuple[float, ...]
    provenance: Provenance | None


class ControlLoop:
    """A control thread at `fps`; `observe()` gives the observation (default: `robot.get_observation()`)."""

    def __init__(
        self,
        engine: Any,
        robot: Any = None,
        *,
        fps: float = 30.0,
        max_action_age_s: float | None = None,
        observe: Callable[[], dict[str, Any]] | None = None,  # a lerobot observation (floats, images)
    ) -> None:
        if robot is None and observe is None:
            raise ValueError("ControlLoop needs a robot or an observe() function")
        self.engine, self.robot, self.period = engine, robot, 1.0 / fps
        self.max_age = max_action_age_s if max_action_age_s is not None else engine.cfg.max_action_age_s
        self.observe = observe or robot.get_observation
        self.executed: list[Executed] = []
        self.nones: list[float] = []
        self.errors: list[BaseException] = []
        self.sessions: set[str] = set()  # sessions the robot opened
        self.stale = self.nan = self.foreign = 0
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._halt.wait(max(0.0, next_t - time.monotonic())):
            next_t += self.period
            try:
                self.tick(time.monotonic())
            except BaseException as exc:  # the invariant is "never raises": recorded for the test to assert on
                self.errors.append(exc)

    def tick(self, now: float) -> None:
        e = self.engine
        if e.session_id:
            self.sessions.add(e.session_id)
        e.notify_observation(self.observe())
        act = e.get_action(None)
        if act is None:
            self.nones.append(now)
            return
        p, values = provenance.latest(), tuple(act.tolist())
        self.stale += p is None or p.source_age_s > self.max_age
        self.nan += not all(math.isfinite(x) for x in values)
        self.foreign += p is not None and p.session_id not in self.sessions | {e.session_id}
        self.executed.append(Executed(now, values, p))
        if self.robot is not None:
            self.robot.send_action(dict(zip(e.action_names, values, strict=True)))

    def executed_since(self, t: float) -> list[Executed]:
        return [x for x in list(self.executed) if x.t >= t]

    @property
    def unsafe(self) -> int:
        """Executed actions that broke an invariant (stale, NaN or from a foreign session)."""
        return self.stale + self.nan + self.foreign

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(5)
