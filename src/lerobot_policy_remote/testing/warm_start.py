"""Warm starts for the test kit's heavy children: a forked copy of an interpreter that has already imported lerobot.

Importing lerobot, torch and transformers costs a 2-vCPU box about 14 s of CPU for every `lerobot-rollout` or
`lerobot-policy-server` a test starts, most of a slow test's time. A zygote process imports them once; each child is
then `fork()`ed from it and runs the very console script a fresh process would (`runpy`, `__main__`, its own argv,
environment, working directory, session and output pipe), so only the imports are shared. The zygote is
single-threaded and computes nothing before forking (no OpenMP pool, no zenoh runtime); each child reseeds numpy.

Only the test suite turns it on (`LEROBOT_REMOTE_WARM_START` names the zygote's socket); benchmarks and the demo
never do, since a warm start would flatter every start or restart figure. Stdlib only on the client side.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

ENV = "LEROBOT_REMOTE_WARM_START"
# Console scripts and `python -m` modules whose imports the zygote holds: the heavy children tests start.
WARM_TOOLS = ("lerobot-rollout", "lerobot-policy-server")
WARM_MODULES = ("bench.peers.",)
PRELOAD = (
    "lerobot.scripts.lerobot_rollout",
    "lerobot.policies.factory",
    "lerobot.policies.act.modeling_act",
    "lerobot.policies.diffusion.modeling_diffusion",
    "lerobot.policies.pi0.modeling_pi0",
    "lerobot.policies.pi05.modeling_pi05",
    "lerobot.policies.smolvla.modeling_smolvla",
    "lerobot_policy_remote.server.cli",
    "lerobot_policy_remote.server.service",
    "lerobot_policy_remote.server.backend",
    "lerobot_policy_remote.engine.remote",
    "lerobot_policy_remote.sim.robot",
)
_PR_SET_PDEATHSIG = 1
# Variables read while an interpreter starts or imports (site, sitecustomize, torch's and the hub's settings): a
# request that sets them otherwise than the zygote had them needs a fresh process.
STARTUP_ENV_PREFIXES = ("PYTHON", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "OMP_", "MKL_", "CUDA", "LD_")


def _startup_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_ENV_PREFIXES) and k != "PYTHONUNBUFFERED"}


def _paths(env: Mapping[str, str]) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def fits(
    asked: Mapping[str, str], base: Mapping[str, str], ignore: set[str] | frozenset[str] = frozenset()
) -> list[str] | None:
    """Whether a child asking for `asked` can fork from a zygote that started with `base`: None if not, else the
    PYTHONPATH entries it adds (folders without start-up hooks, put on `sys.path` in the child). `ignore`: variables
    the zygote's own imports set."""
    mine = {k: v for k, v in _startup_env(base).items() if k not in ignore and k != "PYTHONPATH"}
    theirs = {k: v for k, v in _startup_env(asked).items() if k not in ignore and k != "PYTHONPATH"}
    if mine != theirs or not set(_paths(base)) <= set(_paths(asked)):
        return None
    extra = [p for p in _paths(asked) if p not in set(_paths(base))]
    return extra if all(_hook_free(Path(p)) for p in extra) else None


def _hook_free(folder: Path) -> bool:
    return not folder.is_dir() or not (
        any(folder.glob("*.pth")) or (folder / "sitecustomize.py").exists() or (folder / "usercustomize.py").exists()
    )


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent ends (no child outlives the test process that made it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


# --- the zygote --------------------------------------------------------------------------------------------------


def _preload(modules: Sequence[str]) -> None:
    import importlib

    for name in modules:
        importlib.import_module(name)
    # A fresh process imports this package after lerobot (lerobot's plugin discovery), which registers its hooks;
    # here the package came first, so register them as that import would have.
    from lerobot_policy_remote import register_lerobot_plugins

    register_lerobot_plugins()


def _become_child(request: dict[str, object], out_fd: int, closing: list[socket.socket]) -> None:
    """In the forked child: take the request's identity, then run its program as `__main__` (never returns)."""
    for s in closing:
        s.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _die_with_parent()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(null)
    os.close(out_fd)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    cwd = request.get("cwd")
    if isinstance(cwd, str):
        os.chdir(cwd)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # a fresh process seeds numpy's global generator from the OS
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]  # a JSON list
    _leave(_run_as_main(argv))


def _run_as_main(argv: list[str]) -> int:
    """Run `argv`'s program as `__main__`; its exit status as the interpreter would give it."""
    try:
        if len(argv) >= 3 and argv[1] == "-m":
            sys.argv = [argv[0], *argv[3:]]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return (stop.code or 0) & 0xFF
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]  # inside an except: never None
        return -signal.SIGINT  # an interpreter ends by SIGINT itself here
    except BaseException:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
        return 1
    return 0


def _leave(code: int) -> None:
    """End as the interpreter does (wait for non-daemon threads, run atexit, flush), but without tearing down the
    heap inherited from the zygote: freeing every imported object writes to, and so copies, each shared page, which
    cost about 2 s of CPU per child."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException:  # noqa: BLE001  # a broken pipe or handler: the status stands
        pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def serve(path: str, preload: Sequence[str] = PRELOAD) -> None:
    """Import `preload`, print `ready`, then fork one child per request on the unix socket at `path` until the
    parent goes away. Each request: a JSON line (argv, env, cwd, max_seconds) with the child's output fd attached;
    the reply: `{"pid": N}`, then `{"status": S}` (a wait status) when the child ends. Children past their
    `max_seconds` are killed (SIGKILL to their process group), as the `timeout` wrapper of a fresh start does."""
    _die_with_parent()
    if os.path.exists(path):
        os.unlink(path)  # left by a zygote that was killed: the socket appears only once the imports are done
    # Its native threads (torch's, jemalloc's) sit idle and hold no lock a child needs.
    warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)
    before = dict(os.environ)
    try:
        _preload(preload)
    except BaseException:
        Path(path + ".failed").touch()
        raise
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # Variables the imports themselves set (cv2's LD_LIBRARY_PATH, inductor's cache dir) are set the same way by a
    # fresh process's imports: they are not the request's to match.
    set_by_imports = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    parent = sys.stdin
    sel.register(parent, selectors.EVENT_READ, data="parent")  # EOF: the parent is gone
    children: dict[int, tuple[socket.socket, float]] = {}
    while True:
        timeout = min((d for _, d in children.values()), default=time.monotonic() + 1.0) - time.monotonic()
        for key, _ in sel.select(max(0.0, min(timeout, 1.0))):
            if key.data == "parent":
                if not parent.readline():  # the parent closed it: stop
                    for pid in children:
                        _killpg(pid)
                    return
            elif key.fileobj is listener:
                conn, _ = listener.accept()
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 1)
                request = json.loads(msg.decode())
                extra = fits(request["env"], before, set_by_imports)
                if extra is None:
                    os.close(fds[0])
                    conn.sendall(json.dumps({"fresh": True}).encode() + b"\n")
                    conn.close()
                    continue
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    sys.path[1:1] = extra  # where PYTHONPATH's entries go in a fresh interpreter
                    _become_child(request, fds[0], [listener, conn])
                os.close(fds[0])
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                limit = request.get("max_seconds")
                deadline = time.monotonic() + float(limit) if limit is not None else float("inf")
                children[pid] = (conn, deadline)
            else:
                os.read(wake_r, 4096)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            entry = children.pop(pid, None)
            if entry is not None:
                try:
                    entry[0].sendall(json.dumps({"status": status}).encode() + b"\n")
                except OSError:
                    pass
                entry[0].close()
        now = time.monotonic()
        for pid, (_, deadline) in list(children.items()):
            if now >= deadline:
                _killpg(pid)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- the client ----------------------------------------------------------------------------------------------------


class WarmChild:
    """The part of `subprocess.Popen` the kit's `Proc` uses, for a child forked by the zygote (not our child: its
    exit status arrives on the request's connection)."""

    def __init__(self, conn: socket.socket, replies: IO[str], pid: int, stdout: IO[str], argv: Sequence[str]) -> None:
        self.pid = pid
        self.stdout = stdout
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


class Zygote:
    """One warm-start zygote, for children whose interpreter starts with `env`'s startup variables. Started on the
    first warm start asked of it, so a run that starts no heavy child never pays for its imports."""

    def __init__(self, path: str, env: dict[str, str]) -> None:
        self.path = path
        self.env = {**env, "PYTHONUNBUFFERED": "1"}
        self.proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        for stale in (self.path, self.path + ".failed", self.path + ".starting"):
            if os.path.exists(stale):
                os.unlink(stale)

    def start(self) -> None:
        with self._lock:
            if self.proc is not None:
                return
            Path(self.path + ".starting").touch()
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from lerobot_policy_remote.testing.warm_start import serve; serve(sys.argv[1])",
                    self.path,
                ],
                stdin=subprocess.PIPE,
                text=True,
                env=self.env,
            )

    def ready(self, timeout: float = 180) -> bool:
        """Start it if needed and wait for its imports; False if they failed (children then start fresh)."""
        self.start()
        return _await_socket(self.path, timeout)

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

    MAX_ZYGOTES = 3

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.default = Zygote(str(workdir / "zygote-0.sock"), dict(os.environ))
        self.by_env: dict[tuple[tuple[str, str], ...], Zygote] = {_env_key(os.environ): self.default}
        self._lock = threading.Lock()

    def for_env(self, env: dict[str, str]) -> Zygote | None:
        if fits(env, self.default.env) is not None:
            self.default.start()
            return self.default
        key = _env_key(env)
        if key not in self.by_env and not _hooks_safe(env):
            return None
        with self._lock:
            zygote = self.by_env.get(key)
            if zygote is None and len(self.by_env) < self.MAX_ZYGOTES:
                zygote = Zygote(str(self.workdir / f"zygote-{len(self.by_env)}.sock"), env)
                self.by_env[key] = zygote
        if zygote is not None:
            zygote.start()
        return zygote

    def close(self) -> None:
        for zygote in self.by_env.values():
            zygote.close()


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


def _env_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(_startup_env(dict(env)).items()))


_owned: Zygotes | None = None  # the zygotes of the process that enabled warm starts (started on demand)
READY_TIMEOUT_S = 120.0  # the zygote's imports, on a loaded 2-vCPU box


def enable(workdir: Path) -> Zygotes:
    """Warm starts for this process and its children, from zygotes started on first use."""
    global _owned
    _owned = Zygotes(workdir)
    os.environ[ENV] = _owned.default.path
    return _owned


def disable() -> None:
    global _owned
    os.environ.pop(ENV, None)
    if _owned is not None:
        _owned.close()
        _owned = None


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
    with a policy to check, and the peers bench's own children (`python -m bench.peers.*`: servers, clients and
    robots of every system)."""
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
    """Fork `argv` from the zygote named by `ENV`; None when there is none (the caller starts it fresh)."""
    path = os.environ.get(ENV)
    if not path or not warm_argv(argv):
        return None
    if _owned is not None and _owned.default.path == path:
        zygote = _owned.for_env(env)
        if zygote is None:
            return None
        path = zygote.path
    if not _await_socket(path, READY_TIMEOUT_S):
        return None
    read_fd, write_fd = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"argv": list(argv), "env": env, "cwd": str(cwd) if cwd else None, "max_seconds": max_seconds}
        socket.send_fds(conn, [json.dumps(request).encode()], [write_fd])
        replies = conn.makefile("r")
        pid = int(json.loads(replies.readline())["pid"])  # {"fresh": true}: KeyError, start it fresh
    except (OSError, ValueError, KeyError):
        conn.close()
        os.close(read_fd)
        return None
    finally:
        os.close(write_fd)  # the child holds its own copy: EOF on read_fd once the child (and its children) end
    stdout = io.TextIOWrapper(io.FileIO(read_fd, "r"), errors="replace")
    return WarmChild(conn, replies, pid, stdout, argv)


if __name__ == "__main__":
    serve(sys.argv[1])
