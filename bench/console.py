"""Console load benchmark: N robots and M servers publishing through a real router; the console under load.

    .venv/bin/python bench/console.py                       # 500 robots, 20 servers, 10 Hz, 20 s measured
    .venv/bin/python bench/console.py --robots 100 --seconds 10

Processes: an embedded router (`lerobot-fleet router`), one publisher process (robot liveliness tokens +
telemetry at --hz; server tokens, status queryables, audit lines at --hz, and a /metrics endpoint per
server), and this process running the real console (FleetConsoleApp + ZenohSource, headless Textual).

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
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
STATES = ["STREAMING"] * 17 + ["DEGRADED", "STALLED", "RECONNECTING"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- publisher process


def publisher(endpoint: str, robots: int, servers: int, hz: float, seconds: float) -> None:
    import http.server

    from lerobot_policy_remote.wire.codec import encode, encode_json
    from lerobot_policy_remote.wire.keys import ServiceKeys
    from lerobot_policy_remote.wire.messages import AuditLine, ModelInfo, RobotTelemetry, ServerStatus, SessionInfo
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    keys = ServiceKeys.for_service("bench/act", "main", "bench task")
    s = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint]))
    replicas = [f"bench-gpu-{i:02d}" for i in range(servers)]
    robot_ids = [f"bench-robot-{i:03d}" for i in range(robots)]
    owner = {rid: replicas[i % servers] for i, rid in enumerate(robot_ids)}
    counters = {rep: 0 for rep in replicas}
    mport = _free_port()

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            rep = self.path.strip("/").split("/")[0]
            body = (
                "# TYPE lerobot_policy_server_requests_total counter\n"
                f"lerobot_policy_server_requests_total {counters.get(rep, 0)}\n"
                "# TYPE lerobot_policy_server_errors_total counter\nlerobot_policy_server_errors_total 0\n"
            ).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", mport), Metrics)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def status_handler(rep: str):
        def handle(query):
            with query:
                mine = [r for r in robot_ids if owner[r] == rep]
                st = ServerStatus(
                    replica=rep, model=ModelInfo(repo_or_path="bench/act", revision="main"), service="bench task",
                    max_sessions=32, active_sessions=len(mine), chunk_size=50, trained_fps=30.0, inference_ms_p50=20.0,
                    warmed_up=True, metrics_url=f"http://127.0.0.1:{mport}/{rep}/metrics",
                    sessions=[SessionInfo(session_id=f"s-{r}", client_uuid=r) for r in mine],
                )
                query.reply(keys.server(rep, "status"), encode(st))

        return handle

    decls = []
    for rep in replicas:
        decls.append(s.liveliness().declare_token(keys.server(rep, "alive")))
        decls.append(s.declare_queryable(keys.server(rep, "status"), status_handler(rep)))
    audit_pubs = {rep: s.declare_publisher(keys.server(rep, "audit")) for rep in replicas}
    tel_pubs = {}
    for rid in robot_ids:
        decls.append(s.liveliness().declare_token(keys.robot(rid, "alive")))
        tel_pubs[rid] = s.declare_publisher(keys.robot(rid, "telemetry"))
    print("PUBLISHER READY", flush=True)
    period = 1.0 / hz
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        n += 1
        for i, rid in enumerate(robot_ids):
            stamp = time.monotonic_ns() // 1_000_000
            tel = RobotTelemetry(
                client_uuid=rid, state=STATES[(i + n // 50) % len(STATES)], replica=owner[rid], session_id=f"s-{rid}",
                episode_id=n // 100, rtt_p50_ms=25.0 + (i * 7 + n) % 30, rtt_p95_ms=60.0 + (i + n) % 40, queue_s=0.8,
                delay_steps=1 + (n + i) % 3, requests=n, superseded=n // 20, seq=stamp,
            )
            tel_pubs[rid].put(encode(tel))
        for rep in replicas:
            counters[rep] += robots // servers
            audit_pubs[rep].put(encode_json(AuditLine(ts="t", session_id="s", client_uuid=owner and robot_ids[n % robots], seq_id=n,
                                                      episode_id=0, queue_wait_ms=1.0, inference_ms=20.0, replica=rep)))
        next_t = start + n * period
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print(f"PUBLISHER DONE rounds={n} achieved_hz={n / (time.monotonic() - start):.2f}", flush=True)
    s.close()


# ---------------------------------------------------------------- console side


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
    p.add_argument("--role", default="console", choices=["console", "publisher"], help=argparse.SUPPRESS)
    p.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    p.add_argument("--duration", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "publisher":
        publisher(args.endpoint, args.robots, args.servers, args.hz, args.duration)
        return 0

    port = _free_port()
    endpoint = f"tcp/127.0.0.1:{port}"
    total = args.warmup + args.seconds + 90
    router = subprocess.Popen(["timeout", "-s", "KILL", str(int(total + 30)), str(VENV_BIN / "lerobot-fleet"), "router", "--listen", endpoint],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pub = None
    try:
        assert router.stdout is not None
        line = router.stdout.readline()
        assert "router up" in line, line
        pub = subprocess.Popen(["timeout", "-s", "KILL", str(int(total + 30)), sys.executable, __file__, "--role", "publisher", "--endpoint", endpoint,
                                "--robots", str(args.robots), "--servers", str(args.servers), "--hz", str(args.hz), "--duration", str(total)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert pub.stdout is not None
        line = pub.stdout.readline()
        assert "PUBLISHER READY" in line, line
        result = asyncio.run(measure(endpoint, args.robots, args.warmup, args.seconds))
        result.update({"robots": args.robots, "servers": args.servers, "hz": args.hz, "cpus": os.cpu_count()})
        print(json.dumps(result, indent=2))
        return 0
    finally:
        for proc in (pub, router):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)


if __name__ == "__main__":
    sys.exit(main())
