"""`lerobot-fleet pki init|issue`: print what was made and what to do with it."""

from __future__ import annotations

import argparse
from pathlib import Path

from .inventory import InventoryError, parse_namespace_flag
from .pki import PkiError, init_ca, issue

NEXT_STEP = {
    "router": "lerobot-fleet router --listen tls/0.0.0.0:7447 --tls-cert {cert} --tls-key {key} --tls-ca {ca} --inventory {inv}",
    "server": "lerobot-policy-server --manifest server.yaml --replica_id={name} --zenoh.connect_endpoints='[tls/ROUTER:7447]' "
              "--zenoh.tls_root_ca_certificate={ca} --zenoh.tls_connect_certificate={cert} --zenoh.tls_connect_private_key={key}",
    "robot": "lerobot-rollout ... --inference.type=remote --inference.client_uuid={name} --inference.connect_endpoint=tls/ROUTER:7447 "
             "--inference.tls_ca={ca} --inference.tls_cert={cert} --inference.tls_key={key}",
    "operator": "lerobot-fleet console --router tls/ROUTER:7447 --tls-ca {ca} --tls-cert {cert} --tls-key {key}",
    "viewer": "lerobot-fleet console --read-only --router tls/ROUTER:7447 --tls-ca {ca} --tls-cert {cert} --tls-key {key}",
}


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
    hosts = f" for {', '.join(made.hosts)}" if made.hosts else ""
    print(f"{args.role} certificate for CN={args.name}{hosts}: {made.cert} (key {made.key}, mode 0600)")
    print(f"recorded in {d / 'inventory.yaml'} with role {args.role}")
    print("use: " + NEXT_STEP[args.role].format(name=args.name, cert=made.cert, key=made.key, ca=d / "ca.crt", inv=d / "inventory.yaml"))
    return 0
