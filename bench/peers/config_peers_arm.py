"""A lerobot RobotConfig for the legacy arm, so lerobot's real RobotClient builds its robot itself.

lerobot finds the robot class by convention: `config_peers_arm.PeersArmConfig` -> `peers_arm.PeersArm`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.robots import RobotConfig


@RobotConfig.register_subclass("peers_arm")
@dataclass(kw_only=True)
class PeersArmConfig(RobotConfig):
    pass
