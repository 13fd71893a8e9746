"""The bench's processes, on the package's own process kit (`lerobot_policy_remote.testing.procs`).

Adds only what the peers bench needs: `python -m` children that can import `bench`, an optional
command prefix (`ip netns exec NS` for the constrained-link runs), and a fast kill for servers.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from lerobot_policy_remote.testing.procs import VENV_BIN as BIN
from lerobot_policy_remote.testing.procs import Proc as KitProc
from lerobot_policy_remote.testing.procs import free_port

__all__ = ["BIN", "Proc", "client", "emit", "free_port", "python", "result", "router"]

ROOT = Path(__file__).resolve().parents[2]
_workdir: Path | None = None
# A server outlives every client of its phase: the S = 100 ms latency phase alone takes about 15 min with 5
# repeats, and a server killed by its own bound mid-phase leaves the byte counts and the last arm's row unmeasured.
SERVER_MAX_S = 7200.0


def workdir() -> Path:
    """Where children run, not the checkout: lerobot's gRPC server writes `logs/` into its working directory.
    One per process, made on first use and removed at exit."""
    global _workdir
    if _workdir is None:
        _workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
        atexit.register(shutil.rmtree, _workdir, ignore_errors=True)
    return _workdir


class Proc(KitProc):
    """A bounded child; `pid` is the program itself (what /proc CPU and memory figures must read)."""

    def __init__(
        self, argv: list[str], name: str, max_s: float = 900, prefix: list[str] | None = None, path: str = ""
    ) -> None:
        # `path`: appended to PYTHONPATH (the tiny pi0 hook's site for a process that loads the tiny checkpoint)
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", ""), path]))}
        super().__init__([*(prefix or []), *argv], name=name, env=env, max_seconds=max_s, cwd=workdir())

    @property
    def pid(self) -> int:
        return self.program_pid()

    def signal(self, sig: int) -> None:
        self.signal_program(sig)

    def stop(self, timeout: float = 0) -> int | None:
        """Kill at once (a server's clean drain is not what the bench measures)."""
        if self.popen.poll() is None:
            self.signal_group(signal.SIGKILL)
            self.popen.wait(10)
        return self.popen.returncode


def python(
    module: str, *args: str, name: str, max_s: float = 900, prefix: list[str] | None = None, path: str = ""
) -> Proc:
    return Proc([sys.executable, "-m", module, *args], name=name, max_s=max_s, prefix=prefix, path=path)


def router(port: int | None = None, prefix: list[str] | None = None, host: str = "127.0.0.1") -> tuple[Proc, str]:
    """`lerobot-fleet router` (the product's embedded router) on a free port."""
    endpoint = f"tcp/{host}:{port or free_port()}"
    # the link phase listens on a veth address inside a network namespace the bench made (reachable from
    # nothing else): an open listen there is deliberate, so say so (the router refuses it otherwise)
    insecure = [] if host == "127.0.0.1" else ["--insecure"]
    p = Proc(
        [str(BIN / "lerobot-fleet"), "router", "--listen", endpoint, *insecure],
        name="router",
        prefix=prefix,
        max_s=SERVER_MAX_S,
    )
    p.wait_for("Zenoh router up", timeout=60)
    return p, endpoint


def client(system: str, target: str, *args: str, max_s: float = 600, prefix: list[str] | None = None) -> dict[str, Any]:
    p = python(
        "bench.peers.client", system, "--target", target, *args, name=f"{system} client", max_s=max_s, prefix=prefix
    )
    line = p.wait_for("PEER RESULT", timeout=max_s)
    p.popen.wait(30)
    return result(line)


def result(line: str) -> dict[str, Any]:
    """The JSON after `PEER RESULT` (a library thread may have written onto the same line after it)."""
    obj: dict[str, Any] = json.JSONDecoder().raw_decode(line.split("PEER RESULT ", 1)[1])[0]  # decoded JSON: untyped
    return obj


def emit(obj: dict[str, Any]) -> None:
    """One write, so no other thread's output lands inside the line."""
    sys.stdout.write("PEER RESULT " + json.dumps(obj) + "\n")
    sys.stdout.flush()
