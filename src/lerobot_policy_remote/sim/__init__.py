"""Simulated robots and the `rtc_toy` policy (lerobot plugins for tests and the demo)."""

from .configuration_rtc_toy import RtcToyConfig
from .robot import SimArm, SimArmConfig, SimBase, SimBaseConfig, SimCameraConfig
from .teleop import SimLeader, SimLeaderConfig

__all__ = [
    "RtcToyConfig",
    "SimArm",
    "SimArmConfig",
    "SimBase",
    "SimBaseConfig",
    "SimCameraConfig",
    "SimLeader",
    "SimLeaderConfig",
]
