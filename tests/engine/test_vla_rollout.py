"""The VLA families end to end through the real CLIs: `lerobot-policy-server` with RTC on serving a tiny offline
SmolVLA / pi0 / pi0.5 to `lerobot-rollout --inference.type=remote --robot.type=sim_arm` for 15 s, with no failed
request. pi0 / pi0.5 subprocesses get the tiny sizes through `tiny_pi.SITE_DIR` on PYTHONPATH."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc, tiny_pi
from lerobot_policy_remote.testing.procs import policy_server
from lerobot_policy_remote.testing.vla import SAVERS

pytestmark = pytest.mark.slow

TASK = "pick up the cube"
SECONDS = 15


def tiny_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYTHONPATH": f"{tiny_pi.SITE_DIR}{os.pathsep}{path}" if path else str(tiny_pi.SITE_DIR),
        "HF_HUB_OFFLINE": "1",
    }


def executed(rec: Path) -> list[dict]:
    if not rec.exists():
        return []
    return [r for r in (json.loads(x) for x in rec.read_text().splitlines() if x.strip()) if r.get("provenance")]


def audit_outcomes(server_output: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in server_output.splitlines():
        start = line.find('{"ts"')
        if start >= 0 and '"outcome"' in line:
            outcome = json.loads(line[start:])["outcome"]
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


@pytest.mark.parametrize("kind", ["smolvla", "pi0", "pi05"])
def test_a_vla_served_with_rtc_streams_to_the_sim_arm_with_no_failed_request(router, tmp_path, kind, monkeypatch):
    for key, value in tiny_env().items():
        monkeypatch.setenv(key, value)  # this process builds the checkpoint; the children inherit the hook
    tiny_pi.install()
    model = SAVERS[kind](tmp_path / kind)
    server = policy_server(model, TASK, router.endpoint, "--rtc.enabled=true", max_seconds=240, ready_timeout=150)
    rec = tmp_path / "cmds.jsonl"
    robot = Proc(
        [
            str(VENV_BIN / "lerobot-rollout"),
            "--strategy.type=base",
            "--inference.type=remote",
            "--robot.type=sim_arm",
            f"--robot.record_path={rec}",
            f"--policy.path={model}",
            f"--task={TASK}",
            f"--duration={SECONDS}",
            "--fps=30",
            f"--inference.connect_endpoint={router.endpoint}",
            "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
            "--return_to_initial_position=false",
        ],
        name="rollout",
        max_seconds=SECONDS + 150,
    )
    try:
        opened = robot.wait_for("Session ", timeout=120)
        assert "rtc=True" in opened
        assert robot.wait(SECONDS + 90) == 0, robot.output()[-3000:]
    finally:
        robot.stop()
        server.stop()
    outcomes = audit_outcomes(server.output())
    assert outcomes.get("ok", 0) >= SECONDS and set(outcomes) == {"ok"}, (
        outcomes
    )  # every request served (a 30-step chunk: ~2/s)
    actions = executed(rec)
    assert len(actions) >= SECONDS * 30 * 0.5  # the arm moved on the policy's actions most of the time
    assert "delay=" in robot.output()  # chunks were merged the RTC way (inference delay, trimmed prefix)
