"""`lerobot-fleet simulate` end to end: 30 protocol-exact robots in 2 processes, 2 stub replicas, 2 meshed routers,
one replica drained mid-run; every robot streams, no stale action runs, each drained robot streams again elsewhere."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_simulated_fleet_streams_and_moves_on_drain(tmp_path):
    cmd = [sys.executable, "-m", "lerobot_fleet.cli", "simulate", "--robots", "30", "--per-host", "15", "--replicas", "2",
           "--routers", "2", "--seconds", "12", "--drain-at", "5", "--console", "--json", "--workdir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert out.stdout.strip(), out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["robots_reported"] == 30, r
    assert r["streaming"] == 30, r["states"]
    assert r["stale_actions"] == 0 and r["nan_actions"] == 0
    assert r["chunks_per_s_min"] > 0.3, "every robot keeps receiving chunks"
    d = r["drain"]
    assert d["ok"] and d["moved"] >= 10, d  # about half the robots were on the drained replica
    assert d["not_back"] == [] and d["moved_still_on_drained"] == 0, d
    assert d["move_s_max"] <= 2.0, d  # each moved robot streams again within 2 s of the drain
    moved = [p for p in r["per_robot"] if "move_s" in p]
    assert all(p["replica"] != d["replica"] and p["state"] == "STREAMING" for p in moved)
    assert r["console"]["robots_seen"] == 30, r["console"]


def test_fleet_nice_ranks_each_fleet_session_below_the_console():
    """`--fleet-nice` must reach the scheduler: each fleet child starts its own session (its own autogroup, where
    autogroups exist), so its nice value alone ranked it only inside that group."""
    from pathlib import Path

    from lerobot_fleet.simulate import nice_autogroup

    from lerobot_policy_remote.testing.procs import Proc

    p = Proc(["sleep", "30"], name="nice-probe", max_seconds=30)
    try:
        group = Path(f"/proc/{p.pid}/autogroup")
        had_group = group.exists()
        assert nice_autogroup(p.pid, 19) is had_group
        if had_group:
            assert group.read_text().split()[-1] == "19", group.read_text()
            own = Path("/proc/self/autogroup").read_text().split()  # empty on some kernels' sandboxes (seen in CI)
            assert not own or own[-1] != "19", own  # the console's own group untouched
    finally:
        p.stop(timeout=5)
