"""Faults, per system: server killed and restarted, server paused (SIGSTOP) 2 s, network partition 2 s.

A 30 fps robot (`robot_loop`) runs against one server (stub S = 20 ms); the fault hits once it is
steady. From the robot's monotonic timeline: how long until it noticed (its client raised), how long
the action queue ran dry, how long until it executed an action from an observation taken after the
fault, and whether it executed any action from a chunk whose observation was more than 1 s old when
the chunk arrived (a late answer to a pre-fault observation, acted on as if fresh). A kill runs
`Sizes.kill_trials` times (`--kill-trials`) and its row is the median.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import procs
from .workload import Log, interleaved

if TYPE_CHECKING:  # run.py imports this module: its Server is named for the checker only
    from .run import Server

FAULTS = ("kill", "sigstop", "partition")
PAUSE_S = 2.0


def analyse(res: dict[str, Any], t_fault: float, t_end: float, t_back: float | None) -> dict[str, Any]:
    errs = [t for t, _ in res["errors"] if t >= t_fault]
    fresh = [t for t, age, _ in res["executed"] if t >= t_end and t - age > t_end]
    stale = [lag for t, _, lag in res["executed"] if t >= t_fault and lag > 1.0]
    dry = [t for t in res["dry_ticks"] if t >= t_fault]
    return {
        "noticed_s": (errs[0] - t_fault) if errs else None,
        "dry_s": len(dry) / 30.0,
        "run_again_s": (fresh[0] - t_fault) if fresh else None,
        "server_back_s": (t_back - t_fault) if t_back else None,
        "stale_executed": len(stale),
        "max_lag_s": max((lag for t, _, lag in res["executed"] if t >= t_fault), default=0.0),
        "error_kinds": sorted({e.split(":")[0] for _, e in res["errors"]})[:6],
        "reconnects": len(res["reconnects"]),
    }


def fault_run(
    server: Server, arm: str, system: str, extra: list[str], fault: str, log: Log, kill_window_s: float = 30.0
) -> dict[str, Any]:
    relay, target = server.relay() if fault == "partition" else (None, server.target)
    window = kill_window_s if fault == "kill" else 12.0
    robot = procs.python(
        "bench.peers.robot_loop",
        system,
        "--target",
        target,
        "--seconds",
        str(window),
        *extra,
        name=f"{system} robot",
        max_s=window + 200,
    )
    try:
        robot.wait_for("PEER STEADY", timeout=180)
        time.sleep(2.0)
        t_fault, t_back = time.monotonic(), None
        if fault == "kill":
            for p in server.procs:
                p.signal(signal.SIGKILL)
                p.stop()
            t_end = time.monotonic()
            t_back = server.start()
        elif fault == "sigstop":
            for p in server.procs:
                p.signal(signal.SIGSTOP)
            time.sleep(PAUSE_S)
            for p in server.procs:
                p.signal(signal.SIGCONT)
            t_end = time.monotonic()
        else:
            assert relay is not None  # the partition fault runs through the relay made for it above
            relay.partition(PAUSE_S)
            t_end = time.monotonic()
        line = robot.wait_for("PEER RESULT", timeout=window + 150)
    finally:
        robot.stop()
        if relay is not None:
            relay.stop()
    row = {"arm": arm, "fault": fault, **analyse(procs.result(line), t_fault, t_end, t_back)}
    fmt: Callable[[float | None], str] = lambda v: "never" if v is None else f"{v:.2f}s"  # noqa: E731
    log(
        f"fault {arm:12s} {fault:9s} noticed {fmt(row['noticed_s']):>6}  dry {row['dry_s']:5.2f}s  "
        f"fresh again {fmt(row['run_again_s']):>6}  "
        f"stale>1s executed {row['stale_executed']:3d} (worst chunk lag {row['max_lag_s']:.2f}s)  "
        f"errors {row['error_kinds']}"
    )
    return row


def median_trials(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for several trials of a fault: the median of each time (a trial that never recovered counts as
    slowest), the worst of each safety figure, every trial kept."""

    def med(key: str) -> float | None:
        vals = sorted((float("inf") if t[key] is None else t[key]) for t in trials)
        m = statistics.median(vals)
        return None if m == float("inf") else m

    row = {**trials[0], "trials": trials}
    for key in ("noticed_s", "run_again_s", "server_back_s"):
        row[key] = med(key)
        done = [t[key] for t in trials if t[key] is not None]
        row[key + "_spread"] = [min(done), max(done)] if done else None
    row["dry_s"] = statistics.median(t["dry_s"] for t in trials)
    row["stale_executed"] = sum(t["stale_executed"] for t in trials)
    row["max_lag_s"] = max(t["max_lag_s"] for t in trials)
    row["reconnects"] = min(t["reconnects"] for t in trials)
    row["error_kinds"] = sorted({k for t in trials for k in t["error_kinds"]})[:6]
    return row


def faults(
    arms: list[str],
    arm_table: dict[str, tuple[str, list[str]]],
    server_cls: type[Server],
    log: Log,
    which: tuple[str, ...] = FAULTS,
    kill_window_s: float = 30.0,
    kill_trials: int = 1,
) -> list[dict[str, Any]]:
    """Every fault on every arm, each on a fresh server. A kill runs `kill_trials` times, the arms interleaved (a slow
    window of the box lands on every arm), and its row is their median."""

    def trial(arm: str, fault: str) -> dict[str, Any]:
        system, extra = arm_table[arm]
        server = server_cls(system, 0.02, shm="--shm" in extra)
        try:
            return fault_run(server, arm, system, extra, fault, log, kill_window_s)
        finally:
            server.stop()

    kills = interleaved(arms, kill_trials, lambda arm: trial(arm, "kill")) if "kill" in which else {}
    rows = []
    for arm in arms:
        for fault in which:
            rows.append(median_trials(kills[arm]) if fault == "kill" else trial(arm, fault))
    return rows
