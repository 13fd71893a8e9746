"""The warm-start zygote (`testing/warm_start.py` is its client): a process that has imported lerobot, torch and
transformers once, then forks one child per request and runs the requested console script in it as `__main__`,
with the request's argv, environment, working directory, session and output pipe. Single-threaded; it computes
nothing before forking (no OpenMP pool, no zenoh runtime). Stdlib only until `serve` imports `PRELOAD`.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import threading
import time
import types
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

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
    if "lerobot" in sys.modules:
        from lerobot_policy_remote import register_lerobot_plugins

        register_lerobot_plugins()


def _become_child(request: dict[str, object], fds: list[int], closing: list[socket.socket]) -> None:
    """In the forked child: take the request's identity, then run its program as `__main__` (never returns). `fds`:
    one output pipe (stdin from /dev/null, stdout and stderr to it), or the asker's own stdin, stdout and stderr
    (a pytest worker, whose channel to its controller is that stdin and stdout)."""
    for s in closing:
        s.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _die_with_parent()
    if len(fds) == 3:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
    else:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[0], 2)
        os.close(null)
    for fd in fds:
        os.close(fd)
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
    """Run `argv`'s program (`python [-u] [-B] -m MODULE | -c CODE | PATH ...`) as `__main__`; its exit status as the
    interpreter would give it. The zygote's output is already unbuffered, so `-u` holds."""
    while len(argv) >= 2 and argv[1] in ("-u", "-B"):
        if argv[1] == "-B":
            sys.dont_write_bytecode = True
        argv = [argv[0], *argv[2:]]
    try:
        if len(argv) >= 3 and argv[1] == "-c":
            sys.argv = ["-c", *argv[3:]]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[2], "<string>", "exec"), main.__dict__)
        elif len(argv) >= 3 and argv[1] == "-m":
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
        sys.excepthook(*sys.exc_info())
        return -signal.SIGINT  # an interpreter ends by SIGINT itself here
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _leave(code: int) -> None:
    """End as the interpreter does (wait for non-daemon threads, run atexit, flush), but without tearing down the
    heap inherited from the zygote: freeing every imported object writes to, and so copies, each shared page, which
    cost about 2 s of CPU per child."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException:  # noqa: BLE001  # a broken pipe or handler: the status stands
        pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def serve(
    path: str,
    preload: Sequence[str] = PRELOAD,
    launched: Mapping[str, str] | None = None,
    inherited: Sequence[str] = (),
) -> None:
    """Import `preload`, print `ready`, then fork one child per request on the unix socket at `path` until the
    parent goes away. Each request: a JSON line (argv, env, cwd, max_seconds) with the child's output fd attached;
    the reply: `{"pid": N}`, then `{"status": S}` (a wait status) when the child ends; a request may attach three
    fds instead, the child's stdin, stdout and stderr. Children past their `max_seconds` are killed (SIGKILL to
    their process group), as the `timeout` wrapper of a fresh start does. `inherited`: for a zygote forked from
    another, the variables that one's imports set (they came with the fork, not from its own imports)."""
    _die_with_parent()
    if os.path.exists(path):
        os.unlink(path)  # left by a zygote that was killed: the socket appears only once the imports are done
    # Its native threads (torch's, jemalloc's) sit idle and hold no lock a child needs.
    warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)
    before = dict(os.environ)
    # No cyclic collection while importing: each full pass walks the whole growing heap (about 8 passes, a quarter of
    # the imports' CPU). Then the imported heap is frozen: the children's collections skip it, so they neither spend
    # time on it nor write to (and so copy) its shared pages.
    gc.disable()
    try:
        _preload(preload)
    except BaseException:
        Path(path + ".failed").touch()
        raise
    finally:
        gc.freeze()
        gc.enable()
    # Variables the imports themselves set (cv2's LD_LIBRARY_PATH, inductor's cache dir) are set the same way by a
    # fresh process's imports: they are not the request's to match.
    set_by_imports = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
    # So are those a start-up hook set before `serve` ran (a `sitecustomize` on PYTHONPATH importing torch): the
    # variables the zygote was launched with (`launched`) are the ones to match.
    if launched is not None:
        set_by_imports |= {k for k in _startup_env(before) if k != "PYTHONPATH" and launched.get(k) != before[k]}
    set_by_imports |= set(inherited)
    Path(path + ".imports").write_text(json.dumps(sorted(set_by_imports)))  # for the parent's own matching
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
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
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                request = json.loads(msg.decode())
                extra = fits(request["env"], before, set_by_imports)
                if extra is None:
                    for fd in fds:
                        os.close(fd)
                    conn.sendall(json.dumps({"fresh": True}).encode() + b"\n")
                    conn.close()
                    continue
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    sys.path[1:1] = extra  # where PYTHONPATH's entries go in a fresh interpreter
                    _become_child(request, fds, [listener, conn])
                for fd in fds:
                    os.close(fd)
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


if __name__ == "__main__":
    serve(sys.argv[1])
