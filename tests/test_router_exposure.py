"""A router reachable from the network enforces the inventory's ACL, or says loudly that it does not."""

from __future__ import annotations

import subprocess
import threading

import pytest

from lerobot_policy_remote.testing.procs import VENV_BIN, free_port
from lerobot_policy_remote.zenoh_config import ZenohConfigError


def test_only_loopback_listens_count_as_closed():
    from lerobot_fleet.router.router import exposed_endpoints

    assert exposed_endpoints(["tcp/127.0.0.1:7447", "tls/localhost:1", "tcp/[::1]:7447", "tcp/127.3.2.1:9"]) == []
    assert exposed_endpoints(
        ["tcp/0.0.0.0:7447", "tls/[::]:7447", "tcp/10.0.0.5:7447#iface=eth0", "tcp/127.0.0.1:1"]
    ) == ["tcp/0.0.0.0:7447", "tls/[::]:7447", "tcp/10.0.0.5:7447#iface=eth0"]


def test_an_open_listen_without_inventory_is_refused_unless_insecure():
    from lerobot_fleet.router.router import check_exposure

    with pytest.raises(ZenohConfigError, match="refusing to start.*without --inventory.*--insecure"):
        check_exposure(["tcp/0.0.0.0:7447"], None, False)
    assert check_exposure(["tcp/0.0.0.0:7447"], "fleet.yaml", False) is None
    assert check_exposure(["tcp/127.0.0.1:7447"], None, False) is None
    assert "WARNING: insecure router" in (check_exposure(["tcp/0.0.0.0:7447"], None, True) or "")


def test_the_cli_refuses_before_it_listens():
    res = subprocess.run(
        [str(VENV_BIN / "lerobot-fleet"), "router", "--listen", f"tcp/0.0.0.0:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "refusing to start" in res.stderr and "--inventory" in res.stderr, res.stderr


def test_an_insecure_router_warns_at_start_and_every_minute(monkeypatch, capsys):
    from lerobot_fleet.router import router

    from lerobot_policy_remote.zenoh_config import ZenohSettings

    monkeypatch.setattr(router, "INSECURE_REPEAT_S", 0.2)
    stop = threading.Event()
    settings = ZenohSettings(mode="router", listen_endpoints=[f"tcp/127.0.0.1:{free_port()}"])
    t = threading.Thread(
        target=router.run_router, args=(settings, stop), kwargs={"insecure_warning": "WARNING: insecure router: x"}
    )
    t.start()
    try:
        stop.wait(1.0)
    finally:
        stop.set()
        t.join(10)
    assert capsys.readouterr().out.count("WARNING: insecure router: x") >= 3
