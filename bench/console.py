"""Console load benchmark: N robots and M servers publishing through a real router; the console under load.

    .venv/bin/python bench/console.py                       # 500 robots, 20 servers, 10 Hz, 20 s measured
    .venv/bin/python bench/console.py --robots 100 --seconds 10

Processes: an embedded router (`lerobot-fleet router`), one publisher process
(`lerobot_policy_remote.testing.fleet`: robot liveliness tokens + telemetry at --hz; server tokens, status
queryables, audit lines at --hz, and a /metrics endpoint per server), and this process running the real
console (FleetConsoleApp + ZenohSource, headless Textual).

Measured in the console process:
- CPU: process CPU time / wall time over the measured window (all threads: zenoh, decoder, UI).
- UI refresh per tick: from the start of one `tick()` (snapshot + keyed reconcile) until the repainted
  frame has been written to the (headless) driver; the auto timer is off, ticks run at 1 Hz. The
  decoder and zenoh threads compete for the GIL meanwhile, as they do live.
- Data age: at each tick, the age of every robot's latest telemetry (console receive clock), and the
  delivery lag publish->store (the publisher stamps `seq` with its CLOCK_MONOTONIC in ms; both
  processes share that clock on one host).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from lerobot_policy_remote.testing import Proc, Router

ROOT = Path(__file__).resolve().parents[1]


async def measure(endpoint: str, robots: int, warmup: float, seconds: float) -> dict:
    sys.path.insert(0, str(ROOT / "console"))
    from lerobot_fleet.app import FleetConsoleApp
    from lerobot_fleet.sources.zenoh_source import ZenohSource

    from lerobot_policy_remote.zenoh_config import ZenohSettings

    source = ZenohSource(ZenohSettings(mode="client", connect_endpoints=[endpoint]), status_period_s=2.0, scrape_period_s=2.0)
    app = FleetConsoleApp(source, refresh_s=3600.0, read_only=True)  # ticks driven below at 1 Hz
    displayed = [0.0]
    original_display = app._display

    def timed_display(*a, **kw):
        result = original_display(*a, **kw)
        displayed[0] = time.perf_counter()
        return result

    app._display = timed_display  # bench-only hook: when a frame was written to the (headless) driver
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 60
        while len(app.store.snapshot().robots) < robots and time.monotonic() < deadline:
            await pilot.pause(0.2)
        seen_robots = len(app.store.snapshot().robots)
        await asyncio.sleep(warmup)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        w0 = time.monotonic()
        recv0 = source.received
        ticks, ages_p50, ages_max, lags = [], [], [], []
        while time.monotonic() - w0 < seconds:
            t0 = time.perf_counter()
            app.tick()
            while displayed[0] < t0 and time.perf_counter() - t0 < 5.0:  # until the repaint reached the driver
                await asyncio.sleep(0)
            ticks.append(displayed[0] - t0)
            snap = app.store.snapshot()
            ages = sorted(r.seen_age_s for r in snap.robots if r.seen_age_s is not None)
            if ages:
                ages_p50.append(ages[len(ages) // 2])
                ages_max.append(ages[-1])
            with app.store._lock:  # bench-only peek: publish stamp (ms, CLOCK_MONOTONIC) vs receive time
                for r in app.store._robots.values():
                    if r.telemetry is not None and r.seen_at is not None:
                        lags.append(r.seen_at * 1000.0 - r.telemetry.seq)
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
        wall = time.monotonic() - w0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        received = source.received - recv0
        snap = app.store.snapshot()
    lags.sort()
    return {
        "robots_seen": seen_robots,
        "servers_seen": len(snap.servers),
        "servers_with_rate": sum(1 for s in snap.servers if s.requests_per_s is not None),
        "window_s": round(wall, 1),
        "console_cpu_pct_of_one_core": round(100 * cpu / wall, 1),
        "samples_per_s": round(received / wall),
        "dropped": app.store.dropped,
        "coalesced": source.coalesced,
        "refresh_ms": {"p50": round(1000 * statistics.median(ticks), 1), "p95": round(1000 * sorted(ticks)[int(0.95 * (len(ticks) - 1))], 1),
                       "max": round(1000 * max(ticks), 1), "n": len(ticks)},
        "tick_only_ms_p50": round(1000 * statistics.median(app.tick_times[-len(ticks):]), 1),
        "data_age_s": {"median_of_p50": round(statistics.median(ages_p50), 3), "max": round(max(ages_max), 3)},
        "delivery_lag_ms": {"p50": round(lags[len(lags) // 2], 1), "p99": round(lags[int(0.99 * (len(lags) - 1))], 1), "max": round(lags[-1], 1)},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", type=int, default=500)
    p.add_argument("--servers", type=int, default=20)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=20.0, help="measured window")
    p.add_argument("--warmup", type=float, default=5.0)
    args = p.parse_args()
    total = args.warmup + args.seconds + 90
    router = Router(max_seconds=total + 30).start()
    pub = None
    try:
        pub = Proc([sys.executable, "-m", "lerobot_policy_remote.testing.fleet", "--endpoint", router.endpoint, "--robots", str(args.robots),
                    "--servers", str(args.servers), "--hz", str(args.hz), "--seconds", str(total)], name="publisher", max_seconds=total + 30)
        pub.wait_for("PUBLISHER READY", timeout=120)
        result = asyncio.run(measure(router.endpoint, args.robots, args.warmup, args.seconds))
        result.update({"robots": args.robots, "servers": args.servers, "hz": args.hz, "cpus": os.cpu_count()})
        print(json.dumps(result, indent=2))
        return 0
    finally:
        if pub is not None:
            pub.stop(timeout=10)
        router.stop()


if __name__ == "__main__":
    sys.exit(main())
