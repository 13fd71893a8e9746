"""The round-trip tail at one S, with many requests per arm: `python -m bench.peers.tail [--sleep-ms 20]`.

`bench.peers.run`'s latency rows take p99 over 150 requests per repeat, so a row's p99 is its second-largest
sample and one slow second of the box moves it by 2-4x between repeats. This runs longer closed loops
(default 4 repeats of 300 requests, the arms interleaved as in the bench, every server up throughout) in this process,
through the same clients as the bench, and prints each repeat's p50/p99 over S and when its slow requests came (ms
after the first measured one), so a reader can tell a system's tail from the box's.

    .venv/bin/python -m bench.peers.tail --arms ours-samehost gr00t-zmq --sleep-ms 20 --requests 300 --repeats 4
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from .client import make_client
from .run import ARMS, Server, servers_up
from .workload import frames, interleaved, pct, state


def round_trips(
    servers: dict[str, Server], sleep_s: float, warmup: int, requests: int, *, arm: str
) -> list[tuple[float, float]]:
    """(start, round trip - S) in seconds for each measured request of one fresh client of `arm`.

    Every chunk must answer its own observation (the stub's first row is the robot's state), as in the bench's client.
    """
    system, extra = ARMS[arm]
    quality = int(extra[extra.index("--quality") + 1]) if "--quality" in extra else 90
    c = make_client(system, servers[arm].target, 0, quality, 30.0, shm="--shm" in extra)
    imgs, seq = frames(), []
    try:
        for i in range(warmup + requests):
            st = state(i)
            t0 = time.perf_counter()
            chunk = c.infer(imgs, st)
            dt = time.perf_counter() - t0
            if not np.allclose(np.asarray(chunk)[0], st, atol=getattr(c, "atol", 1e-4)):
                raise RuntimeError(f"{arm}: request {i} got a chunk for another observation")
            if i >= warmup:
                seq.append((t0, dt - sleep_s))
    finally:
        c.close()
    return seq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arms", nargs="*", default=["ours-samehost", "gr00t-zmq"])
    ap.add_argument("--sleep-ms", type=float, default=20.0)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--slow-ms", type=float, default=10.0, help="a request this much over S counts as slow")
    ap.add_argument("--out", default="", help="write every round trip here as JSON")
    args = ap.parse_args()
    s = args.sleep_ms / 1000
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    with servers_up(args.arms, s, "", f"tail S={args.sleep_ms:.0f}ms", args.repeats, print) as (servers, _idle):
        runs = interleaved(
            args.arms, args.repeats, functools.partial(round_trips, servers, s, args.warmup, args.requests)
        )
    for arm, seqs in runs.items():
        p50s, p99s = [], []
        for seq in seqs:
            over = [dt * 1000 for _, dt in seq]
            p50s.append(pct(over, 50))
            p99s.append(pct(over, 99))
            slow = [f"{(t - seq[0][0]) * 1000:.0f}:{dt * 1000:.1f}" for t, dt in seq if dt * 1000 > args.slow_ms]
            print(
                f"{arm:14s} p50 {p50s[-1]:5.2f} p99 {p99s[-1]:5.2f} ms  "
                f"slow (at ms: over ms) {len(slow)}: {' '.join(slow[:16])}"
            )
        pooled = [dt * 1000 for seq in seqs for _, dt in seq]
        print(
            f"{arm:14s} median of repeats p50 {statistics.median(p50s):.2f} p99 {statistics.median(p99s):.2f} ms; "
            f"pooled over {len(pooled)}: p50 {pct(pooled, 50):.2f} p99 {pct(pooled, 99):.2f} ms, "
            f"slow {sum(x > args.slow_ms for x in pooled)}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(runs))


if __name__ == "__main__":
    main()
