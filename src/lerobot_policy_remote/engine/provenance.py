"""Where the last action handed to the robot came from (no lerobot import: the sim robot reads it).

The engine stamps each action it returns; the simulated robot records the stamp next to the command
it received, so tests can prove which server chunk drove the motors.
"""

from __future__ import annotations

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


# One module global, replaced (never mutated) by a single assignment: atomic under the GIL, so the
# control thread publishes without a lock or an allocation beyond the tuple.
_latest: Provenance | tuple | None = None


def publish(p: Provenance | None) -> None:
    global _latest
    _latest = p


def publish_meta(meta, age_s: float) -> None:
    """Hot path: stash the chunk metadata (session_id, seq_id, episode_id, replica) + age; built lazily."""
    global _latest
    _latest = (meta, age_s)


def latest() -> Provenance | None:
    p = _latest
    if isinstance(p, tuple):
        meta, age = p
        return Provenance(meta.session_id, meta.seq_id, meta.episode_id, meta.replica, age)
    return p
