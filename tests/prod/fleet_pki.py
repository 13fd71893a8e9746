"""Shared helpers for the production tests: a generated PKI + inventory, a TLS router with the ACL, TLS flags."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lerobot_fleet.router.inventory import NamespaceGrant
from lerobot_fleet.router.pki import init_ca, issue

from lerobot_policy_remote.testing.procs import Router

NAMES = {
    "router-a": "router",
    "router-b": "router",
    "arm-a": "robot",
    "arm-b": "robot",
    "arm-c": "robot",
    "rep-1": "server",
    "rep-2": "server",
    "alice": "operator",
    "wall": "viewer",
}


ROGUE_SERVICE = "rogue service"  # the only namespace server certificate `rogue` may serve in


def make_pki(d: Path) -> Path:
    """Every name of NAMES in DIR/inventory.yaml, plus `mallory`: signed by the same CA but not in the inventory."""
    init_ca(d)
    for name, role in NAMES.items():
        # rep-1 serves every namespace (the tests' tasks are random), written out explicitly as a server's must be
        issue(d, name, role, namespaces=[NamespaceGrant()] if role == "server" else None)
    issue(d, "rogue", "server", namespaces=[NamespaceGrant(service=ROGUE_SERVICE)])
    outsider = d / "outsider"
    outsider.mkdir()
    shutil.copy(d / "ca.crt", outsider / "ca.crt")
    shutil.copy(d / "ca.key", outsider / "ca.key")
    issue(outsider, "mallory", "robot")
    shutil.copy(outsider / "mallory.crt", d / "mallory.crt")
    shutil.copy(outsider / "mallory.key", d / "mallory.key")
    return d


@contextmanager
def acl_fleet(tmp_path_factory: pytest.TempPathFactory, name: str, seed: int) -> Iterator[tuple[Path, Path, Router]]:
    """A PKI (make_pki), a tiny ACT saved under `name` and router-a enforcing the ACL: what a module's fleet starts
    from. The router stops on exit."""
    from lerobot_policy_remote.testing.policies import save_tiny_act  # torch: only the tests that start a fleet

    pki = make_pki(tmp_path_factory.mktemp("pki"))
    model = save_tiny_act(tmp_path_factory.mktemp(f"{name}_act") / "act", seed=seed)
    router = acl_router(pki).start()
    try:
        yield pki, model, router
    finally:
        router.stop()


def acl_router(pki: Path, name: str = "router-a", connect: list[str] | None = None) -> Router:
    extra = [
        "--tls-cert",
        str(pki / f"{name}.crt"),
        "--tls-key",
        str(pki / f"{name}.key"),
        "--tls-ca",
        str(pki / "ca.crt"),
        "--inventory",
        str(pki / "inventory.yaml"),
    ]
    for ep in connect or []:
        extra += ["--connect", ep]
    r = Router(extra=extra)
    r.endpoint = f"tls/127.0.0.1:{r.port}"
    return r


def fleet_tls(pki: Path, name: str) -> list[str]:
    """`lerobot-fleet` TLS flags for certificate NAME."""
    return [
        "--tls-ca",
        str(pki / "ca.crt"),
        "--tls-cert",
        str(pki / f"{name}.crt"),
        "--tls-key",
        str(pki / f"{name}.key"),
    ]


def server_tls(pki: Path, name: str) -> list[str]:
    return [
        f"--zenoh.tls_root_ca_certificate={pki / 'ca.crt'}",
        f"--zenoh.tls_connect_certificate={pki / f'{name}.crt'}",
        f"--zenoh.tls_connect_private_key={pki / f'{name}.key'}",
    ]


def robot_tls(pki: Path, name: str) -> list[str]:
    return [
        f"--inference.tls_ca={pki / 'ca.crt'}",
        f"--inference.tls_cert={pki / f'{name}.crt'}",
        f"--inference.tls_key={pki / f'{name}.key'}",
    ]
