"""`lerobot-fleet simulate` end to end: 30 protocol-exact robots in 2 processes, 2 stub replicas, 2 meshed routers,
one replica drained mid-run; every robot streams, no stale action runs, each drained robot streams again elsewhere.
The same fleet rolled out to a new model mid-run: every robot ends on it, one switch of model per move."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_simulated_fleet_streams_and_moves_on_drain(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "lerobot_fleet.cli",
        "simulate",
        "--robots",
        "30",
        "--per-host",
        "15",
        "--replicas",
        "2",
        "--routers",
        "2",
        "--seconds",
        "12",
        "--drain-at",
        "5",
        "--console",
        "--json",
        "--workdir",
        str(tmp_path),
    ]
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
    box = r["box"]  # the box's verdict beside the figures: its CPU, the fleet's share of it
    assert (
        box["capacity_pct"] >= 100 and 0 < box["fleet_cpu_pct"] <= box["box_cpu_pct"] + 10
    )  # the fleet runs on the box
    assert box["line"].startswith(("box saturated: ", "box not saturated: "))


def test_simulated_fleet_rolls_out_to_a_new_model_mid_run(tmp_path):
    """A canary then promote under 30 running robots (2 old replicas, 1 new): the robots' own record says every one
    ends on the new model, executes no stale, NaN or third model's action, and switches model once per move."""
    cmd = [sys.executable, "-m", "lerobot_fleet.cli", "simulate", "--robots", "30", "--per-host", "15"]
    cmd += ["--replicas", "2", "--new-replicas", "1", "--routers", "2", "--seconds", "12", "--rollout-at", "3"]
    cmd += ["--rollout-canary", "0.2", "--rollout-step", "12", "--json", "--workdir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert out.stdout.strip(), out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    ro = r["rollout"]
    assert ro["phase"] == "complete" and ro["failed"] == [], ro
    assert ro["canary_s"] <= ro["complete_s"] and ro["steps"] == 3, ro  # 6 canary robots, then 12 + 12
    assert ro["states"] == {"moved": 30}, ro
    assert ro["robots_on_new_model"] == 30 and ro["moves_total"] == 30, ro
    assert ro["stale_actions"] == 0 and ro["nan_actions"] == 0, ro
    assert ro["switches_not_moves"] == 0 and ro["foreign_fingerprint_robots"] == 0, ro
    assert ro["max_gap_s_worst"] <= 1.5, ro  # at most a chunk period (1 s) plus the move
    assert ro["ok"] and ro["line"].startswith("rollout complete: "), ro
    assert r["streaming"] == 30 and out.returncode == 0, out.stderr[-3000:]


def test_fleet_nice_ranks_each_fleet_session_below_the_console():
    """`--fleet-nice` must reach the scheduler: each fleet child starts its own session (its own autogroup, where
    autogroups exist), so its nice value alone ranked it only inside that group."""
    from pathlib import Path

    from lerobot_fleet.sim.simulate import nice_autogroup

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


def _stat(tmp_path, busy: int, idle: int, cpus: int = 2):
    path = tmp_path / "stat"
    lines = (
        [f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0"] + [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)] + ["intr 1 2 3"]
    )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_box_reading_counts_every_core(tmp_path):
    from lerobot_fleet.sim.box_cpu import busy_pct, read_box

    a = read_box(_stat(tmp_path, busy=1000, idle=1000))
    b = read_box(_stat(tmp_path, busy=1900, idle=1100))  # 900 of the 1000 jiffies since were busy
    assert a is not None and b is not None and b.cpus == 2
    assert busy_pct(a, b) == pytest.approx(180.0)  # percent of one core, both cores together
    assert read_box(tmp_path / "missing") is None


def test_a_run_on_a_saturated_box_says_so_and_whose_cpu_it_was():
    from lerobot_fleet.sim.box_cpu import verdict

    v = verdict(187.0, 2, fleet_pct=120.0, console_pct=15.0, samples=[170.0, 190.0, 195.0])
    assert v["saturated"] and v["other_cpu_pct"] == 52.0 and v["saturated_seconds"] == 2
    assert v["line"].startswith("box saturated: 187 % of 200 % (fleet 120 %, console 15 %, other processes 52 %)")
    assert "not the product" in v["line"]
    calm = verdict(120.0, 2, fleet_pct=110.0, console_pct=5.0)
    assert (
        not calm["saturated"]
        and calm["line"] == "box not saturated: 120 % of 200 % (fleet 110 %, console 5 %, other processes 5 %)"
    )
    assert (
        verdict(179.9, 2, 100.0)["saturated"] is False and verdict(180.0, 2, 100.0)["saturated"] is True
    )  # 90 % of 2 cores


def test_a_process_that_exits_mid_window_keeps_the_cpu_it_spent():
    """A drained replica exits before the run ends: its CPU counts up to its last reading, never below its start."""
    import time

    from lerobot_fleet.sim.box_cpu import ProcessCpu, process_cpu_s

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
    quits = subprocess.Popen([sys.executable, "-c", burn])
    stays = subprocess.Popen([sys.executable, "-c", burn + "import sys\nsys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        cpu = ProcessCpu({"gone": [quits.pid], "alive": [stays.pid]}, period_s=0.1).start()
        quits.wait(timeout=30)  # reaped: its /proc entry is gone
        deadline = time.monotonic() + 30
        while process_cpu_s(stays.pid) < 0.6 and time.monotonic() < deadline:  # the other one burns its 0.6 s
            time.sleep(0.05)
        spent = cpu.stop()
    finally:
        for p in (quits, stays):
            p.kill()
            p.wait(timeout=10)
    assert 0.4 <= spent["gone"] <= 1.5, spent  # read only at the start and the end: minus its start-up CPU
    assert 0.4 <= spent["alive"] <= 1.5, spent


def test_a_rollout_not_complete_when_the_window_ends_says_so_and_fails():
    """The report checks the robots' own record, not the router's word: a robot on the old model, one whose executed
    model changed without a move, one that ran a third model each fail the run, and an unfinished rollout says so."""
    from lerobot_fleet.sim.sim_args import NEW_FINGERPRINT, OLD_FINGERPRINT, SimArgs
    from lerobot_fleet.sim.simulate_report import rollout_summary

    def robot(name, fps, moves, gap=0.1):
        return {"robot": name, "fingerprints": fps, "switches": len(fps) - 1, "moves": moves, "max_gap_s": gap}

    base = {"stale_actions": 0, "nan_actions": 0}
    robots = [
        base | robot("a", [OLD_FINGERPRINT, NEW_FINGERPRINT], 1),
        base | robot("b", [OLD_FINGERPRINT], 0),
        base | robot("c", [OLD_FINGERPRINT, NEW_FINGERPRINT], 0, gap=0.9),
        base | robot("d", [OLD_FINGERPRINT, "c3" * 32, NEW_FINGERPRINT], 2),
    ]
    a = SimArgs(robots=4, rollout_at=5.0, new_replicas=1)
    r = rollout_summary(robots, {"at_s": 5.0, "started": True, "canary_s": 1.0, "phase": "promoting", "steps": 2}, a)
    assert not r["ok"] and r["robots_on_new_model"] == 3 and r["max_gap_s_worst"] == 0.9
    assert r["switches_not_moves_robots"] == ["c"] and r["foreign_fingerprint_robots"] == 1
    assert r["line"].startswith("rollout NOT complete when the window ended (phase promoting, canary in 1.0 s)")
    never = rollout_summary(robots, {"started": False, "message": "no replica serves revision 'v2'"}, a)
    assert never["line"].startswith("rollout never started: no replica serves revision 'v2'")
