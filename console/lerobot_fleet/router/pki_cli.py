"""`lerobot-fleet pki init|issue`: print what was made and the command that uses it.

The `use:` line is a command that runs as printed, filled from the inventory: the router's address is the first
extra `--host` of a router in it (else 127.0.0.1, which its certificate names), a server serves the namespace its
certificate was issued for, a robot dials the one namespace the inventory's servers serve. Only what the
inventory cannot know stays a capitalised placeholder (ROBOT; MODEL and TASK when several or no namespaces fit).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from lerobot_policy_remote.wire.keys import WILD

from .inventory import Inventory, InventoryError, Member, NamespaceGrant, load_inventory, parse_namespace_flag
from .pki import ROUTER_DEFAULT_HOSTS, Issued, PkiError, init_ca, issue

ROUTER_PORT = 7447


def router_host(inv: Inventory) -> str:
    """Where the fleet dials its router: a router's first name beyond localhost/127.0.0.1, else 127.0.0.1."""
    for m in sorted(inv.by_role("router"), key=lambda m: m.name):
        extra = [h for h in m.hosts if h not in ROUTER_DEFAULT_HOSTS]
        if extra:
            return extra[0]
    return "127.0.0.1"


def _namespace(grants: list[NamespaceGrant], inv: Inventory) -> tuple[str, str, str]:
    """(model, revision, task) a robot or server of these grants would use; MODEL/TASK where it cannot be told."""
    concrete = {(g.model, g.revision, g.service) for g in grants if g.model != WILD and g.service != WILD}
    if not concrete:  # a robot's default grant (any namespace): the one namespace the inventory's servers serve
        concrete = {
            (g.model, g.revision, g.service)
            for s in inv.by_role("server")
            for g in s.namespaces
            if g.model != WILD and g.service != WILD
        }
    if len(concrete) == 1:
        return next(iter(concrete))
    return "MODEL", WILD, "TASK"


def next_step(member: Member, made: Issued, directory: Path, inv: Inventory) -> list[str]:
    """The `use:` command for a certificate just issued (and, for a router, where the others dial it)."""
    q = shlex.quote
    ca, cert, key = q(str(directory / "ca.crt")), q(str(made.cert)), q(str(made.key))
    endpoint = f"tls/{router_host(inv)}:{ROUTER_PORT}"
    role = member.role
    if role == "router":
        extra = [h for h in made.hosts if h not in ROUTER_DEFAULT_HOSTS]
        listen = f"tls/0.0.0.0:{ROUTER_PORT}" if extra else f"tls/127.0.0.1:{ROUTER_PORT}"
        where = (
            f"robots, servers and consoles dial it as tls/{extra[0]}:{ROUTER_PORT} (its certificate names "
            f"{', '.join(made.hosts)})"
            if extra
            else "this machine only: its certificate names localhost and 127.0.0.1; for other machines issue it again "
            "with --host NAME (it then listens on tls/0.0.0.0)"
        )
        return [
            f"use: lerobot-fleet router --listen {listen} --tls-cert {cert} --tls-key {key} --tls-ca {ca} "
            f"--inventory {q(str(directory / 'inventory.yaml'))}",
            f"note: {where}",
        ]
    model, revision, task = _namespace(list(member.namespaces), inv)
    rev = f" --model.revision={q(revision)}" if revision not in (WILD, "main") else ""
    if role == "server":  # the replica id defaults to the certificate's CN
        return [
            f"use: lerobot-policy-server --model.repo_or_path={q(model)}{rev} --default_task={q(task)} "
            f"--zenoh.connect_endpoints={endpoint} --zenoh.tls_root_ca_certificate={ca} "
            f"--zenoh.tls_connect_certificate={cert} --zenoh.tls_connect_private_key={key}"
        ]
    if role == "robot":
        rev = f" --inference.service_revision={q(revision)}" if revision not in (WILD, "main") else ""
        return [
            f"use: lerobot-rollout --strategy.type=base --inference.type=remote --robot.type=ROBOT "
            f"--policy.path={q(model)} --task={q(task)}{rev} --inference.client_uuid={member.name} "
            f"--inference.connect_endpoint={endpoint} --inference.tls_ca={ca} --inference.tls_cert={cert} "
            f"--inference.tls_key={key}"
        ]
    read_only = " --read-only" if role == "viewer" else ""
    return [
        f"use: lerobot-fleet console{read_only} --router {endpoint} --tls-ca {ca} --tls-cert {cert} --tls-key {key}"
    ]


def run_pki(args: argparse.Namespace) -> int:
    if args.pki_command == "init":
        ca = init_ca(args.dir, days=args.days, force=args.force)
        print(f"CA created: {ca} (key {Path(args.dir) / 'ca.key'}, mode 0600; keep it off robots and servers)")
        print(f"next: lerobot-fleet pki issue {args.dir} router-a --role router")
        return 0
    try:
        grants = [parse_namespace_flag(text) for text in args.namespace or []]
    except InventoryError as exc:
        raise PkiError(str(exc)) from exc
    made = issue(args.dir, args.name, args.role, args.host, args.days, namespaces=grants)
    d = Path(args.dir)
    inv = load_inventory(d / "inventory.yaml")
    hosts = f" for {', '.join(made.hosts)}" if made.hosts else ""
    print(f"{args.role} certificate for CN={args.name}{hosts}: {made.cert} (key {made.key}, mode 0600)")
    print(f"recorded in {d / 'inventory.yaml'} with role {args.role}")
    member = inv.get(args.name)
    assert member is not None  # `issue` has just recorded it
    for line in next_step(member, made, d, inv):
        print(line)
    return 0
