"""Test kit: real-wire fakes, bounded waits and process helpers for tests, benches and the demo.

Shipped with the package so a downstream project can test against the same peers we do. Importing this
package is cheap (stdlib only); the modules that need zenoh or numpy load them when they are imported:

- :mod:`.waiting`     `wait_until`, `assert_never` (bounded waits on a condition, never a fixed sleep)
- :mod:`.procs`       `free_port`, `Proc`, `Router`, `stop_all` (real child processes, ended by PID)
- :mod:`.fake_robot`  `FakeRobot` (one robot speaking the real wire, numpy + zenoh)
- :mod:`.fake_server` `FakeServer` (one server replica speaking the real wire, with fault switches)
- :mod:`.fleet`       `FleetPublisher` (many robots and replicas on one session, for the console bench)
"""

from __future__ import annotations

from .procs import VENV_BIN, Proc, Router, free_port, stop_all
from .waiting import WaitTimeout, assert_never, wait_until

__all__ = ["VENV_BIN", "Proc", "Router", "WaitTimeout", "assert_never", "free_port", "stop_all", "wait_until"]
