"""Per-hop CPU costs of the fleet: a replica's chunk, a robot host's observation and telemetry, a router's message.

Real processes on this box: a router (`lerobot-fleet router`, or with `--bare-router` zenoh-python in router mode
with the same settings and nothing else in the process), a replica (the product's `PolicyServer` with the
`StubBackend`, as `lerobot-fleet simulate` runs it) and a robot host (`testing.simfleet robots`: the product's
engine, --robots robots at one chunk a second each). After a warm-up, each process's CPU (/proc/<pid>/stat
utime+stime, and per thread /proc/<pid>/task/<tid>/stat) is read at the start and the end of a window, and divided
by the messages counted in that window (the replica counts its chunks; observations are one per chunk).

Rows (CPU microseconds per message, or ms per session-second):
- replica per chunk, split by thread: the inference worker (decode when it does it, mailbox take, scheduler, batch
  assembly, stub pass, reply encode, zenoh put, audit line, metrics), the decode pool, the zenoh callbacks and
  zenoh's own threads (deposit, transport), housekeeping (per session-second);
- replica per chunk by stage (`--stages`, a second replica run with each stage's function timed by thread CPU):
  decode, mailbox, scheduler, batch assembly, backend, reply encode, zenoh put, audit line, metrics;
- robot host per observation (with its telemetry), and per telemetry message (the difference of a run at a
  5x telemetry rate, `--telemetry`);
- router per robot message (observation in, chunk out, telemetry) against the bare router (`--bare-router`).

`--baseline DIR` runs the replica and the robot host of another checkout (a `git worktree` of an older commit) in
the same run, the phases alternating (`--repeats`), and prints old/new. Measure on a quiet box; the load average is
recorded.

    .venv/bin/python -m bench.costs --robots 200 --seconds 20 --baseline /tmp/oldmain --stages --bare-router
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "costs.json"
CLK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- /proc
def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (kernel thread name, CPU seconds) for each thread of `pid`."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / CLK)
    return out


# ---------------------------------------------------------------- child: the replica
STAGES = (
    "decode",
    "mailbox",
    "scheduler",
    "batch assembly",
    "backend",
    "reply encode",
    "zenoh put",
    "audit line",
    "metrics",
)


class StageClock:
    """Thread CPU spent inside wrapped functions, per stage (nested stages are subtracted from their parent)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._local = threading.local()

    def wrap(self, stage: str, fn: Any) -> Any:
        def timed(*a: Any, **kw: Any) -> Any:
            stack = getattr(self._local, "stack", None)
            if stack is None:
                stack = self._local.stack = []
            t0 = time.thread_time()
            stack.append(0.0)
            try:
                return fn(*a, **kw)
            finally:
                inner = stack.pop()
                spent = time.thread_time() - t0
                self.cpu[stage] += spent - inner
                if stack:
                    stack[-1] += spent

        return timed


class TimedMetric:
    """A prometheus metric whose calls are charged to the `metrics` stage (labels() returns a timed child)."""

    def __init__(self, inner: Any, clock: StageClock) -> None:
        self._inner, self._clock = inner, clock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name == "labels":
            return self._clock.wrap("metrics", lambda *a, **k: TimedMetric(attr(*a, **k), self._clock))
        if name in ("inc", "observe", "set", "dec"):
            return self._clock.wrap("metrics", attr)
        return attr


class TimedPublisher:
    """A zenoh publisher whose puts are charged to the `zenoh put` stage."""

    def __init__(self, inner: Any, clock: StageClock) -> None:
        self._inner = inner
        self.put = clock.wrap("zenoh put", inner.put)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def instrument(clock: StageClock) -> None:
    """Wrap each stage's functions where the worker and the service look them up. The names are looked up in every
    module that may hold them (older checkouts keep them in the worker, newer in its replies module), each function
    and class method wrapped once."""
    import importlib
    import importlib.util

    from lerobot_policy_remote.server import audit, metrics, sessions, stub, worker

    holders = [worker] + [
        importlib.import_module(f"lerobot_policy_remote.server.{name}")
        for name in ("replies", "admission", "service")
        if importlib.util.find_spec(f"lerobot_policy_remote.server.{name}") is not None
    ]
    wrapped: dict[int, Any] = {}

    def wrap_name(stage: str, name: str) -> None:
        for mod in holders:
            fn = getattr(mod, name, None)
            if fn is not None:
                if id(fn) not in wrapped:
                    wrapped[id(fn)] = clock.wrap(stage, fn)
                setattr(mod, name, wrapped[id(fn)])

    wrap_name("decode", "decode_observation")
    wrap_name("reply encode", "encode_chunk")
    wrap_name("reply encode", "float16_fits")
    wrap_name("audit line", "audit_line")
    from lerobot_policy_remote.wire.header import Header

    Header.pack = clock.wrap("reply encode", Header.pack)
    worker.Worker.serve = clock.wrap("batch assembly", worker.Worker.serve)
    worker.Worker._choose = clock.wrap("scheduler", worker.Worker._choose)
    sessions.Mailbox.deposit = clock.wrap("mailbox", sessions.Mailbox.deposit)
    sessions.Mailbox.take = clock.wrap("mailbox", sessions.Mailbox.take)
    stub.StubBackend.infer_batch = clock.wrap("backend", stub.StubBackend.infer_batch)
    stub.StubBackend.infer = clock.wrap("backend", stub.StubBackend.infer)
    stub.StubBackend.validate_obs = clock.wrap("backend", stub.StubBackend.validate_obs)
    audit.Auditor.emit = clock.wrap("audit line", audit.Auditor.emit)
    declare = sessions.declare_action_publisher

    def timed_declare(z: Any, key: str, **kw: Any) -> TimedPublisher:
        return TimedPublisher(declare(z, key, **kw), clock)

    for mod in holders:
        if hasattr(mod, "declare_action_publisher"):
            mod.declare_action_publisher = timed_declare
    init = metrics.ServerMetrics.__init__

    def timed_init(self: Any, *a: Any, **kw: Any) -> None:
        init(self, *a, **kw)
        for k, v in list(vars(self).items()):
            if hasattr(v, "labels") or hasattr(v, "observe") or hasattr(v, "inc"):
                setattr(self, k, TimedMetric(v, clock))

    metrics.ServerMetrics.__init__ = timed_init


def profile_threads(out: Path) -> None:
    """cProfile the worker and the housekeeper, each on its own thread; the stats are written when each ends."""
    import cProfile

    from lerobot_policy_remote.server import housekeeping, worker

    def profiled(name: str, run: Any) -> Any:
        def wrapper(self: Any, *a: Any, **kw: Any) -> Any:
            prof = cProfile.Profile()
            try:
                return prof.runcall(run, self, *a, **kw)
            finally:
                prof.dump_stats(str(out / f"{name}.prof"))

        return wrapper

    out.mkdir(parents=True, exist_ok=True)
    worker.Worker.run = profiled("worker", worker.Worker.run)
    housekeeping.Housekeeper.run = profiled("housekeeping", housekeeping.Housekeeper.run)


def stub_replica_of_older_checkout(
    endpoint: str, replica_id: str, max_sessions: int, max_batch: int, infer_s: float, per_robot_s: float
) -> Any:
    """The simulator's replica as checkouts before `simfleet.start_stub_replica` built it in `run_replica` (the same
    manifest, stub and settle), so that such a checkout's replica can be the baseline."""
    from lerobot_policy_remote.heap import settle_after_startup
    from lerobot_policy_remote.server.manifest import BatchingSpec, Manifest, ModelSpec
    from lerobot_policy_remote.server.service import PolicyServer
    from lerobot_policy_remote.server.stub import StubBackend
    from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES
    from lerobot_policy_remote.testing.simfleet import CHUNK, MODEL, TASK
    from lerobot_policy_remote.zenoh_config import ZenohSettings

    manifest = Manifest(
        model=ModelSpec(repo_or_path=MODEL),
        default_task=TASK,
        max_sessions=max_sessions,
        health_port=0,
        warmup_inferences=0,
        replica_id=replica_id,
        zenoh=ZenohSettings(mode="client", connect_endpoints=[endpoint]),
        session_grace_s=3.0,
        drain_timeout_s=10.0,
        batching=BatchingSpec(max_batch=max_batch, max_wait_ms=0.0),
    )
    backend = StubBackend(
        infer_s, SIM_ARM_ACTION_NAMES, chunk_size=CHUNK, max_sessions=max_sessions, per_robot_s=per_robot_s
    )
    return PolicyServer(manifest, backend=backend, progress=lambda s: None, settle=settle_after_startup).start()


def run_replica_child(a: argparse.Namespace) -> int:
    """The replica as `lerobot-fleet simulate` runs it; on each `mark` line on stdin, prints its counters."""
    clock = StageClock() if a.stages else None
    if clock is not None:
        instrument(clock)
    if a.profile:
        profile_threads(Path(a.profile))
    try:
        from lerobot_policy_remote.testing.simfleet import start_stub_replica
    except ImportError:  # a `--baseline` checkout older than that function: its simulator built the same replica
        start_stub_replica = stub_replica_of_older_checkout

    server = start_stub_replica(a.endpoint, "costs-r0", a.max_sessions, max_batch=32, infer_s=0.010, per_robot_s=0.0002)
    print(f"REPLICA READY {os.getpid()}", flush=True)
    for line in sys.stdin:
        if line.strip() != "mark":
            break
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        ru = resource.getrusage(resource.RUSAGE_SELF)
        mark = {
            "chunks": server.metrics.requests_served(),
            "sessions": server.registry.count(),
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "threads": {str(k): v for k, v in names.items()},
            "stages": dict(clock.cpu) if clock is not None else None,
        }
        print("MARK " + json.dumps(mark), flush=True)
    server.stop()
    return 0


def run_bare_router_child(a: argparse.Namespace) -> int:
    """zenoh-python in router mode with the embedded router's settings, and nothing else in the process."""
    sys.path.insert(0, str(ROOT / "console"))
    from lerobot_fleet.router.router import router_settings

    from lerobot_policy_remote.zenoh_config import open_session

    z = open_session(router_settings([a.listen]))
    print("Zenoh router up", flush=True)
    sys.stdin.read()
    z.close()
    return 0


# ---------------------------------------------------------------- orchestration
class Child:
    """A child process with a time bound whose stdout lines are read on demand."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, max_s: float = 600) -> None:
        self.p = subprocess.Popen(
            ["timeout", "-s", "KILL", str(int(max_s)), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=ROOT,
            start_new_session=True,
        )
        self.term = False  # SIGTERM on stop: a program that does not end when its stdin closes

    def pid(self) -> int:
        """The program's PID (the child of the `timeout` wrapper)."""
        for _ in range(50):
            kids = Path(f"/proc/{self.p.pid}/task/{self.p.pid}/children").read_text().split()
            if kids:
                return int(kids[0])
            time.sleep(0.05)
        raise RuntimeError("child did not start")

    def wait_line(self, text: str, timeout: float = 90) -> str:
        assert self.p.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"child exited before printing {text!r}")
            if text in line:
                return line
        raise RuntimeError(f"{text!r} not seen within {timeout:g} s")

    def mark(self) -> dict:
        assert self.p.stdin is not None
        self.p.stdin.write("mark\n")
        self.p.stdin.flush()
        return json.loads(self.wait_line("MARK ", 30).split(" ", 1)[1])

    def stop(self) -> None:
        """Close its stdin (the replica and the bare router end on that); with `term` set, SIGTERM it too."""
        try:
            if self.p.stdin:
                self.p.stdin.close()
            if self.term and self.p.poll() is None:
                with contextlib.suppress(OSError, RuntimeError):
                    os.kill(self.pid(), signal.SIGTERM)
            self.p.wait(timeout=20)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait(timeout=5)


def free_endpoint() -> str:
    from lerobot_policy_remote.testing.procs import free_port

    return f"tcp/127.0.0.1:{free_port()}"


def thread_group(name: str) -> str:
    """A thread's row in the split: the product's Python threads by name, zenoh's by its runtime's prefix."""
    if name.startswith("inference-worker"):
        return "worker"
    if name.startswith("obs-decode"):
        return "decode pool"
    if name.startswith("housekeeping"):
        return "housekeeping"
    if name.startswith("audit-flusher"):
        return "audit publish"
    if name == "MainThread":
        return "main"
    return "zenoh (callbacks, transport)"


def phase(
    label: str,
    code: Path | None,
    a: argparse.Namespace,
    *,
    bare: bool = False,
    stages: bool = False,
    telemetry_period: float = 1.0,
) -> dict:
    """One window: router + replica (of `code`, or this checkout) + robot host; CPU per message of each."""
    ep = free_endpoint()
    py = sys.executable
    router = (
        Child([py, "-m", "bench.costs", "--child", "bare-router", "--listen", ep])
        if bare
        else Child([os.path.join(os.path.dirname(py), "lerobot-fleet"), "router", "--listen", ep, "--no-rollouts"])
    )
    children = [router]
    try:
        router.wait_line("Zenoh router up", 30)
        env = {"PYTHONPATH": f"{code / 'src'}:{code / 'console'}"} if code is not None else {}
        replica = Child(
            [py, "-m", "bench.costs", "--child", "replica", "--endpoint", ep, "--max-sessions", str(a.robots + 8)]
            + (["--stages"] if stages else [])
            + (["--profile", str(a.profile)] if a.profile else []),
            env=env,
        )
        children.insert(0, replica)
        replica.wait_line("REPLICA READY", 90)
        out = Path(f"/tmp/costs-robots-{os.getpid()}.json")
        robots = Child(
            [
                py,
                "-m",
                "lerobot_policy_remote.testing.simfleet",
                "robots",
                "--endpoint",
                ep,
                "--count",
                str(a.robots),
                "--seconds",
                str(a.warmup + a.seconds + 30),
                "--telemetry-period",
                str(telemetry_period),
                "--telemetry-max-period",
                str(telemetry_period),
                "--out",
                str(out),
            ],
            env=env,  # the robot host of the same checkout as the replica: its old/new row compares the robot's code
        )
        robots.term = True  # it runs on for its --seconds otherwise
        children.insert(0, robots)
        robots.wait_line("ROBOTS READY", 120)
        time.sleep(a.warmup)
        pids = {"replica": replica.pid(), "router": router.pid(), "robots": robots.pid()}
        m0, c0, th0, t0 = (
            replica.mark(),
            {k: proc_cpu_s(p) for k, p in pids.items()},
            thread_cpu_s(pids["replica"]),
            time.monotonic(),
        )
        time.sleep(a.seconds)
        m1, c1, th1, t1 = (
            replica.mark(),
            {k: proc_cpu_s(p) for k, p in pids.items()},
            thread_cpu_s(pids["replica"]),
            time.monotonic(),
        )
    finally:
        for c in children:
            c.stop()
    wall = t1 - t0
    chunks = m1["chunks"] - m0["chunks"]
    sessions = (m0["sessions"] + m1["sessions"]) / 2
    cpu = {k: c1[k] - c0[k] for k in pids}
    names = {int(k): v for k, v in m1["threads"].items()}
    split: dict[str, float] = {}
    for tid, (kname, s1) in th1.items():
        group = thread_group(names.get(tid, kname))
        split[group] = split.get(group, 0.0) + s1 - th0.get(tid, (kname, 0.0))[1]
    telemetry = sessions * wall / telemetry_period
    robot_msgs = 2 * chunks + telemetry
    row = {
        "phase": label,
        "wall_s": round(wall, 2),
        "sessions": sessions,
        "chunks": chunks,
        "chunks_per_s": round(chunks / wall, 1),
        "replica_us_per_chunk": round(1e6 * cpu["replica"] / max(1, chunks), 1),
        "replica_ms_per_session_s": round(1e3 * cpu["replica"] / max(1e-9, sessions * wall), 3),
        "replica_split_us_per_chunk": {k: round(1e6 * v / max(1, chunks), 1) for k, v in sorted(split.items())},
        "robots_us_per_observation": round(1e6 * cpu["robots"] / max(1, chunks), 1),
        "robots_cpu_s": round(cpu["robots"], 3),
        "telemetry_msgs": round(telemetry),
        "router_us_per_robot_message": round(1e6 * cpu["router"] / max(1, robot_msgs), 1),
        "cpu_pct": {k: round(100 * v / wall, 1) for k, v in cpu.items()},
    }
    if stages and m1.get("stages"):
        row["stages_us_per_chunk"] = {
            k: round(1e6 * (m1["stages"][k] - m0["stages"][k]) / max(1, chunks), 1) for k in STAGES
        }
    return row


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0, help="measured window per phase")
    ap.add_argument("--warmup", type=float, default=8.0, help="after the robots are up, before the window")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout whose replica runs in the same run")
    ap.add_argument("--repeats", type=int, default=1, help="alternating new/baseline phases")
    ap.add_argument("--stages", action="store_true", help="one more replica run with each stage timed")
    ap.add_argument(
        "--telemetry", action="store_true", help="one more run at 5x the telemetry rate (its marginal cost)"
    )
    ap.add_argument("--bare-router", action="store_true", help="a run through a bare zenoh router in each repeat")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--from-json", type=Path, default=None, help="print and rewrite the tables of a stored run")
    ap.add_argument(
        "--profile", type=Path, default=None, help="write cProfile stats of the replica's worker and housekeeper here"
    )
    ap.add_argument("--child", choices=("replica", "bare-router"), help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--listen", help=argparse.SUPPRESS)
    ap.add_argument("--max-sessions", type=int, default=300, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "replica":
        return run_replica_child(a)
    if a.child == "bare-router":
        return run_bare_router_child(a)

    if a.from_json is not None:  # print the tables of a stored run again (and rewrite its document)
        old = json.loads(a.from_json.read_text())
        rows, load, commit, date = old.get("phases") or old["rows"], old["load"], old["commit"], old["date"]
        command = old["command"]
        load = load if isinstance(load, list) else [load, "1-min load average at the start"]
    else:
        load = [round(os.getloadavg()[0], 2), "1-min load average at the start"]
        rows = []
        for _ in range(a.repeats):  # alternated, so a drift of the box's speed lands on every arm alike
            run_phase(rows, "new", None, a)
            if a.baseline is not None:
                run_phase(rows, "baseline", a.baseline, a)
            if a.bare_router:
                run_phase(rows, "new bare router", None, a, bare=True)
        if a.stages:
            run_phase(rows, "new stages", None, a, stages=True)
            if a.baseline is not None:
                run_phase(rows, "baseline stages", a.baseline, a, stages=True)
        if a.telemetry:
            run_phase(rows, "new telemetry x5", None, a, telemetry_period=0.2)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        command = "python -m bench.costs " + " ".join(argv if argv is not None else sys.argv[1:])
    summary = summarize(rows)
    print_table(rows, summary)
    doc = {
        "bench": "costs",
        "script": "bench/costs.py",
        "measures": "CPU per message of each hop, from the real processes' /proc CPU over a window: a replica's chunk "
        "(stub backend, by thread and by stage), a robot host's observation and telemetry, a router's robot "
        "message against a bare zenoh router; old/new against another checkout's replica in the same run.",
        "command": command,
        "date": date,
        "commit": commit,
        "machine": f"{os.cpu_count()}-vCPU {platform.machine()} box",
        "load": load,
        "robots": a.robots,
        "window_s": a.seconds,
        "tables": tables(summary, rows),
        "headline": ["replica", "stages"],
        "summary": summary,
        "phases": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {a.out}")
    return 0


def run_phase(rows: list[dict], label: str, code: Path | None, a: argparse.Namespace, **kw: Any) -> None:
    rows.append(phase(label, code, a, **kw))
    print(json.dumps(rows[-1]), flush=True)


def tables(summary: dict, rows: list[dict]) -> dict[str, dict]:
    """The results tables the document shows: old vs new per hop, and the replica's chunk by stage."""
    med = summary["medians"]
    new, old = med.get("new", {}), med.get("baseline")
    names = {
        "replica_us_per_chunk": "replica CPU µs per chunk (stub)",
        "replica_ms_per_session_s": "replica CPU ms per session-second",
        "robots_us_per_observation": "robot host CPU µs per observation",
        "router_us_per_robot_message": "router CPU µs per robot message",
    }
    hop = [[names[k], old[k] if old else None, new.get(k), summary.get("old_over_new", {}).get(k)] for k in names]
    hop.append(["robot host CPU µs per telemetry message", None, summary.get("robots_us_per_telemetry"), None])
    bare = med.get("new bare router")
    hop.append(
        [
            "bare zenoh router CPU µs per robot message",
            None,
            bare["router_us_per_robot_message"] if bare else None,
            None,
        ]
    )
    out = {"replica": {"columns": ["figure", "baseline", "this", "baseline / this"], "rows": hop}}
    staged = {r["phase"]: r.get("stages_us_per_chunk") for r in rows if r.get("stages_us_per_chunk")}
    if staged:
        out["stages"] = {
            "columns": ["replica stage (thread CPU)", "baseline µs per chunk", "this µs per chunk"],
            "rows": [
                [k, (staged.get("baseline stages") or {}).get(k), (staged.get("new stages") or {}).get(k)]
                for k in STAGES
            ],
        }
    return out


def summarize(rows: list[dict]) -> dict:
    """Medians per phase label, and old/new ratios where a baseline ran."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["phase"], []).append(r)
    keys = (
        "replica_us_per_chunk",
        "replica_ms_per_session_s",
        "robots_us_per_observation",
        "router_us_per_robot_message",
    )
    med = {label: {k: median([r[k] for r in rs]) for k in keys} for label, rs in by.items()}
    out: dict[str, Any] = {"medians": med}
    if "baseline" in med and "new" in med:
        out["old_over_new"] = {k: round(med["baseline"][k] / med["new"][k], 2) if med["new"][k] else None for k in keys}
    for label, m in med.items():
        med[label] = {k: round(v, 3) for k, v in m.items()}
    if "new bare router" in med and "new" in med:
        out["router_over_bare"] = round(
            med["new"]["router_us_per_robot_message"]
            / max(1e-9, med["new bare router"]["router_us_per_robot_message"]),
            2,
        )
    if "new telemetry x5" in by and "new" in by:
        base, fast = by["new"][0], by["new telemetry x5"][0]
        extra = fast["telemetry_msgs"] - base["telemetry_msgs"] * fast["wall_s"] / base["wall_s"]
        d = fast["robots_cpu_s"] - base["robots_cpu_s"] * fast["wall_s"] / base["wall_s"]
        raw = round(1e6 * d / extra, 1) if extra > 0 else None
        # Below the box's noise (another job's load moves the robots' CPU more than the extra telemetry): unknown.
        out["robots_us_per_telemetry_raw"] = raw
        out["robots_us_per_telemetry"] = raw if raw is not None and raw > 0 else None
    return out


def print_table(rows: list[dict], summary: dict) -> None:
    print(
        f"\n{'phase':<18} {'chunks/s':>8} {'replica us/chunk':>16} {'ms/session-s':>12} {'robots us/obs':>13} "
        f"{'router us/msg':>13}"
    )
    for r in rows:
        print(
            f"{r['phase']:<18} {r['chunks_per_s']:>8} {r['replica_us_per_chunk']:>16} "
            f"{r['replica_ms_per_session_s']:>12} {r['robots_us_per_observation']:>13} "
            f"{r['router_us_per_robot_message']:>13}"
        )
        print(f"{'':<18} replica by thread (us/chunk): {r['replica_split_us_per_chunk']}")
        if "stages_us_per_chunk" in r:
            print(f"{'':<18} replica by stage (us/chunk, thread CPU): {r['stages_us_per_chunk']}")
    for k, v in summary.items():
        if k != "medians":
            print(f"{k}: {v}")


if __name__ == "__main__":
    sys.exit(main())
