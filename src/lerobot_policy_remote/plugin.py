"""Hooks into stock lerobot 0.6.1 (filled in by the robot-side work)."""

from __future__ import annotations


def register() -> None:
    """Nothing to register until the remote engine and the sim robot exist."""
