"""The console's UI refresh alone, in one process: a synthetic fleet written straight into the store
(no router, no decoding), then timed `tick()`s (snapshot + alerts + sort/filter + keyed reconcile) and
repaints, for this console and, with --compare, an older one (git archive), alternating.

    .venv/bin/python bench/console_tick.py --robots 2000 --compare 4a93e4e --repeats 3

Between ticks every robot sends one new telemetry sample (10 Hz telemetry with a 10 Hz refresh is the
worst case: every row changed). Reports p50/p95 of the tick and of tick->frame written, per run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NS = ("lerobot/act_bench", "main", "bench task")
STATES = ["STREAMING"] * 17 + ["DEGRADED", "RECONNECTING", "STALLED"]


class SyntheticFleet:
    label = "bench"
    can_act = False

    def __init__(self, robots: int, servers: int) -> None:
        self.robots, self.servers = robots, servers

    def start(self, store) -> None:
        from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus, SessionInfo

        store.set_connection("connected")
        for j in range(self.servers):
            store.on_server_alive(f"gpu-{j}", True, NS)
            store.on_status(
                ServerStatus(
                    replica=f"gpu-{j}",
                    model=ModelInfo(repo_or_path=NS[0], revision=NS[1]),
                    service=NS[2],
                    max_sessions=self.robots,
                    active_sessions=self.robots // self.servers,
                    chunk_size=50,
                    trained_fps=30.0,
                    inference_ms_p50=20.0,
                    warmed_up=True,
                    load=0.5,
                    sessions=[
                        SessionInfo(session_id=f"s-{i}", client_uuid=f"arm-{i}")
                        for i in range(j, self.robots, self.servers)
                    ],
                ),
                NS,
            )
        for i in range(self.robots):
            store.on_robot_alive(f"arm-{i}", True, NS)
        self.feed(store, 0)

    def feed(self, store, n: int) -> None:
        from lerobot_policy_remote.wire.messages import RobotTelemetry

        for i in range(self.robots):
            state = STATES[(i // 7 + n // 50) % len(STATES)]  # a few robots change state now and then
            store.on_telemetry(
                RobotTelemetry(
                    client_uuid=f"arm-{i}",
                    state=state,
                    model_id=NS[0],
                    service=NS[2],
                    replica=f"gpu-{i % self.servers}",
                    session_id=f"s-{i}" if state != "RECONNECTING" else "",
                    episode_id=1,
                    staleness_s=0.05 * ((i + n) % 11),
                    queue_s=0.5,
                    rtt_p50_ms=30.0 + (i + n) % 40,
                    rtt_p95_ms=60.0 + (i + n) % 80,
                    delay_steps=1,
                    requests=100 + n,
                    superseded=n // 10,
                    errors=0,
                    last_outcome="ok",
                    fps=30.0,
                    seq=n,
                ),
                NS,
            )

    def stop(self) -> bool:
        return True


async def measure(robots: int, servers: int, ticks: int, console_src: str) -> dict:
    sys.path.insert(0, console_src)
    from lerobot_fleet.console.app import FleetConsoleApp

    fleet = SyntheticFleet(robots, servers)
    app = FleetConsoleApp(fleet, refresh_s=3600.0, read_only=True)
    displayed = [0.0]
    original = app._display

    def timed_display(*a, **kw):
        result = original(*a, **kw)
        displayed[0] = time.perf_counter()
        return result

    app._display = timed_display  # bench-only hook: when a frame reached the (headless) driver
    tick_ms, frame_ms, feed_ms = [], [], []
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        for n in range(1, ticks + 1):
            f0 = time.perf_counter()
            fleet.feed(app.store, n)
            feed_ms.append(1000 * (time.perf_counter() - f0))
            t0 = time.perf_counter()
            app.tick()
            tick_ms.append(1000 * (time.perf_counter() - t0))
            while displayed[0] < t0 and time.perf_counter() - t0 < 5.0:
                await asyncio.sleep(0)
            frame_ms.append(1000 * (displayed[0] - t0))

    def pct(v: list[float], q: float) -> float:
        return round(sorted(v)[int(q * (len(v) - 1))], 1)

    return {
        "robots": robots,
        "ticks": ticks,
        "tick_ms": {"p50": pct(tick_ms, 0.5), "p95": pct(tick_ms, 0.95)},
        "frame_ms": {"p50": pct(frame_ms, 0.5), "p95": pct(frame_ms, 0.95)},
        "store_writes_ms_per_round_p50": pct(feed_ms, 0.5),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", type=int, default=2000)
    p.add_argument("--servers", type=int, default=20)
    p.add_argument("--ticks", type=int, default=40)
    p.add_argument("--console-src", default=str(ROOT / "console"))
    p.add_argument("--compare", default=None, metavar="GIT_REF")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if not args.compare:
        print(json.dumps(asyncio.run(measure(args.robots, args.servers, args.ticks, args.console_src))))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.compare, "console"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        runs: dict[str, list[dict]] = {args.compare: [], "this": []}
        for i in range(args.repeats):
            for label, src in ((args.compare, f"{tmp}/console"), ("this", str(ROOT / "console"))):
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--robots",
                        str(args.robots),
                        "--servers",
                        str(args.servers),
                        "--ticks",
                        str(args.ticks),
                        "--console-src",
                        src,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                result = (
                    json.loads(out.stdout.strip().splitlines()[-1])
                    if out.returncode == 0
                    else {"error": out.stderr[-400:]}
                )
                runs[label].append(result)
                print(json.dumps({"run": i, "console": label, **result}), flush=True)
    summary = {}
    for label, rs in runs.items():
        ok = [r for r in rs if "tick_ms" in r]
        summary[label] = (
            {
                f"{m}_{q}": {
                    "median": round(statistics.median(r[m][q] for r in ok), 1),
                    "min": min(r[m][q] for r in ok),
                    "max": max(r[m][q] for r in ok),
                }
                for m in ("tick_ms", "frame_ms")
                for q in ("p50", "p95")
            }
            if ok
            else {}
        )
    print(json.dumps({"summary": summary, "robots": args.robots, "repeats": args.repeats}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
