"""What the hop through the router costs per request, and which zenoh settings change it.

A client publishes a request (express, like our observations' small cousins), an echo process in another
process republishes it on a reply key, the client waits for it: one request/reply round trip, measured on
the client's monotonic clock. Each row runs in fresh processes:

- topology `router`: client -> router process -> echo (clients of a router, as the fleet runs) or `peer`:
  the client connects straight to the echo (peer mode, no router: what openpi/GR00T-style peers do);
- payload: 64 B (a control message, a chunk), 100 kB (a JPEG observation) and 1.84 MB (two raw 640x480 frames;
  fewer requests per row: `--n-large`);
- settings: zenoh's defaults (shared memory on, tx batching on) vs shared memory off (the cross-host path)
  vs tx batching off vs shared memory off with the 16-batch DATA queue robots and routers use
  (`OBS_TX_QUEUE_BATCHES`: a 1.84 MB observation is 29 fragments of 64 kB).

Prints p50, p10-p90 spread and p99 in microseconds per row. Measure on a quiet box only (the load average
is printed); `--quick` only checks that it runs.

    .venv/bin/python -m bench.router_hop [--quick] [--n 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from lerobot_policy_remote.testing.procs import free_port
from lerobot_policy_remote.zenoh_config import OBS_TX_QUEUE_BATCHES, ZenohSettings, open_session

REQ, REP = "bench/hop/req", "bench/hop/rep"
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "shm-off": {"shared_memory": False},
    "batching-off": {
        "extra_json5": json.dumps({"transport": {"link": {"tx": {"queue": {"batching": {"enabled": False}}}}}})
    },
    "shm-off-q16": {"shared_memory": False, "tx_queue_data": OBS_TX_QUEUE_BATCHES},
}
LARGE = 1_843_200  # two raw 640x480 RGB frames


def settings(mode: str, connect: list[str], listen: list[str], variant: str) -> ZenohSettings:
    return ZenohSettings(
        mode=mode, connect_endpoints=connect, listen_endpoints=listen, connect_timeout_ms=5000, **SETTINGS[variant]
    )


def serve(role: str, mode: str, connect: list[str], listen: list[str], variant: str) -> None:
    """Child process: a router, or the echo (republishes every request on the reply key)."""
    z = open_session(settings(mode, connect, listen, variant))
    objs = []
    if role == "echo":
        import zenoh

        pub = z.declare_publisher(REP, express=True, congestion_control=zenoh.CongestionControl.BLOCK)
        objs.append(z.declare_subscriber(REQ, lambda s: pub.put(s.payload.to_bytes())))
    print("READY", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    z.close()


def child(role: str, mode: str, connect: list[str], listen: list[str], variant: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "bench.router_hop",
        "--child",
        role,
        "--mode",
        mode,
        "--variant",
        variant,
        "--connect",
        ",".join(connect),
        "--listen",
        ",".join(listen),
    ]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline() if p.stdout else ""
    if "READY" not in line:
        p.kill()
        raise RuntimeError(f"{role} did not start")
    return p


def stop(p: subprocess.Popen) -> None:
    try:
        if p.stdin:
            p.stdin.close()
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)


def measure(topology: str, variant: str, sizes: list[int], n: int, warmup: int, n_large: int) -> dict[int, list[float]]:
    import zenoh

    procs = []
    try:
        if topology == "router":
            ep = f"tcp/127.0.0.1:{free_port()}"
            procs.append(child("router", "router", [], [ep], variant))
            procs.append(child("echo", "client", [ep], [], variant))
            z = open_session(settings("client", [ep], [], variant))
        else:
            ep = f"tcp/127.0.0.1:{free_port()}"
            procs.append(child("echo", "peer", [], [ep], variant))
            z = open_session(settings("peer", [ep], [], variant))
        got = threading.Event()
        sub = z.declare_subscriber(REP, lambda s: got.set())
        pub = z.declare_publisher(REQ, express=True, congestion_control=zenoh.CongestionControl.BLOCK)
        time.sleep(0.3)  # declarations propagate
        out: dict[int, list[float]] = {}
        for size in sizes:
            body = os.urandom(size)
            samples = []
            count, skip = (n_large, min(warmup, 20)) if size >= LARGE else (n, warmup)
            for i in range(skip + count):
                got.clear()
                t0 = time.perf_counter()
                pub.put(body)
                if not got.wait(5.0):
                    raise RuntimeError(f"{topology}/{variant}: no echo for a {size} B request")
                if i >= skip:
                    samples.append((time.perf_counter() - t0) * 1e6)
            out[size] = samples
        sub.undeclare()
        z.close()
        return out
    finally:
        for p in reversed(procs):
            stop(p)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="a few requests per row: checks the bench runs, measures nothing"
    )
    ap.add_argument("--n", type=int, default=2000, help="requests per row (after warm-up)")
    ap.add_argument("--n-large", type=int, default=300, help="requests per row at 1.84 MB (after warm-up)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per row; the p50 spread is over rounds")
    ap.add_argument("--child", default="")
    ap.add_argument("--mode", default="client")
    ap.add_argument("--variant", default="default")
    ap.add_argument("--connect", default="")
    ap.add_argument("--listen", default="")
    a = ap.parse_args()
    if a.child:
        serve(a.child, a.mode, [e for e in a.connect.split(",") if e], [e for e in a.listen.split(",") if e], a.variant)
        return
    n, n_large, rounds, warmup = (50, 10, 1, 10) if a.quick else (a.n, a.n_large, a.rounds, 200)
    sizes = [64, 100_000, LARGE]
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {n} requests x {rounds} rounds per row "
        f"({'QUICK: figures mean nothing' if a.quick else 'measure on a quiet box'})",
        flush=True,
    )
    print(
        f"{'topology':8s} {'settings':13s} {'payload':>8s} {'p50 us':>9s} {'p10-p90 us':>15s} {'p99 us':>9s} "
        f"{'p50 over rounds':>22s}"
    )
    for variant in SETTINGS:
        for topology in ("peer", "router"):
            per_round = [measure(topology, variant, sizes, n, warmup, n_large) for _ in range(rounds)]
            for size in sizes:
                allx = [x for r in per_round for x in r[size]]
                p50s = [statistics.median(r[size]) for r in per_round]
                print(
                    f"{topology:8s} {variant:13s} {size:8d} {statistics.median(allx):9.0f} "
                    f"{pct(allx, 10):7.0f}-{pct(allx, 90):<7.0f} {pct(allx, 99):9.0f} "
                    f"{min(p50s):10.0f}-{max(p50s):<10.0f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
