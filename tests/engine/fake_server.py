"""Moved to `lerobot_policy_remote.testing.fake_server` (the kit's protocol-exact replica); kept as an alias."""

from lerobot_policy_remote.testing.fake_server import FakeServer, Faults

__all__ = ["FakeServer", "Faults"]
