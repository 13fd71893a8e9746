"""Cross-robot micro-batching benchmark: batching off vs on (the default derived wait window) vs opportunistic
(max_wait_ms 0, never wait), N = 1..16 robots.

The real PolicyServer worker, scheduler, checks and backends, driven in-process: each robot is a thread
that deposits an encoded observation (JPEG images, as on the wire) into its session's mailbox and sends
the next one as soon as its chunk is published, so the scheduler and the model are all that is measured
(the network path is `bench/server.py`'s job). Two models:
  (a) a stub whose pass over B robots takes a + b*B seconds (shows the scheduler reaching the model bound);
  (b) a small real ACT on CPU, or `--device cuda` (two 96x128 cameras, 6-dim state, chunk 50, random weights).
The model bound at N is min(N, max_batch) / t(min(N, max_batch)), with t measured in the same run by
calling the backend directly. Prints one table per model; the last line is
`batching speedup at N=8: <x> (model bound <y>, <x/y> of it)` for the real ACT with the default window.

Run: `.venv/bin/python bench/batching.py` or `--quick` (cells last at least 6 passes at B=8, so a slow
box makes the run longer).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_policy_remote.server.manifest import BatchingSpec, Manifest, ModelSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.sessions import Mail, Session, new_session_id
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.wire.data import ObservationMsg, encode_observation
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION

ACTIONS = [f"joint{i}.pos" for i in range(6)]
CAMERAS = {"front": (96, 128), "wrist": (96, 128)}
NS = (1, 2, 4, 8, 16)
MAX_BATCH = 8


def jain(xs: list[float]) -> float:
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


class Inbox:
    """Stands in for a session's zenoh publisher: the worker's put wakes the waiting robot thread."""

    def __init__(self) -> None:
        self.got = threading.Event()

    def put(self, payload: bytes, attachment: bytes | None = None) -> None:
        self.got.set()


def save_act(path: Path, device: str = "cpu") -> Path:
    """A small random-weight ACT checkpoint saved like a training run (config, weights, processors)."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    feats = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,))}
    feats |= {f"observation.images.{c}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w)) for c, (h, w) in CAMERAS.items()}
    cfg = ACTConfig(device=device, input_features=feats, output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
                    chunk_size=50, n_action_steps=50, pretrained_backbone_weights=None, dim_model=64, n_heads=2,
                    dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1, use_vae=False, push_to_hub=False)
    torch.manual_seed(0)
    unit = {"mean": torch.zeros(6), "std": torch.full((6,), 20.0), "min": torch.full((6,), -60.0), "max": torch.full((6,), 60.0)}
    image = {"mean": torch.full((3, 1, 1), 0.45), "std": torch.full((3, 1, 1), 0.22), "min": torch.zeros(3, 1, 1), "max": torch.ones(3, 1, 1)}
    stats = {"observation.state": unit, "action": unit} | {f"observation.images.{c}": image for c in CAMERAS}
    ACTPolicy(cfg).eval().save_pretrained(path)
    for pipeline in make_pre_post_processors(cfg, dataset_stats=stats):
        pipeline.save_pretrained(path)
    return path


def observation(rng: np.random.Generator, cameras: dict[str, tuple[int, int]]) -> ObservationMsg:
    images = {f"observation.images.{c}": rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for c, (h, w) in cameras.items()}
    return ObservationMsg({"observation.state": rng.uniform(-50, 50, 6).astype(np.float32)}, images)


def model_time(backend: Any, b: int, obs: ObservationMsg, reps: int) -> float:
    """Median seconds of one backend pass over b robots (the model's own time, no scheduler)."""
    states = [backend.new_session_state() for _ in range(b)]
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        if b == 1:
            backend.infer(states[0], obs, None)
        else:
            backend.infer_batch([(s, obs, None) for s in states])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(backend: Any, n: int, batching: BatchingSpec, seconds: float, cameras: dict[str, tuple[int, int]], settle: float) -> dict[str, float]:
    """N saturating robots against the real worker for `seconds`; returns chunks/s, RTT p50/p99, Jain, mean batch."""
    manifest = Manifest(model=ModelSpec(repo_or_path="bench"), default_task=f"bench {uuid.uuid4().hex[:6]}", max_sessions=max(n, 1),
                        health_port=0, warmup_inferences=0, batching=batching)
    server = PolicyServer(manifest, backend=backend, progress=lambda s: None)
    rng = np.random.default_rng(n)
    payloads = [encode_observation(observation(rng, cameras)) for _ in range(n)]
    inboxes = [Inbox() for _ in range(n)]
    sessions = []
    for i in range(n):
        s = Session(new_session_id(), f"robot-{i}", backend.new_session_state(), None, SCHEMA_VERSION)
        s.pub = inboxes[i]
        server.registry.add(s)
        sessions.append(s)
    worker = threading.Thread(target=server.worker.run, name="bench-worker", daemon=True)
    worker.start()
    stop, measuring = threading.Event(), threading.Event()
    rtts: list[list[float]] = [[] for _ in range(n)]

    def robot(i: int) -> None:
        seq = 0
        while not stop.is_set():
            seq += 1
            att = Header(SCHEMA_VERSION, MsgType.OBS, seq, 0, time.monotonic_ns(), 1).pack()
            inboxes[i].got.clear()
            t0 = time.perf_counter()
            sessions[i].mailbox.deposit(Mail(payloads[i], att, t0, len(payloads[i])))
            server.worker.wake.set()
            if inboxes[i].got.wait(30) and measuring.is_set() and not stop.is_set():
                rtts[i].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=robot, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(settle)  # warm-up: let the ring reach its steady state
    passes_before = len(server.worker.stats.recent())
    measuring.set()
    t_start = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - t_start
    stop.set()
    server.lifecycle.stop()
    server.worker.wake.set()
    deadline = time.monotonic() + 30
    for t in threads:  # a robot waiting for a chunk the stopped worker will never send is let go at once
        while t.is_alive() and time.monotonic() < deadline:
            for ib in inboxes:
                ib.got.set()
            t.join(0.02)
    worker.join(30)
    counts = [len(r) for r in rtts]
    flat = sorted(x for r in rtts for x in r)
    recent = server.worker.stats.recent()[passes_before:] or server.worker.stats.recent()
    return {
        "chunks_s": sum(counts) / elapsed,
        "p50_ms": flat[len(flat) // 2] * 1e3 if flat else float("nan"),
        "p99_ms": flat[min(len(flat) - 1, int(len(flat) * 0.99))] * 1e3 if flat else float("nan"),
        "jain": jain([float(c) for c in counts]),
        "mean_batch": sum(b for b, _ in recent) / len(recent) if recent else 0.0,
    }


def table(name: str, backend: Any, seconds: float, reps: int, cameras: dict[str, tuple[int, int]]) -> dict[int, tuple[float, float, float]]:
    """Prints one model's table; returns {N: (speedup on/off, speedup opportunistic/off, bound(N)/bound(1))}."""
    obs = observation(np.random.default_rng(0), cameras)
    def times() -> None:  # on a serving thread, as the worker runs the model (server/torch_threads.py)
        backend.bind_serving_thread()
        t.update({b: model_time(backend, b, obs, reps) for b in sorted({min(n, MAX_BATCH) for n in NS})})

    t: dict[int, float] = {}
    th = threading.Thread(target=times, name="bench-model-time")
    th.start()
    th.join()
    # A cell spans many passes even when the shared box slows the model down.
    cell, settle = max(seconds, 6 * t[MAX_BATCH]), max(0.5, 2 * t[MAX_BATCH])
    print(f"\n== {name}: model time per pass " + ", ".join(f"B={b}: {v * 1e3:.1f} ms" for b, v in t.items())
          + f"; {cell:.1f} s per cell")
    print(f"{'N':>3} {'mode':>4} {'chunks/s':>9} {'bound':>7} {'of bound':>8} {'p50 ms':>8} {'p99 ms':>8} {'Jain':>6} {'batch':>6}")
    out = {}
    for n in NS:
        rows = {}
        for mode, spec in (("off", BatchingSpec(1)), ("on", BatchingSpec(MAX_BATCH)), ("opp", BatchingSpec(MAX_BATCH, 0.0))):
            b = min(n, spec.max_batch)
            bound = b / t[b]
            r = rows[mode] = run(backend, n, spec, cell, cameras, settle)
            print(f"{n:>3} {mode:>4} {r['chunks_s']:>9.1f} {bound:>7.1f} {r['chunks_s'] / bound:>8.2f} {r['p50_ms']:>8.1f} "
                  f"{r['p99_ms']:>8.1f} {r['jain']:>6.3f} {r['mean_batch']:>6.2f}")
        off = rows["off"]["chunks_s"]
        out[n] = (rows["on"]["chunks_s"] / off, rows["opp"]["chunks_s"] / off, (min(n, MAX_BATCH) / t[min(n, MAX_BATCH)]) * t[1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs (about 1 min in all)")
    ap.add_argument("--seconds", type=float, default=None, help="measuring window per (N, mode)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a small shared box)")
    ap.add_argument("--device", default="cpu", help="where the real ACT runs (cuda on a GPU box)")
    ap.add_argument("--stub-a", type=float, default=0.010, help="stub pass time a + b*B: a (s)")
    ap.add_argument("--stub-b", type=float, default=0.010, help="stub pass time a + b*B: b (s)")
    args = ap.parse_args()
    seconds = args.seconds or (1.5 if args.quick else 4.0)
    reps = 5 if args.quick else 15
    print(f"batching bench: N={list(NS)}; off = max_batch 1; on = max_batch {MAX_BATCH}, default window (up to half a "
          f"pass while fewer robots are ready than active); opp = max_batch {MAX_BATCH}, max_wait_ms 0 (opportunistic); "
          f">= {seconds:.1f} s per cell, torch threads {args.threads}")
    stub = StubBackend(args.stub_a + args.stub_b, ACTIONS, chunk_size=50, max_sessions=max(NS), per_robot_s=args.stub_b)
    table(f"stub a={args.stub_a * 1e3:.0f} ms b={args.stub_b * 1e3:.0f} ms", stub, seconds, reps, {})

    import torch

    from lerobot_policy_remote.server.backend import LerobotBackend

    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = save_act(Path(tmp), args.device)
        manifest = Manifest(model=ModelSpec(repo_or_path=str(ckpt), device=args.device), default_task="bench", max_sessions=max(NS), health_port=0)
        act = LerobotBackend(manifest, progress=lambda s: None)
        act.warmup(3, lambda s: None)
        res = table(f"ACT (2x 96x128 cameras, chunk 50) on {args.device}", act, seconds, reps, CAMERAS)
    speedup, speedup_opp, bound = res[8]
    print(f"with max_wait_ms 0 (opportunistic): speedup at N=8: {speedup_opp:.2f}")
    print(f"batching speedup at N=8: {speedup:.2f} (model bound {bound:.2f}, {speedup / bound:.2f} of it)")


if __name__ == "__main__":
    main()
