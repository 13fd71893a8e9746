"""The legacy arm's robot: 14 joints and two 640x480 cameras, whose next observation the bench sets."""

from __future__ import annotations

from typing import Any

import numpy as np
from lerobot.robots import Robot
from numpy.typing import NDArray

from .config_peers_arm import PeersArmConfig
from .workload import ACTION_NAMES, CAMERAS, HEIGHT, WIDTH, Images, frames, state


class PeersArm(Robot):
    config_class = PeersArmConfig
    name = "peers_arm"

    def __init__(self, config: PeersArmConfig) -> None:
        super().__init__(config)
        self._images = frames()
        self._state = state(0)
        self.sent: list[dict[str, Any]] = []

    def set_observation(self, images: Images, st: NDArray[np.float32]) -> None:
        self._images, self._state = images, st

    @property
    def observation_features(self) -> dict[str, type[float] | tuple[int, int, int]]:
        return {**{k: float for k in ACTION_NAMES}, **{c: (HEIGHT, WIDTH, 3) for c in CAMERAS}}

    @property
    def action_features(self) -> dict[str, type[float]]:
        return {k: float for k in ACTION_NAMES}

    @property
    def is_connected(self) -> bool:
        return True

    @property
    def is_calibrated(self) -> bool:
        return True

    def connect(self, calibrate: bool = True) -> None:
        pass

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def get_observation(self) -> dict[str, Any]:
        return {**{k: float(v) for k, v in zip(ACTION_NAMES, self._state, strict=True)}, **self._images}

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        return action

    def disconnect(self) -> None:
        pass
