"""A 30 fps robot for the fault and constrained-link runs: `python -m bench.peers.robot_loop SYSTEM --target ...`.

The control thread pops one action per tick and never waits on the network; an inference thread
asks for a new chunk when half the queue is left (legacy's default threshold) and replaces the queue
with the new chunk, skipping the steps already elapsed since its observation. Every system's client
runs unchanged inside it; when a client raises, the robot rebuilds it every 0.2 s (the wrapper a user
adds; openpi's and GR00T's clients never reconnect by themselves). It prints one JSON line with
monotonic timestamps (the system-wide clock), so the orchestrator can line them up with the fault.
"""

from __future__ import annotations

import argparse
import collections
import logging
import threading
import time
from typing import Any

from .client import make_client
from .procs import emit
from .workload import frames, state

FPS = 30.0


class Robot:
    def __init__(self, system: str, target: str, quality: int, timeout_s: float) -> None:
        self.system, self.target, self.quality, self.timeout_s = system, target, quality, timeout_s
        self.queue: collections.deque[tuple[float, float]] = collections.deque()  # (observation time, its chunk's arrival lag)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.executed: list[tuple[float, float, float]] = []  # (tick, observation age, how late its chunk arrived)
        self.dry_ticks: list[float] = []
        self.chunks: list[tuple[float, float]] = []  # (observation time, arrival time)
        self.errors: list[tuple[float, str]] = []
        self.reconnects: list[float] = []
        self.first_chunk: float | None = None
        self.started = time.monotonic()
        self.client: Any = None

    def control(self) -> None:
        tick = time.monotonic()
        while not self.stop.is_set():
            tick += 1 / FPS
            time.sleep(max(0.0, tick - time.monotonic()))
            now = time.monotonic()
            with self.lock:
                item = self.queue.popleft() if self.queue else None
            if item is None:
                if self.first_chunk is not None:
                    self.dry_ticks.append(now)
            else:
                self.executed.append((now, now - item[0], item[1]))

    def infer_loop(self) -> None:
        imgs, i = frames(), 0
        while not self.stop.is_set():
            if self.client is None:
                try:
                    self.client = make_client(self.system, self.target, 0, self.quality, self.timeout_s)
                    if self.errors:
                        self.reconnects.append(time.monotonic())
                except Exception as exc:
                    self.errors.append((time.monotonic(), f"open: {type(exc).__name__}"))
                    time.sleep(0.2)
                    continue
            with self.lock:
                left = len(self.queue)
            if left > 25 and self.first_chunk is not None:
                time.sleep(0.005)
                continue
            i += 1
            t_obs = time.monotonic()
            try:
                chunk = self.client.infer(imgs, state(i))
            except Exception as exc:
                self.errors.append((time.monotonic(), f"{type(exc).__name__}: {str(exc)[:80]}"))
                try:
                    self.client.close()
                except Exception:
                    pass
                self.client = None
                continue
            now = time.monotonic()
            skip = int((now - t_obs) * FPS)
            with self.lock:
                self.queue = collections.deque((t_obs, now - t_obs) for _ in range(skip, len(chunk)))
            self.chunks.append((t_obs, now))
            if self.first_chunk is None:
                self.first_chunk = now

    def run(self, seconds: float) -> dict[str, Any]:
        threading.Thread(target=self.control, daemon=True).start()
        threading.Thread(target=self.infer_loop, daemon=True).start()
        while self.first_chunk is None and time.monotonic() - self.started < 120:
            time.sleep(0.01)
        print(f"PEER STEADY {time.monotonic():.6f}", flush=True)
        time.sleep(seconds)
        self.stop.set()
        return {
            "system": self.system, "started": self.started, "first_chunk": self.first_chunk, "ended": time.monotonic(),
            "executed": self.executed, "dry_ticks": self.dry_ticks, "chunks": self.chunks,
            "errors": self.errors[:200], "reconnects": self.reconnects,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("system", choices=["ours", "legacy", "openpi", "gr00t"])
    ap.add_argument("--target", required=True)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to run after the first chunk")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--timeout", type=float, default=None,
                    help="how long the robot waits for a chunk before re-sending: ours 1 s (the engine re-sends the newest "
                         "observation; request ids drop late replies); legacy effectively never, as its real client; "
                         "openpi and GR00T clients have no timeout at all")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.disable(logging.INFO)
    timeout = args.timeout if args.timeout is not None else (1.0 if args.system == "ours" else 60.0)
    out = Robot(args.system, args.target, args.quality, timeout).run(args.seconds)
    emit(out)


if __name__ == "__main__":
    main()
