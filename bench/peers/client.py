"""One measurement as its own process: `python -m bench.peers.client SYSTEM --target ... [--robots N]`.

Closed loop: each robot sends an observation, waits for its chunk, checks the chunk answers *its*
observation (the stub's first row is the robot's own state), repeats. Prints one JSON line: round
trips, this process's CPU and the server's CPU per request, requests/s, errors, wrong chunks.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any

import numpy as np

from .procs import emit
from .workload import CHUNK, PeerClient, frames, pct, proc_cpu_s, self_cpu_s, state


def make_client(
    system: str,
    target: str,
    robot: int,
    quality: int,
    timeout_s: float,
    act_path: str = "",
    resize: int = 0,
    shm: bool = False,
    vla: bool = False,
    rtc: bool = True,
) -> PeerClient:
    if system == "ours":
        from .ours_peer import Client as OursClient

        return OursClient(target, robot, quality=quality, timeout_s=timeout_s, shm=shm, rtc=vla and rtc)
    host, port = target.rsplit(":", 1)
    if system == "legacy":
        from .legacy_peer import Client as LegacyClient

        return LegacyClient(host, int(port), robot, act_path=act_path, timeout_s=timeout_s)
    if system == "openpi":
        from .openpi_peer import Client as OpenpiClient

        return OpenpiClient(host, int(port), robot, resize=resize)
    from .gr00t_peer import Client as Gr00tClient

    return Gr00tClient(host, int(port), robot)


def run(
    system: str,
    target: str,
    robots: int,
    warmup: int,
    requests: int,
    seconds: float,
    quality: int,
    server_pids: list[int],
    timeout_s: float,
    act_path: str = "",
    resize: int = 0,
    shm: bool = False,
    vla: bool = False,
    rtc: bool = True,
) -> dict[str, Any]:
    imgs = frames()
    clients: list[PeerClient] = []
    errors: list[str] = []
    t_open = time.perf_counter()
    for i in range(robots):
        try:
            targets = target.split(",")  # several: robot i uses server i mod len (the N-process alternative)
            clients.append(
                make_client(system, targets[i % len(targets)], i, quality, timeout_s, act_path, resize, shm, vla, rtc)
            )
        except Exception as exc:
            errors.append(f"robot {i} open: {type(exc).__name__}: {exc}")
    open_s = time.perf_counter() - t_open
    rtts: list[list[float]] = [[] for _ in clients]
    wrong = [0] * len(clients)
    stop = threading.Event()
    measuring = threading.Event()

    def loop(k: int, c: PeerClient) -> None:
        i = k * 1_000_000
        n = 0
        while not stop.is_set() and (seconds > 0 or n < warmup + requests):
            i += 1
            st = state(i)
            t0 = time.perf_counter()
            try:
                chunk = c.infer(imgs, st)
            except Exception as exc:
                errors.append(f"robot {k}: {type(exc).__name__}: {str(exc)[:120]}")
                if len(errors) > 50 or seconds <= 0:
                    return
                continue
            dt = time.perf_counter() - t0
            n += 1
            if seconds > 0 and not measuring.is_set():
                continue
            if seconds <= 0 and n <= warmup:
                continue
            rtts[k].append(dt)
            model = act_path or vla  # a real model's chunk: its shape and values are checked, not whose it is
            if (
                np.asarray(chunk).shape != CHUNK
                or not np.isfinite(chunk).all()
                or (not model and not np.allclose(np.asarray(chunk)[0], st, atol=getattr(c, "atol", 1e-4)))
            ):
                wrong[k] += 1

    threads = [threading.Thread(target=loop, args=(k, c), daemon=True) for k, c in enumerate(clients)]
    if seconds > 0:  # scaling: everybody runs; the window opens after a settle time
        for th in threads:
            th.start()
        time.sleep(min(1.0, seconds / 2))
    else:  # latency: warm up first (inside the loop), measure CPU around the whole closed loop
        pass
    cpu0, srv0 = self_cpu_s(), [proc_cpu_s(p) for p in server_pids]
    t0 = time.perf_counter()
    measuring.set()
    if seconds > 0:
        time.sleep(seconds)
        stop.set()
    else:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout_s * (warmup + requests))
    wall = time.perf_counter() - t0
    cpu1, srv1 = self_cpu_s(), [proc_cpu_s(p) for p in server_pids]
    stop.set()
    for th in threads:
        th.join(timeout_s)
    done = sum(len(r) for r in rtts)
    total = done + (warmup * len(clients) if seconds <= 0 else 0)
    rtc_row: dict[str, Any] = {  # not `rtc`: that is the robots' setting, a bool
        "rtc_active": any(getattr(c, "rtc_active", False) for c in clients),
        "rtc_prefixed": sum(getattr(c, "prefixed", 0) for c in clients),
    }
    if vla and system == "ours":  # what our server says of its passes: batching as by default, robots per pass
        from .ours_peer import discover

        try:
            st = discover(target)
            rtc_row.update(
                server_rtc=st.supports_rtc, server_max_batch=st.max_batch, server_batch_mean=st.batch_size_mean
            )
        except Exception as exc:
            errors.append(f"status: {type(exc).__name__}: {exc}")
    for c in clients:
        try:
            c.close()
        except Exception:
            pass
    all_rtt = [x for r in rtts for x in r]
    per = [len(r) / wall for r in rtts]
    return {
        "system": system,
        "robots": robots,
        "opened": len(clients),
        "open_s": open_s,
        "requests": done,
        "wall_s": wall,
        "req_per_s": done / wall if wall > 0 else 0.0,
        "per_robot_req_s": per,
        "rtt_p50_ms": pct(all_rtt, 50) * 1000,
        "rtt_p99_ms": pct(all_rtt, 99) * 1000,
        "client_cpu_ms": (cpu1 - cpu0) * 1000 / max(1, total),
        "server_cpu_ms": sum(b - a for a, b in zip(srv0, srv1, strict=True)) * 1000 / max(1, total),
        "errors": len(errors),
        "error_samples": errors[:5],
        "wrong_chunks": sum(wrong),
        "cross_delivered": sum(getattr(c, "cross", 0) for c in clients),
        "resends": sum(getattr(c, "resends", 0) for c in clients),
        **rtc_row,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("system", choices=["ours", "legacy", "openpi", "gr00t"])
    ap.add_argument(
        "--target",
        required=True,
        help="host:port (comma-separated for one server per robot), or a zenoh endpoint for ours",
    )
    ap.add_argument("--robots", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=0.0, help="scaling mode: run all robots for this long")
    ap.add_argument("--quality", type=int, default=90, help="ours: JPEG quality, 0 = raw")
    ap.add_argument(
        "--resize",
        type=int,
        default=0,
        help="openpi: resize_with_pad every frame to NxN on the robot, as openpi's docs advise",
    )
    ap.add_argument("--shm", action="store_true", help="ours: zenoh shared memory on (the defaults on one machine)")
    ap.add_argument("--server-pid", type=int, action="append", default=[])
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument(
        "--act", default="", help="the server runs this ACT checkpoint: check chunk shape only (legacy sends the path)"
    )
    ap.add_argument(
        "--vla",
        action="store_true",
        help="the server runs the pi0 checkpoint: check chunk shape only; ours asks for RTC",
    )
    ap.add_argument(
        "--no-rtc", action="store_true", help="ours with --vla: the robot asks for no RTC (what the peers serve)"
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.disable(logging.INFO)
    out = run(
        args.system,
        args.target,
        args.robots,
        args.warmup,
        args.requests,
        args.seconds,
        args.quality,
        args.server_pid,
        args.timeout,
        args.act,
        args.resize,
        args.shm,
        args.vla,
        not args.no_rtc,
    )
    emit(out)


if __name__ == "__main__":
    main()
