"""lerobot-fleet: the operator console and fleet verbs. Never imports torch or lerobot."""

__version__ = "0.1.0"
