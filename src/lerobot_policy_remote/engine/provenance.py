"""Where the last action handed to the robot came from (no lerobot import: the sim robot reads it).

One type, `Provenance`, stamps every queued action (the queue keeps one per action, `source_age_s`
left at 0) and describes the last executed one (with its age). The simulated robot records the
stamp next to the command it received, so tests can prove which server chunk drove the motors, and which model
(`fingerprint`): a move to another model switches it exactly once, at the first chunk of the new model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Provenance:
    session_id: str
    seq_id: int
    episode_id: int
    replica: str = ""
    source_age_s: float = 0.0
    fingerprint: str = ""  # the checkpoint that computed the chunk (the session's pinned one)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# One module global, replaced (never mutated) by a single assignment: atomic under the GIL, so the
# control thread publishes without a lock or an allocation beyond the tuple.
_latest: tuple[Provenance, float] | None = None
_degraded = False  # the last handed action was taken while the link was not STREAMING, or was a fallback


def publish(p: Provenance | None, age_s: float = 0.0, degraded: bool = False) -> None:
    """Hot path: stash the chunk's stamp and the action's age; the aged copy is built lazily.

    `degraded` marks the tick for recorded datasets (`remote.degraded`): an action executed while the
    link was DEGRADED/STALLED/RECONNECTING, or a fallback (published with `p=None, degraded=True`).
    """
    global _latest, _degraded
    _latest = (p, age_s) if p is not None else None
    _degraded = degraded


def degraded() -> bool:
    return _degraded


def latest() -> Provenance | None:
    p = _latest
    if p is None:
        return None
    m, age = p  # built field by field: `dataclasses.replace` cost 10 us per executed action
    return Provenance(m.session_id, m.seq_id, m.episode_id, m.replica, age, m.fingerprint)


def latest_fingerprint() -> str | None:
    """Only the last action's model (None: it was a fallback): for a recorder counting model switches."""
    p = _latest
    return None if p is None else p[0].fingerprint


def latest_age() -> float | None:
    """Only the last action's age (None: it was a fallback): for callers that record nothing else."""
    p = _latest
    return None if p is None else p[1]
