"""Which policy services a router offers, and which one a mistyped request probably meant.

Used by the robot when no server answers its namespace, and by `lerobot-fleet doctor` / the console.
Torch-, numpy- and cv2-free: only zenoh and the wire control messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .wire.codec import decode
from .wire.errors import WireError
from .wire.keys import WILD, Namespace, ServiceKeys, encode_segment, parse_key
from .wire.messages import ServerStatus
from .wire.text import printable

logger = logging.getLogger(__name__)

ANY = ServiceKeys.any()
# The namespaces a certificate was issued for, written by `lerobot-fleet pki issue` as a non-critical extension (an
# OID under 2.25, derived from a UUID, needs no registration; TLS stacks ignore unknown non-critical extensions), so a
# robot the router answers nothing can say what its certificate may see without holding the router's inventory.
SCOPES_OID = "2.25.219082697486320605642689879724296155964"
MAX_SCOPES = 32  # a certificate names a handful; more is not ours


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
        return (
            f"model {self.model_id!r} revision {self.revision!r} task {self.service!r}: "
            f"{n} replica{'s' if n != 1 else ''}, "
            f"{self.free_sessions} free session{'s' if self.free_sessions != 1 else ''}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "revision": self.revision,
            "task": self.service,
            "policy_type": self.policy_type,
            "free_sessions": self.free_sessions,
            "replicas": [
                {
                    "replica": r.replica,
                    "health": r.health,
                    "active_sessions": r.active_sessions,
                    "max_sessions": r.max_sessions,
                    "free_sessions": r.free_sessions,
                    "load": r.load,
                }
                for r in self.replicas
            ],
        }


def free_seats(status: ServerStatus) -> int:
    """Seats left on a replica; an unbounded one (max_sessions 0) counts as having plenty; a cordoned one, none."""
    if status.cordoned:
        return 0
    if status.max_sessions <= 0:
        return _UNBOUNDED_SEATS - status.active_sessions
    return max(0, status.max_sessions - status.active_sessions)


_UNBOUNDED_SEATS = 1 << 16


def key_vouches_for(status: ServerStatus, key: str) -> bool:
    """A status reply is believed only when the key it came on (which the router's ACL lets only that replica
    answer on) names the replica and service its body claims: a server cannot speak for another."""
    try:
        parsed = parse_key(key)
    except WireError:
        return False
    return (
        parsed.role == "server"
        and parsed.leaf == "status"
        and parsed.ident == status.replica
        and (not status.service or parsed.service == status.service)
    )


def query_statuses(
    session: Any, timeout: float = 2.0, keys: ServiceKeys = ANY, scopes: Sequence[ServiceKeys] = ()
) -> list[tuple[ServerStatus, Namespace]]:
    """`get(<keys>/server/*/status)`, and the same in each of `scopes` (under an ACL a certificate bound to some
    namespaces may ask only there); all queries run at once. Undecodable replies are skipped, each reply keeps its
    namespace."""
    import zenoh

    out = []
    # NONE: every replica's reply arrives even if several reply on the same (wildcard) key, which the
    # default consolidation would collapse into one.
    asked = [
        session.get(k.server("*", "status"), timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE)
        for k in dict.fromkeys([keys, *scopes])
    ]
    for reply in (r for replies in asked for r in replies):
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
        svc = by_ns.setdefault(
            ns, ServiceInfo(ns.model_id, ns.revision, ns.service, status.model.policy_type, status.default_task)
        )
        if any(r.replica == status.replica for r in svc.replicas):
            continue
        svc.replicas.append(
            ReplicaInfo(
                status.replica,
                status.active_sessions,
                status.max_sessions,
                status.draining,
                status.warmed_up,
                status.load,
                status.cordoned,
            )
        )
    for svc in by_ns.values():
        svc.replicas.sort(key=lambda r: r.replica)
    return sorted(by_ns.values(), key=lambda s: (s.model_id, s.revision, s.service))


def list_services(session: Any, timeout: float = 2.0, scopes: Sequence[ServiceKeys] = ()) -> list[ServiceInfo]:
    return group(query_statuses(session, timeout, scopes=scopes))


@dataclass(frozen=True)
class Scope:
    """One namespace pattern a certificate may use (`*` in a field: any value); the console's inventory calls it a
    namespace grant."""

    model: str = WILD
    revision: str = WILD
    service: str = WILD

    def covers(self, model: str, revision: str, service: str) -> bool:
        return all(
            mine in (WILD, theirs)
            for mine, theirs in ((self.model, model), (self.revision, revision), (self.service, service))
        )

    def keys(self) -> ServiceKeys:
        """The key builder of this pattern, escaped as the programs escape free text."""
        enc: Callable[[str, str], str] = lambda value, name: value if value == WILD else encode_segment(value, name)  # noqa: E731
        return ServiceKeys(enc(self.model, "model"), enc(self.revision, "revision"), enc(self.service, "service"))

    def flag(self) -> str:
        """The `--namespace` value of `lerobot-fleet pki issue` (fields left at `*` omitted)."""
        return namespace_flag(self.model, self.revision, self.service)


def namespace_flag(model: str, revision: str, service: str) -> str:
    """`model=M,service=S[,revision=R]` for `lerobot-fleet pki issue --namespace` (`*` and revision main omitted)."""
    parts = [
        f"model={model}" if model != WILD else "",
        f"service={service}" if service != WILD else "",
        f"revision={revision}" if revision not in (WILD, "main") else "",
    ]
    return ",".join(p for p in parts if p) or "model=*"


def encode_scopes(scopes: Sequence[Scope]) -> bytes:
    """The extension's value: a DER UTF8String holding a JSON list of {model, revision, service}."""
    text = json.dumps(
        [{"model": s.model, "revision": s.revision, "service": s.service} for s in scopes], separators=(",", ":")
    ).encode()
    n = len(text)
    length = (
        bytes([n])
        if n < 0x80
        else bytes([0x80 | len(n.to_bytes((n.bit_length() + 7) // 8, "big"))])
        + n.to_bytes((n.bit_length() + 7) // 8, "big")
    )
    return b"\x0c" + length + text


def decode_scopes(value: bytes) -> tuple[Scope, ...]:
    """The inverse of `encode_scopes`; ValueError for anything else."""
    if len(value) < 2 or value[0] != 0x0C:
        raise ValueError("not a UTF8String")
    n, body = value[1], value[2:]
    if n & 0x80:
        width = n & 0x7F
        n, body = int.from_bytes(body[:width], "big"), body[width:]
    if n != len(body):
        raise ValueError("bad length")
    items = json.loads(body.decode())
    if not isinstance(items, list) or not items or len(items) > MAX_SCOPES:
        raise ValueError("not a list of namespaces")
    out = []
    for item in items:
        fields = [item.get(k, WILD) if isinstance(item, dict) else None for k in ("model", "revision", "service")]
        if not all(isinstance(f, str) and f for f in fields):
            raise ValueError("a namespace needs model, revision and service strings")
        out.append(Scope(*(str(f) for f in fields)))
    return tuple(out)


def certificate_scopes(cert_path: str) -> tuple[tuple[Scope, ...], str]:
    """The namespaces the certificate at `cert_path` may use, and where that was read: its own extension (`pki issue`
    writes it), else the `inventory.yaml` beside it (a `pki` directory; certificates issued before the extension).
    ((), "") when neither tells (another CA, a copied certificate)."""
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    except (OSError, ValueError):
        return (), ""
    try:
        ext = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier(SCOPES_OID))
        # our own OID: cryptography leaves it unparsed (anything else fails below as an AttributeError)
        return decode_scopes(cast(x509.UnrecognizedExtension, ext.value).value), "certificate"
    except x509.ExtensionNotFound:
        pass
    except (ValueError, UnicodeDecodeError, AttributeError) as exc:
        logger.debug("unreadable namespaces extension in %s: %s", cert_path, exc)
        return (), ""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    inventory = Path(cert_path).parent / "inventory.yaml"
    if not names or not inventory.is_file():
        return (), ""
    return _inventory_scopes(inventory, str(names[0].value))


def _inventory_scopes(path: Path, name: str) -> tuple[tuple[Scope, ...], str]:
    """NAME's namespaces in a `lerobot-fleet` inventory file (an entry without `namespaces` may use any)."""
    try:
        import yaml

        data = yaml.safe_load(path.read_text()) or {}
        for section in ("robots", "servers", "operators", "viewers"):
            entries = data.get(section) or {}
            if isinstance(entries, list):
                entries = {n: {} for n in entries}
            if name in entries:
                raw = (entries[name] or {}).get("namespaces")
                if raw is None:
                    return (Scope(),), str(path)
                return tuple(
                    Scope(*(str(ns.get(k, WILD)) for k in ("model", "revision", "service"))) for ns in raw[:MAX_SCOPES]
                ), str(path)
    except Exception as exc:  # a courtesy for a better message: never a reason to fail
        logger.debug("could not read %s: %s", path, exc)
    return (), ""
