"""Warm starts (testing/warm_start.py): a heavy child forked from the suite's zygote is still the real program, in
its own session, with its own output, status, bound and signals; anything that changes how an interpreter starts
gets a fresh process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lerobot_policy_remote.testing import tiny_pi
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, policy_server, run
from lerobot_policy_remote.testing.warm_start import WarmChild, warm_argv

pytestmark = pytest.mark.slow  # the zygote imports lerobot once per worker

SERVER = str(VENV_BIN / "lerobot-policy-server")


def test_only_the_heavy_programs_start_warm():
    assert warm_argv([SERVER, "--help"]) and warm_argv([str(VENV_BIN / "lerobot-rollout")])
    assert warm_argv([sys.executable, "-m", "bench.peers.serve"])  # the peers bench's servers, clients and robots
    assert not warm_argv([str(VENV_BIN / "lerobot-fleet"), "router"]) and not warm_argv([sys.executable, "-c", "1"])
    assert not warm_argv([sys.executable, "-m", "lerobot_fleet.cli"])
    assert warm_argv([sys.executable, "-m", "lerobot_policy_remote.sim.vla_policy"])  # the demo's policy builder
    assert warm_argv([sys.executable, "-m", "lerobot_policy_remote.testing.simfleet", "robots"])  # the simulator's
    fleet = str(VENV_BIN / "lerobot-fleet")
    assert warm_argv([fleet, "doctor", "--router", "tcp/x:1", "--policy.path=/m"])  # it loads lerobot to check it
    assert not warm_argv([fleet, "doctor", "--router", "tcp/x:1"]) and not warm_argv([fleet, "status"])


def test_a_warm_child_runs_the_real_program_with_its_output_and_status(router, tmp_path):
    p = Proc(
        [
            SERVER,
            f"--model.repo_or_path={tmp_path / 'missing'}",
            "--default_task=x",
            f"--zenoh.connect_endpoints=[{router.endpoint}]",
        ],
        name="server",
        max_seconds=120,
    )
    assert isinstance(p.popen, WarmChild)
    assert p.wait(120) == 2
    assert "lerobot-policy-server: error:" in p.output() and "missing" in p.output()


def test_a_warm_child_is_its_own_session_and_is_ended_by_pid(router, tmp_path):
    model = save_tiny_act(tmp_path / "act")
    server = policy_server(model, f"warm {os.urandom(3).hex()}", router.endpoint, max_seconds=120)
    try:
        assert isinstance(server.popen, WarmChild)
        assert os.getsid(server.pid) == server.pid and server.program_pid() == server.pid
        server.signal_program(signal.SIGKILL)
        assert server.wait(10) == -signal.SIGKILL
    finally:
        server.stop()


def test_a_warm_childs_bound_kills_it(router, tmp_path):
    model = save_tiny_act(tmp_path / "act")
    t0 = time.monotonic()
    p = Proc(
        [
            SERVER,
            f"--model.repo_or_path={model}",
            "--default_task=bounded",
            f"--zenoh.connect_endpoints=[{router.endpoint}]",
            "--health_port=0",
        ],
        name="server",
        max_seconds=4,
    )
    assert isinstance(p.popen, WarmChild)
    assert p.wait(30) == -signal.SIGKILL
    assert time.monotonic() - t0 < 20


def test_a_changed_interpreter_start_gets_a_fresh_process(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    # a warm child never runs it; a fresh interpreter does, at start, and ends there (its imports would prove nothing)
    (site / "sitecustomize.py").write_text("import os\nprint('fresh interpreter', flush=True)\nos._exit(0)\n")
    p = Proc([SERVER, "--help"], name="server", env={"PYTHONPATH": str(site)}, max_seconds=120)
    assert isinstance(p.popen, subprocess.Popen)
    assert p.wait(120) == 0 and "fresh interpreter" in p.output()


def test_run_gives_the_status_and_the_output_in_order(router, tmp_path):
    status, out = run(
        [
            SERVER,
            f"--model.repo_or_path={tmp_path}",
            "--default_task=x",
            f"--zenoh.connect_endpoints=[{router.endpoint}]",
        ],
        timeout=120,
    )
    assert status == 2 and out.count("lerobot-policy-server: error:") == 1


def test_other_startup_variables_get_their_own_zygote_even_when_its_hook_sets_more():
    """HF_HUB_OFFLINE and tiny_pi's safe `sitecustomize`, as the VLA tests and the demo start their children: a zygote
    of their own, matched against the variables it was launched with, not those its hook set (the hook imports
    torch, which sets TORCHINDUCTOR_CACHE_DIR: every tiny pi0 server and rollout once started fresh)."""
    env = {"PYTHONPATH": str(tiny_pi.SITE_DIR), "HF_HUB_OFFLINE": "1"}
    first = Proc([SERVER, "--help"], name="server", env=env, max_seconds=120)
    again = Proc([SERVER, "--help"], name="server", env=env, max_seconds=120)
    assert isinstance(first.popen, WarmChild) and isinstance(again.popen, WarmChild)
    for p in (first, again):
        assert p.wait(120) == 0 and "--model.repo_or_path" in p.output()


DESCENDANT = """
import sys
from lerobot_policy_remote.testing.procs import Proc
p = Proc([sys.argv[1], "--help"], name="server", env={"HF_HUB_DISABLE_TELEMETRY": "1"}, max_seconds=120)
print("child:", type(p.popen).__name__, flush=True)
status = p.wait(120)
print(p.output())
sys.exit(status)
"""


def test_a_descendant_forks_what_the_suites_zygote_cannot_from_zygotes_of_its_own(tmp_path):
    """A program a test runs (the demo) that starts its children with a start-up variable the suite's zygote did not
    start with forks them from a zygote of its own rather than starting each fresh."""
    status, out = run([sys.executable, "-c", DESCENDANT, SERVER], timeout=180)
    assert status == 0 and "child: WarmChild" in out, out[-2000:]
    assert "--model.repo_or_path" in out


@pytest.mark.parametrize(
    ("ending", "status", "stderr_has"),
    [
        ("pass", 0, ""),
        ("raise SystemExit(3)", 3, ""),
        ("raise SystemExit('cannot go on: fix the flag')", 1, "cannot go on: fix the flag"),
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("raise KeyboardInterrupt", -signal.SIGINT, "KeyboardInterrupt"),
    ],
)
def test_a_warm_child_ends_as_the_interpreter_would(tmp_path, ending, status, stderr_has):
    """It skips only the heap teardown: threads are joined, atexit runs, buffered output is flushed, and the status
    is the one a fresh interpreter gives."""
    marker = tmp_path / "atexit"
    script = tmp_path / "prog.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
        "sys.stdout.write('no newline')\n"
        f"{ending}\n"
    )
    leave = (
        "import sys; from lerobot_policy_remote.testing.zygote import _leave, _run_as_main as r;"
        " _leave(r(sys.argv[1:]))"
    )
    done = subprocess.run([sys.executable, "-c", leave, str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == status, done.stderr
    assert "no newline" in done.stdout and "thread done" in done.stdout
    assert marker.read_text() == "ran"
    assert stderr_has in done.stderr
