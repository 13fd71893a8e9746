"""Start real processes with a time bound, wait for a ready line, end them by PID."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose output is collected by a reader thread (so it never blocks on a full pipe)."""

    def __init__(self, argv: Sequence[str], *, name: str, env: dict[str, str] | None = None, max_seconds: float = 600) -> None:
        self.name = name
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        # `timeout` bounds the child's lifetime even if this test process dies.
        self.popen = subprocess.Popen(
            ["timeout", "-s", "KILL", str(int(max_seconds)), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        """PID of the real program (the child of `timeout`)."""
        return self.popen.pid

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))
            self._q.put(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        for line in list(self.lines):
            if text in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.1)
            except queue.Empty:
                if self.popen.poll() is not None and self._q.empty():
                    break
                continue
            if text in line:
                return line
        raise AssertionError(f"{self.name}: {text!r} not seen within {timeout}s; output:\n" + "\n".join(self.lines[-60:]))

    def output(self) -> str:
        return "\n".join(self.lines)

    def signal_group(self, sig: int) -> None:
        """Signal the process group (the `timeout` wrapper and the program)."""
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def program_pid(self) -> int:
        """PID of the program under `timeout` (its only child)."""
        children = Path(f"/proc/{self.popen.pid}/task/{self.popen.pid}/children").read_text().split()
        return int(children[0]) if children else self.popen.pid

    def signal_program(self, sig: int) -> None:
        try:
            os.kill(self.program_pid(), sig)
        except (ProcessLookupError, FileNotFoundError):
            pass

    def stop(self, timeout: float = 15) -> int | None:
        if self.popen.poll() is None:
            self.signal_program(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                self.popen.wait(timeout=5)
        return self.popen.returncode

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)


class Router:
    """The embedded router (`lerobot-fleet router`) as a real process on a free loopback port."""

    def __init__(self, port: int | None = None, extra: Sequence[str] = ()) -> None:
        self.port = port or free_port()
        self.endpoint = f"tcp/127.0.0.1:{self.port}"
        self.extra = list(extra)
        self.proc: Proc | None = None

    def start(self) -> Router:
        self.proc = Proc([str(VENV_BIN / "lerobot-fleet"), "router", "--listen", self.endpoint, *self.extra], name="router")
        self.proc.wait_for("Zenoh router up", timeout=30)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.signal_group(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()
