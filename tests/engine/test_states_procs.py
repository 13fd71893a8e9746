"""Link states with real processes: `lerobot-policy-server` + `lerobot-rollout --inference.type=remote` (sim_arm).

ACT built from the sim_arm's own features, chunk 50 and 100 at 30 fps. A healthy run never shows
DEGRADED (the robot asks for a chunk every 1.7 / 3.3 s, longer than degraded_after_s: that is not a
fault). SIGSTOP of the server (lease 10 s, so only the outstanding request can tell) shows DEGRADED
once the request in flight is older than degraded_after_s, then STALLED when the queue runs dry.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import policy_server

pytestmark = pytest.mark.slow
DEGRADED_AFTER = 0.5
BUFFER = 1.0  # the next request goes out when 1 s of actions is left: late at +0.5 s, dry at +1.0 s
SLACK = 1.0  # a loaded 2-core box: log lines and scheduling


def test_healthy_run_is_never_degraded_and_sigstop_is_degraded_then_stalled(router, tmp_path):
    task = f"pick {uuid.uuid4().hex[:6]}"
    for chunk in (50, 100):
        model = save_tiny_act(tmp_path / f"act{chunk}", cameras={"front": (96, 128)}, chunk_size=chunk)
        server = policy_server(
            model,
            task,
            router.endpoint,
            "--zenoh.lease_ms=10000",
            "--warmup_inferences=1",
            name=f"server{chunk}",
            max_seconds=240,
            ready_timeout=120,
        )
        rollout = Proc(
            [
                str(VENV_BIN / "lerobot-rollout"),
                "--strategy.type=base",
                "--inference.type=remote",
                "--robot.type=sim_arm",
                f"--policy.path={model}",
                f"--task={task}",
                "--duration=120",
                "--fps=30",
                f"--inference.connect_endpoint={router.endpoint}",
                "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
                f"--inference.degraded_after_s={DEGRADED_AFTER}",
                f"--inference.buffer_time_s={BUFFER}",
                "--inference.request_timeout_s=20",
                "--inference.max_action_age_s=5",
                "--return_to_initial_position=false",
            ],
            name=f"rollout{chunk}",
            max_seconds=200,
        )
        try:
            rollout.wait_for("Link state: STREAMING", timeout=90)
            t_healthy = time.monotonic()
            n_lines = len(rollout.lines)
            # healthy: several chunk periods (1.7 s / 3.3 s each) with no fault state at all
            while time.monotonic() - t_healthy < 4 * chunk / 30:
                assert rollout.popen.poll() is None, rollout.output()[-3000:]
                time.sleep(0.2)  # a bounded watch for something that must NOT happen (checked below)
            healthy = "\n".join(list(rollout.lines)[n_lines:])
            assert "executing session_id=" in rollout.output()
            for bad in ("DEGRADED", "STALLED", "RECONNECTING", "timed out"):
                assert bad not in healthy, f"chunk {chunk}: {bad} in a healthy run:\n{healthy[-3000:]}"

            n_lines = len(rollout.lines)
            server.signal_program(signal.SIGSTOP)
            t_stop = time.monotonic()
            try:
                rollout.wait_for("Link state: DEGRADED", timeout=chunk / 30 + DEGRADED_AFTER + SLACK)
                t_degraded = time.monotonic()
                rollout.wait_for("Link state: STALLED", timeout=BUFFER + SLACK)
                t_stalled = time.monotonic()
            finally:
                server.signal_program(signal.SIGCONT)
            after = list(rollout.lines)[n_lines:]
            states = [ln.split("Link state: ")[1] for ln in after if "Link state: " in ln]
            assert states[:2] == ["DEGRADED", "STALLED"], states
            # DEGRADED came at most one chunk period (the robot had not asked yet) + the bound after the stop,
            # STALLED at most the buffer after DEGRADED's request went out
            assert t_degraded - t_stop <= chunk / 30 + DEGRADED_AFTER + SLACK
            assert t_stalled - t_degraded <= BUFFER - DEGRADED_AFTER + SLACK
        finally:
            rollout.stop()
            server.stop()
