"""`lerobot-fleet simulate`: N protocol-exact robots, R stub replicas, M meshed routers on this host.

Children (each in its own process group, ended by PID): M `lerobot-fleet router` processes in a mesh
(router i connects to routers 0..i-1), R replicas and ceil(N / per-host) robot hosts
(`python -m lerobot_policy_remote.testing.simfleet`, the product's `PolicyServer` with a `StubBackend` and the
product's `RemoteInferenceEngine` many times per process on one shared Zenoh session). With `--drain-at S` one
replica is drained through the real drain query S seconds into the run, and each robot it held is timed until
it streams again elsewhere. With `--console` the real console (its Zenoh source, headless Textual) watches the
fleet from this process and its refresh time and data age are reported.

This module imports neither torch nor lerobot: the heavy parts live in the child processes.
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lerobot_policy_remote.testing.procs import Proc, free_port, stop_all, tool

from .box_cpu import BoxSampler, ProcessCpu, verdict
from .sim_args import NEW_FINGERPRINT, NEW_REVISION, OLD_FINGERPRINT, OLD_REVISION, SimArgs
from .simulate_report import ConsoleWatch, DrainRecord, Json, RolloutRecord, pct, summarize

if TYPE_CHECKING:
    import argparse

# Deeper TX queues: one robot host's link multiplexes 250 robots (kept in the torch-free module below)
MUX_QUEUES_JSON5 = "{transport: {link: {tx: {queue: {size: {interactive_high: 16, data: 16}}}}}}"


def nice_autogroup(pid: int, nice: int) -> bool:
    """Give the session of `pid` a nice value as a whole. Linux (autogroup on) schedules each session as one group
    and ranks processes by nice only within their group; every `Proc` starts a session, so `nice -n` alone left each
    fleet process a share equal to the console's (its refresh waited for a CPU: ticks of 40 ms of CPU took 100-400 ms).
    False where there is no autogroup (then `nice -n` alone ranks them)."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
        return True
    except OSError:
        return False


def run_simulation(a: SimArgs, say: Callable[[str], None] = print) -> Json:
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="lerobot-fleet-sim-"))
    work.mkdir(parents=True, exist_ok=True)
    children: list[Proc] = []
    budget = a.seconds + 300

    def spawn(name: str, argv: list[str], nice: int = a.fleet_nice) -> Proc:
        if nice:
            argv = ["nice", "-n", str(nice), *argv]
        p = Proc(argv, name=name, max_seconds=budget, log=work / f"{name}.log", keep_lines=200)
        children.append(p)
        if nice:
            nice_autogroup(p.pid, nice)
        return p

    try:
        ports = [free_port() for _ in range(a.routers)]
        endpoints = [f"tcp/127.0.0.1:{p}" for p in ports]
        routers: list[Proc] = []
        for i, ep in enumerate(endpoints):
            mesh = [x for ep2 in endpoints[:i] for x in ("--connect", ep2)]
            # the first router keeps the fleet's rollout (in the run's directory), the others none: one keeper
            mesh += ["--rollout-state", str(work / "rollout.json")] if i == 0 else ["--no-rollouts"]
            routers.append(
                spawn(
                    f"router-{i}",
                    [tool("lerobot-fleet"), "router", "--listen", ep, *mesh, "--config", MUX_QUEUES_JSON5],
                    nice=a.fleet_nice if a.router_nice is None else a.router_nice,
                )
            )
        for r in routers:
            r.wait_for("Zenoh router up", 30)
        room = a.replicas - 1 if a.drain_at >= 0 and a.replicas > 1 else a.replicas
        # seats for every robot on the replicas left after a drain, and on the new model's replicas after a rollout
        seats = math.ceil(a.robots / max(1, room)) + 8
        old = ["--revision", OLD_REVISION, "--fingerprint", OLD_FINGERPRINT] if a.rollout else []
        replicas = [f"sim-r{j}" for j in range(a.replicas)]
        reps = [
            spawn(rid, _replica_argv(a, endpoints[j % a.routers], rid, seats, old)) for j, rid in enumerate(replicas)
        ]
        if a.rollout:
            new = ["--revision", NEW_REVISION, "--fingerprint", NEW_FINGERPRINT]
            new_seats = math.ceil(a.robots / max(1, a.new_replicas)) + 8
            for j in range(a.new_replicas):
                ep = endpoints[(a.replicas + j) % a.routers]
                reps.append(spawn(f"sim-n{j}", _replica_argv(a, ep, f"sim-n{j}", new_seats, new)))
        for r in reps:
            r.wait_for("REPLICA READY", 120)
        new_up = f" + {a.new_replicas} of the new model" if a.rollout else ""
        say(f"[simulate] {a.routers} routers, {a.replicas} replicas{new_up} up; starting {a.robots} robots ...")
        hosts: list[Proc] = []
        outs: list[Path] = []
        stop_file = work / "robots.stop"  # created once every host has reported: then they tear down together
        stop_file.unlink(missing_ok=True)
        n_hosts = max(1, math.ceil(a.robots / a.per_host))
        for h in range(n_hosts):
            first, count = h * a.robots // n_hosts, (h + 1) * a.robots // n_hosts - h * a.robots // n_hosts
            own_ep = endpoints[h % a.routers]
            order = [own_ep] + [ep for ep in endpoints if ep != own_ep]
            out = work / f"robots-{h}.json"
            outs.append(out)
            hosts.append(
                spawn(
                    f"robots-{h}",
                    [
                        sys.executable,
                        "-m",
                        "lerobot_policy_remote.testing.simfleet",
                        "robots",
                        *[x for ep in order for x in ("--endpoint", ep)],
                        "--first",
                        str(first),
                        "--count",
                        str(count),
                        "--seconds",
                        str(a.seconds),
                        "--out",
                        str(out),
                        "--stop-file",
                        str(stop_file),
                        "--telemetry-period",
                        str(a.telemetry_period_s),
                        "--telemetry-max-period",
                        str(a.telemetry_max_period_s),
                        *(["--revision", OLD_REVISION] if a.rollout else []),
                    ],
                )
            )
        for host in hosts:
            host.wait_for("ROBOTS READY", 60 + a.robots * 0.2)
        t_run = time.monotonic()
        cpu_pids = {
            "routers": [r.program_pid() for r in routers],
            "replicas": [r.program_pid() for r in reps],
            "robot_hosts": [h.program_pid() for h in hosts],
        }
        fleet_cpu = ProcessCpu(cpu_pids).start()  # a replica that exits after its drain keeps what it spent
        box = BoxSampler().start()  # the whole box's CPU over the same window: is the box, not the fleet, the limit?
        own0 = _own_cpu_s()
        say(f"[simulate] {a.robots} robots started; running {a.seconds:g} s")
        drain: DrainRecord = {}
        stop_console = threading.Event()
        drainer = None
        if a.drain_at >= 0:
            drainer = threading.Thread(
                target=_drain_later, args=(endpoints[0], replicas[0], t_run + a.drain_at, drain, say), daemon=True
            )
            drainer.start()
        rollout: RolloutRecord = {}
        stop_rollout = threading.Event()  # set once the hosts reported: the rollout's figures end with their window
        roller = None
        if a.rollout:
            roller = threading.Thread(
                target=_roll_later, args=(endpoints[0], t_run, a, rollout, stop_rollout, say), daemon=True
            )
            roller.start()
        console: ConsoleWatch | None = None
        if a.console:
            console = asyncio.run(_watch_console(endpoints[-1], a.robots, t_run + a.seconds - 1.0, stop_console))
        deadline = time.monotonic() + a.seconds + 120
        while (
            not all(p.exists() for p in outs)
            and time.monotonic() < deadline
            and all(h.popen.poll() is None for h in hosts)
        ):
            time.sleep(0.2)
        window = time.monotonic() - t_run
        cpu = {k: round(v / window, 3) for k, v in fleet_cpu.stop().items()}
        own = (_own_cpu_s() - own0) / window
        box_mean = box.stop()
        stop_rollout.set()
        if roller is not None:
            roller.join(15)  # its last status read, while every robot still runs
        stop_file.touch()
        for host in hosts:
            host.wait(timeout=60)
        if drainer is not None:
            drainer.join(10)
        reports = [json.loads(p.read_text()) for p in outs if p.exists()]
    finally:
        stop_all(reversed(children), timeout=15)
    result = summarize(reports, drain, console, a, cpu, rollout)
    if box_mean is not None:
        fleet = 100 * (cpu["routers"] + cpu["replicas"] + cpu["robot_hosts"])
        result["box"] = verdict(box_mean[0], box_mean[1], fleet, 100 * own, box.samples)
    return result


def _replica_argv(a: SimArgs, endpoint: str, rid: str, seats: int, model: list[str]) -> list[str]:
    """One stub replica's command line; `model`: the revision and fingerprint it stands for (empty: the stub's)."""
    return [
        *[sys.executable, "-m", "lerobot_policy_remote.testing.simfleet", "replica", "--endpoint", endpoint],
        *["--replica-id", rid, "--max-sessions", str(seats), "--max-batch", str(a.max_batch)],
        *["--infer-ms", str(a.infer_ms), "--seconds", str(a.seconds + 300), *model],
    ]


def _own_cpu_s() -> float:
    """User + system CPU seconds of this process (the console and the orchestration), all its threads."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _drain_later(endpoint: str, replica: str, at: float, out: DrainRecord, say: Callable[[str], None]) -> None:
    """At `at`, drain `replica` with the console's own drain query (`ops.send_drain`)."""
    from lerobot_fleet.data.ops import query_statuses, send_drain
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    z = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint]))
    try:
        time.sleep(max(0.0, at - time.monotonic()))
        ns = next((n for st, n in query_statuses(z) if st.replica == replica), None)
        out["t"] = time.monotonic()
        result = send_drain(z, replica, ns, "simulate: drain", "lerobot-fleet simulate")
        out["ok"], out["replica"], out["message"] = result.ok, replica, result.message
        say(f"[simulate] drained {replica}: {result.message}")
    finally:
        z.close()


def _roll_later(
    endpoint: str, t_run: float, a: SimArgs, out: RolloutRecord, stop: threading.Event, say: Callable[[str], None]
) -> None:
    """At `--rollout-at`, the operator's rollout through the verbs' own query (`ops.send_rollout`) to the router
    that keeps it: `start`, `promote` once the canary settled (its robots streaming from the new model or failed),
    then the router's status until the rollout ends or `stop` (the hosts reported). The final read is the report's."""
    from lerobot_fleet.data.ops import send_rollout
    from lerobot_fleet.rollout.plan import canary_count
    from lerobot_policy_remote.wire.rollout import Phase, RobotMove, RolloutCommand, RolloutStatus
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    def settled(st: RolloutStatus) -> bool:
        done = sum(r.state in (RobotMove.MOVED.value, RobotMove.FAILED.value) for r in st.robots)
        return st.phase != Phase.CANARY.value or (bool(st.robots) and done >= canary_count(st))

    z = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint]))
    st = RolloutStatus()
    try:
        if stop.wait(max(0.0, t_run + a.rollout_at - time.monotonic())):
            return
        t0 = time.monotonic()
        out["at_s"] = round(t0 - t_run, 3)
        who = "lerobot-fleet simulate"
        start = RolloutCommand("start", NEW_REVISION, canary=a.rollout_canary, step=a.rollout_step, requested_by=who)
        reply = send_rollout(z, start)
        out["started"], out["message"] = reply.ok, reply.message
        say(f"[simulate] rollout start --to {NEW_REVISION} --canary {a.rollout_canary:g}: {reply.message}")
        promoted = False
        while out["started"] and not stop.is_set():  # a refused start leaves nothing to follow
            st = send_rollout(z, RolloutCommand("status"), 2.0).status
            if not promoted and settled(st):
                out["canary_s"] = round(time.monotonic() - t0, 3)
                reply = send_rollout(z, RolloutCommand("promote", requested_by=who))
                promoted = True
                say(f"[simulate] rollout canary settled in {out['canary_s']:g} s; promote: {reply.message}")
            if st.phase and Phase(st.phase).final:
                if st.phase == Phase.COMPLETE.value:
                    out["complete_s"] = round(time.monotonic() - t0, 3)
                say(f"[simulate] rollout {st.phase} {time.monotonic() - t0:.3g} s after the start: {st.message}")
                break
            stop.wait(0.25)
        if out.get("started"):
            st = send_rollout(z, RolloutCommand("status"), 2.0).status
    finally:
        z.close()
    states: dict[str, int] = {}
    for r in st.robots:
        states[r.state] = states.get(r.state, 0) + 1
    out["phase"], out["steps"], out["states"] = st.phase, st.steps, states
    out["failed"] = [f"{r.robot}: {r.detail}" for r in st.robots if r.state == RobotMove.FAILED.value]
    out["events"] = st.events[-8:]
    if st.message:
        out["message"] = st.message


async def _watch_console(endpoint: str, robots: int, until: float, stop: threading.Event) -> ConsoleWatch:
    """The real console (ZenohSource + FleetConsoleApp, headless) on the fleet: refresh per tick at 1 Hz
    (tick to frame written) and each tick's oldest robot sample (data age)."""
    from lerobot_fleet.console.app import FleetConsoleApp
    from lerobot_fleet.data.model import RobotState
    from lerobot_fleet.data.sources.zenoh_source import ZenohSource
    from lerobot_policy_remote.zenoh_config import ZenohSettings

    source = ZenohSource(
        ZenohSettings(mode="client", connect_endpoints=[endpoint]), status_period_s=2.0, scrape_period_s=5.0
    )
    app = FleetConsoleApp(source, refresh_s=3600.0, read_only=True)
    displayed = [0.0]
    original = app._display

    def timed(*args: Any, **kw: Any) -> None:  # passes whatever `_display` (textual, private) takes through
        result = original(*args, **kw)
        displayed[0] = time.perf_counter()
        return result

    app._display = timed  # type: ignore[method-assign]  # wraps the bound method to time each frame written
    ticks: list[float] = []
    age_max: list[float] = []
    rows_age_max: list[float] = []
    seen = extra = 0
    async with app.run_test(size=(160, 50)):
        while time.monotonic() < until and not stop.is_set():
            t0 = time.perf_counter()
            app.tick()
            while displayed[0] < t0 and time.perf_counter() - t0 < 5.0:
                await asyncio.sleep(0)
            ticks.append(displayed[0] - t0)
            snap = app.store.snapshot()
            # Per robot (its id), not per row: a robot that moved to another model has one row per namespace for a
            # moment, and a row the console failed to drop would otherwise count as a robot and as its data age.
            shown = [r for r in snap.robots if r.state is not RobotState.GONE]
            seen = max(seen, len({r.robot_id for r in shown}))
            extra = len(shown) - len({r.robot_id for r in shown})  # at the last tick: rows kept, not moves under way
            youngest: dict[str, float] = {}
            for r in snap.robots:
                if r.seen_age_s is not None:
                    youngest[r.robot_id] = min(r.seen_age_s, youngest.get(r.robot_id, math.inf))
            if len(youngest) >= robots:  # once every robot has been seen
                age_max.append(max(youngest.values()))
                rows_age_max.append(max((r.seen_age_s or 0.0 for r in shown), default=0.0))
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
    warm = ticks[3:] or ticks
    return {
        "robots_seen": seen,
        "refresh_ms_p50": round(1000 * statistics.median(warm), 1) if warm else None,
        "refresh_ms_p95": round(1000 * pct(warm, 0.95), 1) if warm else None,
        "data_age_max_s": round(max(age_max[3:] or age_max), 3) if age_max else None,
        "extra_rows_end": extra,
        "row_age_max_s": round(max(rows_age_max[3:] or rows_age_max), 3) if rows_age_max else None,
        "ticks": len(ticks),
    }


def main(args: argparse.Namespace) -> int:
    a = SimArgs(
        robots=args.robots,
        replicas=args.replicas,
        routers=args.routers,
        seconds=args.seconds,
        per_host=args.per_host,
        drain_at=args.drain_at,
        console=args.console,
        workdir=args.workdir,
        max_batch=args.max_batch,
        infer_ms=args.infer_ms,
        telemetry_period_s=args.telemetry_period,
        telemetry_max_period_s=args.telemetry_max_period,
        fleet_nice=args.fleet_nice,
        router_nice=args.router_nice,
        rollout_at=args.rollout_at,
        new_replicas=(1 if args.new_replicas is None else args.new_replicas) if args.rollout_at >= 0 else 0,
        rollout_canary=args.rollout_canary,
        rollout_step=args.rollout_step,
    )
    if a.rollout and not (0 <= a.rollout_at < a.seconds and a.new_replicas >= 1):
        raise SystemExit("--rollout-at S needs 0 <= S < --seconds and --new-replicas >= 1")
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    result = run_simulation(a, say)
    if args.json:
        print(json.dumps(result))
    else:
        brief = {k: v for k, v in result.items() if k != "per_robot"}
        print(json.dumps(brief, indent=2))
    if "box" in result:
        say(f"[simulate] {result['box']['line']}")
    if result["rollout"] is not None:
        say(f"[simulate] {result['rollout']['line']}")
    ok = result["streaming"] == a.robots and result["stale_actions"] == 0 and result["nan_actions"] == 0
    ok = ok and (result["rollout"] is None or result["rollout"]["ok"])
    return 0 if ok else 1
