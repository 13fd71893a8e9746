"""What a robot's certificate may see under mTLS: the namespaces `pki issue` writes into it, read back by the robot,
and the start-up advice they lead to (unit level; tests/prod/test_robot_namespace_mtls.py runs it through a router)."""

from __future__ import annotations

import pytest
from lerobot_fleet.router.inventory import NamespaceGrant
from lerobot_fleet.router.pki import init_ca, issue

from lerobot_policy_remote.discovery import (
    ReplicaInfo,
    Scope,
    ServiceInfo,
    certificate_scopes,
    decode_scopes,
    encode_scopes,
)
from lerobot_policy_remote.engine.handshake import HandshakeError
from lerobot_policy_remote.engine.startup import CertificateScope, certificate_scope, handshake_failed
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.messages import SessionOpen

NO_SERVER = HandshakeError("nobody answered", fatal=False, code=Refusal.NO_SERVER)


def request(task: str) -> SessionOpen:
    return SessionOpen(client_uuid="arm-1", action_names=["j1"], model_id="/ckpt/act", revision="main", service=task)


def test_scopes_round_trip_through_the_extension_value_long_or_short():
    scopes = (Scope("/ckpt/act", "*", "pick up the cube"), Scope(service="x" * 300))
    assert decode_scopes(encode_scopes(scopes)) == scopes
    assert decode_scopes(encode_scopes(scopes[:1])) == scopes[:1]
    for bad in (b"", b"\x04\x02[]", b"\x0c\x05[]"):
        with pytest.raises(ValueError):
            decode_scopes(bad)


def test_pki_writes_the_namespaces_into_the_certificate_and_the_robot_reads_them(tmp_path):
    init_ca(tmp_path)
    made = issue(tmp_path, "arm-1", "robot", namespaces=[NamespaceGrant(model="/ckpt/act", service="pick")])
    (tmp_path / "inventory.yaml").unlink()  # the certificate alone tells
    assert certificate_scopes(str(made.cert)) == ((Scope("/ckpt/act", "*", "pick"),), "certificate")
    anywhere = issue(tmp_path, "arm-2", "robot")
    assert certificate_scopes(str(anywhere.cert)) == ((Scope(),), "certificate")
    assert not certificate_scope(str(anywhere.cert), "arm-2").bounded  # any namespace: nothing to narrow


def test_a_certificate_without_the_extension_falls_back_to_the_inventory_beside_it(tmp_path):
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "arm-old")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / "arm-old.crt"
    path.write_bytes(cert.public_bytes(Encoding.PEM))
    assert certificate_scopes(str(path)) == ((), "")  # another CA, nothing beside it: not known
    (tmp_path / "inventory.yaml").write_text("version: 1\nrobots:\n  arm-old: {namespaces: [{model: m, service: s}]}\n")
    assert certificate_scopes(str(path)) == ((Scope("m", "*", "s"),), str(tmp_path / "inventory.yaml"))


def test_a_bounded_certificate_is_refused_outside_its_namespaces_only():
    scope = CertificateScope("arm-1", (Scope("/ckpt/act", "*", "pick"),), "certificate")
    assert scope.refuses(request("place")) and not scope.refuses(request("pick"))
    assert not CertificateScope("arm-1").refuses(request("place"))  # not known: never assumed


def test_the_advice_names_the_visible_task_and_the_certificate_that_would_reach_the_request():
    scope = CertificateScope("arm-1", (Scope("/ckpt/act", "*", "pick"),), "certificate")
    seen = [ServiceInfo("/ckpt/act", "main", "pick", replicas=[ReplicaInfo("rep-1", 0, 2, False, True, 0.0)])]
    text = str(handshake_failed(lambda timeout: seen, request("place"), NO_SERVER, tls=True, scope=scope))
    assert "\n" not in text and "the router has no policy server at all" not in text
    assert "may see: the router's access control answers it only in namespace 'model=/ckpt/act,service=pick'" in text
    assert "To use it: --task='pick'" in text
    assert (
        "lerobot-fleet pki issue DIR arm-1 --role robot --namespace model=/ckpt/act,service=pick "
        "--namespace model=/ckpt/act,service=place"
    ) in text
    nothing = str(handshake_failed(lambda timeout: [], request("place"), NO_SERVER, tls=True, scope=scope))
    assert "No server serves there; for a certificate in the namespace asked for: lerobot-fleet pki issue" in nothing
    inside = str(handshake_failed(lambda timeout: [], request("pick"), NO_SERVER, tls=True, scope=scope))
    assert "where no server serves now. Start one there" in inside and "--role server --namespace" in inside
