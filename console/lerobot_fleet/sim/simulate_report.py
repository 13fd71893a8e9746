"""`lerobot-fleet simulate`'s report: the robots' states and chunk rates, the drain's moves, the rollout's progress
and what every robot executed through it, the costs per message."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any, TypedDict

from .sim_args import NEW_FINGERPRINT, NEW_REVISION, OLD_FINGERPRINT

if TYPE_CHECKING:
    from .sim_args import SimArgs

# A JSON object as the robot hosts write it and `json.loads` reads it back (and the report `json.dumps` writes):
# values of mixed types, read by key.
Json = dict[str, Any]


class DrainRecord(TypedDict, total=False):
    """What `_drain_later` noted of the drain: when it was sent and the reply (empty: no drain)."""

    t: float
    ok: bool
    replica: str
    message: str


class RolloutRecord(TypedDict, total=False):
    """What `_roll_later` read of the rollout from the router that keeps it (empty: no rollout). Times are seconds:
    `at_s` into the run, `canary_s` and `complete_s` after the start was sent."""

    at_s: float
    started: bool  # the router accepted the start
    message: str  # the start's reply, or the router's last word when the window ended
    canary_s: float
    complete_s: float
    phase: str  # at the end of the window
    steps: int
    states: dict[str, int]  # robots per rollout state at the end
    failed: list[str]  # "robot: why" of each robot whose move failed
    events: list[str]  # the router's latest step lines


class ConsoleWatch(TypedDict):
    """What `_watch_console` measured of the real console on the fleet."""

    robots_seen: int  # robot ids shown not GONE (the most at any tick)
    refresh_ms_p50: float | None
    refresh_ms_p95: float | None
    data_age_max_s: float | None  # the oldest robot's newest sample, over the ticks once every robot was seen
    # Rows shown (not GONE) beyond one per robot id at the last tick: a moved robot's old row the console kept
    extra_rows_end: int
    row_age_max_s: float | None  # the oldest sample of any row shown (not GONE), kept rows included
    ticks: int


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def _move_time(history: list[tuple[float, str, str]], t_drain: float, replica: str) -> float | None:
    """Seconds from the drain until the robot streamed again after leaving STREAMING because of it (None: not moved).

    Because of it: the drain notice, or the drained replica's token going (a robot that missed the notice)."""
    left = None
    for t, state, why in history:
        if t < t_drain:
            continue
        if left is None and ("draining" in why or f"(replica {replica})" in why):
            left = t
        elif left is not None and state == "STREAMING":
            return t - t_drain
    return math.inf if left is not None else None


def summarize(
    reports: list[Json],
    drain: DrainRecord,
    console: ConsoleWatch | None,
    a: SimArgs,
    cpu: dict[str, float] | None = None,
    rollout: RolloutRecord | None = None,
) -> Json:
    robots = [r for rep in reports for r in rep["robots"]]
    states: dict[str, int] = {}
    for r in robots:
        states[r["state"]] = states.get(r["state"], 0) + 1
    moves: dict[str, float] = {}
    if "t" in drain:
        for r in robots:
            m = _move_time(r["history"], drain["t"], drain.get("replica", ""))
            if m is not None:
                moves[r["robot"]] = m
    move_vals = [m for m in moves.values() if math.isfinite(m)]
    out: Json = {
        "robots": a.robots,
        "replicas": a.replicas,
        "routers": a.routers,
        "seconds": a.seconds,
        "nice": {"fleet": a.fleet_nice, "routers": a.fleet_nice if a.router_nice is None else a.router_nice},
        "robots_reported": len(robots),
        "states": states,
        "robot_hosts_cpu_pct_of_one_core": round(
            100 * sum(rep.get("cpu_s", 0.0) / max(1e-9, rep["wall_s"]) for rep in reports), 1
        ),
        "streaming": states.get("STREAMING", 0),
        "stale_actions": sum(r["stale_actions"] for r in robots),
        "nan_actions": sum(r["nan_actions"] for r in robots),
        "chunks_per_s_total": round(sum(r["chunks_per_s"] for r in robots), 1),
        "chunks_per_s_min": min((r["chunks_per_s"] for r in robots), default=0.0),
        "staleness_mean_s": round(statistics.mean(r["staleness_mean_s"] for r in robots), 3) if robots else None,
        "max_action_age_s": max((r["max_action_age_s"] for r in robots), default=0.0),
        "drain": {
            **{k: v for k, v in drain.items() if k != "t"},
            "moved": len(moves),
            "not_back": sorted(k for k, v in moves.items() if not math.isfinite(v)),
            "move_s_p50": round(statistics.median(move_vals), 3) if move_vals else None,
            "move_s_max": round(max(move_vals), 3) if move_vals else None,
            "moved_still_on_drained": sum(
                1 for r in robots if r["robot"] in moves and r["replica"] == drain.get("replica")
            ),
        }
        if drain
        else None,
        "rollout": rollout_summary(robots, rollout, a) if a.rollout else None,
        "console": console,
        "cost": _costs(robots, reports, cpu, a) if cpu else None,
        "per_robot": [
            {k: r[k] for k in ("robot", "state", "replica", "chunks_per_s", "staleness_mean_s", "stale_actions")}
            | (
                {"move_s": round(moves[r["robot"]], 3) if math.isfinite(moves[r["robot"]]) else None}
                if r["robot"] in moves
                else {}
            )
            for r in robots
        ],
    }
    return out


def _costs(robots: list[Json], reports: list[Json], cpu: dict[str, float], a: SimArgs) -> Json:
    """CPU per message and per session from the routers' and replicas' CPU over the run (wall clock of the
    orchestrator's window, close to the hosts'). Messages through the routers: each chunk is one observation in and
    one chunk out, plus each robot's telemetry (about 1/s at the default period); a meshed router may forward a
    message over a mesh link too, so this is the mesh's cost per robot message."""
    chunks = sum(r["chunks_per_s"] for r in robots)
    telemetry = len(robots) / max(1e-9, a.telemetry_period_s)
    msgs = 2 * chunks + telemetry
    sessions = len(robots) / max(1, a.replicas)
    return {
        "routers_cpu_pct_of_one_core": round(100 * cpu["routers"], 1),
        "replicas_cpu_pct_of_one_core": round(100 * cpu["replicas"], 1),
        "robot_messages_per_s": round(msgs),
        "router_cpu_us_per_message": round(1e6 * cpu["routers"] / msgs, 1) if msgs else None,
        "replica_cpu_ms_per_session_s": round(1e3 * cpu["replicas"] / max(1, a.replicas) / sessions, 3)
        if sessions
        else None,
        "replica_cpu_us_per_chunk": round(1e6 * cpu["replicas"] / chunks, 1) if chunks else None,
    }


def rollout_summary(robots: list[Json], record: RolloutRecord | None, a: SimArgs) -> Json:
    """The rollout as the router kept it, and as every robot executed it (the hosts' own record, not the router's):
    a robot ends on the new model when its last executed action came from it; each move is exactly one switch of
    the executed actions' model; no action comes from a third model; no action is stale or NaN."""
    rec: RolloutRecord = record or {}
    known = {OLD_FINGERPRINT, NEW_FINGERPRINT}
    on_new = sum(1 for r in robots if r["fingerprints"] and r["fingerprints"][-1] == NEW_FINGERPRINT)
    uneven = sorted(r["robot"] for r in robots if r["switches"] != r["moves"])
    foreign = sorted(r["robot"] for r in robots if set(r["fingerprints"]) - known)
    stale = sum(r["stale_actions"] for r in robots)
    nan = sum(r["nan_actions"] for r in robots)
    gap = max((r["max_gap_s"] for r in robots), default=0.0)
    phase = rec.get("phase", "")
    ok = phase == "complete" and on_new == a.robots and not (stale or nan or uneven or foreign)
    out: Json = {
        **{k: v for k, v in rec.items() if k not in ("phase", "failed")},
        "phase": phase,
        "failed": rec.get("failed", []),
        "robots_on_new_model": on_new,
        "moves_total": sum(r["moves"] for r in robots),
        "stale_actions": stale,
        "nan_actions": nan,
        "switches_not_moves": len(uneven),
        "switches_not_moves_robots": uneven[:10],
        "foreign_fingerprint_robots": len(foreign),
        "max_gap_s_worst": gap,
        "ok": ok,
    }
    out["line"] = _rollout_line(out, a)
    return out


def _rollout_line(r: Json, a: SimArgs) -> str:
    """The rollout in one line for a person: how it went, then what the robots executed through it."""

    def secs(key: str) -> str:
        return f"{r[key]:.1f} s" if r.get(key) is not None else "never"

    if r["phase"] == "complete":
        head = f"rollout complete: canary in {secs('canary_s')}, complete in {secs('complete_s')} after the start"
    elif not r.get("started"):
        head = f"rollout never started: {r.get('message', 'no reply')}"
    else:
        head = (
            f"rollout NOT complete when the window ended (phase {r['phase'] or '?'}, canary in {secs('canary_s')}): "
            f"give --seconds more room after --rollout-at {a.rollout_at:g}"
        )
    return (
        f"{head}; {r.get('steps', 0)} steps, {len(r['failed'])} failed; {r['robots_on_new_model']}/{a.robots} robots "
        f"on {NEW_REVISION}, {r['stale_actions']} stale, {r['nan_actions']} NaN, {r['switches_not_moves']} with "
        f"switches != moves, {r['foreign_fingerprint_robots']} with a foreign model, worst gap {r['max_gap_s_worst']} s"
    )
