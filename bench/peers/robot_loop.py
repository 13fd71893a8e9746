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
from .workload import PeerClient, frames, state

FPS = 30.0


class Robot:
    def __init__(self, system: str, target: str, quality: int, timeout_s: float, resize: int = 0) -> None:
        self.system, self.target, self.quality, self.timeout_s, self.resize = system, target, quality, timeout_s, resize
        self.queue: collections.deque[tuple[float, float]] = (
            collections.deque()
        )  # (observation time, its chunk's arrival lag)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.executed: list[tuple[float, float, float]] = []  # (tick, observation age, how late its chunk arrived)
        self.dry_ticks: list[float] = []
        self.chunks: list[tuple[float, float]] = []  # (observation time, arrival time)
        self.errors: list[tuple[float, str]] = []
        self.reconnects: list[float] = []
        self.first_chunk: float | None = None
        self.started = time.monotonic()
        self.client: PeerClient | None = None

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
                    self.client = make_client(
                        self.system, self.target, 0, self.quality, self.timeout_s, resize=self.resize
                    )
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
            "system": self.system,
            "started": self.started,
            "first_chunk": self.first_chunk,
            "ended": time.monotonic(),
            "executed": self.executed,
            "dry_ticks": self.dry_ticks,
            "chunks": self.chunks,
            "errors": self.errors[:200],
            "reconnects": self.reconnects,
        }


class EngineRobot:
    """Ours: the product's engine with its own network worker, as `lerobot-rollout --inference.type=remote`
    runs it: the control thread notifies the observation and takes `get_action()` every tick; the engine
    decides when to ask, merges, fails over on the server's liveliness token and never re-sends.

    The result has Robot's shape: "errors" are the engine leaving STREAMING (the robot noticed), "reconnects"
    its handshakes after the first; a chunk's arrival lag is its round trip from the engine's own chunk log line.
    """

    def __init__(self, target: str, quality: int, timeout_s: float, shm: bool = False) -> None:
        from .ours_peer import engine

        self.e = engine(
            target, 0, quality, timeout_s, buffer_time_s=25 / FPS, worker=True, shm=shm
        )  # asks at half a chunk, as Robot
        self.stop = threading.Event()
        self.executed: list[tuple[float, float, float]] = []
        self.dry_ticks: list[float] = []
        self.first_chunk: float | None = None
        self.started = time.monotonic()
        self._lag: dict[tuple[str, int], float] = {}
        self._watch_chunks()

    def _watch_chunks(self) -> None:
        """The engine logs every merged chunk with its session, seq and rtt: record each chunk's arrival lag."""
        from lerobot_policy_remote.engine import replies

        lag = self._lag

        class Chunks(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                args = record.args
                if isinstance(args, tuple) and len(args) >= 5:
                    fields: tuple[Any, ...] = args  # the chunk line's %-arguments: (session, seq, ..., rtt ms)
                    lag[(str(fields[0]), int(fields[1]))] = float(fields[4]) / 1000.0

        replies.chunk_logger.addHandler(Chunks())
        replies.chunk_logger.setLevel(logging.DEBUG)  # the lines are DEBUG unless log_every_chunk
        replies.chunk_logger.propagate = False

    def control(self) -> None:
        from lerobot_policy_remote.engine import provenance

        from .ours_peer import observation

        imgs, tick, i = frames(), time.monotonic(), 0
        while not self.stop.is_set():
            tick += 1 / FPS
            time.sleep(max(0.0, tick - time.monotonic()))
            i += 1
            self.e.notify_observation(observation(imgs, state(i)))
            act = self.e.get_action()
            now = time.monotonic()
            p = provenance.latest() if act is not None else None
            if p is None:  # the fallback (hold) or nothing yet: not an executed chunk action
                if self.first_chunk is not None:
                    self.dry_ticks.append(now)
                continue
            if self.first_chunk is None:
                self.first_chunk = now
            self.executed.append((now, p.source_age_s, self._lag.get((p.session_id, p.seq_id), p.source_age_s)))

    def run(self, seconds: float) -> dict[str, Any]:
        threading.Thread(target=self.control, daemon=True).start()
        while self.first_chunk is None and time.monotonic() - self.started < 120:
            time.sleep(0.01)
        print(f"PEER STEADY {time.monotonic():.6f}", flush=True)
        time.sleep(seconds)
        self.stop.set()
        hist = list(self.e.states.history)
        self.e.stop()
        left = [(t, f"{st.value}: {why}") for t, st, why in hist if st.value not in ("STREAMING", "CONNECTING")]
        handshakes = [t for t, st, _ in hist if st.value == "CONNECTING"]
        return {
            "system": "ours",
            "started": self.started,
            "first_chunk": self.first_chunk,
            "ended": time.monotonic(),
            "executed": self.executed,
            "dry_ticks": self.dry_ticks,
            "chunks": [],
            "errors": left[:200],
            "reconnects": handshakes[1:],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("system", choices=["ours", "legacy", "openpi", "gr00t"])
    ap.add_argument("--target", required=True)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to run after the first chunk")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--shm", action="store_true", help="ours: zenoh shared memory on (the defaults on one machine)")
    ap.add_argument("--resize", type=int, default=0, help="openpi: resize_with_pad to NxN on the robot")
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="how long the robot waits for a chunk: ours 1 s (the engine's request timeout; its next request "
        "carries the newest observation; request ids drop late replies); legacy effectively never, as its "
        "real client; openpi and GR00T clients have no timeout at all",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.system != "ours":  # ours reads the engine's INFO chunk lines (its own logger, not printed)
        logging.disable(logging.INFO)
    timeout = args.timeout if args.timeout is not None else (1.0 if args.system == "ours" else 60.0)
    if args.system == "ours":
        out = EngineRobot(args.target, args.quality, timeout, args.shm).run(args.seconds)
    else:
        out = Robot(args.system, args.target, args.quality, timeout, args.resize).run(args.seconds)
    emit(out)


if __name__ == "__main__":
    main()
