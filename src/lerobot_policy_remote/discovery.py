"""Which policy services a router offers, and which one a mistyped request probably meant.

Used by the robot when no server answers its namespace, and by `lerobot-fleet doctor` / the console.
Torch-, numpy- and cv2-free: only zenoh and the wire control messages.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from typing import Any

from .wire.codec import decode
from .wire.errors import WireError
from .wire.keys import Namespace, ServiceKeys, parse_key
from .wire.messages import ServerStatus
from .wire.text import printable

logger = logging.getLogger(__name__)

ANY = ServiceKeys.any()


@dataclass
class ReplicaInfo:
    replica: str
    active_sessions: int
    max_sessions: int
    draining: bool
    warmed_up: bool
    load: float
    cordoned: bool = False

    @property
    def free_sessions(self) -> int:
        return 0 if self.draining or self.cordoned else max(0, self.max_sessions - self.active_sessions)

    @property
    def health(self) -> str:
        """What a robot opening a session would meet: ok | full | draining | cordoned | warming."""
        if self.draining:
            return "draining"
        if self.cordoned:
            return "cordoned"
        if not self.warmed_up:
            return "warming"
        return "full" if self.free_sessions == 0 else "ok"


@dataclass
class ServiceInfo:
    """One namespace `(model, revision, service)` and the replicas serving it."""

    model_id: str
    revision: str
    service: str
    policy_type: str = ""
    default_task: str = ""
    replicas: list[ReplicaInfo] = field(default_factory=list)

    @property
    def free_sessions(self) -> int:
        return sum(r.free_sessions for r in self.replicas)

    def describe(self) -> str:
        n = len(self.replicas)
        return (f"model {self.model_id!r} revision {self.revision!r} task {self.service!r}: "
                f"{n} replica{'s' if n != 1 else ''}, {self.free_sessions} free session{'s' if self.free_sessions != 1 else ''}")

    def to_dict(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "revision": self.revision, "task": self.service, "policy_type": self.policy_type,
                "free_sessions": self.free_sessions,
                "replicas": [{"replica": r.replica, "health": r.health, "active_sessions": r.active_sessions,
                              "max_sessions": r.max_sessions, "free_sessions": r.free_sessions, "load": r.load}
                             for r in self.replicas]}


def key_vouches_for(status: ServerStatus, key: str) -> bool:
    """A status reply is believed only when the key it came on (which the router's ACL lets only that replica
    answer on) names the replica and service its body claims: a server cannot speak for another."""
    try:
        parsed = parse_key(key)
    except WireError:
        return False
    return (parsed.role == "server" and parsed.leaf == "status" and parsed.ident == status.replica
            and (not status.service or parsed.service == status.service))


def query_statuses(session: Any, timeout: float = 2.0, keys: ServiceKeys = ANY) -> list[tuple[ServerStatus, Namespace]]:
    """`get(<keys>/server/*/status)`; undecodable replies are skipped, each reply keeps its namespace."""
    import zenoh

    out = []
    # NONE: every replica's reply arrives even if several reply on the same (wildcard) key, which the
    # default consolidation would collapse into one.
    for reply in session.get(keys.server("*", "status"), timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE):
        if reply.ok is None:
            continue
        try:
            status = decode(ServerStatus, reply.ok.payload.to_bytes())
        except WireError:
            continue
        key = str(reply.ok.key_expr)
        if not key_vouches_for(status, key):
            logger.warning("Ignoring a status reply on %s that claims replica %s", key, printable(status.replica, 80))
            continue
        out.append((status, parse_key(key).namespace))
    return out


def group(statuses: list[tuple[ServerStatus, Namespace]]) -> list[ServiceInfo]:
    """Replica statuses -> one ServiceInfo per namespace, sorted by model then task."""
    by_ns: dict[Namespace, ServiceInfo] = {}
    for status, ns in statuses:
        svc = by_ns.setdefault(ns, ServiceInfo(ns.model_id, ns.revision, ns.service, status.model.policy_type, status.default_task))
        if any(r.replica == status.replica for r in svc.replicas):
            continue
        svc.replicas.append(ReplicaInfo(status.replica, status.active_sessions, status.max_sessions, status.draining,
                                        status.warmed_up, status.load, status.cordoned))
    for svc in by_ns.values():
        svc.replicas.sort(key=lambda r: r.replica)
    return sorted(by_ns.values(), key=lambda s: (s.model_id, s.revision, s.service))


def list_services(session: Any, timeout: float = 2.0) -> list[ServiceInfo]:
    return group(query_statuses(session, timeout))


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip().lower(), b.strip().lower()).ratio()


def closest(services: list[ServiceInfo], model_id: str, revision: str, task: str) -> ServiceInfo | None:
    """The service whose (task, model, revision) is most similar to the request; None if nothing is close.

    The task weighs most: it is free text typed per rollout, the usual source of a one-letter miss.
    """
    best, best_score = None, 0.0
    for svc in services:
        score = 2.0 * _ratio(task, svc.service) + _ratio(model_id, svc.model_id) + 0.5 * (revision == svc.revision)
        if score > best_score:
            best, best_score = svc, score
    return best if best_score >= 1.5 else None


def fix_for(match: ServiceInfo, model_id: str, revision: str, task: str) -> str:
    """The flags that would make the request land on `match` (robot-side names)."""
    fixes = []
    if match.service != task:
        fixes.append(f"--task={match.service!r} (or --inference.service_task={match.service!r})")
    if match.model_id != model_id:
        fixes.append(f"--inference.service_model_id={match.model_id!r}")
    if match.revision != revision:
        fixes.append(f"--inference.service_revision={match.revision!r}")
    return " ".join(fixes)


def no_server_report(services: list[ServiceInfo], model_id: str, revision: str, task: str) -> str:
    """Why nothing answered, what the router does offer, and the closest match with the flags to reach it."""
    asked = f"model {model_id!r} revision {revision!r} task {task!r}"
    if not services:
        return (f"No policy server serves {asked}, and the router has no policy server at all. Start one connected to "
                "this router: lerobot-policy-server --model.repo_or_path=<checkpoint> --default_task=<task> "
                "--zenoh.connect_endpoints=[<router endpoint>]")
    lines = [f"No policy server serves {asked}. The router offers {len(services)} service{'s' if len(services) != 1 else ''}:"]
    lines += [f"  - {svc.describe()}" for svc in services]
    match = closest(services, model_id, revision, task)
    if match is not None:
        lines.append(f"Closest match: {match.describe()}. To use it: {fix_for(match, model_id, revision, task)}")
    else:
        lines.append("None is close to what you asked: start a server for it, or pick one of the above "
                     "(--task, --inference.service_model_id, --inference.service_revision).")
    return "\n".join(lines)
