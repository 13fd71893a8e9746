"""The policy contract through the real CLIs: `lerobot-rollout --inference.type=remote --rename_map=...` driving the sim
arm against a real `lerobot-policy-server` whose policy names its camera differently; and peer mode (no router)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc, free_port, wait_until
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import policy_server, tool

pytestmark = pytest.mark.slow


def rollout(model: Path, endpoint: str, rec: Path, *extra: str) -> Proc:
    return Proc(
        [
            str(VENV_BIN / "lerobot-rollout"),
            "--strategy.type=base",
            "--inference.type=remote",
            "--robot.type=sim_arm",
            f"--robot.record_path={rec}",
            f"--policy.path={model}",
            "--task=pick",
            "--duration=60",
            "--fps=30",
            f"--inference.connect_endpoint={endpoint}",
            "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
            "--return_to_initial_position=false",
            *extra,
        ],
        name="rollout",
        max_seconds=150,
    )


def executed(rec: Path) -> list[dict]:
    if not rec.exists():
        return []
    return [r for r in (json.loads(x) for x in rec.read_text().splitlines() if x.strip()) if r.get("provenance")]


def test_rename_map_lets_a_robot_drive_a_policy_whose_cameras_have_other_names(router, tmp_path):
    model = save_tiny_act(tmp_path / "act_top", cameras={"top": (96, 128)})  # the policy's camera is `top`
    server = policy_server(model, "pick", router.endpoint, max_seconds=180, ready_timeout=120)
    rec = tmp_path / "cmds.jsonl"
    # the sim arm's camera is `front`; the map is lerobot's own flag, as with local inference
    robot = rollout(model, router.endpoint, rec, '--rename_map={"observation.images.front": "observation.images.top"}')
    try:
        robot.wait_for("Session ", timeout=90)
        wait_until(lambda: len(executed(rec)) > 5, timeout=60, message="the sim arm executing the policy's actions")
        chunk = robot.wait_for("chunk session_id=", timeout=30)
        assert "queue_wait=" in chunk and "inference=" in chunk and "network=" in chunk
        out = robot.output()
        assert "Action order NOT checked" in out  # tiny ACT names no actions and the server has no action_feature_names
    finally:
        robot.stop()
        server.stop()


def test_peer_mode_without_a_router(tmp_path):
    model = save_tiny_act(tmp_path / "act")
    port = free_port()
    endpoint = f"tcp/127.0.0.1:{port}"
    server = Proc(
        [
            tool("lerobot-policy-server"),
            f"--model.repo_or_path={model}",
            "--default_task=pick",
            "--health_port=0",
            "--zenoh.mode=peer",
            f"--zenoh.listen_endpoints=[{endpoint}]",
        ],
        name="server",
        max_seconds=180,
    )
    rec = tmp_path / "cmds.jsonl"
    robot = None
    try:
        up = server.wait_for("Policy server up", timeout=120)
        assert (
            f"zenoh=peer listen={endpoint}" in up and "connect=" not in up
        )  # no loopback router endpoint in peer mode
        assert "healthz=off metrics=off" in up
        robot = rollout(model, endpoint, rec, "--inference.zenoh_mode=peer")
        robot.wait_for("Session ", timeout=90)
        wait_until(lambda: len(executed(rec)) > 5, timeout=60, message="the sim arm streaming over a peer link")
    finally:
        if robot is not None:
            robot.stop()
        server.stop()
