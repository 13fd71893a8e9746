"""A simulated leader arm as a lerobot Teleoperator plugin: `--teleop.type=sim_leader`.

Why: `dagger` corrections, `episodic` resets and `highlight` saves need a human; tests and demos need
the same without hardware. The leader reports `<motor>.pos` for the sim_arm's six joints, moving on a
deterministic sine around `center` (so a recorded correction is known exactly: frame k of a correction
carries the leader's pose at that tick). `key_script` plays key presses ("SECONDS:KEY,...", lerobot's
key names: space, tab, enter, right, esc, or a character) through the same path the strategy's keyboard
listener uses (`engine.keypress`), counted from the robot's first executed remote action, so a
script is independent of how long start-up took. Every action it hands out is also written, with the
tick's time, to `record_path` (JSONL) when set.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lerobot.teleoperators.config import TeleoperatorConfig
from lerobot.teleoperators.teleoperator import Teleoperator

from .robot import ARM_MOTORS

logger = logging.getLogger(__name__)


@TeleoperatorConfig.register_subclass("sim_leader")
@dataclass(kw_only=True)
class SimLeaderConfig(TeleoperatorConfig):
    """Scripted leader arm: pose(t) = center + amplitude * sin(2 pi t / period_s + joint phase)."""

    center: list[float] = field(default_factory=lambda: [0.0, -30.0, 40.0, 20.0, 0.0, 25.0])
    amplitude: float = 10.0
    period_s: float = 4.0
    key_script: str = ""  # e.g. "1.0:space,1.5:tab,3.0:tab" (seconds after the robot's first remote action)
    key_script_timeout_s: float = 120.0  # give up waiting for the first remote action after this
    record_path: str | None = None


def parse_key_script(script: str) -> list[tuple[float, str]]:
    """ "1.0:space,2:s" -> [(1.0, "space"), (2.0, "s")], sorted; ValueError names the bad item."""
    out: list[tuple[float, str]] = []
    for item in filter(None, (s.strip() for s in script.split(","))):
        at, sep, key = item.partition(":")
        try:
            t = float(at)
        except ValueError:
            t = math.nan
        if not sep or not key or not math.isfinite(t) or t < 0:
            raise ValueError(f"--teleop.key_script item {item!r}: expected SECONDS:KEY, e.g. 1.5:space")
        out.append((t, key))
    return sorted(out)


class SimLeader(Teleoperator):
    config_class = SimLeaderConfig
    name = "sim_leader"

    def __init__(self, config: SimLeaderConfig) -> None:
        super().__init__(config)
        self.config = config
        if len(config.center) != len(ARM_MOTORS):
            raise ValueError(f"sim_leader needs {len(ARM_MOTORS)} center positions, got {len(config.center)}")
        self.script = parse_key_script(config.key_script)
        self._connected = False
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._record: TextIO | None = None
        self.pressed: list[tuple[float, str]] = []

    @property
    def action_features(self) -> dict[str, type[float]]:
        return {f"{m}.pos": float for m in ARM_MOTORS}

    @property
    def feedback_features(self) -> dict[str, type[float]]:
        return {}

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def is_calibrated(self) -> bool:
        return True

    def connect(self, calibrate: bool = True) -> None:
        if self.config.record_path:
            Path(self.config.record_path).parent.mkdir(parents=True, exist_ok=True)
            self._record = open(self.config.record_path, "a", buffering=1)  # noqa: SIM115
        self._t0 = time.monotonic()
        self._connected = True
        if self.script:
            threading.Thread(target=self._play, name="sim-leader-keys", daemon=True).start()

    def calibrate(self) -> None:
        """Nothing to calibrate in simulation."""

    def configure(self) -> None:
        """Nothing to configure in simulation."""

    def pose(self, t: float) -> dict[str, float]:
        w = 2 * math.pi / max(self.config.period_s, 1e-3)
        return {
            f"{m}.pos": c + self.config.amplitude * math.sin(w * t + i * 0.5)
            for i, (m, c) in enumerate(zip(ARM_MOTORS, self.config.center, strict=True))
        }

    def get_action(self) -> dict[str, float]:
        now = time.monotonic()
        action = self.pose(now - self._t0)
        if self._record is not None:
            self._record.write(json.dumps({"t": now, "action": action}) + "\n")
        return action

    def send_feedback(self, feedback: dict[str, Any]) -> None:
        """A simulated leader has no motors to drive."""

    def disconnect(self) -> None:
        self._stop.set()
        self._connected = False
        if self._record is not None:
            self._record.close()
            self._record = None

    def _play(self) -> None:
        """Wait for the robot's first remote action, then press each key at its time."""
        from ..engine import keypress, provenance

        deadline = time.monotonic() + self.config.key_script_timeout_s
        while provenance.latest() is None and not self._stop.is_set():
            if time.monotonic() > deadline:
                logger.warning(
                    "sim_leader key_script: no remote action within %gs, script not played",
                    self.config.key_script_timeout_s,
                )
                return
            self._stop.wait(0.02)
        start = time.monotonic()
        for at, key in self.script:
            if self._stop.wait(max(0.0, start + at - time.monotonic())):
                return
            logger.info("sim_leader key_script: pressing %r at +%.2fs", key, time.monotonic() - start)
            keypress.press(key)
            self.pressed.append((time.monotonic(), key))
