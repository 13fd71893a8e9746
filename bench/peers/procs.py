"""Start bench processes with a lifetime bound, wait for their ready line, end them by PID."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child under `timeout -s KILL`, its output read by a thread; `pid` is the program itself."""

    def __init__(self, argv: list[str], name: str, max_s: float = 900, prefix: list[str] | None = None) -> None:
        self.name = name
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
        self.popen = subprocess.Popen([*(prefix or []), "timeout", "-s", "KILL", str(int(max_s)), *argv], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                      start_new_session=True)
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))
            self._q.put(line)

    @property
    def pid(self) -> int:
        """The program under `timeout` (its only child), found via /proc."""
        for _ in range(100):
            for path in Path("/proc").glob(f"{self.popen.pid}/task/*/children"):
                kids = path.read_text().split()
                if kids:
                    return int(kids[0])
            if self.popen.poll() is not None:
                break
            time.sleep(0.02)
        return self.popen.pid

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for line in self.lines[seen:]:
                if text in line:
                    return line
            seen = len(self.lines)
            try:
                self._q.get(timeout=0.1)
            except queue.Empty:
                if self.popen.poll() is not None and self._q.empty():
                    break
        raise RuntimeError(f"{self.name}: {text!r} not seen within {timeout:.0f}s; last output:\n" + "\n".join(self.lines[-30:]))

    def signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(10)


def python(module: str, *args: str, name: str, max_s: float = 900, prefix: list[str] | None = None) -> Proc:
    return Proc([sys.executable, "-m", module, *args], name=name, max_s=max_s, prefix=prefix)


def router(port: int | None = None, prefix: list[str] | None = None, host: str = "127.0.0.1") -> tuple[Proc, str]:
    endpoint = f"tcp/{host}:{port or free_port()}"
    p = Proc([str(BIN / "lerobot-fleet"), "router", "--listen", endpoint], name="router", prefix=prefix)
    p.wait_for("Zenoh router up", timeout=60)
    return p, endpoint


def client(system: str, target: str, *args: str, max_s: float = 600, prefix: list[str] | None = None) -> dict[str, Any]:
    p = python("bench.peers.client", system, "--target", target, *args, name=f"{system} client", max_s=max_s, prefix=prefix)
    line = p.wait_for("PEER RESULT", timeout=max_s)
    p.popen.wait(30)
    return json.loads(line.split("PEER RESULT ", 1)[1])
