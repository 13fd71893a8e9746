"""Where the last action handed to the robot came from (no lerobot import: the sim robot reads it).

The engine stamps each action it returns; the simulated robot records the stamp next to the command
it received, so tests can prove which server chunk drove the motors.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Provenance:
    session_id: str
    seq_id: int
    episode_id: int
    replica: str = ""
    source_age_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


_lock = threading.Lock()
_latest: Provenance | None = None


def publish(p: Provenance | None) -> None:
    global _latest
    with _lock:
        _latest = p


def latest() -> Provenance | None:
    with _lock:
        return _latest
