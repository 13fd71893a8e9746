"""The start-up check that the router lets robots find this replica, and the default replica id (units).

The real refusals (a robot's certificate, a server certificate outside its namespace) through an mTLS router with
an inventory are in tests/prod/test_server_refused.py; here: an open router accepts, peer mode is not checked, the
refusal's words for each certificate, the retry loop, and the replica id rule.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest
from lerobot_fleet.router.inventory import NamespaceGrant
from lerobot_fleet.router.pki import init_ca, issue

from lerobot_policy_remote.server.manifest import Manifest, ModelSpec, default_replica_id
from lerobot_policy_remote.server.router_check import RouterWatch, refusal_message, router_accepts, router_refusal
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings, certificate_role

KEYS = ServiceKeys.for_service("/ckpt/act", "main", "pick up the cube")
NS = "'model=/ckpt/act,service=pick up the cube'"


def manifest(router_endpoint: str, **kw) -> Manifest:
    return Manifest(
        model=ModelSpec(repo_or_path="/ckpt/act"),
        default_task="pick up the cube",
        replica_id="rc-1",
        zenoh=ZenohSettings(mode="client", connect_endpoints=[router_endpoint]),
        **kw,
    )


def test_an_open_router_accepts_at_once(router):
    m = manifest(router.endpoint)
    assert router_accepts(m.zenoh_settings(), m.keys().server("rc-1", "status"), window_s=5.0)
    assert router_refusal(m) == ""


def test_a_peer_mode_server_has_no_router_to_ask():
    m = Manifest(
        model=ModelSpec(repo_or_path="/ckpt/act"),
        default_task="t",
        zenoh=ZenohSettings(mode="peer", listen_endpoints=["tcp/127.0.0.1:1"]),
    )
    assert router_refusal(m) == ""


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    init_ca(d)
    issue(d, "arm-a", "robot")
    issue(d, "gpu-0", "server", namespaces=[NamespaceGrant(service="other")])
    return d


def tls(pki, name: str) -> ZenohSettings:
    return ZenohSettings(
        mode="client",
        connect_endpoints=["tls/127.0.0.1:1"],
        tls_root_ca_certificate=str(pki / "ca.crt"),
        tls_connect_certificate=str(pki / f"{name}.crt"),
        tls_connect_private_key=str(pki / f"{name}.key"),
    )


def test_issued_certificates_carry_their_role(pki):
    assert certificate_role(str(pki / "arm-a.crt")) == "robot"
    assert certificate_role(str(pki / "gpu-0.crt")) == "server"
    assert certificate_role(str(pki / "ca.crt")) == ""


def test_a_robot_certificate_is_told_to_get_a_server_one(pki):
    msg = refusal_message(
        tls(pki, "arm-a"), KEYS, "arm-a", "/ckpt/act", "main", "pick up the cube", replica_given=False
    )
    assert "certificate CN=arm-a (a robot certificate) may not serve namespace " + NS in msg
    assert f"lerobot-fleet pki issue DIR NAME --role server --namespace {NS}" in msg
    assert "--zenoh.tls_connect_certificate=DIR/NAME.crt" in msg and "\n" not in msg


def test_a_server_outside_its_namespace_is_told_which_namespace_to_add(pki):
    msg = refusal_message(tls(pki, "gpu-0"), KEYS, "gpu-0", "/ckpt/act", "v2", "pick up the cube", replica_given=False)
    assert (
        "CN=gpu-0 (a server certificate) may not serve namespace 'model=/ckpt/act,service=pick up the cube,revision=v2'"
        in msg
    )
    assert (
        "lerobot-fleet pki issue DIR gpu-0 --role server "
        "--namespace 'model=/ckpt/act,service=pick up the cube,revision=v2'" in msg
    )


def test_a_replica_id_other_than_the_cn_is_named(pki):
    msg = refusal_message(tls(pki, "gpu-0"), KEYS, "gpu-9", "/ckpt/act", "main", "pick up the cube", replica_given=True)
    assert "is issued to CN=gpu-0" in msg and "--replica_id=gpu-9" in msg and "Drop --replica_id" in msg


def test_without_a_certificate_the_message_names_the_key():
    msg = refusal_message(
        ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:1"]),
        KEYS,
        "rc-1",
        "/ckpt/act",
        "main",
        "pick up the cube",
        replica_given=True,
    )
    assert KEYS.server("rc-1", "status") in msg and "access control" in msg


def test_retry_checks_again_until_accepted():
    answers = iter([False, RuntimeError("router down"), False, True])
    accepted = threading.Event()

    def accepts() -> bool:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    watch = RouterWatch(accepts, accepted.set, period_s=0.01).start()
    try:
        wait_until(accepted.is_set, timeout=10, message="accepted after the fourth check")
    finally:
        watch.stop()


def test_the_default_replica_id_is_the_host_and_health_port_and_survives_a_restart():
    host = socket.gethostname()
    m = Manifest(model=ModelSpec(repo_or_path="/ckpt/act"), default_task="t", health_port=9123)
    assert (
        m.replica() == default_replica_id(9123) and m.replica().endswith("-9123") and m.replica().startswith(host[:10])
    )
    code = (
        "from lerobot_policy_remote.server.manifest import Manifest, ModelSpec; "
        "print(Manifest(model=ModelSpec(repo_or_path='/ckpt/act'), default_task='t', health_port=9123).replica())"
    )
    again = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    assert again == m.replica()  # another process (a restart) on this machine: the same id
    assert (
        Manifest(model=ModelSpec(repo_or_path="/ckpt/act"), default_task="t", health_port=0)
        .replica()
        .endswith(f"-{os.getpid()}")
    )
    assert (
        Manifest(model=ModelSpec(repo_or_path="/ckpt/act"), default_task="t", replica_id="gpu-a").replica() == "gpu-a"
    )


def test_with_mtls_the_default_replica_id_is_the_certificate_cn(pki):
    m = Manifest(model=ModelSpec(repo_or_path="/ckpt/act"), default_task="t", zenoh=tls(pki, "gpu-0"))
    assert m.replica() == "gpu-0"


def test_the_acl_lets_a_server_ask_its_own_status_only():
    from lerobot_fleet.router.acl import allowed
    from lerobot_fleet.router.inventory import Inventory, Member

    ns = NamespaceGrant(model="/ckpt/act", service="pick up the cube")
    inv = Inventory([Member("gpu-0", "server", (ns,)), Member("arm-a", "robot")])
    own, other = KEYS.server("gpu-0", "status"), KEYS.server("gpu-1", "status")
    assert allowed(inv, "gpu-0", "ingress", "query", own) and allowed(inv, "gpu-0", "egress", "reply", own)
    assert not allowed(inv, "gpu-0", "ingress", "query", other)
    elsewhere = ServiceKeys.for_service("/ckpt/act", "main", "other task").server("gpu-0", "status")
    assert not allowed(inv, "gpu-0", "ingress", "query", elsewhere)
    assert not allowed(inv, "arm-a", "ingress", "declare_queryable", KEYS.server("arm-a", "status"))
