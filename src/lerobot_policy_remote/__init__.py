"""Remote policy inference for LeRobot over Zenoh.

This module is imported by lerobot's `register_third_party_plugins()` (the distribution name starts
with `lerobot_policy_`). It stays cheap: the lerobot hooks (`--inference.type=remote`, the simulated
robot) are registered only when lerobot itself is already loaded, so the console and the wire
package can import us without pulling in torch.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"


def register_lerobot_plugins() -> None:
    """Register the remote inference backend and the simulated robot with lerobot."""
    from .plugin import register

    register()


if "lerobot" in sys.modules:
    register_lerobot_plugins()
