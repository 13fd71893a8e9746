"""The README's main job: `lerobot-fleet demo` brings up a fleet whose robots stream from both replicas."""

from __future__ import annotations

import json
import subprocess

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc, free_port, wait_until

pytestmark = pytest.mark.slow  # starts router / server processes


def test_demo_fleet_streams_and_stops_cleanly(tmp_path):
    port = free_port()
    demo = Proc(
        [str(VENV_BIN / "lerobot-fleet"), "demo", "--no-console", "--robots", "3", "--port", str(port),
         "--duration", "120", "--workdir", str(tmp_path)],
        name="demo",
        max_seconds=300,
    )
    try:
        demo.wait_for("fleet is up", timeout=240)

        def streaming() -> list[dict]:
            out = subprocess.run([str(VENV_BIN / "lerobot-fleet"), "status", "--json", "--router", f"tcp/127.0.0.1:{port}"],
                                 capture_output=True, text=True, timeout=60)
            report = json.loads(out.stdout)
            robots = [r for r in report["robots"] if r["state"] == "STREAMING" and r["requests"] > 0]
            return [report] if len(robots) == 3 else []

        (report,) = wait_until(streaming, timeout=90, interval=2, message="all three demo robots STREAMING with requests")
        streaming_robots = [r for r in report["robots"] if r["state"] == "STREAMING"]
        assert {r["replica"] for r in streaming_robots} == {"demo-a", "demo-b"}  # least-loaded placement spreads them
        assert {s["replica"] for s in report["servers"]} == {"demo-a", "demo-b"}
        for name in ("router", "server-demo-a", "server-demo-b", "sim-arm-01"):  # every child logs to the work directory
            assert (tmp_path / f"{name}.log").stat().st_size > 0, name
    finally:
        demo.stop(timeout=40)
    assert demo.popen.returncode == 0, demo.output()
    assert "stopped; logs kept" in demo.output()


def test_demo_record_dir_records_each_robots_episodes(tmp_path):
    """`lerobot-fleet demo --record-dir DIR`: each simulated robot records a local dataset (sentry) that
    lerobot's LeRobotDataset loads, with the `remote.degraded` mark; stopping the demo saves the episodes."""
    port, records, work = free_port(), tmp_path / "datasets", tmp_path / "work"
    robots = ("sim-arm-01", "sim-arm-02")
    demo = Proc(
        [str(VENV_BIN / "lerobot-fleet"), "demo", "--no-console", "--robots", "2", "--port", str(port),
         "--duration", "120", "--workdir", str(work), "--record-dir", str(records)],
        name="demo-record",
        max_seconds=300,
    )
    try:
        demo.wait_for("fleet is up", timeout=240)

        def executing() -> bool:
            logs = [work / f"{r}.log" for r in robots]
            return all(p.exists() and p.read_text(errors="replace").count("executing session_id=") >= 2 for p in logs)

        wait_until(executing, timeout=120, interval=0.5, message="both demo robots executing remote actions")
    finally:
        demo.stop(timeout=60)
    assert demo.popen.returncode == 0, demo.output()
    assert f"datasets in {records}" in demo.output()
    from lerobot.datasets import LeRobotDataset

    for robot in robots:
        ds = LeRobotDataset(f"local/rollout_{robot.replace('-', '_')}", root=records / robot)
        assert ds.meta.total_episodes >= 1 and ds.num_frames > 0, robot
        assert "remote.degraded" in ds.features and "action" in ds.features
