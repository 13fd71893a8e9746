"""`lerobot-fleet pki`: a CA and certificates with the right usages, 0600 keys, the inventory kept in step."""

from __future__ import annotations

import ipaddress
import stat
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lerobot_fleet.cli import main
from lerobot_fleet.router.inventory import load_inventory


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_init_and_issue(tmp_path, capsys):
    d = tmp_path / "pki"
    assert main(["pki", "init", str(d)]) == 0
    assert (
        main(
            [
                "pki",
                "issue",
                str(d),
                "router-a",
                "--role",
                "router",
                "--host",
                "router-a.fleet.svc",
                "--host",
                "10.0.0.7",
            ]
        )
        == 0
    )
    assert main(["pki", "issue", str(d), "arm-01", "--role", "robot"]) == 0
    assert main(["pki", "issue", str(d), "alice", "--role", "operator"]) == 0
    out = capsys.readouterr().out
    assert "CN=arm-01" in out and "--inference.client_uuid=arm-01" in out

    for name in ("ca", "router-a", "arm-01", "alice"):
        mode = stat.S_IMODE((d / f"{name}.key").stat().st_mode)
        assert mode == 0o600, f"{name}.key is {oct(mode)}"
    ca = _cert(d / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True

    router = _cert(d / "router-a.crt")
    assert router.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "router-a"
    san = router.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "router-a.fleet.svc"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.0.0.7"),
    }
    eku = router.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}

    robot = _cert(d / "arm-01.crt")
    assert list(robot.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert robot.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert robot.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is False
    robot.verify_directly_issued_by(ca)  # raises if the signature or issuer is wrong

    inv = load_inventory(d / "inventory.yaml")
    assert {(m.name, m.role) for m in inv.members} == {
        ("router-a", "router"),
        ("arm-01", "robot"),
        ("alice", "operator"),
    }
    assert inv.get("router-a").hosts == ("router-a.fleet.svc", "10.0.0.7")


def test_openssl_agrees_the_chain_is_valid(tmp_path):
    d = tmp_path / "pki"
    main(["pki", "init", str(d)])
    main(["pki", "issue", str(d), "rep-1", "--role", "server", "--namespace", "model=lab/act,service=pick"])
    res = subprocess.run(
        ["openssl", "verify", "-CAfile", str(d / "ca.crt"), "-purpose", "sslclient", str(d / "rep-1.crt")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_refusals_say_what_to_do(tmp_path, capsys):
    d = tmp_path / "pki"
    assert main(["pki", "issue", str(d), "arm-01", "--role", "robot"]) == 2
    assert "pki init" in capsys.readouterr().err
    main(["pki", "init", str(d)])
    assert main(["pki", "init", str(d)]) == 2
    assert "already exists" in capsys.readouterr().err
    main(["pki", "issue", str(d), "arm-01", "--role", "robot"])
    assert main(["pki", "issue", str(d), "arm-01", "--role", "operator"]) == 2
    assert "already a robot" in capsys.readouterr().err
    assert main(["pki", "issue", str(d), "arm-02", "--role", "robot", "--host", "x"]) == 2
    assert main(["pki", "issue", str(d), "bad/name", "--role", "robot"]) == 2
    assert "not a valid id" in capsys.readouterr().err
    assert not (d / "bad").exists()


@pytest.mark.parametrize("argv", [["pki", "--help"], ["router", "--help"]])
def test_help_lists_the_new_flags(argv):
    res = subprocess.run([sys.executable, "-m", "lerobot_fleet.cli", *argv], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    assert ("issue" in res.stdout) if argv[0] == "pki" else ("--inventory" in res.stdout and "--connect" in res.stdout)


def test_a_server_certificate_names_its_namespaces(tmp_path, capsys):
    """A server may act only in the namespaces the inventory gives it; `pki issue` insists on them."""
    d = tmp_path / "pki"
    main(["pki", "init", str(d)])
    assert main(["pki", "issue", str(d), "gpu-0", "--role", "server"]) == 2
    assert "--namespace model=MODEL,service=SERVICE" in capsys.readouterr().err
    assert not (d / "gpu-0.crt").exists()
    assert (
        main(
            [
                "pki",
                "issue",
                str(d),
                "gpu-0",
                "--role",
                "server",
                "--namespace",
                "model=lab/act,service=pick up the cube",
                "--namespace",
                "model=lab/act,revision=v2,service=place",
            ]
        )
        == 0
    )
    grants = load_inventory(d / "inventory.yaml").get("gpu-0").namespaces
    assert [(g.model, g.revision, g.service) for g in grants] == [
        ("lab/act", "*", "pick up the cube"),
        ("lab/act", "v2", "place"),
    ]
    assert main(["pki", "issue", str(d), "gpu-1", "--role", "server", "--namespace", "bogus"]) == 2
