"""The real `lerobot-rollout --inference.type=remote` ends a failed start with one piece of advice, no traceback.

Router down; a task one letter off the server's (the robot lists what the router offers and points at the
closest match); a robot whose actions do not fit the policy (the contract advice).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, free_port, policy_server

pytestmark = pytest.mark.slow
TASK = "pick up the cube"


def rollout(
    model: Path,
    endpoint: str,
    task: str,
    robot: str = "sim_arm",
    env: dict[str, str] | None = None,
    took: list[float] | None = None,
) -> tuple[int, str]:
    """Default connect timeout and return-to-start (a start mistake is reported within 3 s of the engine's
    start, not after the 10 s connect timeout and a drive back to the start pose). `took` gets those seconds."""
    p = Proc(
        [
            str(VENV_BIN / "lerobot-rollout"),
            "--strategy.type=base",
            "--inference.type=remote",
            f"--robot.type={robot}",
            f"--policy.path={model}",
            f"--task={task}",
            "--duration=20",
            "--fps=30",
            f"--inference.connect_endpoint={endpoint}",
        ],
        name="rollout",
        env=env,
        max_seconds=200,
    )
    p.wait_for("Starting inference engine", timeout=150)
    t0 = time.monotonic()
    p.wait_for("lerobot-rollout: ", timeout=60)
    if took is not None:
        took.append(time.monotonic() - t0)
    rc = p.wait(60)
    p.wait_for("(LOG_LEVEL=DEBUG", timeout=5)  # the reader thread has seen the end of the output
    return rc, p.output()


def advice(out: str) -> list[str]:
    """The lines after the final `lerobot-rollout:` message (the message and the hint)."""
    lines = out.splitlines()
    start = max(i for i, x in enumerate(lines) if x.startswith("lerobot-rollout: "))
    return lines[start:]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_tiny_act(tmp_path_factory.mktemp("startup") / "act", seed=1)


@pytest.fixture
def server(model, own_router):
    p = policy_server(
        model, TASK, own_router.endpoint, "--max_sessions=2", "--replica_id=cube-1", max_seconds=300, ready_timeout=120
    )
    yield p
    p.stop()


def test_router_down_is_one_message_at_the_end_at_once(model):
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    took: list[float] = []
    rc, out = rollout(model, endpoint, TASK, took=took)
    assert rc != 0
    lines = advice(out)
    assert lines[0] == (
        f"lerobot-rollout: Remote inference could not start: nothing listens at {endpoint} (connection refused): "
        f"start the router there (lerobot-fleet router --listen {endpoint}) or fix --inference.connect_endpoint. "
        f"Check with: lerobot-fleet doctor --router {endpoint}"
    )
    assert took[0] < 3.0, f"a refused port took {took[0]:.1f}s to report"
    assert "Returning robot to initial position" not in out  # it never moved
    assert lines[1:] == ["(LOG_LEVEL=DEBUG prints the traceback; `lerobot-fleet doctor` checks the whole setup)"]
    assert "Traceback" not in out
    # the traceback is still there for whoever asks
    rc, out = rollout(model, endpoint, TASK, env={"LOG_LEVEL": "DEBUG"})
    assert rc != 0 and "Traceback (most recent call last)" in out and "RemoteStartupError" in out


def test_task_typo_lists_the_services_and_points_at_the_closest(model, own_router, server):
    took: list[float] = []
    rc, out = rollout(model, own_router.endpoint, "pick up the cub", took=took)
    assert rc != 0
    assert took[0] < 3.0, f"an unknown service took {took[0]:.1f}s to report"
    assert advice(out) == [
        f"lerobot-rollout: Remote inference could not start: No policy server serves model '{model}' revision 'main' "
        "task 'pick up the cub'. The router offers 1 service:",
        f"  - model '{model}' revision 'main' task '{TASK}': 1 replica, 2 free sessions",
        f"Closest match: model '{model}' revision 'main' task '{TASK}': 1 replica, 2 free sessions. "
        f"To use it: --task='{TASK}' (or --inference.service_task='{TASK}')",
        "(LOG_LEVEL=DEBUG prints the traceback; `lerobot-fleet doctor` checks the whole setup)",
    ]
    assert "Traceback" not in out


def test_robot_that_does_not_fit_the_policy_gets_the_contract_advice(model, own_router, server):
    rc, out = rollout(model, own_router.endpoint, TASK, robot="sim_base")
    assert rc != 0
    first = advice(out)[0]
    assert first.startswith(
        "lerobot-rollout: Remote inference could not start: session refused by replica cube-1 (action_mismatch): "
    )
    assert "the policy outputs 6 actions, the robot has 3 (['x.vel', 'y.vel', 'theta.vel'])" in first
    assert first.endswith(
        ". To fix: run the robot type the policy was trained on (same joints, same order), "
        "or serve a policy trained for "
        "this robot; if only the order differs, set action_feature_names in the server manifest to the training "
        "dataset's action names"
    )
    assert "Traceback" not in out
