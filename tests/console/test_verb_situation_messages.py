"""`reset`/`drain` that nobody answered, and `status` that sees nothing, say what
happened: a target that is gone is gone (not the ACL), and an empty view through a certificate may be
the access control hiding the fleet."""

from __future__ import annotations

from lerobot_fleet.router.acl import hidden_fleet_note, nobody_answered_hint
from lerobot_fleet.router.pki import init_ca, issue


def _cert(tmp_path, name: str, role: str) -> str:
    init_ca(tmp_path)
    return str(issue(tmp_path, name, role).cert)


def test_reset_of_a_robot_that_finished_does_not_blame_the_acl(tmp_path):
    cert = _cert(tmp_path, "alice", "operator")
    gone = nobody_answered_hint(cert, "episode reset", "robot", "arm-1", present=False)
    assert "access control" not in gone and "arm-1 is not on the network" in gone and "status" in gone
    # the robot is there and did not answer: the access control may well have refused this certificate
    assert "access control refused this certificate (CN=alice)" in nobody_answered_hint(
        cert, "episode reset", "robot", "arm-1", True
    )
    # cannot tell (a robot certificate sees no tokens): the ACL hint as before
    assert "CN=alice" in nobody_answered_hint(cert, "drain", "server", "gpu-0", None)
    assert nobody_answered_hint(None, "drain", "server", "gpu-0", None) == ""  # no certificate, no ACL
    assert "gpu-0 is not on the network" in nobody_answered_hint(None, "drain", "server", "gpu-0", False)


def test_status_through_a_certificate_that_sees_nothing_names_the_access_control(tmp_path):
    cert = _cert(tmp_path, "arm-7", "robot")
    note = hidden_fleet_note(cert, servers=0, robots=0)
    assert "CN=arm-7" in note and "access control" in note and "operator or viewer certificate" in note
    assert hidden_fleet_note(cert, servers=1, robots=0) == ""
    assert hidden_fleet_note(None, servers=0, robots=0) == ""
