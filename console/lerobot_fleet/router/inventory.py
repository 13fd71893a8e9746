"""The fleet inventory: who exists, with which role, in which service namespaces.

One YAML file, written by `lerobot-fleet pki issue` (or by hand), read by `lerobot-fleet router --inventory`::

    version: 1
    robots:                       # NAME = the robot's --inference.client_uuid = its certificate CN
      arm-01: {}
      arm-02: {namespaces: [{model: lerobot/act_so100, service: pick}]}
    servers:                      # NAME = the server's replica id = its certificate CN
      act-0: {}
    operators: {alice: {}}
    viewers: {wallboard: {}}
    routers: {router-a: {hosts: [router-a.fleet.svc]}}

A namespace is `{model, revision, service}` (each defaults to `*`: any); an entry without `namespaces`
may use every namespace. Names are identifiers (they go into keys verbatim), checked like client_uuids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import WILD, ServiceKeys, check_id, encode_segment

ROLES = ("robot", "server", "operator", "viewer", "router")
SECTIONS = {role: f"{role}s" for role in ROLES}  # role -> YAML section


class InventoryError(ValueError):
    """The inventory cannot be used; the message names the entry and what to change."""


@dataclass(frozen=True)
class NamespaceGrant:
    """The service namespaces a member may use: a pattern, `*` in a field matches any value.

    Not `wire.keys.Namespace` (one decoded namespace a key lives in): a grant may name many.
    """

    model: str = WILD
    revision: str = WILD
    service: str = WILD

    def keys(self) -> ServiceKeys:
        """The key builder for this namespace (free text escaped exactly as the programs escape it)."""

        def enc(value: str, name: str) -> str:
            return value if value == WILD else encode_segment(value, name)

        return ServiceKeys(enc(self.model, "model"), enc(self.revision, "revision"), enc(self.service, "service"))

    def to_yaml(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("model", self.model), ("revision", self.revision), ("service", self.service))
            if v != WILD
        }


ANY_NAMESPACE = NamespaceGrant()


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    namespaces: tuple[NamespaceGrant, ...] = (ANY_NAMESPACE,)
    hosts: tuple[str, ...] = ()  # routers only: extra DNS names / IPs on the certificate


@dataclass
class Inventory:
    members: list[Member] = field(default_factory=list)

    def by_role(self, role: str) -> list[Member]:
        return [m for m in self.members if m.role == role]

    def get(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)

    def with_member(self, member: Member) -> Inventory:
        """A copy with `member` added or replaced (a name has exactly one role)."""
        return Inventory([m for m in self.members if m.name != member.name] + [member])

    def to_yaml_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": 1}
        for role in ROLES:
            entries: dict[str, Any] = {}
            for m in sorted(self.by_role(role), key=lambda m: m.name):
                body: dict[str, Any] = {}
                if m.namespaces != (ANY_NAMESPACE,) or m.role == "server":  # a server's grant is always written out
                    body["namespaces"] = [ns.to_yaml() for ns in m.namespaces]
                if m.hosts:
                    body["hosts"] = list(m.hosts)
                entries[m.name] = body
            if entries:
                out[SECTIONS[role]] = entries
        return out


def parse_inventory(data: Any, source: str = "inventory") -> Inventory:
    """A loaded YAML document -> Inventory; every mistake is reported with where it is."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InventoryError(f"{source}: must be a mapping with sections {', '.join(SECTIONS.values())}")
    unknown = set(data) - set(SECTIONS.values()) - {"version"}
    if unknown:
        raise InventoryError(
            f"{source}: unknown section(s) {', '.join(sorted(map(str, unknown)))}; "
            f"known: {', '.join(SECTIONS.values())}"
        )
    if data.get("version", 1) != 1:
        raise InventoryError(f"{source}: version {data.get('version')!r} is not supported (use 1)")
    members: list[Member] = []
    seen: dict[str, str] = {}
    for role in ROLES:
        section = data.get(SECTIONS[role]) or {}
        if isinstance(section, list):  # a plain list of names is fine too
            section = {name: {} for name in section}
        if not isinstance(section, dict):
            raise InventoryError(f"{source}: {SECTIONS[role]} must map names to settings")
        for name, body in section.items():
            where = f"{source}: {SECTIONS[role]}.{name}"
            try:
                check_id(str(name), "name")
            except WireError as exc:
                raise InventoryError(f"{where}: {exc}") from exc
            if name in seen:
                raise InventoryError(f"{where}: {name!r} is already a {seen[name]}; one certificate name has one role")
            seen[name] = role
            members.append(_member(str(name), role, body or {}, where))
    return Inventory(members)


def _member(name: str, role: str, body: Any, where: str) -> Member:
    if not isinstance(body, dict):
        raise InventoryError(f"{where}: settings must be a mapping (e.g. {{}})")
    unknown = set(body) - {"namespaces", "hosts"}
    if unknown:
        raise InventoryError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; known: namespaces, hosts")
    raw = body.get("namespaces")
    namespaces: tuple[NamespaceGrant, ...] = (ANY_NAMESPACE,)
    if raw is None and role == "server":
        raise InventoryError(
            f"{where}: a server must name the namespaces it serves, e.g. namespaces: [{{model: lerobot/act_so100, "
            "service: pick}] (`lerobot-fleet pki issue DIR NAME --role server --namespace model=...,service=...`); "
            "a server certificate may declare and answer only there"
        )
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            raise InventoryError(f"{where}.namespaces: must be a non-empty list of {{model, revision, service}}")
        namespaces = tuple(_namespace(ns, f"{where}.namespaces[{i}]") for i, ns in enumerate(raw))
    hosts = body.get("hosts") or []
    if hosts and role != "router":
        raise InventoryError(f"{where}: only routers have hosts")
    return Member(name, role, namespaces, tuple(str(h) for h in hosts))


def _namespace(raw: Any, where: str) -> NamespaceGrant:
    if not isinstance(raw, dict) or set(raw) - {"model", "revision", "service"}:
        raise InventoryError(f"{where}: a namespace is a mapping with model, revision and/or service")
    ns = NamespaceGrant(*(str(raw.get(k, WILD)) for k in ("model", "revision", "service")))
    try:
        ns.keys()
    except WireError as exc:
        raise InventoryError(f"{where}: {exc}") from exc
    return ns


def parse_namespace_flag(text: str) -> NamespaceGrant:
    """`model=M,service=S[,revision=R]` (each field optional, `*` or absent = any) -> a grant; for
    `pki issue --namespace`."""
    fields: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("model", "revision", "service") or not value:
            raise InventoryError(
                f"--namespace {text!r}: write model=MODEL,service=SERVICE[,revision=REV] (any field may be '*')"
            )
        fields[key] = value
    if not fields:
        raise InventoryError(f"--namespace {text!r} names nothing: write model=MODEL,service=SERVICE")
    return _namespace(fields, f"--namespace {text!r}")


def load_inventory(path: str | Path) -> Inventory:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InventoryError(
            f"inventory {str(p)!r} does not exist: create it with `lerobot-fleet pki issue` or by hand"
        )
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise InventoryError(f"inventory {str(p)!r} is not valid YAML: {exc}") from exc
    return parse_inventory(data, str(p))


def save_inventory(inv: Inventory, path: str | Path) -> None:
    import yaml

    header = "# lerobot-fleet inventory: certificate common names and their roles (see docs/security.md)\n"
    Path(path).write_text(header + yaml.safe_dump(inv.to_yaml_dict(), sort_keys=False))
