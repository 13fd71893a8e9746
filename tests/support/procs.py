"""Moved to `lerobot_policy_remote.testing.procs`; this name stays for test files not yet switched over."""

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, Router, free_port

__all__ = ["VENV_BIN", "Proc", "Router", "free_port"]
