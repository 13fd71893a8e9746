"""Warm starts for the test kit's heavy children: a forked copy of an interpreter that has already imported lerobot.

Importing lerobot, torch and transformers costs a 2-vCPU box about 14 s of CPU for every `lerobot-rollout` or
`lerobot-policy-server` a test starts, most of a slow test's time. A zygote process imports them once; each child is
then `fork()`ed from it and runs the very console script a fresh process would (`runpy`, `__main__`, its own argv,
environment, working directory, session and output pipe), so only the imports are shared (`testing/zygote.py`).

Only the test suite turns it on (`LEROBOT_REMOTE_WARM_START` names the zygote's socket); benchmarks and the demo a
person runs never do, since a warm start would flatter every start or restart figure. Stdlib only.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from .zygote import _startup_env, fits

ENV = "LEROBOT_REMOTE_WARM_START"
# The socket of a zygote (the suite workers' own, which imports a superset of `PRELOAD`) that the zygotes of a
# process enabling warm starts fork from, instead of importing lerobot again in a fresh interpreter.
SEED_ENV = "LEROBOT_REMOTE_WARM_SEED"
SERVE = (
    "import json, sys; from lerobot_policy_remote.testing.zygote import PRELOAD, serve; "
    "serve(sys.argv[1], json.loads(sys.argv[3]) or PRELOAD, launched=json.loads(sys.argv[2]), "
    "inherited=json.loads(sys.argv[4]))"
)
# Console scripts and `python -m` modules whose imports the zygote holds: the heavy children tests start.
WARM_TOOLS = ("lerobot-rollout", "lerobot-policy-server")
WARM_MODULES = ("bench.peers.", "lerobot_policy_remote.sim.", "lerobot_policy_remote.testing.simfleet")


class ForkedChild:
    """The part of `subprocess.Popen` the kit uses, for a child forked by a zygote (not our child: its exit status
    arrives on the request's connection)."""

    def __init__(self, conn: socket.socket, replies: IO[str], pid: int, argv: Sequence[str]) -> None:
        self.pid = pid
        self.args = list(argv)
        self.returncode: int | None = None
        self._ended = threading.Event()
        threading.Thread(target=self._await_status, args=(conn, replies), name=f"warm-{pid}", daemon=True).start()

    def _await_status(self, conn: socket.socket, replies: IO[str]) -> None:
        try:
            line = replies.readline()
        except OSError:
            line = ""
        conn.close()
        # no status line: the zygote went away, and its children died with it
        self.returncode = os.waitstatus_to_exitcode(int(json.loads(line)["status"])) if line else -signal.SIGKILL
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class WarmChild(ForkedChild):
    """A heavy child (a console script the kit's `Proc` runs), its output on one pipe."""

    def __init__(self, conn: socket.socket, replies: IO[str], pid: int, stdout: IO[str], argv: Sequence[str]) -> None:
        self.stdout = stdout
        super().__init__(conn, replies, pid, argv)


class SeededZygote(ForkedChild):
    """A zygote forked from the seed zygote (`SEED_ENV`) rather than started fresh: it inherits the seed's imports.
    Its stdin is a pipe from this process, so it stops when this process closes it or ends, as a fresh one does."""

    def __init__(self, conn: socket.socket, replies: IO[str], pid: int, stdin: IO[str], argv: Sequence[str]) -> None:
        self.stdin: IO[str] | None = stdin
        super().__init__(conn, replies, pid, argv)

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # it leads its own session; its children die with it
        except (ProcessLookupError, PermissionError):
            pass


class Zygote:
    """One warm-start zygote, for children whose interpreter starts with `env`'s startup variables. Started on the
    first warm start asked of it, so a run that starts no heavy child never pays for its imports."""

    def __init__(
        self, path: str, env: dict[str, str], preload: Sequence[str] | None = None, seed: str | None = None
    ) -> None:
        self.path = path
        self.env = {**env, "PYTHONUNBUFFERED": "1"}
        self.preload = list(preload) if preload is not None else None  # None: the zygote's own PRELOAD
        self.seed = seed  # a zygote to fork this one from (its imports fit): None, or it did not fit, starts it fresh
        self.proc: subprocess.Popen[str] | SeededZygote | None = None
        self._lock = threading.Lock()
        for stale in (self.path, self.path + ".failed", self.path + ".starting", self.path + ".imports"):
            if os.path.exists(stale):
                os.unlink(stale)

    def start(self) -> None:
        with self._lock:
            if self.proc is not None:
                return
            Path(self.path + ".starting").touch()
            launched = json.dumps(_startup_env(self.env))
            argv = [sys.executable, "-c", SERVE, self.path, launched, json.dumps(self.preload)]
            self.proc = self._fork_from_seed(argv) or subprocess.Popen(
                [*argv, "[]"], stdin=subprocess.PIPE, text=True, env=self.env
            )

    def _fork_from_seed(self, argv: list[str]) -> SeededZygote | None:
        """This zygote forked from the seed, which already holds its imports; None if there is none or it does not
        fit this zygote's start-up variables."""
        if self.seed is None or not _await_socket(self.seed, READY_TIMEOUT_S):
            return None
        inherited = json.dumps(sorted(_imports_of(self.seed)))
        read_fd, write_fd = os.pipe()
        request = {"argv": [*argv, inherited], "env": self.env, "cwd": os.getcwd(), "max_seconds": None}
        try:
            conn, replies, answer = _ask(self.seed, request, [read_fd, 1, 2])
        finally:
            os.close(read_fd)
        if "pid" not in answer:
            os.close(write_fd)
            return None
        assert replies is not None
        return SeededZygote(conn, replies, int(answer["pid"]), os.fdopen(write_fd, "w"), argv)

    def ready(self, timeout: float = 180) -> bool:
        """Start it if needed and wait for its imports; False if they failed (children then start fresh)."""
        self.start()
        return _await_socket(self.path, timeout)

    def set_by_imports(self) -> frozenset[str]:
        """The variables its own imports set (torch's TORCHINDUCTOR_CACHE_DIR, cv2's LD_LIBRARY_PATH), known once it
        is ready: a parent that has since imported torch itself has them too, and still fits it."""
        return _imports_of(self.path)

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class Zygotes:
    """The zygotes of the process that enabled warm starts: one for its own startup variables (its children's
    children use that one, through `ENV`), and one more per other set its own children ask for (a test's
    PYTHONPATH hook, HF_HUB_OFFLINE), up to `MAX_ZYGOTES`; past that, children start fresh."""

    MAX_ZYGOTES = 4

    def __init__(self, workdir: Path, seed: str | None = None) -> None:
        self.workdir = workdir
        self.seed = seed
        self.default = Zygote(str(workdir / "zygote-0.sock"), dict(os.environ), seed=seed)
        self.others: dict[tuple[tuple[str, str], ...], Zygote] = {}
        self._ignored: frozenset[str] | None = None
        self._lock = threading.Lock()

    def _set_by_imports(self) -> frozenset[str]:
        """What the zygotes' own imports set, from the default zygote (started and waited for the first time a child
        does not fit it as launched): a child that carries them only because its parent imported torch since fits
        the same zygote as one that does not."""
        if self._ignored is None:
            if not self.default.ready(READY_TIMEOUT_S):
                return frozenset()  # not known yet (a loaded box): ask again next time rather than never
            self._ignored = self.default.set_by_imports()
        return self._ignored

    def for_env(self, env: dict[str, str]) -> Zygote | None:
        """The zygote for a child with `env`; None: start it fresh."""
        if fits(env, self.default.env) is not None:
            self.default.start()
            return self.default
        ignored = self._set_by_imports()
        if fits(env, self.default.env, ignored) is not None:
            return self.default
        key = _env_key(env, ignored)
        if key not in self.others and not _hooks_safe(env):
            return None
        with self._lock:
            zygote = self.others.get(key)
            if zygote is None and len(self.others) + 1 < self.MAX_ZYGOTES:
                zygote = Zygote(str(self.workdir / f"zygote-{len(self.others) + 1}.sock"), env, seed=self.seed)
                self.others[key] = zygote
        if zygote is not None:
            zygote.start()
        return zygote

    def close(self) -> None:
        for zygote in (self.default, *self.others.values()):
            zygote.close()


def _imports_of(path: str) -> frozenset[str]:
    """The variables the imports of the zygote at `path` set (its `.imports` file, written once it is ready)."""
    try:
        return frozenset(json.loads(Path(path + ".imports").read_text()))
    except (OSError, ValueError):
        return frozenset()


def _hooks_safe(env: Mapping[str, str]) -> bool:
    """Whether the start-up hooks on `env`'s PYTHONPATH may run once in a zygote for all its children: each
    `sitecustomize`/`usercustomize` says `WARM_START_SAFE = True` (it starts no thread, opens no session), and no
    `.pth` file is there."""
    for entry in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        if any(folder.glob("*.pth")):
            return False
        for hook in ("sitecustomize.py", "usercustomize.py"):
            if (folder / hook).exists() and "WARM_START_SAFE = True" not in (folder / hook).read_text():
                return False
    return True


def _env_key(env: Mapping[str, str], ignored: frozenset[str] = frozenset()) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in _startup_env(dict(env)).items() if k not in ignored))


_owned: Zygotes | None = None  # the zygotes of the process that enabled warm starts (started on demand)
READY_TIMEOUT_S = 120.0  # the zygote's imports, on a loaded 2-vCPU box


def enable(workdir: Path) -> Zygotes:
    """Warm starts for this process and its children, from zygotes started on first use (forked from the seed
    zygote that `SEED_ENV` names, when there is one)."""
    global _owned
    _owned = Zygotes(workdir, seed=os.environ.pop(SEED_ENV, None))
    os.environ[ENV] = _owned.default.path
    return _owned


def disable() -> None:
    global _owned
    os.environ.pop(ENV, None)
    if _owned is not None:
        _owned.close()
        _owned = None


def zygote_pids() -> list[int]:
    """The zygotes this process started. The programs they fork are their children, not the asker's: a test that must
    find every process a program it ran started (the demo's arms) looks below these as well as below that program."""
    if _owned is None:
        return []
    return [z.proc.pid for z in (_owned.default, *_owned.others.values()) if z.proc is not None]


def _await_socket(path: str, timeout: float) -> bool:
    """The zygote binds its socket once its imports are done; a `.failed` file beside it says they failed, and
    without a `.starting` one nobody started it (a child of a process that never asked for a warm start)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if not os.path.exists(path + ".starting") or os.path.exists(path + ".failed"):
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def warm_argv(argv: Sequence[str]) -> bool:
    """Whether `argv` runs a program the zygote holds warm: the two heavy console scripts, `lerobot-fleet doctor`
    with a policy to check, the peers bench's own children (`python -m bench.peers.*`: servers, clients and robots
    of every system), the demo's policy builders (`python -m lerobot_policy_remote.sim.*`) and the fleet
    simulator's replicas and robot hosts (`python -m lerobot_policy_remote.testing.simfleet`)."""
    if not argv:
        return False
    if Path(argv[0]).name in WARM_TOOLS:
        return True
    if Path(argv[0]).name == "lerobot-fleet" and argv[1:2] == ["doctor"]:  # with a policy, it loads lerobot
        return any(a.startswith("--policy.path") for a in argv)
    return len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2].startswith(WARM_MODULES)


def warm_child(
    argv: Sequence[str], env: dict[str, str], cwd: str | Path | None, max_seconds: float | None
) -> WarmChild | None:
    """Fork `argv` from the zygote named by `ENV`; None when there is none (the caller starts it fresh). A descendant
    of the process that enabled warm starts (the demo a test runs) whose child that zygote cannot start (other
    start-up variables: HF_HUB_OFFLINE, a PYTHONPATH hook) forks it from zygotes of its own."""
    path = os.environ.get(ENV)
    if not path or not warm_argv(argv):
        return None
    if _owned is not None and _owned.default.path == path:
        zygote = _owned.for_env(env)
        try:
            return None if zygote is None else _fork(zygote.path, argv, env, cwd, max_seconds)
        except NotItsStart:
            return None
    try:
        return _fork(path, argv, env, cwd, max_seconds)
    except NotItsStart:
        zygote = _own_zygotes().for_env(env)
        return None if zygote is None else _fork(zygote.path, argv, env, cwd, max_seconds)


class NotItsStart(Exception):
    """The zygote asked started its interpreter otherwise than the child would (it answered `fresh`)."""


def _fork(
    path: str, argv: Sequence[str], env: dict[str, str], cwd: str | Path | None, max_seconds: float | None
) -> WarmChild | None:
    """The child forked by the zygote at `path`; None if that zygote is not there (start it fresh)."""
    if not _await_socket(path, READY_TIMEOUT_S):
        return None
    read_fd, write_fd = os.pipe()
    request = {"argv": list(argv), "env": env, "cwd": str(cwd) if cwd else None, "max_seconds": max_seconds}
    try:
        conn, replies, answer = _ask(path, request, [write_fd])
    finally:
        os.close(write_fd)  # the child holds its own copy: EOF on read_fd once the child (and its children) end
    if "pid" not in answer:  # no zygote there, or {"fresh": true}: it did not start its interpreter as this child would
        os.close(read_fd)
        if answer.get("fresh"):
            raise NotItsStart(path)
        return None
    assert replies is not None
    stdout = io.TextIOWrapper(io.FileIO(read_fd, "r"), errors="replace")
    return WarmChild(conn, replies, int(answer["pid"]), stdout, argv)


def _ask(
    path: str, request: Mapping[str, object], fds: list[int]
) -> tuple[socket.socket, IO[str] | None, dict[str, int]]:
    """Send one request, with the fds its child takes, to the zygote at `path`: the connection, its replies and the
    first of them (`{"pid": N}`; `{}` when no zygote answered, the connection then closed)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    replies: IO[str] | None = None
    try:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        replies = conn.makefile("r")
        answer = json.loads(replies.readline())
    except (OSError, ValueError):
        answer = {}
    if "pid" not in answer:
        conn.close()
    return conn, replies, answer


_descendant: Zygotes | None = None  # a descendant's own zygotes, for children the inherited one cannot start
_descendant_lock = threading.Lock()


def _own_zygotes() -> Zygotes:
    """This descendant's zygotes, made on first need: each starts on its first child and dies with this process
    (its children with it, as a fresh start's `timeout` wrapper would not outlive its caller either)."""
    global _descendant
    with _descendant_lock:
        if _descendant is None:
            workdir = Path(tempfile.mkdtemp(prefix="zygotes-"))
            _descendant = Zygotes(workdir)
            atexit.register(_close_own, _descendant, workdir)
        return _descendant


def _close_own(zygotes: Zygotes, workdir: Path) -> None:
    zygotes.close()
    shutil.rmtree(workdir, ignore_errors=True)
