"""Robot identity as pure units: the robot id from the certificate's CN, a mismatch refused naming both, and a
rollout that executed no remote action ending with status 1 and the reason (real `lerobot-rollout` runs of the
same paths: tests/prod/test_second_contact.py)."""

from __future__ import annotations

import collections
import types

import pytest
from lerobot_fleet.router.pki import init_ca, issue

from lerobot_policy_remote.engine import hook, identity, startup


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("idpki")
    init_ca(d)
    issue(d, "arm-01", "robot")
    return d


def test_certificate_without_client_uuid_makes_the_cn_the_robot_id(pki):
    ident = identity.resolve("", str(pki / "arm-01.crt"))
    assert (ident.client_uuid, ident.source, ident.problem) == ("arm-01", "certificate", "")


def test_client_uuid_that_differs_from_the_cn_is_a_problem_naming_both(pki):
    ident = identity.resolve("arm-02", str(pki / "arm-01.crt"))
    assert ident.problem.startswith(
        f"--inference.client_uuid=arm-02 but the certificate --inference.tls_cert={pki / 'arm-01.crt'} "
        "is issued to CN=arm-01"
    )
    assert "Drop --inference.client_uuid" in ident.problem
    assert identity.resolve("arm-01", str(pki / "arm-01.crt")).problem == ""


def test_no_certificate_keeps_the_old_rules(pki):
    assert identity.resolve("arm-07", None).client_uuid == "arm-07"
    random = identity.resolve("", None)
    assert random.source == "random" and len(random.client_uuid) == 32
    assert "cannot read the certificate" in identity.resolve("", str(pki / "missing.crt")).problem


def test_timeouts_without_a_chunk_under_mtls_point_at_the_certificate():
    c = collections.Counter(requests=3, timeouts=2)
    why = startup.nothing_executed(c, "", "arm-01", "flag", True, "rep-1")
    assert why.startswith("replica rep-1 never answered this robot's 3 observation(s) (2 request timeouts)")
    assert "robot id arm-01 (from --inference.client_uuid)" in why and "ACL refused: CN=" in why
    assert "check the server's log" in startup.nothing_executed(c, "", "arm-01", "random", False, "rep-1")
    assert startup.nothing_executed(c, "contract mismatch", "a", "flag", False, "").startswith(
        "remote inference went DEAD"
    )


def test_a_rollout_that_executed_nothing_exits_1_with_the_reason(monkeypatch, capsys):
    script = types.SimpleNamespace(rollout=lambda: None)
    hook.wrap_rollout(script)
    idle = types.SimpleNamespace(executed_count=0, why_nothing_executed=lambda: "replica rep-1 never answered")
    monkeypatch.setattr(hook, "_built", [idle])
    with pytest.raises(SystemExit) as ended:
        script.rollout()
    assert ended.value.code == 1
    assert (
        "lerobot-rollout: the robot executed no remote action: replica rep-1 never answered" in capsys.readouterr().err
    )
    monkeypatch.setattr(hook, "_built", [types.SimpleNamespace(executed_count=5)])
    assert script.rollout() is None  # a robot that executed something ends as lerobot says
