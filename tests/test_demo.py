"""The README's main job: `lerobot-fleet demo` brings up a fleet whose robots stream from both replicas."""

from __future__ import annotations

import json
import subprocess
import time

from support.procs import VENV_BIN, Proc, free_port


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
        deadline, report = time.monotonic() + 90, {}
        while time.monotonic() < deadline:
            out = subprocess.run([str(VENV_BIN / "lerobot-fleet"), "status", "--json", "--router", f"tcp/127.0.0.1:{port}"],
                                 capture_output=True, text=True, timeout=60)
            report = json.loads(out.stdout)
            streaming = [r for r in report["robots"] if r["state"] == "STREAMING" and r["requests"] > 0]
            if len(streaming) == 3:
                break
            time.sleep(2)
        assert len(streaming) == 3, report
        assert {r["replica"] for r in streaming} == {"demo-a", "demo-b"}  # least-loaded placement spreads them
        assert {s["replica"] for s in report["servers"]} == {"demo-a", "demo-b"}
    finally:
        demo.stop(timeout=40)
    assert demo.popen.returncode == 0, demo.output()
    assert "stopped; logs kept" in demo.output()
