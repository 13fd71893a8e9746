"""A development PKI in one command each: `lerobot-fleet pki init DIR`, `lerobot-fleet pki issue DIR NAME --role R`.

EC P-256 keys (PKCS#8 PEM, mode 0600), a CA that can only sign certificates, leaf certificates whose
common name is the fleet name the router's ACL matches on, and `DIR/inventory.yaml` kept in step.
For production, use your own CA and write the inventory by hand; the files have the same shape.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from lerobot_policy_remote.discovery import SCOPES_OID, Scope, encode_scopes
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import check_id

from .inventory import ROLES, Inventory, Member, NamespaceGrant, load_inventory, save_inventory

if TYPE_CHECKING:  # cryptography is imported where it is used: `--help` stays fast
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

ROUTER_DEFAULT_HOSTS = ("localhost", "127.0.0.1")


class PkiError(RuntimeError):
    """The PKI directory cannot be used as asked; the message says what to do."""


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    role: str
    hosts: tuple[str, ...]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never world-readable, not even briefly
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(path, 0o600)  # in case the umask was stricter than needed or the fs ignores the mode


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(path, 0o644)


def init_ca(directory: str | Path, name: str = "lerobot-fleet dev CA", days: int = 3650, force: bool = False) -> Path:
    """Create DIR/ca.crt and DIR/ca.key (and an empty inventory); refuses to overwrite an existing CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "ca.key").exists() and not force:
        raise PkiError(
            f"{d / 'ca.key'} already exists: issue certificates with `lerobot-fleet pki issue {d} NAME --role ...` "
            "(or pass --force to replace the CA, which invalidates every certificate it signed)"
        )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(d / "ca.key", key)
    _write_cert(d / "ca.crt", cert)
    if not (d / "inventory.yaml").exists():
        save_inventory(Inventory(), d / "inventory.yaml")
    return d / "ca.crt"


def issue(
    directory: str | Path,
    name: str,
    role: str,
    hosts: list[str] | None = None,
    days: int = 365,
    namespaces: list[NamespaceGrant] | None = None,
) -> Issued:
    """Sign DIR/NAME.crt + DIR/NAME.key with the CA in DIR and record NAME's role (and namespaces) in
    DIR/inventory.yaml."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if role not in ROLES:
        raise PkiError(f"role {role!r} is not one of {', '.join(ROLES)}")
    try:
        check_id(name, "name")  # it becomes a file name, a certificate CN and, for robots and servers, a key chunk
    except WireError as exc:
        raise PkiError(str(exc)) from exc
    d = Path(directory)
    if not (d / "ca.key").is_file() or not (d / "ca.crt").is_file():
        raise PkiError(f"no CA in {d}: run `lerobot-fleet pki init {d}` first")
    if hosts and role != "router":
        raise PkiError("--host is only for router certificates (clients are identified by their common name)")
    inv = load_inventory(d / "inventory.yaml") if (d / "inventory.yaml").exists() else Inventory()
    existing = inv.get(name)
    if existing is not None and existing.role != role:
        raise PkiError(
            f"{name!r} is already a {existing.role} in {d / 'inventory.yaml'}; a name has one role "
            "(remove the entry first to change it)"
        )
    if namespaces:
        grants = tuple(namespaces)
    elif existing is not None:
        grants = existing.namespaces
    elif role == "server":
        raise PkiError(
            f"a server certificate serves named namespaces only: add --namespace model=MODEL,service=SERVICE "
            f"(the model id and task {name} serves; '*' in a field for any)"
        )
    else:
        grants = Member(name, role).namespaces
    member = Member(name, role, grants, tuple(dict.fromkeys(hosts or [])) if role == "router" else ())
    inv = inv.with_member(member)

    # Typed as a key that signs certificates (cryptography raises for any other kind): `init_ca` writes an EC key
    ca_key = cast(
        "CertificateIssuerPrivateKeyTypes",
        serialization.load_pem_private_key((d / "ca.key").read_bytes(), password=None),
    )
    ca_cert = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    # Routers also dial other routers (mesh), so they authenticate as clients too.
    eku = (
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        if role == "router"
        else [ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    builder = (
        x509.CertificateBuilder()
        # The OU records the role it was issued for: a refused program can say "a robot certificate" (the router's
        # access control matches the CN only; the inventory decides the role)
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, name),
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if role != "router":  # the namespaces it may use, so a program the router answers nothing can say where it may look
        scopes = encode_scopes([Scope(g.model, g.revision, g.service) for g in grants])
        ext = x509.UnrecognizedExtension(x509.ObjectIdentifier(SCOPES_OID), scopes)
        builder = builder.add_extension(ext, critical=False)
    all_hosts: tuple[str, ...] = ()
    if role == "router":
        all_hosts = tuple(dict.fromkeys([*ROUTER_DEFAULT_HOSTS, *(hosts or [])]))
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in all_hosts]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(d / f"{name}.key", key)
    _write_cert(d / f"{name}.crt", cert)
    save_inventory(inv, d / "inventory.yaml")
    return Issued(d / f"{name}.crt", d / f"{name}.key", role, all_hosts)


def _san(host: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def common_name(cert_path: str | Path) -> str:
    """The CN of a PEM certificate ('' if unreadable): what the router's ACL knows this client as."""
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
        attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return str(attrs[0].value) if attrs else ""
    except Exception:
        return ""
