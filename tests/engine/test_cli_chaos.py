"""The real `lerobot-rollout --inference.type=remote` CLI against a real `lerobot-policy-server` process.

One rollout rides through: streaming -> server kill -9 -> restart (same model, resumes) -> kill -9 ->
restart with ANOTHER model at the same path -> DEAD -> clean stop before --duration.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc, assert_never, wait_until
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import policy_server

pytestmark = pytest.mark.slow
MAX_AGE = 1.5


def start_server(model: Path, endpoint: str) -> Proc:
    return policy_server(model, "pick", endpoint, max_seconds=240, ready_timeout=120)


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_cli_rollout_executes_server_actions_and_survives_chaos(router, tmp_path):
    model = tmp_path / "act"
    save_tiny_act(model, seed=1)
    server = start_server(model, router.endpoint)
    rec = tmp_path / "cmds.jsonl"
    rollout = Proc(
        [
            str(VENV_BIN / "lerobot-rollout"),
            "--strategy.type=base",
            "--inference.type=remote",
            "--robot.type=sim_arm",
            f"--robot.record_path={rec}",
            f"--policy.path={model}",
            "--task=pick",
            "--duration=120",
            "--fps=30",
            f"--inference.connect_endpoint={router.endpoint}",
            "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
            f"--inference.max_action_age_s={MAX_AGE}",
            "--inference.max_offline_s=60",
            "--inference.request_timeout_s=2",
            "--inference.reconnect_max_backoff_s=1",
            "--return_to_initial_position=false",
        ],
        name="rollout",
        max_seconds=200,
    )
    try:
        rollout.wait_for("Session ", timeout=90)
        rollout.wait_for("executing session_id=", timeout=30)
        wait_until(lambda: len(records(rec)) > 5, timeout=30, message="the sim arm recording executed actions")

        # 1) kill -9 mid-episode: robot rides its buffer, never executes stale actions, is not failed
        server.signal_program(signal.SIGKILL)
        server.wait(10)
        rollout.wait_for("RECONNECTING", timeout=30)
        assert_never(
            lambda: rollout.popen.poll() is not None, 2.0, message="the rollout exiting while its server is down"
        )
        server = start_server(model, router.endpoint)

        # Resumed = actions of a second session reached the motors (a STREAMING line alone could be a
        # STALLED -> STREAMING recovery inside the first session on a loaded box).
        def sessions() -> set[str]:
            return {r["provenance"]["session_id"] for r in records(rec) if r["provenance"]}

        try:
            wait_until(lambda: len(sessions()) >= 2, 60, message="actions of a new session after the restart")
        except AssertionError:
            raise AssertionError(rollout.output()[-4000:]) from None
        assert "RECONNECTING" in rollout.output()

        # 2) server restarted with another model at the same path: DEAD, clean stop
        server.signal_program(signal.SIGKILL)
        server.wait(10)
        save_tiny_act(model, seed=2)  # same path and shape, different weights: another checkpoint
        server = start_server(model, router.endpoint)
        rc = rollout.wait(90)
        out = rollout.output()
        assert rc == 0, out[-3000:]
        assert "DEAD" in out and "different model" in out
        assert "Rollout finished" in out
    finally:
        rollout.stop()
        server.stop()

    recs = records(rec)
    executed = [r for r in recs if r["provenance"]]
    assert executed and len(executed) == len(recs), "an action without server provenance reached the motors"
    assert max(r["provenance"]["source_age_s"] for r in executed) <= MAX_AGE
