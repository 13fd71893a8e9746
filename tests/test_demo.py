"""The README's main job: `lerobot-fleet demo` brings up a fleet whose robots stream from both replicas."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc, free_port, wait_until
from lerobot_policy_remote.testing.warm_start import zygote_pids

pytestmark = pytest.mark.slow  # starts router / server processes


def test_demo_fleet_streams_and_stops_cleanly(tmp_path):
    port = free_port()
    demo = Proc(
        [
            str(VENV_BIN / "lerobot-fleet"),
            "demo",
            "--no-console",
            "--robots",
            "3",
            "--port",
            str(port),
            "--duration",
            "120",
            "--workdir",
            str(tmp_path),
        ],
        name="demo",
        max_seconds=300,
    )
    try:
        demo.wait_for("fleet is up", timeout=240)

        def streaming() -> list[dict]:
            out = subprocess.run(
                [str(VENV_BIN / "lerobot-fleet"), "status", "--json", "--router", f"tcp/127.0.0.1:{port}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            report = json.loads(out.stdout)
            robots = [r for r in report["robots"] if r["state"] == "STREAMING" and r["requests"] > 0]
            return [report] if len(robots) == 3 else []

        (report,) = wait_until(
            streaming, timeout=90, interval=2, message="all three demo robots STREAMING with requests"
        )
        streaming_robots = [r for r in report["robots"] if r["state"] == "STREAMING"]
        assert {r["replica"] for r in streaming_robots} == {"demo-a", "demo-b"}  # least-loaded placement spreads them
        assert {s["replica"] for s in report["servers"]} == {"demo-a", "demo-b"}
        for name in (
            "router",
            "server-demo-a",
            "server-demo-b",
            "sim-arm-01",
        ):  # every child logs to the work directory
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
        [
            str(VENV_BIN / "lerobot-fleet"),
            "demo",
            "--no-console",
            "--robots",
            "2",
            "--port",
            str(port),
            "--duration",
            "120",
            "--workdir",
            str(work),
            "--record-dir",
            str(records),
        ],
        name="demo-record",
        max_seconds=300,
    )
    try:
        demo.wait_for("fleet is up", timeout=240)

        def executing() -> bool:
            logs = [work / f"{r}.log" for r in robots]
            return all(p.exists() and "Streaming from replica " in p.read_text(errors="replace") for p in logs)

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


def test_demo_second_model_rolls_out_canary_then_promote(tmp_path):
    """`lerobot-fleet demo --second-model`: a third replica serves other weights under revision v2; `rollout start
    --to v2 --canary 50%` moves two of four robots, `promote` the other two, each robot once and without a refusal."""
    port = free_port()
    robots = [f"sim-arm-{i:02d}" for i in range(1, 5)]
    demo = Proc(
        [str(VENV_BIN / "lerobot-fleet"), "demo", "--no-console", "--second-model", "--port", str(port)]
        + ["--duration", "200", "--workdir", str(tmp_path)],
        name="demo-second-model",
        max_seconds=400,
    )

    def fleet(*args: str) -> dict:
        out = subprocess.run(
            [str(VENV_BIN / "lerobot-fleet"), *args, "--json", "--router", f"tcp/127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def moved(n: int) -> bool:
        return sum(r["state"] == "moved" for r in fleet("rollout", "status", "--wait", "0.5")["robots"]) == n

    try:
        assert "Try a rollout: lerobot-fleet rollout start --to v2" in demo.wait_for("fleet is up", timeout=240)
        wait_until(
            lambda: sum(r["state"] == "STREAMING" for r in fleet("status")["robots"]) == len(robots),
            timeout=120,
            interval=2,
            message="four demo robots STREAMING",
        )
        started = fleet("rollout", "start", "--to", "v2", "--canary", "50%", "--wait", "0.5")
        assert started["to_model"]["revision"] == "v2" and len(started["robots"]) == len(robots), started
        wait_until(lambda: moved(2), timeout=90, interval=2, message="the canary's two robots on v2")
        fleet("rollout", "promote", "--wait", "0.5")
        wait_until(lambda: moved(4), timeout=90, interval=2, message="all four robots on v2")
        assert {r["replica"] for r in fleet("status")["robots"]} == {"demo-v2"}
    finally:
        demo.stop(timeout=60)
    assert demo.popen.returncode == 0, demo.output()[-3000:]
    for robot in robots:
        lines = (tmp_path / f"{robot}.log").read_text(errors="replace").splitlines()
        bad = [line for line in lines if "ERROR" in line or "refus" in line.lower() or "Traceback" in line]
        assert not bad, (robot, bad)
        assert sum("Moved to model" in line for line in lines) == 1, robot
    assert (tmp_path / "server-demo-v2.sh").exists()  # restarted by hand like the other replicas


def _descendants(*pids: int) -> set[int]:
    """Every live process below `pids` (children, their children, ...), from /proc."""
    out, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        try:
            kids = [int(x) for x in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
        out.update(kids)
        todo.extend(kids)
    return out


SUMMARY_WITH_RTC = re.compile(r"Streaming from replica \S+: .* RTC delay \d+ steps")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_demo_policy_smolvla_streams_every_arm_with_rtc(tmp_path):
    """`lerobot-fleet demo --policy smolvla`: the replicas serve a tiny offline SmolVLA with RTC; all four arms open
    an RTC session, merge chunks the RTC way and report `rtc` on to the console; stopping the demo ends every child."""
    port = free_port()
    before = _descendants(*zygote_pids())
    robots = [f"sim-arm-{i:02d}" for i in range(1, 5)]
    demo = Proc(
        [
            str(VENV_BIN / "lerobot-fleet"),
            "demo",
            "--policy",
            "smolvla",
            "--no-console",
            "--port",
            str(port),
            "--duration",
            "150",
            "--workdir",
            str(tmp_path),
        ],
        name="demo-smolvla",
        max_seconds=400,
    )
    children: set[int] = set()
    try:
        assert "serving tiny SmolVLA with RTC" in demo.wait_for("fleet is up", timeout=300)
        # the demo's children, wherever they were forked: below the demo, or below this worker's zygotes (one test at
        # a time runs on a worker, so what is new below them is the demo's)
        children = _descendants(demo.program_pid()) | (_descendants(*zygote_pids()) - before)
        assert len(children) >= 1 + 2 + len(robots), children  # router, two replicas, the arms
        # what the demo started each replica with: its restart script (a warm-started child's /proc argv is the
        # zygote's)
        servers = [p.read_text() for p in sorted(tmp_path.glob("*.sh")) if "lerobot-policy-server" in p.read_text()]
        assert len(servers) == 2 and all("--rtc.enabled=true" in s for s in servers), servers

        def log(robot: str) -> str:
            path = tmp_path / f"{robot}.log"
            return path.read_text(errors="replace") if path.exists() else ""

        def streaming_with_rtc() -> bool:  # the robots' summary line: chunks merged, with RTC's delay
            return all(SUMMARY_WITH_RTC.search(log(r)) for r in robots)

        wait_until(streaming_with_rtc, timeout=150, interval=1, message="four demo arms merging RTC chunks")
        for robot in robots:
            assert "differs from training" not in log(robot)  # the arms' cameras are the policy's trained size
            opened = [line for line in log(robot).splitlines() if "Session " in line and " opened on replica " in line]
            assert opened and all("rtc=True" in line for line in opened), (robot, opened)

        def console_sees_rtc() -> list[dict]:
            out = subprocess.run(
                [str(VENV_BIN / "lerobot-fleet"), "status", "--json", "--router", f"tcp/127.0.0.1:{port}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            report = json.loads(out.stdout)
            on = [r for r in report["robots"] if r["state"] == "STREAMING" and r["rtc"] == "on"]
            return [report] if len(on) == len(robots) else []

        (report,) = wait_until(
            console_sees_rtc, timeout=90, interval=2, message="the console sees four arms STREAMING with rtc on"
        )
        assert {r["replica"] for r in report["robots"]} == {"demo-a", "demo-b"}
    finally:
        demo.stop(timeout=60)
    assert demo.popen.returncode == 0, demo.output()[-3000:]
    assert "stopped; logs kept" in demo.output()
    assert not [pid for pid in children if _alive(pid)], "demo children left running"
