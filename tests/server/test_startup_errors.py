"""The real `lerobot-policy-server` CLI fails with one specific line and no traceback (unless --verbose)."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import VENV_BIN, free_port, run

pytestmark = pytest.mark.slow  # starts router / server processes

SERVER = str(VENV_BIN / "lerobot-policy-server")


def run_server(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    return run([SERVER, *args], timeout=240, env=env)


def error_line(out: str) -> str:
    lines = [x for x in out.splitlines() if x.startswith("lerobot-policy-server: error:")]
    assert len(lines) == 1, out
    return lines[0].removeprefix("lerobot-policy-server: error: ")


@pytest.fixture
def at_router(router) -> str:
    """The flag that points a server at a live router: the router is checked before the model."""
    return f"--zenoh.connect_endpoints=[{router.endpoint}]"


def test_bad_checkpoint_path_says_what_to_pass(at_router):
    rc, out = run_server("--model.repo_or_path=/nonexistent/ckpt", "--default_task=x", at_router)
    assert rc == 2
    assert error_line(out) == (
        "no checkpoint directory at '/nonexistent/ckpt', and it is not a hub repo id you can reach: pass a local "
        "checkpoint directory (with config.json and model.safetensors) or a hub repo id like 'org/name'; if it is a "
        "hub id, check the network / HF_HUB_OFFLINE"
    )
    assert "Traceback" not in out and "HFValidationError" not in out


def test_unreachable_hub_id_offline_says_network_or_local_dir(at_router):
    rc, out = run_server(
        "--model.repo_or_path=lerobot/act_does_not_exist", "--default_task=x", at_router, env={"HF_HUB_OFFLINE": "1"}
    )
    assert rc == 2
    assert error_line(out) == (
        "no checkpoint directory at 'lerobot/act_does_not_exist', and it is not a hub repo id you can reach "
        "(HF_HUB_OFFLINE is set and it is not in the local cache): pass a local checkpoint directory, or check the "
        "network / unset HF_HUB_OFFLINE so it can be downloaded once"
    )
    assert "Traceback" not in out and "LocalEntryNotFoundError" not in out


def test_directory_that_is_not_a_checkpoint(tmp_path, at_router):
    rc, out = run_server(f"--model.repo_or_path={tmp_path}", "--default_task=x", at_router)
    assert rc == 2
    assert error_line(out).startswith(
        f"'{tmp_path}' is a directory but not a lerobot checkpoint (no config.json in it)"
    )
    assert "Traceback" not in out


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "model:\n  repo_or_pth: x\n",
            "bad manifest value: `model`: The fields `repo_or_pth` are not valid for ModelSpec. "
            "Fix that field in the manifest or on the command line (see docs/server.md)",
        ),
        ("model: [\n", "could not read the manifest {path}: it is not valid YAML"),
        (None, "manifest file '{path}' not found: pass an existing YAML file with --manifest (see docs/server.md)"),
    ],
)
def test_bad_manifest(tmp_path, text, expected):
    path = tmp_path / "server.yaml"
    if text is not None:
        path.write_text(text)
    rc, out = run_server("--manifest", str(path))
    assert rc == 2
    assert error_line(out).startswith(expected.format(path=path))
    assert "Traceback" not in out


def test_router_unreachable_is_said_before_loading_and_verbose_is_quiet_about_it(tmp_path):
    """A refused router port is reported before the model loads (it used to take the load + 5 s)."""
    model = save_tiny_act(tmp_path / "act", seed=1)
    port = free_port()
    args = (
        f"--model.repo_or_path={model}",
        "--default_task=x",
        f"--zenoh.connect_endpoints=[tcp/127.0.0.1:{port}]",
        "--health_port=0",
    )
    rc, out = run_server(*args)
    assert rc == 2
    assert error_line(out) == (
        f"nothing listens at tcp/127.0.0.1:{port} (connection refused): start the router there "
        f"(lerobot-fleet router --listen tcp/127.0.0.1:{port}) or fix --zenoh.connect_endpoints"
    )
    assert "Loading" not in out and "Traceback" not in out and ".rs:" not in out


def test_health_port_in_use_is_named_with_the_flag_before_loading(tmp_path, at_router):
    """Two servers on one host: one line naming --health_port, exit 2, no model loaded."""
    import socket

    model = save_tiny_act(tmp_path / "act", seed=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, out = run_server(f"--model.repo_or_path={model}", "--default_task=x", at_router, f"--health_port={port}")
    assert rc == 2, out
    line = error_line(out)
    assert line.startswith(
        f"the health port {port} on 127.0.0.1 is already in use (another lerobot-policy-server on this host?)"
    )
    assert "--health_port=<a free port>" in line and "--health_port=0" in line
    assert "Loading" not in out and "Traceback" not in out
