"""Real child processes with a time bound: start, wait for a ready line, end by PID (never by name).

Used by the tests, the benches and `lerobot-fleet demo`. Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..loopback_ports import free_loopback_port
from .warm_start import WarmChild, warm_child

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    return free_loopback_port()


def tool(name: str) -> str:
    """Path of a console script: this interpreter's environment first, then PATH."""
    local = VENV_BIN / name
    return str(local) if local.exists() else (shutil.which(name) or name)


class NotReady(RuntimeError):
    """A child did not print its ready line in time (or exited first); the message carries its output tail."""


class Proc:
    """A child process in its own process group whose output a reader thread collects (never blocks on a pipe).

    `max_seconds` wraps the program in `timeout -s KILL`, so it dies even if this process is killed;
    None leaves it unbounded (the demo: the user ends it). `log` also writes every line to a file;
    `keep_lines` bounds the lines held in memory for long-running children.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        env: dict[str, str] | None = None,
        max_seconds: float | None = 600,
        log: Path | None = None,
        keep_lines: int | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.name = name
        self.log = log
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        warm = warm_child(argv, full_env, cwd, max_seconds)
        self.wrapped = max_seconds is not None and warm is None
        bound = ["timeout", "-s", "KILL", str(int(max_seconds))] if max_seconds is not None and self.wrapped else []
        cmd = [*bound, *argv]
        self.popen: subprocess.Popen[str] | WarmChild = warm or subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=full_env,
            start_new_session=True,
            cwd=cwd,
        )
        self.lines: deque[str] = deque(maxlen=keep_lines)
        self._count = 0
        self._eof = False
        self._cond = threading.Condition()
        self._log: IO[str] | None = log.open("w") if log is not None else None
        threading.Thread(target=self._read, name=f"proc-{name}", daemon=True).start()

    @property
    def pid(self) -> int:
        """PID of the direct child (the `timeout` wrapper when bounded); its process group id too."""
        return self.popen.pid

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.rstrip("\n")
            if self._log is not None:
                self._log.write(line + "\n")
                self._log.flush()
            with self._cond:
                self.lines.append(line)
                self._count += 1
                self._cond.notify_all()
        if self._log is not None:
            self._log.close()
        with self._cond:
            self._eof = True
            self._cond.notify_all()
        self.popen.wait()  # reaped as soon as it exits: a child that ends early (a drained replica) leaves no zombie

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """Return the first output line containing `text`; NotReady if it exits or `timeout` passes first."""
        deadline = time.monotonic() + timeout
        scanned = 0
        with self._cond:
            while True:
                new = self._count - scanned
                if new:
                    recent = list(self.lines)[-min(new, len(self.lines)) :] if self.lines else []
                    scanned = self._count
                    for line in recent:
                        if text in line:
                            return line
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = f"exited with {self._exit_code()}" if self._eof else f"not seen within {timeout:g}s"
        where = f" (full log: {self.log})" if self.log else ""
        raise NotReady(
            f"{self.name} did not become ready ({text!r} {why}); its output ends with{where}:\n" + self.tail(60)
        )

    def _exit_code(self) -> int | None:
        """The exit status once the output has ended (the pipe closes a moment before the child is reaped)."""
        try:
            return self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def output(self, settle_s: float = 2.0) -> str:
        """Everything kept so far; once the child has exited, read to the end of its pipe first (bounded by
        `settle_s`): `wait()` returns when the child is reaped, which can be before this reader saw its last line."""
        with self._cond:
            if self.popen.poll() is not None:
                self._cond.wait_for(lambda: self._eof, timeout=settle_s)
            return "\n".join(self.lines)

    @contextmanager
    def reader_held(self) -> Iterator[None]:
        """The reader thread records no line while this block runs, except while `output` waits in it for the end of
        the pipe. Public so a test can make a slow reader certain (a loaded box only makes it likely)."""
        with self._cond:
            yield

    def tail(self, n: int = 20) -> str:
        with self._cond:
            return "\n".join(list(self.lines)[-n:])

    def signal_group(self, sig: int) -> None:
        """Signal the whole process group (the `timeout` wrapper, the program and its children)."""
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def program_pid(self) -> int:
        """PID of the program itself (under `timeout` when bounded, else the direct child)."""
        if not self.wrapped:
            return self.popen.pid
        try:
            children = Path(f"/proc/{self.popen.pid}/task/{self.popen.pid}/children").read_text().split()
        except OSError:
            children = []
        return int(children[0]) if children else self.popen.pid

    def signal_program(self, sig: int) -> None:
        try:
            os.kill(self.program_pid(), sig)
        except (ProcessLookupError, FileNotFoundError):
            pass

    def terminate(self) -> None:
        """Ask for a clean stop: SIGTERM to the program (bounded) or to its group (unbounded, like a Ctrl-C)."""
        if self.popen.poll() is None:
            if self.wrapped:
                self.signal_program(signal.SIGTERM)  # not the group: `timeout` would forward a second SIGTERM
            else:
                self.signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, wait up to `timeout`, then SIGKILL the group; returns the exit status."""
        stop_all([self], timeout)
        return self.popen.returncode

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)


def run(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a program to its end like `subprocess.run`, bounded by `timeout`: its exit status and its output (stdout
    and stderr in the order written). A program still running at `timeout` is killed (status -9)."""
    p = Proc(argv, name=Path(argv[0]).name, env=env, max_seconds=timeout + 5)
    try:
        status = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.signal_group(signal.SIGKILL)
        status = p.wait(10)
    return status, p.output()


def stop_all(procs: Iterable[Proc], timeout: float = 15) -> None:
    """Stop several children together: SIGTERM all (in the order given), one shared deadline, SIGKILL what is left."""
    procs = list(procs)
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.signal_group(signal.SIGKILL)
            p.popen.wait(timeout=5)


class Router:
    """The embedded router (`lerobot-fleet router`) as a real process on a free loopback port."""

    def __init__(self, port: int | None = None, extra: Sequence[str] = (), max_seconds: float = 3600) -> None:
        """Its rollout state goes to a directory of its own (never the user's): `rollout_state` names the file."""
        self.port = port or free_port()
        self.endpoint = f"tcp/127.0.0.1:{self.port}"
        self.rollout_state = Path(tempfile.mkdtemp(prefix="router-")) / "rollout.json"
        self.extra = list(extra)
        if "--rollout-state" not in self.extra and "--no-rollouts" not in self.extra:
            self.extra += ["--rollout-state", str(self.rollout_state)]
        self.max_seconds = max_seconds
        self.proc: Proc | None = None

    def start(self) -> Router:
        self.proc = Proc(
            [tool("lerobot-fleet"), "router", "--listen", self.endpoint, *self.extra],
            name="router",
            max_seconds=self.max_seconds,
        )
        self.proc.wait_for("Zenoh router up", timeout=30)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        shutil.rmtree(self.rollout_state.parent, ignore_errors=True)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.signal_group(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()


SERVER_READY = "Policy server up"


def policy_server(
    model: str | Path,
    task: str,
    endpoints: str | Sequence[str],
    *extra: str,
    name: str = "server",
    health_port: int | None = 0,
    max_seconds: float = 600,
    ready_timeout: float = 300,
    log: Path | None = None,
    wait: bool = True,
) -> Proc:
    """`lerobot-policy-server` for `model` under `task` on the given router endpoint(s), started and
    (unless `wait=False`) past its ready line. `extra` are more `--flag=value` overrides. NotReady says
    why it did not come up, with the server's output tail."""
    eps = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    argv = [
        tool("lerobot-policy-server"),
        f"--model.repo_or_path={model}",
        f"--default_task={task}",
        f"--zenoh.connect_endpoints=[{','.join(eps)}]",
    ]
    if health_port is not None:
        argv.append(f"--health_port={health_port}")
    p = Proc([*argv, *extra], name=name, max_seconds=max_seconds, log=log)
    if wait:
        try:
            p.wait_for(SERVER_READY, timeout=ready_timeout)
        except NotReady:
            p.stop()
            raise
    return p


def rollout_argv(policy_path: str | Path, task: str, endpoint: str, *extra: str, duration: float = 5) -> list[str]:
    """`lerobot-rollout` of the sim arm with remote inference (base strategy) on `endpoint`: the robot the tests
    launch, with a log line per chunk (tests join on them). `extra` are more `--flag=value` overrides."""
    return [
        str(VENV_BIN / "lerobot-rollout"),
        "--strategy.type=base",
        "--inference.type=remote",
        "--robot.type=sim_arm",
        f"--policy.path={policy_path}",
        f"--task={task}",
        f"--duration={duration}",
        f"--inference.connect_endpoint={endpoint}",
        "--inference.log_every_chunk=true",
        *extra,
    ]
