"""Inventory -> the router's `access_control` config (pure: no I/O, no zenoh import).

Zenoh 1.10 facts this relies on (docs/decisions.md "ACL generation"):
- default_permission "deny": a message is allowed only if an allow rule's key expression *includes* its key,
  for the subject the router matched by the peer's certificate common name. An unknown CN matches no subject.
- both directions are checked: a client's own messages are `ingress`, what the router forwards to it is
  `egress`. A query needs ingress at the caller and egress at the queryable; a reply the reverse.
- `**` never matches a verbatim chunk, so `@lerobot/...` and the admin space `@/...` get rules of their own.

What each role may *do* is decided on ingress (precise keys built with `ServiceKeys`, the one key builder).
Egress rules are deliberately wide (any namespace): a message only reaches a client if that client declared
an interest it was allowed to declare, and a wildcard query (`.../server/*/status`) must still be deliverable
to a replica whose own key is narrower.
"""

from __future__ import annotations

from typing import Any

from lerobot_policy_remote.wire.keys import ROLLOUT_CONTROL_KEY, ROLLOUT_STATUS_KEY, ROOT, ServiceKeys

from .inventory import ANY_NAMESPACE, Inventory, Member
from .refused_board import REFUSED_KEY

ALL_MESSAGES = (
    "put",
    "delete",
    "declare_subscriber",
    "query",
    "declare_queryable",
    "reply",
    "liveliness_token",
    "declare_liveliness_subscriber",
    "liveliness_query",
)
# Routing metadata the router forwards to every client (it never carries data); zenoh also checks its
# interest messages as liveliness queries.
DECLARATIONS = ("declare_subscriber", "declare_queryable", "declare_liveliness_subscriber", "liveliness_query")
ADMIN = "@/**"
ANY = ServiceKeys.any()
EVERYTHING = f"{ROOT}/**"
REFUSED_BOARDS = f"{REFUSED_KEY}/*"  # each router's board of refused servers (acl_log.py, router.py)

# (flow, messages, key expressions)
Grant = tuple[str, tuple[str, ...], list[str]]


def _robot(m: Member) -> list[Grant]:
    r = m.name
    grants: list[Grant] = []
    for ns in m.namespaces:
        k = ns.keys()
        grants += [
            ("ingress", ("put",), [k.obs("*", r), k.robot(r, "telemetry")]),
            ("ingress", ("liveliness_token",), [k.robot(r, "alive")]),
            ("ingress", ("declare_subscriber",), [k.robot(r, "action")]),
            (
                "ingress",
                ("declare_queryable", "reply"),
                [k.robot(r, "episode_reset"), k.robot(r, "telemetry"), k.robot(r, "move")],
            ),
            # only its own session and reset keys: one robot can never open, replace or reset another's session
            ("ingress", ("query",), [k.server("*", "status"), k.session("*", r), k.reset("*", r)]),
            ("ingress", ("declare_liveliness_subscriber", "liveliness_query"), [k.server("*", "alive")]),
        ]
    return grants + [
        ("egress", ("put",), [ANY.robot(r, "action")]),
        # a reader asks every robot's telemetry at once (one wildcard query); the robot answers on its own key only
        ("egress", ("query",), [ANY.robot(r, "episode_reset"), ANY.robot("*", "telemetry"), ANY.robot(r, "move")]),
        ("egress", ("reply",), [ANY.server("*", "status"), ANY.session("*", r), ANY.reset("*", r)]),
        ("egress", ("liveliness_token",), [ANY.server("*", "alive")]),
        ("egress", DECLARATIONS, [EVERYTHING]),
    ]


def _server(m: Member) -> list[Grant]:
    """A server acts only as its own replica and only in the namespaces the inventory names for it."""
    s = m.name
    grants: list[Grant] = []
    for ns in m.namespaces:
        k = ns.keys()
        grants += [
            (
                "ingress",
                ("declare_queryable", "reply"),
                [
                    k.server(s, "status"),
                    k.server(s, "drain"),
                    k.server(s, "cordon"),
                    k.session(s, "*"),
                    k.reset(s, "*"),
                ],
            ),
            ("ingress", ("declare_subscriber",), [k.obs(s, "*")]),
            ("ingress", ("put",), [k.server(s, "audit"), k.robot("*", "action")]),
            ("ingress", ("liveliness_token",), [k.server(s, "alive")]),
            ("ingress", ("declare_liveliness_subscriber", "liveliness_query"), [k.robot("*", "alive")]),
            # its own status, asked through the router at start: may robots find it here? (server/router_check.py)
            ("ingress", ("query",), [k.server(s, "status")]),
            ("egress", ("reply",), [k.server(s, "status")]),
        ]
    return grants + [
        (
            "egress",
            ("query",),
            [
                ANY.server("*", "status"),
                ANY.server("*", "drain"),
                ANY.server("*", "cordon"),
                ANY.session("*", "*"),
                ANY.reset("*", "*"),
            ],
        ),
        ("egress", ("put",), [ANY.obs("*", "*")]),
        ("egress", ("liveliness_token",), [ANY.robot("*", "alive")]),
        ("egress", DECLARATIONS, [EVERYTHING]),
    ]


def _reader(m: Member, commands: bool) -> list[Grant]:
    """Operators and viewers read what the console reads in their namespaces (liveliness, telemetry, audit,
    status; never camera images or action chunks); only operators send drain, cordon and episode reset, and only they
    may read the router's admin space (the mesh's session and link topology). The routers' boards of refused servers
    name certificates and keys in every namespace: only a reader of every namespace may ask for them. A rollout moves
    robots between namespaces: only an operator of every namespace may start, promote or abort one (the router's
    rollout keys); a viewer of every namespace may read it."""
    grants: list[Grant] = [("ingress", ("query",), [ADMIN]), ("egress", ("reply",), [ADMIN])] if commands else []
    if ANY_NAMESPACE in m.namespaces:
        fleet = [REFUSED_BOARDS, ROLLOUT_STATUS_KEY] + ([ROLLOUT_CONTROL_KEY] if commands else [])
        grants += [("ingress", ("query",), fleet), ("egress", ("reply",), fleet)]
    for ns in m.namespaces:
        k = ns.keys()
        asks = [k.server("*", "status"), k.robot("*", "telemetry")] + (
            [k.server("*", "drain"), k.server("*", "cordon"), k.robot("*", "episode_reset")] if commands else []
        )
        grants += [
            ("ingress", ("declare_subscriber",), [k.robot("*", "telemetry"), k.server("*", "audit")]),
            (
                "ingress",
                ("declare_liveliness_subscriber", "liveliness_query"),
                [k.server("*", "alive"), k.robot("*", "alive")],
            ),
            ("ingress", ("query",), asks),
        ]
    replies = [ANY.server("*", "status"), ANY.robot("*", "telemetry")] + (
        [ANY.server("*", "drain"), ANY.server("*", "cordon"), ANY.robot("*", "episode_reset")] if commands else []
    )
    return grants + [
        ("egress", ("put",), [ANY.robot("*", "telemetry"), ANY.server("*", "audit")]),
        ("egress", ("reply",), replies),
        ("egress", ("liveliness_token",), [ANY.server("*", "alive"), ANY.robot("*", "alive")]),
        ("egress", DECLARATIONS, [EVERYTHING]),
    ]


def _router(_m: Member) -> list[Grant]:
    """A mesh neighbour forwards everyone's traffic: each router applies the ACL to its own clients."""
    return [(flow, ALL_MESSAGES, [EVERYTHING, ADMIN]) for flow in ("ingress", "egress")]


ROLE_GRANTS = {
    "robot": _robot,
    "server": _server,
    "operator": lambda m: _reader(m, commands=True),
    "viewer": lambda m: _reader(m, commands=False),
    "router": _router,
}


def member_grants(m: Member) -> list[Grant]:
    return ROLE_GRANTS[m.role](m)


def access_control(inv: Inventory) -> dict[str, Any]:
    """The router's `access_control` object: default deny, one subject (by certificate CN) per member."""
    rules: list[dict[str, Any]] = []
    subjects: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    for m in sorted(inv.members, key=lambda m: (m.role, m.name)):
        subject = f"{m.role}:{m.name}"
        subjects.append({"id": subject, "cert_common_names": [m.name]})
        ids = []
        for i, (flow, messages, keys) in enumerate(_merge(member_grants(m))):
            rid = f"{subject}:{i}"
            rules.append(
                {"id": rid, "permission": "allow", "flows": [flow], "messages": list(messages), "key_exprs": keys}
            )
            ids.append(rid)
        policies.append({"id": subject, "rules": ids, "subjects": [subject]})
    return {"enabled": True, "default_permission": "deny", "rules": rules, "subjects": subjects, "policies": policies}


def router_acl_config(inv: Inventory) -> dict[str, Any]:
    """The JSON5 object merged into the router config by `lerobot-fleet router --inventory`."""
    return {"access_control": access_control(inv)}


def _merge(grants: list[Grant]) -> list[Grant]:
    """Fold grants with the same flow and messages together, keys de-duplicated in order (smaller config)."""
    out: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for flow, messages, keys in grants:
        bucket = out.setdefault((flow, tuple(messages)), [])
        bucket += [k for k in keys if k not in bucket]
    return [(flow, messages, keys) for (flow, messages), keys in out.items()]


def allowed(inv: Inventory, name: str, flow: str, message: str, key: str) -> bool:
    """What the generated config allows, for tests and `--explain`: some rule's key *includes* `key`.

    Inclusion is computed with zenoh's own `KeyExpr.includes` (imported lazily; generation stays pure).
    """
    import zenoh

    m = inv.get(name)
    if m is None:
        return False
    target = zenoh.KeyExpr(key)
    return any(
        f == flow and message in messages and any(zenoh.KeyExpr(k).includes(target) for k in keys)
        for f, messages, keys in member_grants(m)
    )


def nobody_answered_hint(cert_path: str | None, action: str, who: str, target: str, present: bool | None) -> str:
    """What a drain/reset that nobody answered means. `present`: whether the target's liveliness token is on
    the network (None: not known). A target that is gone (a robot that finished, a server that exited) is
    said to be gone; the access control is suggested only when the target is there or we cannot tell."""
    if present is False:
        return (
            f"; {who} {target} is not on the network now (it finished, stopped or never connected; "
            "`lerobot-fleet status` lists what is there)"
        )
    return refused_hint(cert_path, action)


def hidden_fleet_note(cert_path: str | None, servers: int, robots: int) -> str:
    """`status` saw nothing at all through a certificate: the access control may hide the fleet from it."""
    if not cert_path or servers or robots:
        return ""
    from .pki import common_name

    cn = common_name(cert_path) or "?"
    return (
        f"nothing visible through certificate CN={cn}: the router's access control shows each certificate only "
        "what its role may see (a robot or server certificate sees no fleet); use an operator or viewer certificate "
        "to see the fleet, or the fleet is empty"
    )


def refused_hint(cert_path: str | None, action: str) -> str:
    """Zenoh gives a refused client nothing (a denied query just gets no reply), so say what it may mean."""
    if not cert_path:
        return ""
    from .pki import common_name

    cn = common_name(cert_path) or "?"
    return (
        f"; if it exists, the router's access control refused this certificate (CN={cn}) to send {action}: "
        f"only operator certificates may (the router logs 'ACL refused: CN={cn} query ...')"
    )
