"""What a router spends forwarding a robot's publication across the mesh, by whether some session declared its key.

Two routers in a mesh (`lerobot-fleet router`, the simulator's settings). A client of the first stands for a robot
host: `--robots` robots, each with its action subscriber (declarations every router of a fleet holds) and a publisher
on its telemetry key. A client of the second subscribes to every robot's telemetry with one wildcard, as the console
does. The robots publish `--rate` messages a second in all for `--seconds`; each router's CPU (/proc) is divided by the
messages the subscriber received. Rows, each in fresh routers:

- `publisher only`: nothing declares the telemetry key but the robot's publisher (its key declaration stays between
  the robot and its own router);
- `queryable` (the product): the robot's telemetry queryable declares the key on every router (engine/zenoh_link.py).

The first router receives from its own client in both rows; the second receives from the mesh, and on a key no session
declared a zenoh router matches the key against every declaration it holds (docs/decisions.md, "A robot's telemetry
key is declared"). Measure on a quiet box (the load average is printed and recorded); `--quick` only checks it runs.

    .venv/bin/python -m bench.router_keys [--robots 1000] [--rate 2000] [--seconds 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lerobot_policy_remote.testing.procs import Proc, free_port, stop_all, tool
from lerobot_policy_remote.testing.robot_host import MUX_QUEUES_JSON5
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "router_keys.json"
CLK = os.sysconf("SC_CLK_TCK")
KEYS = ServiceKeys.for_service("bench/router-keys", "main", "telemetry")
VARIANTS = ("publisher only", "queryable")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def measure(variant: str, robots: int, rate: float, seconds: float) -> dict[str, float]:
    """One row in fresh routers: µs of each router's CPU per message the wildcard subscriber received."""
    import zenoh

    ports = [free_port(), free_port()]
    eps = [f"tcp/127.0.0.1:{p}" for p in ports]
    routers = []
    try:
        for i, ep in enumerate(eps):
            mesh = ["--connect", eps[0]] if i else []
            routers.append(
                Proc(
                    [tool("lerobot-fleet"), "router", "--listen", ep, *mesh, "--config", MUX_QUEUES_JSON5],
                    name=f"router-{i}",
                    max_seconds=seconds + 120,
                )
            )
            routers[-1].wait_for("Zenoh router up", 30)
        host = open_session(ZenohSettings(mode="client", connect_endpoints=[eps[0]]))
        reader = open_session(ZenohSettings(mode="client", connect_endpoints=[eps[1]]))
        got = [0]
        counted = zenoh.handlers.Callback(lambda _s: got.__setitem__(0, got[0] + 1), indirect=False)
        objs: list[Any] = [reader.declare_subscriber(KEYS.robot("*", "telemetry"), counted)]
        pubs = []
        for i in range(robots):
            rid = f"arm-{i:05d}"
            objs.append(host.declare_subscriber(KEYS.robot(rid, "action"), zenoh.handlers.RingChannel(1)))
            if variant == "queryable":
                objs.append(host.declare_queryable(KEYS.robot(rid, "telemetry"), zenoh.handlers.RingChannel(1)))
            pubs.append(host.declare_publisher(KEYS.robot(rid, "telemetry")))
        time.sleep(2.0)  # every declaration through the mesh
        pids = [r.program_pid() for r in routers]
        payload = b"t" * 300  # about a telemetry report's size
        tick, per_tick = 0.01, max(1, round(rate * 0.01))

        def publish(window: float) -> None:
            t0, k = time.monotonic(), 0
            while time.monotonic() - t0 < window:
                for j in range(per_tick):
                    pubs[(k * per_tick + j) % robots].put(payload)
                k += 1
                time.sleep(max(0.0, t0 + k * tick - time.monotonic()))

        publish(1.0)  # warm-up: routes computed, batches sized
        time.sleep(0.3)
        c0, n0 = [cpu_s(p) for p in pids], got[0]
        publish(seconds)
        time.sleep(0.5)
        c1, n = [cpu_s(p) for p in pids], got[0] - n0
        for o in objs:
            o.undeclare()
        host.close()
        reader.close()
        return {
            "messages": n,
            "router_from_client_us": round((c1[0] - c0[0]) * 1e6 / max(1, n), 1),
            "router_from_mesh_us": round((c1[1] - c0[1]) * 1e6 / max(1, n), 1),
        }
    finally:
        stop_all(reversed(routers), timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=2000.0, help="messages per second, all robots together")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=3, help="rounds, the rows alternating")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 50 robots, 1 s, one round, nothing recorded")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    if a.quick:
        a.robots, a.rate, a.seconds, a.repeats = 50, 500.0, 1.0, 1
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at start: {load}", flush=True)
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for r in range(a.repeats):
        for v in VARIANTS:
            row = measure(v, a.robots, a.rate, a.seconds)
            runs[v].append(row)
            print(f"round {r + 1} {v:15s} {json.dumps(row)}", flush=True)
    med = {v: {k: statistics.median(x[k] for x in rows) for k in rows[0]} for v, rows in runs.items()}
    spread = {
        v: [min(x["router_from_mesh_us"] for x in rows), max(x["router_from_mesh_us"] for x in rows)]
        for v, rows in runs.items()
    }
    ratio = round(med["publisher only"]["router_from_mesh_us"] / max(0.1, med["queryable"]["router_from_mesh_us"]), 1)
    print(f"\nrouter CPU µs per message, medians of {a.repeats} ({a.robots} robots, {a.rate:g} msg/s):")
    for v in VARIANTS:
        m = med[v]
        print(
            f"  {v:15s} from its client {m['router_from_client_us']:7.1f}"
            f"   from the mesh {m['router_from_mesh_us']:7.1f}   (mesh spread {spread[v][0]}-{spread[v][1]})"
        )
    print(f"  the mesh router, publisher only / queryable: {ratio}")
    if a.quick:
        return 0
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    doc = {
        "bench": "router_keys",
        "script": "bench/router_keys.py",
        "measures": "Router CPU per robot publication in a two-router mesh, the key declared only by its publisher "
        "or also by a queryable, received by a wildcard subscriber on the second router.",
        "command": "python -m bench.router_keys " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit.stdout.strip() or None,
        "machine": f"{os.cpu_count()}-vCPU {platform.machine()} box",
        "load": load,
        "robots": a.robots,
        "rate": a.rate,
        "window_s": a.seconds,
        "tables": {
            "keys": {
                "columns": [
                    "telemetry key declared by",
                    "router from its client µs",
                    "router from the mesh µs",
                    "mesh spread µs",
                ],
                "rows": [
                    [
                        v,
                        med[v]["router_from_client_us"],
                        med[v]["router_from_mesh_us"],
                        f"{spread[v][0]}-{spread[v][1]}",
                    ]
                    for v in VARIANTS
                ],
            }
        },
        "headline": ["keys"],
        "runs": runs,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
