"""Warm starts for the suite's own xdist workers: each is forked from one zygote that has imported lerobot, torch,
transformers, textual and the test stack once, instead of importing them itself (about 16 s of CPU per worker on the
2-core box, three or four workers a run).

The controller starts the zygote (`start`) before xdist makes its workers and names this module as each worker's
interpreter (`interpreter`). execnet runs `<interpreter> -u -c <bootstrap>` with its channel on stdin and stdout;
`main` hands those fds and stderr to the zygote, which forks the worker and runs the bootstrap as `__main__`
(`testing/zygote.py`). The launcher stays as execnet's child: it relays signals to the worker and ends with its
status. Without a ready zygote (its imports failed, or a start-up variable differs) the launcher becomes the fresh
interpreter itself, so a worker always starts. Stdlib only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import IO, NoReturn

from .warm_start import READY_TIMEOUT_S, SEED_ENV, Zygote, _ask, _await_socket
from .zygote import PRELOAD

# What a worker imports while it collects, beyond the heavy children's set: the console, pytest and the libraries a
# few test modules load at import (those not installed are left out). Not pytest's plugins (hypothesis): pytest
# rewrites their asserts as it imports them.
WORKER_EXTRAS = ("textual.app", "pytest", "cryptography.x509", "kubernetes_validate")


def start(workdir: Path) -> Zygote:
    """The workers' zygote, importing in the background: workers that start before it is ready wait for it."""
    extras = [name for name in WORKER_EXTRAS if importlib.util.find_spec(name) is not None]
    zygote = Zygote(str(workdir / "workers.sock"), dict(os.environ), [*PRELOAD, *extras])
    zygote.start()
    os.environ[SEED_ENV] = zygote.path  # each worker's own zygotes fork from it too (testing/warm_start.py)
    return zygote


def interpreter(zygote_path: str) -> str:
    """execnet's `python=` for a worker forked from the zygote at `zygote_path`."""
    return shlex.join([sys.executable, "-m", __name__, zygote_path])


def main(argv: list[str]) -> NoReturn:
    """`argv`: the zygote's socket, then the interpreter's own arguments (execnet's `-u -c <bootstrap>`)."""
    path, *python_args = argv
    fresh = [sys.executable, *python_args]
    replies: IO[str] | None = None
    answer: dict[str, int] = {}
    if _await_socket(path, READY_TIMEOUT_S):
        request = {"argv": fresh, "env": dict(os.environ), "cwd": os.getcwd(), "max_seconds": None}
        _conn, replies, answer = _ask(path, request, [0, 1, 2])  # the connection lives as long as the launcher
    if "pid" not in answer or replies is None:
        os.execv(sys.executable, fresh)
    pid = int(answer["pid"])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the worker holds the channel now: its end is the controller's EOF
        os.dup2(null, fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _signal_worker(pid, signum))
    line = replies.readline()
    code = os.waitstatus_to_exitcode(int(json.loads(line)["status"])) if line else -signal.SIGKILL
    if code < 0:  # end by the worker's signal, as the fresh interpreter would have
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def _signal_worker(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)  # the worker leads its own session
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
