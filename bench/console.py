"""Console load benchmark: N robots and M servers publishing through a real router; the console under load.

    .venv/bin/python bench/console.py                       # 500 robots, 20 servers, 10 Hz, 20 s measured
    .venv/bin/python bench/console.py --robots 100 --seconds 10
    .venv/bin/python bench/console.py --compare 4a93e4e --repeats 3     # this console vs an older one, alternating

Processes: an embedded router (`lerobot-fleet router`), --publishers publisher processes (default one per
250 robots; `lerobot_policy_remote.testing.fleet`: robot liveliness tokens + telemetry at --hz; server tokens,
status queryables, audit lines at --hz, and a /metrics endpoint per server), and this process running the real
console (FleetConsoleApp + ZenohSource, headless Textual).

    .venv/bin/python bench/console.py --robots 2000 --hz 10 --publishers 8     # the aim: 20,000 samples/s

The publishers must prove the load: the console counts what it received in the window (`delivered_per_s`)
against `intended_per_s` (robots x hz + servers x hz audit lines); below 95% the run prints
`"reportable": false` and its figures must not be reported. 10 Hz per robot is ten times what a real robot
sends (telemetry is adaptive, `--inference.telemetry_period_s`..`telemetry_max_period_s`: at once on a state
change, 1 Hz at most otherwise by default), so 2,000 x 10 Hz stands for 20,000 robots' steady telemetry.

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
from lerobot_policy_remote.testing.procs import stop_all

ROOT = Path(__file__).resolve().parents[1]


async def measure(endpoint: str, robots: int, warmup: float, seconds: float, console_src: Path, tick_hz: float) -> dict:
    sys.path.insert(0, str(console_src))
    from lerobot_fleet.console.app import FleetConsoleApp
    from lerobot_fleet.data.sources.zenoh_source import ZenohSource

    from lerobot_policy_remote.zenoh_config import ZenohSettings

    source = ZenohSource(
        ZenohSettings(mode="client", connect_endpoints=[endpoint]), status_period_s=2.0, scrape_period_s=2.0
    )
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
            for rec in app.store.capture().robots:  # publish stamp (ms, CLOCK_MONOTONIC) vs receive time
                if rec.telemetry is not None and rec.seen_at is not None:
                    lags.append(rec.seen_at * 1000.0 - rec.telemetry.seq)
            await asyncio.sleep(max(0.0, 1.0 / tick_hz - (time.perf_counter() - t0)))
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
        "received_in_window": received,
        "dropped": app.store.dropped,
        "coalesced": source.coalesced,
        "window_mono": (w0, w0 + wall),
        "refresh_ms": {
            "p50": round(1000 * statistics.median(ticks), 1),
            "p95": round(1000 * sorted(ticks)[int(0.95 * (len(ticks) - 1))], 1),
            "max": round(1000 * max(ticks), 1),
            "n": len(ticks),
        },
        "tick_only_ms_p50": round(1000 * statistics.median(app.tick_times[-len(ticks) :]), 1),
        "data_age_s": {"median_of_p50": round(statistics.median(ages_p50), 3), "max": round(max(ages_max), 3)},
        "delivery_lag_ms": {
            "p50": round(lags[len(lags) // 2], 1),
            "p99": round(lags[int(0.99 * (len(lags) - 1))], 1),
            "max": round(lags[-1], 1),
        },
    }


def _sent_per_s(output: str, w0: float, w1: float) -> float:
    """Samples/s a publisher put during [w0, w1], from its `PUBLISHER PROGRESS samples=.. mono=..` lines."""
    points = []
    for line in output.splitlines():
        if line.startswith("PUBLISHER PROGRESS"):
            kv = dict(x.split("=", 1) for x in line.split()[2:])
            points.append((float(kv["mono"]), int(kv["samples"])))
    inside = [p for p in points if w0 - 1.0 <= p[0] <= w1 + 1.0]
    if len(inside) < 2:
        return 0.0
    (t0, s0), (t1, s1) = inside[0], inside[-1]
    return (s1 - s0) / max(1e-9, t1 - t0)


def compare(args: argparse.Namespace) -> int:
    """Alternate runs of this console and the console at `--compare REF` (git archive into a temp dir), each
    in its own process with its own router and publisher; print every run and the medians/spread."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "console-old"
        old.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.compare, "console"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        runs: dict[str, list[dict]] = {args.compare: [], "this": []}
        for i in range(args.repeats):
            for label, src in ((args.compare, old / "console"), ("this", ROOT / "console")):
                cmd = [
                    sys.executable,
                    __file__,
                    "--robots",
                    str(args.robots),
                    "--servers",
                    str(args.servers),
                    "--hz",
                    str(args.hz),
                    "--seconds",
                    str(args.seconds),
                    "--warmup",
                    str(args.warmup),
                    "--tick-hz",
                    str(args.tick_hz),
                    "--console-src",
                    str(src),
                ]
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + args.warmup + 400)
                try:
                    result = json.loads(out.stdout[out.stdout.index("{") :])
                except ValueError:
                    result = {"error": (out.stderr or out.stdout)[-500:]}
                runs[label].append(result)
                print(json.dumps({"run": i, "console": label, **result}), flush=True)

    def summary(results: list[dict], path: tuple[str, ...]) -> dict:
        vals = []
        for r in results:
            v = r
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            if isinstance(v, (int, float)):
                vals.append(float(v))
        return (
            {"median": round(statistics.median(vals), 1), "min": min(vals), "max": max(vals), "n": len(vals)}
            if vals
            else {}
        )

    metrics = {
        "refresh_p50_ms": ("refresh_ms", "p50"),
        "refresh_p95_ms": ("refresh_ms", "p95"),
        "tick_only_p50_ms": ("tick_only_ms_p50",),
        "cpu_pct": ("console_cpu_pct_of_one_core",),
        "data_age_max_s": ("data_age_s", "max"),
        "samples_per_s": ("samples_per_s",),
    }
    table = {label: {m: summary(rs, path) for m, path in metrics.items()} for label, rs in runs.items()}
    print(json.dumps({"summary": table, "robots": args.robots, "hz": args.hz, "repeats": args.repeats}, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", type=int, default=500)
    p.add_argument("--servers", type=int, default=20)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=20.0, help="measured window")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument(
        "--tick-hz", type=float, default=1.0, help="UI refreshes per second during the window (the console's --refresh)"
    )
    p.add_argument(
        "--console-src", default=str(ROOT / "console"), help="folder holding the lerobot_fleet package to measure"
    )
    p.add_argument("--publishers", type=int, default=0, help="publisher processes (default: one per 250 robots)")
    p.add_argument(
        "--compare", default=None, metavar="GIT_REF", help="also measure the console at this git ref, alternating runs"
    )
    p.add_argument("--repeats", type=int, default=3, help="--compare: runs per console")
    args = p.parse_args()
    if args.compare:
        return compare(args)
    total = args.warmup + args.seconds + 90
    router = Router(max_seconds=total + 30).start()
    pubs: list[Proc] = []
    n_pub = args.publishers or max(1, -(-args.robots // 250))
    try:
        for k in range(n_pub):
            first, last = k * args.robots // n_pub, (k + 1) * args.robots // n_pub
            servers = (k + 1) * args.servers // n_pub - k * args.servers // n_pub
            pubs.append(
                Proc(
                    [
                        sys.executable,
                        "-m",
                        "lerobot_policy_remote.testing.fleet",
                        "--endpoint",
                        router.endpoint,
                        "--robots",
                        str(last - first),
                        "--first",
                        str(first),
                        "--servers",
                        str(servers),
                        "--server-prefix",
                        f"bench-gpu-p{k}",
                        "--hz",
                        str(args.hz),
                        "--seconds",
                        str(total),
                    ],
                    name=f"publisher-{k}",
                    max_seconds=total + 30,
                )
            )
        for pub in pubs:
            pub.wait_for("PUBLISHER READY", timeout=120)
        result = asyncio.run(
            measure(router.endpoint, args.robots, args.warmup, args.seconds, Path(args.console_src), args.tick_hz)
        )
        window = result.pop("window_mono")
        sent = sum(_sent_per_s(p.output(), *window) for p in pubs)
        result["publishers_sent_per_s"] = round(sent)  # what the publishers put (their PROGRESS lines) in the window
        intended = (args.robots + args.servers) * args.hz
        delivered = result["samples_per_s"]
        result.update(
            {
                "robots": args.robots,
                "servers": args.servers,
                "hz": args.hz,
                "cpus": os.cpu_count(),
                "publishers": n_pub,
                "intended_per_s": round(intended),
                "delivered_per_s": delivered,
                "delivered_pct": round(100 * delivered / intended, 1),
                "reportable": delivered >= 0.95 * intended,
            }
        )
        print(json.dumps(result, indent=2))
        print(
            f"publisher delivered {delivered} of {intended:.0f} samples/s intended ({result['delivered_pct']}%)"
            + ("" if result["reportable"] else ": NOT REPORTABLE, the load was not produced"),
            file=sys.stderr,
        )
        return 0
    finally:
        stop_all(pubs, timeout=10)
        router.stop()


if __name__ == "__main__":
    sys.exit(main())
