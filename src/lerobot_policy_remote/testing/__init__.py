"""Test kit: real-wire fakes, bounded waits and process helpers for tests, benches and the demo.

Shipped with the package so a downstream project can test against the same peers we do. Importing this
package is cheap (stdlib only); the modules that need zenoh or numpy load them when they are imported:

- :mod:`.waiting`     `wait_until`, `wait_until_async`, `assert_never` (bounded waits on a condition, never a fixed
                      sleep)
- :mod:`.procs`       `free_port`, `Proc`, `Router`, `policy_server`, `stop_all` (real child processes, ended by PID)
- :mod:`.fake_robot`  `FakeRobot` (one robot speaking the real wire, numpy + zenoh)
- :mod:`.fake_server` `FakeServer`, `ChunkResponder` (one server replica speaking the real wire, with fault switches)
- :mod:`.fleet`       `FleetPublisher` (many robots and replicas on one session, for the console bench)
- :mod:`.memory_link` `MemoryLink` (the robot engine's `RemoteLink` with the server played in memory)
"""

from __future__ import annotations

from .procs import VENV_BIN, Proc, Router, free_port, policy_server, stop_all
from .waiting import WaitTimeout, assert_never, wait_until, wait_until_async

__all__ = [
    "VENV_BIN",
    "Proc",
    "Router",
    "WaitTimeout",
    "assert_never",
    "free_port",
    "policy_server",
    "stop_all",
    "wait_until",
    "wait_until_async",
]
