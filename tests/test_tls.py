"""mTLS through the embedded router, with certificates made by openssl for this test.

Checks that TLS really is on: a client with a CA-signed certificate exchanges data; a client without a
certificate, or one signed by another CA, cannot connect.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from lerobot_policy_remote.testing.procs import Router
from lerobot_policy_remote.zenoh_config import ZenohConfigError, ZenohSettings, open_session

pytestmark = pytest.mark.slow  # starts router / server processes


def _run(*args: str, cwd: Path) -> None:
    """openssl (Debian package `openssl`, present on every machine of this kind) makes the test PKI."""
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _ca(d: Path, name: str) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=d)
    _run(
        "req",
        "-x509",
        "-new",
        "-key",
        f"{name}.key",
        "-subj",
        f"/CN={name}",
        "-days",
        "2",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-out",
        f"{name}.pem",
        cwd=d,
    )


def _leaf(d: Path, name: str, ca: str, ext: str) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=d)
    _run("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr", cwd=d)
    (d / f"{name}.ext").write_text(ext)
    _run(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.pem",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.pem",
        cwd=d,
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _ca(d, "rogue-ca")
    _leaf(d, "router", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _leaf(d, "robot-01", "ca", "extendedKeyUsage=clientAuth\n")
    _leaf(d, "intruder", "rogue-ca", "extendedKeyUsage=clientAuth\n")
    return d


def test_mtls_router_accepts_signed_clients_only(pki: Path):
    router = Router(
        extra=[
            "--tls-cert",
            str(pki / "router.pem"),
            "--tls-key",
            str(pki / "router.key"),
            "--tls-ca",
            str(pki / "ca.pem"),
        ]
    )
    router.endpoint = f"tls/127.0.0.1:{router.port}"
    router.start()
    try:

        def client(cert: str | None) -> ZenohSettings:
            return ZenohSettings(
                mode="client",
                connect_endpoints=[router.endpoint],
                tls_root_ca_certificate=str(pki / "ca.pem"),
                tls_connect_certificate=str(pki / f"{cert}.pem") if cert else None,
                tls_connect_private_key=str(pki / f"{cert}.key") if cert else None,
                connect_timeout_ms=1500,
            )

        a, b = open_session(client("robot-01")), open_session(client("robot-01"))
        try:
            got = threading.Event()
            sub = b.declare_subscriber("@lerobot/m/main/t/robot/robot-01/telemetry", lambda s: got.set())
            for _ in range(50):
                a.put("@lerobot/m/main/t/robot/robot-01/telemetry", b"x")
                if got.wait(0.1):
                    break
            assert got.is_set(), "no delivery over mTLS"
            sub.undeclare()
        finally:
            a.close()
            b.close()
        for cert in (None, "intruder"):
            with pytest.raises(ZenohConfigError, match="could not open"):
                open_session(client(cert)).close()
    finally:
        router.stop()
