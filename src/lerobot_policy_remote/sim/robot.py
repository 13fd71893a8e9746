"""Simulated robots as lerobot Robot plugins: `--robot.type=sim_arm` (position) and `sim_base` (velocity).

Why: the remote backend must be exercised through the stock `lerobot-rollout` CLI without hardware.
Joints follow a first-order lag toward their command; cameras render a synthetic scene that moves
with the joints (so observations change with the policy's actions). Every command that reaches the
"motors" is recorded in memory and, with `--robot.record_path=...`, as one JSON line with the
provenance (session_id, seq_id, episode_id, replica, fingerprint) of the remote action, so tests can check exactly
which actions were executed, and from which model (a move to another model switches the fingerprint once).
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from lerobot.robots.config import RobotConfig
from lerobot.robots.robot import Robot
from numpy.typing import NDArray

ARM_MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
BASE_AXES = ("x", "y", "theta")


@dataclass
class SimCameraConfig:
    """A synthetic camera (width/height/fps are what lerobot's camera pre-flight expects)."""

    height: int = 96
    width: int = 128
    fps: int = 30


def _default_cameras() -> dict[str, SimCameraConfig]:
    return {"front": SimCameraConfig()}


@dataclass(kw_only=True)
class SimRobotConfigBase(RobotConfig):
    cameras: dict[str, SimCameraConfig] = field(default_factory=_default_cameras)
    time_constant_s: float = 0.1  # first-order lag of the joints
    record_path: str | None = None  # JSONL of every commanded action (+ provenance)
    max_records: int = 100_000  # in-memory bound


@RobotConfig.register_subclass("sim_arm")
@dataclass(kw_only=True)
class SimArmConfig(SimRobotConfigBase):
    """Position-controlled 6-joint arm; action keys `<motor>.pos`."""

    initial_positions: list[float] = field(default_factory=lambda: [0.0, -30.0, 40.0, 20.0, 0.0, 25.0])


@RobotConfig.register_subclass("sim_base")
@dataclass(kw_only=True)
class SimBaseConfig(SimRobotConfigBase):
    """Velocity-controlled mobile base; action keys `x.vel`, `y.vel`, `theta.vel`."""


class _SimRobot(Robot):
    """Shared dynamics, rendering and recording; subclasses say which keys are commanded."""

    command_suffix = ".pos"
    joints: tuple[str, ...] = ()

    def __init__(self, config: SimRobotConfigBase) -> None:
        super().__init__(config)
        self.config = config
        self._connected = False
        self._lock = threading.Lock()
        n = len(self.joints)
        self.q = np.zeros(n, dtype=np.float64)  # measured joint value (pos or vel)
        self.target = np.zeros(n, dtype=np.float64)
        self.pose = np.zeros(3, dtype=np.float64)  # base pose (sim_base only)
        self._t_last = time.monotonic()
        self.commands: list[dict[str, Any]] = []  # every command that reached the motors
        self._record_file: TextIO | None = None
        self.cameras = dict(config.cameras)

    # -- lerobot Robot API -------------------------------------------------
    @property
    def _motor_keys(self) -> list[str]:
        return [f"{j}{self.command_suffix}" for j in self.joints]

    @property
    def observation_features(self) -> dict[str, type[float] | tuple[int, int, int]]:
        feats: dict[str, type[float] | tuple[int, int, int]] = {k: float for k in self._motor_keys}
        for name, cam in self.config.cameras.items():
            feats[name] = (cam.height, cam.width, 3)
        return feats

    @property
    def action_features(self) -> dict[str, type[float]]:
        return {k: float for k in self._motor_keys}

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def is_calibrated(self) -> bool:
        return True

    def connect(self, calibrate: bool = True) -> None:
        if self.config.record_path:
            Path(self.config.record_path).parent.mkdir(parents=True, exist_ok=True)
            self._record_file = open(self.config.record_path, "a", buffering=1)  # noqa: SIM115
        self._t_last = time.monotonic()
        self._connected = True

    def calibrate(self) -> None:
        """Nothing to calibrate in simulation."""

    def configure(self) -> None:
        """Nothing to configure in simulation."""

    def get_observation(self) -> dict[str, Any]:
        with self._lock:
            self._step()
            obs: dict[str, Any] = {k: float(v) for k, v in zip(self._motor_keys, self.q, strict=True)}
            for name, cam in self.config.cameras.items():
                obs[name] = self._render(cam, name)
        return obs

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        from ..engine.provenance import degraded, latest

        cmd = {k: float(action[k]) for k in self._motor_keys if k in action}
        with self._lock:
            self._step()
            for i, k in enumerate(self._motor_keys):
                if k in cmd and math.isfinite(cmd[k]):
                    self.target[i] = cmd[k]
            prov = latest()
            rec = {
                "t": time.monotonic(),
                "action": cmd,
                "provenance": prov.as_dict() if prov else None,
                "degraded": degraded(),
            }
            if len(self.commands) < self.config.max_records:
                self.commands.append(rec)
            if self._record_file is not None:
                self._record_file.write(json.dumps(rec) + "\n")
        return cmd

    def disconnect(self) -> None:
        self._connected = False
        if self._record_file is not None:
            self._record_file.close()
            self._record_file = None

    # -- simulation -----------------------------------------------------------
    def _step(self) -> None:
        now = time.monotonic()
        dt = max(0.0, now - self._t_last)
        self._t_last = now
        alpha = 1.0 - math.exp(-dt / max(self.config.time_constant_s, 1e-6))
        self.q += (self.target - self.q) * alpha
        self._integrate(dt)

    def _integrate(self, dt: float) -> None:
        """Position robots have nothing more to integrate."""

    def _scene_xy(self) -> tuple[float, float, float]:
        """Shape centre (0..1, 0..1) and hue (0..1) derived from the joint state."""
        a, b = (self.q[0], self.q[1]) if len(self.q) > 1 else (self.q[0], 0.0)
        hue = (self.q[-1] % 100.0) / 100.0
        return 0.5 + 0.4 * math.sin(math.radians(a)), 0.5 + 0.4 * math.sin(math.radians(b)), hue

    def _render(self, cam: SimCameraConfig, name: str) -> NDArray[np.uint8]:
        h, w = cam.height, cam.width
        img = np.empty((h, w, 3), dtype=np.uint8)
        img[..., 0] = np.linspace(20, 60, w, dtype=np.uint8)[None, :]
        img[..., 1] = np.linspace(30, 80, h, dtype=np.uint8)[:, None]
        img[..., 2] = 40 + (hash(name) % 40)
        cx, cy, hue = self._scene_xy()
        size = max(2, min(h, w) // 6)
        x0, y0 = int(cx * (w - size)), int(cy * (h - size))
        img[y0 : y0 + size, x0 : x0 + size] = (int(255 * hue), 200, int(255 * (1 - hue)))
        return img


class SimArm(_SimRobot):
    config_class = SimArmConfig
    name = "sim_arm"
    command_suffix = ".pos"
    joints = ARM_MOTORS

    def __init__(self, config: SimArmConfig) -> None:
        super().__init__(config)
        init = np.asarray(config.initial_positions, dtype=np.float64)
        if init.shape != (len(self.joints),):
            raise ValueError(f"sim_arm needs {len(self.joints)} initial positions, got {len(init)}")
        self.q[:] = init
        self.target[:] = init


class SimBase(_SimRobot):
    config_class = SimBaseConfig
    name = "sim_base"
    command_suffix = ".vel"
    joints = BASE_AXES

    def _integrate(self, dt: float) -> None:
        c, s = math.cos(self.pose[2]), math.sin(self.pose[2])
        self.pose[0] += (c * self.q[0] - s * self.q[1]) * dt
        self.pose[1] += (s * self.q[0] + c * self.q[1]) * dt
        self.pose[2] += self.q[2] * dt

    def _scene_xy(self) -> tuple[float, float, float]:
        return 0.5 + 0.4 * math.tanh(self.pose[0]), 0.5 + 0.4 * math.tanh(self.pose[1]), (self.pose[2] % 1.0)
