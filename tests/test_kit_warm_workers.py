"""Warm workers (testing/warm_workers.py): the interpreter execnet starts for an xdist worker hands its stdin, stdout
and stderr to a zygote, which forks the worker; the worker speaks on those pipes, its status and signals reach the
launcher, and without a ready zygote the launcher is the fresh interpreter itself. A worker's own zygotes fork from
the workers' one (the seed) when their start-up variables fit it. A light zygote (json only) keeps these fast; the
suite's own workers come from one that imported lerobot."""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lerobot_policy_remote.testing.warm_start import SeededZygote, Zygote, _fork
from lerobot_policy_remote.testing.warm_workers import interpreter

# What execnet's bootstrap does with the channel, in miniature: read a line on stdin, answer on stdout.
ECHO = (
    "import json, os, sys; line = sys.stdin.readline(); "
    "print(json.dumps({'got': line.strip(), 'pid': os.getpid(), 'ppid': os.getppid(), 'argv': sys.argv, "
    "'name': __name__, 'json_preloaded': 'json' in sys.modules}), flush=True); "
    "print('to stderr', file=sys.stderr, flush=True); sys.exit(int(line))"
)
REPORT = (
    "import json, os, sys; print(json.dumps({'ppid': os.getppid(), 'cwd': os.getcwd(), "
    "'json_preloaded': 'json' in sys.modules}), flush=True)"
)


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    z = Zygote(str(tmp_path / "w.sock"), dict(os.environ), ["json"])
    assert z.ready(60)
    yield z
    z.close()


_launched: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def end_launchers() -> Iterator[None]:
    """Every launcher a test starts is ended by its PID (its worker dies with the zygote, which the fixture closes)."""
    yield
    while _launched:
        p = _launched.pop()
        if p.poll() is None:
            p.kill()
            p.wait(10)


def launch(zygote_path: str, code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    argv = [*shlex.split(interpreter(zygote_path)), "-u", "-c", code]  # as execnet's popen gateway runs it
    p = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    _launched.append(p)
    return p


def test_a_worker_is_forked_by_the_zygote_and_speaks_on_the_launchers_pipes(zygote):
    p = launch(zygote.path, ECHO)
    out, err = p.communicate("3\n", timeout=60)
    reply = json.loads(out)
    assert reply["got"] == "3" and p.returncode == 3
    assert reply["ppid"] == zygote.proc.pid and reply["pid"] != p.pid  # forked there, not started here
    assert reply["name"] == "__main__" and reply["argv"] == ["-c"] and reply["json_preloaded"]
    assert "to stderr" in err


def test_without_a_ready_zygote_the_launcher_is_the_fresh_interpreter(tmp_path):
    p = launch(str(tmp_path / "none.sock"), ECHO)  # nobody started a zygote there
    out, _ = p.communicate("0\n", timeout=60)
    assert p.returncode == 0 and json.loads(out)["pid"] == p.pid


def test_a_worker_that_starts_its_interpreter_otherwise_starts_fresh(zygote):
    p = launch(zygote.path, ECHO, env={**os.environ, "OMP_NUM_THREADS": "7"})
    out, _ = p.communicate("0\n", timeout=60)
    assert p.returncode == 0 and json.loads(out)["pid"] == p.pid


def test_a_signal_to_the_launcher_ends_the_worker_and_the_launcher_says_so(zygote):
    # a worker that runs until it is told to stop: it waits on its channel, which the test holds open
    p = launch(zygote.path, "import os, sys; print(os.getpid(), flush=True); sys.stdin.read()")
    assert p.stdout is not None
    worker = int(p.stdout.readline())
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == -signal.SIGTERM
    # the worker held the only other end of its stdout (the launcher let go of its own): EOF says it is gone
    assert select.select([p.stdout], [], [], 10)[0] and p.stdout.read() == "", f"worker {worker} still running"


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_zygote_with_a_seed_is_forked_from_it_and_forks_its_own_children(zygote, tmp_path):
    own = Zygote(str(tmp_path / "own.sock"), dict(os.environ), ["json"], seed=zygote.path)
    try:
        assert own.ready(60)
        assert isinstance(own.proc, SeededZygote) and _parent_of(own.proc.pid) == zygote.proc.pid
        child = _fork(own.path, [sys.executable, "-c", REPORT], dict(os.environ), str(tmp_path), 30)
        assert child is not None
        reply = json.loads(child.stdout.readline())
        assert child.wait(30) == 0
        assert reply["ppid"] == own.proc.pid and reply["json_preloaded"] and reply["cwd"] == str(tmp_path)
    finally:
        own.close()
    assert own.proc.poll() is not None  # closing its stdin ended it, as it ends a fresh one


def test_a_zygote_whose_variables_do_not_fit_the_seed_starts_fresh(zygote, tmp_path):
    own = Zygote(str(tmp_path / "own.sock"), {**os.environ, "OMP_NUM_THREADS": "7"}, ["json"], seed=zygote.path)
    try:
        assert own.ready(60)
        assert isinstance(own.proc, subprocess.Popen) and _parent_of(own.proc.pid) == os.getpid()
    finally:
        own.close()
