"""Inventory -> access_control generation (pure), checked with zenoh's own key-expression inclusion."""

from __future__ import annotations

import json

import pytest
import zenoh
from lerobot_fleet.router.acl import access_control, allowed, router_acl_config
from lerobot_fleet.router.inventory import InventoryError, parse_inventory

from lerobot_policy_remote.wire import ServiceKeys

INV = parse_inventory(
    {
        "robots": {"arm-a": {}, "arm-b": {"namespaces": [{"model": "lab/act", "service": "pick"}]}},
        "servers": {"rep-1": {"namespaces": [{"model": "lab/act", "service": "pick"}]}},
        "operators": {"alice": {}},
        "viewers": {"wall": {}},
        "routers": {"router-a": {"hosts": ["r.example"]}},
    }
)
K = ServiceKeys.for_service("lab/act", "main", "pick")
OTHER = ServiceKeys.for_service("lab/other", "main", "place")
ANY = ServiceKeys.any()


def test_default_deny_one_subject_per_name_by_common_name():
    acl = access_control(INV)
    assert acl["enabled"] is True and acl["default_permission"] == "deny"
    cns = sorted(cn for s in acl["subjects"] for cn in s["cert_common_names"])
    assert cns == ["alice", "arm-a", "arm-b", "rep-1", "router-a", "wall"]
    assert all(r["permission"] == "allow" for r in acl["rules"])
    assert all(s.get("cert_common_names") for s in acl["subjects"]), "a subject without a CN would match everyone"
    ids = {r["id"] for r in acl["rules"]}
    assert all(set(p["rules"]) <= ids for p in acl["policies"])


def test_zenoh_accepts_the_generated_config():
    cfg = {"mode": "router", "scouting": {"multicast": {"enabled": False}}, **router_acl_config(INV)}
    zenoh.Config.from_json5(json.dumps(cfg))  # raises on a bad message name, flow or key


@pytest.mark.parametrize(
    ("who", "flow", "msg", "key", "ok"),
    [
        # a robot: its own observations, token, telemetry, chunks and sessions; nothing of another robot
        ("arm-a", "ingress", "put", K.obs("rep-1", "arm-a"), True),
        ("arm-a", "ingress", "put", K.obs("rep-1", "arm-b"), False),
        ("arm-a", "ingress", "put", K.robot("arm-a", "telemetry"), True),
        ("arm-a", "ingress", "put", K.robot("arm-b", "telemetry"), False),
        ("arm-a", "ingress", "put", K.robot("arm-b", "action"), False),
        ("arm-a", "ingress", "liveliness_token", K.robot("arm-a", "alive"), True),
        ("arm-a", "ingress", "liveliness_token", K.robot("arm-b", "alive"), False),
        ("arm-a", "ingress", "liveliness_token", K.server("rep-1", "alive"), False),
        ("arm-a", "ingress", "declare_subscriber", K.robot("arm-a", "action"), True),
        ("arm-a", "ingress", "declare_subscriber", K.robot("arm-b", "action"), False),
        ("arm-a", "ingress", "declare_subscriber", K.obs("rep-1", "*"), False),
        ("arm-a", "ingress", "query", K.server("*", "status"), True),
        ("arm-a", "ingress", "query", K.session("rep-1", "arm-a"), True),
        ("arm-a", "ingress", "query", K.reset("rep-1", "arm-a"), True),
        ("arm-a", "ingress", "query", K.session("*", "arm-a"), True),
        # never another robot's session or reset key: one robot cannot replace or reset another's session
        ("arm-a", "ingress", "query", K.session("rep-1", "arm-b"), False),
        ("arm-a", "ingress", "query", K.session("rep-1", "*"), False),
        ("arm-a", "ingress", "query", K.reset("rep-1", "arm-b"), False),
        ("arm-a", "egress", "reply", K.session("rep-1", "arm-a"), True),
        ("arm-a", "egress", "reply", K.session("rep-1", "arm-b"), False),
        ("arm-a", "ingress", "query", K.server("rep-1", "drain"), False),
        ("arm-a", "ingress", "query", K.server("rep-1", "cordon"), False),
        ("arm-a", "ingress", "query", K.robot("arm-b", "episode_reset"), False),
        ("arm-a", "ingress", "declare_queryable", K.robot("arm-a", "episode_reset"), True),
        ("arm-a", "ingress", "declare_queryable", K.server("rep-1", "status"), False),
        ("arm-a", "ingress", "query", "@/*/router", False),
        ("arm-a", "egress", "put", K.robot("arm-a", "action"), True),
        ("arm-a", "egress", "put", K.robot("arm-b", "action"), False),
        ("arm-a", "egress", "liveliness_token", K.robot("arm-b", "alive"), False),
        # a namespace-restricted robot stays inside it
        ("arm-b", "ingress", "put", K.obs("rep-1", "arm-b"), True),
        ("arm-b", "ingress", "put", ServiceKeys.for_service("lab/other", "main", "pick").obs("rep-1", "arm-b"), False),
        # a server: its own replica's keys, replies on them, chunks to robots
        ("rep-1", "ingress", "declare_queryable", K.server("rep-1", "drain"), True),
        ("rep-1", "ingress", "declare_queryable", K.server("rep-2", "drain"), False),
        ("rep-1", "ingress", "reply", K.server("rep-1", "status"), True),
        ("rep-1", "ingress", "reply", K.server("rep-2", "status"), False),
        ("rep-1", "ingress", "declare_subscriber", K.obs("rep-1", "*"), True),
        ("rep-1", "ingress", "declare_subscriber", K.obs("rep-2", "*"), False),
        ("rep-1", "ingress", "liveliness_token", K.server("rep-1", "alive"), True),
        ("rep-1", "ingress", "liveliness_token", K.robot("arm-a", "alive"), False),
        ("rep-1", "ingress", "put", K.robot("arm-a", "action"), True),
        ("rep-1", "ingress", "put", K.obs("rep-1", "arm-a"), False),
        ("rep-1", "ingress", "query", K.server("rep-2", "drain"), False),
        ("rep-1", "ingress", "declare_queryable", K.server("rep-1", "cordon"), True),
        ("rep-1", "ingress", "reply", K.server("rep-1", "cordon"), True),
        ("rep-1", "ingress", "declare_queryable", K.server("rep-2", "cordon"), False),
        ("rep-1", "ingress", "query", K.server("rep-2", "cordon"), False),
        ("rep-1", "egress", "query", ANY.server("rep-1", "cordon"), True),
        ("rep-1", "ingress", "declare_queryable", K.session("rep-1", "*"), True),
        ("rep-1", "ingress", "reply", K.session("rep-1", "arm-a"), True),
        ("rep-1", "ingress", "reply", K.session("rep-2", "arm-a"), False),
        ("rep-1", "ingress", "reply", K.reset("rep-1", "arm-a"), True),
        # a server is bound to its namespace: it cannot serve (or drain robots of) another model or task
        ("rep-1", "ingress", "declare_queryable", OTHER.session("rep-1", "*"), False),
        ("rep-1", "ingress", "reply", OTHER.server("rep-1", "status"), False),
        ("rep-1", "ingress", "put", OTHER.robot("arm-a", "action"), False),
        ("rep-1", "ingress", "liveliness_token", OTHER.server("rep-1", "alive"), False),
        ("rep-1", "egress", "query", ANY.server("*", "status"), True),
        ("rep-1", "egress", "query", K.session("rep-1", "arm-a"), True),
        ("rep-1", "egress", "put", K.obs("rep-1", "arm-a"), True),
        # an operator reads everything and may drain / cordon / reset, but opens no sessions
        ("alice", "ingress", "query", ANY.server("rep-1", "drain"), True),
        ("alice", "ingress", "query", ANY.server("rep-1", "cordon"), True),
        ("alice", "egress", "reply", K.server("rep-1", "cordon"), True),
        ("alice", "ingress", "query", ANY.robot("arm-a", "episode_reset"), True),
        ("alice", "ingress", "query", ANY.server("*", "status"), True),
        ("alice", "ingress", "query", K.session("rep-1", "arm-a"), False),
        ("alice", "ingress", "declare_subscriber", ANY.server("*", "audit"), True),
        # ... but never camera images or action chunks
        ("alice", "ingress", "declare_subscriber", ANY.obs("*", "*"), False),
        ("alice", "ingress", "declare_subscriber", ANY.robot("*", "action"), False),
        ("alice", "ingress", "declare_subscriber", f"{ANY.base}/**", False),
        ("alice", "egress", "put", K.obs("rep-1", "arm-a"), False),
        ("alice", "egress", "put", K.robot("arm-a", "action"), False),
        ("alice", "egress", "put", K.robot("arm-a", "telemetry"), True),
        ("alice", "ingress", "declare_subscriber", ANY.robot("*", "telemetry"), True),
        ("alice", "ingress", "query", "@/*/router", True),
        ("alice", "ingress", "put", K.obs("rep-1", "arm-a"), False),
        ("alice", "ingress", "liveliness_token", K.robot("arm-a", "alive"), False),
        # a viewer only reads
        ("wall", "ingress", "query", ANY.server("*", "status"), True),
        ("wall", "ingress", "declare_liveliness_subscriber", ANY.robot("*", "alive"), True),
        ("wall", "ingress", "query", ANY.server("rep-1", "drain"), False),
        ("wall", "ingress", "query", ANY.server("rep-1", "cordon"), False),
        ("wall", "egress", "reply", K.server("rep-1", "cordon"), False),
        ("wall", "ingress", "query", ANY.robot("arm-a", "episode_reset"), False),
        ("wall", "ingress", "put", K.robot("arm-a", "telemetry"), False),
        ("wall", "ingress", "declare_subscriber", ANY.robot("*", "telemetry"), True),
        ("wall", "ingress", "declare_subscriber", ANY.obs("*", "*"), False),
        ("wall", "egress", "put", K.obs("rep-1", "arm-a"), False),
        # the router's admin space (mesh sessions and links) is for routers and operators only
        ("wall", "ingress", "query", "@/*/router", False),
        ("wall", "egress", "reply", "@/*/router", False),
        # a mesh neighbour forwards everything; nobody else is anything
        ("router-a", "ingress", "put", K.obs("rep-1", "arm-a"), True),
        ("router-a", "egress", "query", "@/*/router", True),
        ("mallory", "ingress", "query", ANY.server("*", "status"), False),
    ],
)
def test_role_matrix(who, flow, msg, key, ok):
    assert allowed(INV, who, flow, msg, key) is ok


def test_robot_names_cannot_reach_wildcards_through_inventory():
    with pytest.raises(InventoryError, match="robots"):
        parse_inventory({"robots": {"*": {}}})
    with pytest.raises(InventoryError, match="already a robot"):
        parse_inventory({"robots": ["x"], "operators": ["x"]})
    with pytest.raises(InventoryError, match="unknown section"):
        parse_inventory({"robot": ["x"]})
    with pytest.raises(InventoryError, match="only routers have hosts"):
        parse_inventory({"robots": {"x": {"hosts": ["h"]}}})


def test_a_server_must_name_its_namespaces():
    with pytest.raises(InventoryError, match="a server must name the namespaces"):
        parse_inventory({"servers": ["gpu-0"]})
    with pytest.raises(InventoryError, match="a server must name the namespaces"):
        parse_inventory({"servers": {"gpu-0": {}}})
    inv = parse_inventory({"servers": {"gpu-0": {"namespaces": [{"service": "pick"}]}}})
    assert inv.to_yaml_dict()["servers"]["gpu-0"] == {"namespaces": [{"service": "pick"}]}


def test_free_text_namespaces_are_escaped_like_the_programs_escape_them():
    inv = parse_inventory({"robots": {"arm-c": {"namespaces": [{"model": "lab/act", "service": "pick up/*"}]}}})
    keys = ServiceKeys.for_service("lab/act", "v1", "pick up/*")
    assert allowed(inv, "arm-c", "ingress", "put", keys.obs("rep-1", "arm-c"))
    rules = json.dumps(access_control(inv))
    assert "pick up/*" not in rules and "pick%20up%2F%2A" in rules
