"""`lerobot-fleet pki issue` prints `use:` commands that run as printed.

The slow test issues a router, a server (namespace of a tiny real ACT), a robot and an operator certificate with
the real CLI, then runs each printed command: the router, the server, the robot (ROBOT -> sim_arm, and a
--duration so it ends) and the operator's flags with `status` instead of the full-screen `console`. Only the port
is changed (7447 may be taken on a shared machine) and the server gets a free health port.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import Proc, free_port, tool


def issue_all(d: Path, model: Path | str, task: str, router_host: str | None = None) -> dict[str, str]:
    """The `use:` line (without `use: `) printed for each name, from the real `lerobot-fleet pki` CLI."""

    def run(*args: str) -> str:
        out = subprocess.run(
            [tool("lerobot-fleet"), "pki", *args], capture_output=True, text=True, timeout=60, cwd=d.parent
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    run("init", d.name)
    hints = {}
    router = ["--host", router_host] if router_host else []
    for name, extra in (
        ("router-a", ["--role", "router", *router]),
        ("gpu-0", ["--role", "server", "--namespace", f"model={model},service={task}"]),
        ("arm-01", ["--role", "robot"]),
        ("alice", ["--role", "operator"]),
    ):
        lines = run("issue", d.name, name, *extra).splitlines()
        hints[name] = next(x for x in lines if x.startswith("use: "))[len("use: ") :]
        hints[f"{name} note"] = "\n".join(x for x in lines if x.startswith("note: "))
    return hints


def test_hints_name_no_missing_file_and_dial_what_the_router_certificate_names(tmp_path):
    hints = issue_all(tmp_path / "pki", "/ckpt/act", "pick up the cube")
    assert "--listen tls/127.0.0.1:7447" in hints["router-a"] and "this machine only" in hints["router-a note"]
    assert "--manifest" not in hints["gpu-0"] and "ROUTER" not in " ".join(hints.values())
    assert "--model.repo_or_path=/ckpt/act --default_task='pick up the cube'" in hints["gpu-0"]
    assert "--policy.path=/ckpt/act --task='pick up the cube'" in hints["arm-01"]
    assert "..." not in hints["arm-01"] and "--inference.connect_endpoint=tls/127.0.0.1:7447" in hints["arm-01"]

    hosted = issue_all(tmp_path / "pki2", "/ckpt/act", "pick up the cube", router_host="router-a.lab")
    assert "--listen tls/0.0.0.0:7447" in hosted["router-a"] and "tls/router-a.lab:7447" in hosted["router-a note"]
    assert "--zenoh.connect_endpoints=tls/router-a.lab:7447" in hosted["gpu-0"]
    assert "--router tls/router-a.lab:7447" in hosted["alice"]


@pytest.mark.slow
def test_the_printed_commands_run(tmp_path):
    model = save_tiny_act(tmp_path / "act", seed=11)
    task = f"hint pick {uuid.uuid4().hex[:4]}"
    hints = issue_all(tmp_path / "pki", model, task)
    port = str(free_port())

    def argv(name: str, *extra: str) -> list[str]:
        words = shlex.split(
            hints[name].replace(":7447", f":{port}").replace("--robot.type=ROBOT", "--robot.type=sim_arm")
        )
        return [tool(words[0]), *words[1:], *extra]

    procs: list[Proc] = []
    try:
        router = Proc(argv("router-a"), name="router", max_seconds=300, cwd=tmp_path)
        procs.append(router)
        router.wait_for("Zenoh router up", timeout=30)
        server = Proc(argv("gpu-0", f"--health_port={free_port()}"), name="server", max_seconds=300, cwd=tmp_path)
        procs.append(server)
        assert "replica=gpu-0 " in server.wait_for("Policy server up", timeout=200)
        robot = Proc(
            argv(
                "arm-01",
                "--duration=4",
                "--fps=30",
                "--return_to_initial_position=false",
                "--inference.log_every_chunk=true",
            ),
            name="robot",
            max_seconds=200,
            cwd=tmp_path,
        )
        procs.append(robot)
        assert robot.wait(180) == 0, robot.tail(40)
        assert "executing session_id=" in robot.output()
        words = argv("alice")
        status = subprocess.run(
            [tool("lerobot-fleet"), "status", *words[2:]], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert status.returncode == 0 and "gpu-0" in status.stdout, status.stdout + status.stderr
    finally:
        for p in reversed(procs):
            p.stop()
