"""Moved to `lerobot_policy_remote.testing.fake_robot` (the kit's protocol-exact robot); kept as an alias."""

from lerobot_policy_remote.testing.fake_robot import FakeRobot as Robot
from lerobot_policy_remote.testing.fake_robot import default_features

__all__ = ["Robot", "default_features"]
