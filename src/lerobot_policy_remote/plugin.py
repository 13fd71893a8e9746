"""Hooks into stock lerobot 0.6.1: `--inference.type=remote`, `--robot.type=sim_arm|sim_base`, `rtc_toy`.

Called from the package `__init__` when lerobot is already imported (e.g. by
`register_third_party_plugins()` inside `lerobot-rollout` or `lerobot-policy-server`).
"""

from __future__ import annotations

_done = False


def register() -> None:
    """Idempotent: registering a draccus choice twice raises, so guard it."""
    global _done
    if _done:
        return
    from .engine import hook
    from .engine.config import RemoteInferenceConfig  # noqa: F401  (registers "remote")
    from .sim import RtcToyConfig, SimArmConfig, SimBaseConfig, SimLeaderConfig  # noqa: F401  (sim robots, sim_leader, rtc_toy)

    hook.install()
    _done = True
