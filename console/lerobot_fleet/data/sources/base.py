"""The source seam (like httpx's transport): the app talks to this protocol, tests swap implementations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from lerobot_policy_remote.wire.keys import Namespace

from ..store import FleetStore


@dataclass(frozen=True)
class ActionResult:
    """What an operator action returned, in words the result line can show as is."""

    ok: bool
    target: str
    action: str  # "drain" | "cordon" | "uncordon" | "reset"
    message: str
    sessions: tuple[str, ...] = ()
    episode_id: int | None = None
    details: dict[str, object] = field(default_factory=dict)

    def summary(self) -> str:
        head = f"{self.action} {self.target}: {'ok' if self.ok else 'FAILED'}"
        extra = []
        if self.message:
            extra.append(self.message)
        if self.sessions:
            extra.append(f"{len(self.sessions)} session(s) affected")
        if self.episode_id is not None and self.ok:
            extra.append(f"episode now {self.episode_id}")
        return head + (" — " + "; ".join(extra) if extra else "")


class FleetSource(Protocol):
    """Feeds a store; performs operator actions. `start` must return quickly (work runs on threads)."""

    label: str
    can_act: bool

    def start(self, store: FleetStore) -> None: ...

    def stop(self) -> bool | None:
        """Stop feeding the store; False when a thread did not end in time."""
        ...

    def drain(self, replica: str, reason: str, requested_by: str) -> ActionResult: ...

    def cordon(self, replica: str, on: bool, reason: str, requested_by: str) -> ActionResult:
        """`on`: the replica admits no new sessions (its sessions keep streaming); off: it admits them again."""
        ...

    def reset_episode(self, robot_id: str, reason: str, requested_by: str, ns: Namespace | None = None) -> ActionResult:
        """`ns` picks the robot when one id exists in several namespaces (rows are keyed by both)."""
        ...
