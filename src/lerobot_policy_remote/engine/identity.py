"""Who this robot is: `--inference.client_uuid`, or the common name (CN) of its certificate.

Under the router's access control a robot may use only the keys of its certificate's CN, so a robot id
that differs from the CN sends observations nobody receives. With a certificate the CN is the id;
a `--inference.client_uuid` that differs is refused before anything is sent (`Identity.problem`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..wire.errors import WireError
from ..wire.keys import check_id
from ..zenoh_config import certificate_cn


@dataclass(frozen=True)
class Identity:
    client_uuid: str
    source: str  # "flag", "certificate" or "random"
    problem: str = ""  # why the robot must not start ("" when it may)


def resolve(client_uuid: str, tls_cert: str | None) -> Identity:
    """The robot id for these flags (WireError for an invalid --inference.client_uuid, as before); any other problem
    is reported by `start()`, where lerobot's teardown runs."""
    cn, cert_problem = "", ""
    if tls_cert:
        try:
            cn = certificate_cn(tls_cert)
        except (OSError, ValueError) as exc:
            cert_problem = f"cannot read the certificate --inference.tls_cert={tls_cert}: {exc}"
    if client_uuid:
        check_id(client_uuid, "client_uuid")
        if cn and cn != client_uuid:
            return Identity(
                client_uuid,
                "flag",
                (
                    f"--inference.client_uuid={client_uuid} but the certificate --inference.tls_cert={tls_cert} "
                    f"is issued to CN={cn}: the router's access control knows a robot only by its certificate's name, "
                    "so it would drop "
                    f"everything this robot sends. Drop --inference.client_uuid (the robot then is {cn}) or pass the "
                    f"certificate issued for {client_uuid} (lerobot-fleet pki issue DIR {client_uuid} --role robot)"
                ),
            )
        return Identity(client_uuid, "flag", cert_problem)
    if cn:
        try:
            return Identity(check_id(cn, "certificate CN"), "certificate")
        except WireError as exc:
            return Identity(
                uuid.uuid4().hex,
                "random",
                f"the certificate's name CN={cn} cannot be a robot id ({exc}): "
                "issue the robot a certificate named like arm-01 (letters, digits, '.', '_', '-')",
            )
    return Identity(uuid.uuid4().hex, "random", cert_problem)
