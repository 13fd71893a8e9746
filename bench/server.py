"""Server scheduling benchmark: a fixed-time stub model, N saturating robots through the real router.

Prints achieved chunks/s vs the ideal 1/t, p50/p99 queue wait, Jain fairness over per-robot chunk
counts, and superseded counts. Run: `.venv/bin/python bench/server.py --t 0.02 --seconds 5`.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid

import numpy as np

from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES, FakeRobot
from lerobot_policy_remote.testing.procs import Router
from lerobot_policy_remote.wire.data import ActionChunkMsg
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session


def jain(xs: list[float]) -> float:
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def run(router: Router, n: int, t: float, seconds: float, shm: bool) -> dict:
    settings = ZenohSettings(mode="client", connect_endpoints=[router.endpoint], shared_memory=shm)
    manifest = Manifest(
        model=ModelSpec(repo_or_path="stub"),
        default_task=f"bench {uuid.uuid4().hex[:6]}",
        max_sessions=max(n, 1),
        health_port=0,
        warmup_inferences=0,
        zenoh=settings,
    )
    server = PolicyServer(
        manifest, backend=StubBackend(t, SIM_ARM_ACTION_NAMES, max_sessions=n), progress=lambda s: None
    ).start()
    sessions = [open_session(settings) for _ in range(n)]
    robots = [FakeRobot(z, server.keys, f"bench-{i}") for i, z in enumerate(sessions)]
    for r in robots:
        assert r.open(server.replica).ok
    stop = threading.Event()
    waits: list[float] = []
    counts = [0] * n
    superseded = [0] * n

    def saturate(i: int) -> None:
        r = robots[i]
        r.send(np.full(6, float(i)))
        while not stop.is_set():
            try:
                h, b = r.recv(5)
            except Exception:
                r.send(np.full(6, float(i)))
                continue
            if isinstance(b, ActionChunkMsg):
                if not stop.is_set():
                    counts[i] += 1
                    waits.append(b.queue_wait_ms)
                    superseded[i] += b.superseded_seqs
                r.send(np.full(6, float(i)))  # saturating: a new request as soon as a chunk lands
                r.send(np.full(6, float(i)))  # and one more, so the mailbox always holds work (newest wins)

    threads = [threading.Thread(target=saturate, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    time.sleep(1.0)  # settle
    c0, t0 = list(counts), time.perf_counter()
    w0 = len(waits)
    time.sleep(seconds)
    c1, t1 = list(counts), time.perf_counter()
    w = sorted(waits[w0:])
    stop.set()
    for th in threads:
        th.join(6)
    server.stop()
    for z in sessions:
        z.close()
    per = [b - a for a, b in zip(c0, c1, strict=True)]
    rate = sum(per) / (t1 - t0)
    return {
        "n": n,
        "chunks_per_s": rate,
        "ideal": 1 / t,
        "ratio": rate * t,
        "qwait_p50_ms": w[len(w) // 2] if w else 0.0,
        "qwait_p99_ms": w[min(len(w) - 1, int(len(w) * 0.99))] if w else 0.0,
        "jain": jain(per),
        "superseded": sum(superseded),
        "per_robot": per,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--t", type=float, default=0.02, help="stub inference time in seconds")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--n", type=int, nargs="*", default=[1, 2, 4, 8, 16])
    ap.add_argument("--shm", action="store_true", help="leave zenoh shared memory on (off resembles a real network)")
    args = ap.parse_args()
    router = Router().start()
    try:
        print(
            f"stub inference t={args.t * 1000:.0f} ms, ideal {1 / args.t:.1f} chunks/s, "
            f"window {args.seconds:.0f} s, shm={args.shm}"
        )
        print(
            f"{'N':>3} {'chunks/s':>9} {'of 1/t':>7} {'qwait p50':>10} {'qwait p99':>10} {'Jain':>6} "
            f"{'superseded':>11}  per-robot"
        )
        for n in args.n:
            r = run(router, n, args.t, args.seconds, args.shm)
            print(
                f"{r['n']:>3} {r['chunks_per_s']:>9.1f} {r['ratio'] * 100:>6.1f}% {r['qwait_p50_ms']:>8.1f}ms "
                f"{r['qwait_p99_ms']:>8.1f}ms "
                f"{r['jain']:>6.3f} {r['superseded']:>11}  {r['per_robot']}",
                flush=True,
            )
    finally:
        router.stop()


if __name__ == "__main__":
    main()
