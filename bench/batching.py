"""Cross-robot micro-batching benchmark: batching off vs on (the default derived wait window) vs opportunistic
(max_wait_ms 0, never wait), N = 1..16 robots.

The real PolicyServer worker, scheduler, decode pool, checks and backends, driven in-process: each robot is a thread
that delivers an encoded observation (JPEG images, as on the wire) through the server's own deposit path (its
session's mailbox, the decode pool while the worker is busy) and sends the next one as soon as its chunk is
published, so the server and the model are all that is measured (the network path is `bench/server.py`'s job).
Three models (`--models`, default all):
  stub: a pass over B robots takes a + b*B seconds (shows the scheduler reaching the model bound);
  act:  a small real ACT on CPU, or `--device cuda` (two 96x128 cameras, 6-dim state, chunk 50, random weights);
  vla:  a tiny SmolVLA (`testing.vla.save_tiny_smolvla`: one 64x64 camera, 6-dim state, chunk 50, 3 flow steps,
        random weights) served with real-time chunking on. Each robot sends what a robot with RTC sends: its
        session asks for RTC with its own execution horizon (6, 8, 10, 12 by robot), and each observation carries
        its own inference delay (1, 2, 3 steps by robot) and the unexecuted tail of its previous chunk, cut to
        its horizon by the robot's own code (`engine.request`), so robots with different prefixes share a pass.
        `--vla-model smolvla` or `pi0` (with `--device cuda`) serves the stock-size architecture instead, random
        weights built offline (SmolVLM2-500M's first 16 layers at 512 px; pi0's gemma_2b + gemma_300m at 224 px in
        bfloat16, 10 flow steps), and a line gives its GPU memory.
The model bound at N is min(N, max_batch) / t(min(N, max_batch)), with t measured in the same run by
calling the backend directly (for the VLA with RTC batches of that size, each row its robot's prefix, delay
and horizon). Prints one table per model; the last lines are
`batching speedup at N=8: <x> (model bound <y>, <x/y> of it)` for the real ACT with the default window and
`VLA batching speedup at N=8 with RTC: <x> (model bound <y>, <x/y> of it)` for the VLA. The VLA run checks
that robots shared passes (the worker's batch sizes) and that the guidance ran on their prefixes.

Run: `.venv/bin/python bench/batching.py` or `--quick` (cells last at least 20 passes at B=8, so a slow
box makes the run longer); `--models vla` runs the VLA table alone. `--compile off|auto|on` is the real models'
`model.compile` (auto: compiled on CUDA); `--models engine` times the compiled pass against the eager one per
bucket for the ACT and the VLA (eager, auto and on rows, compile time, GPU memory: `bench/engine.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `python bench/batching.py`

from bench.models import (  # noqa: E402
    ACTIONS,
    CAMERAS,
    RTC_DELAYS,
    RTC_HORIZONS,
    VLA_MODELS,
    VLA_TASK,
    left_over,
    observation,
    requests,
    robot_rtc,
    save_act,
    save_vla,
    with_prefix,
)
from lerobot_policy_remote.server.manifest import BatchingSpec, Manifest, ModelSpec  # noqa: E402
from lerobot_policy_remote.server.service import PolicyServer  # noqa: E402
from lerobot_policy_remote.server.sessions import Mail, Session, new_session_id  # noqa: E402
from lerobot_policy_remote.server.stub import StubBackend  # noqa: E402
from lerobot_policy_remote.wire.data import ObservationMsg, decode_chunk, encode_observation  # noqa: E402
from lerobot_policy_remote.wire.header import Header, MsgType  # noqa: E402
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION, RtcSettings  # noqa: E402

NS = (1, 2, 4, 8, 16)
MAX_BATCH = 8
MODELS = ("stub", "act", "vla", "engine")


def jain(xs: list[float]) -> float:
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


class Inbox:
    """Stands in for a session's zenoh publisher: the worker's put wakes the waiting robot thread."""

    def __init__(self) -> None:
        self.got = threading.Event()
        self.payload = b""

    def put(self, payload: bytes, attachment: bytes | None = None) -> None:
        self.payload = payload
        self.got.set()


class Feed:
    """What one robot sends without RTC: the same encoded observation every time (its session asks for no RTC)."""

    rtc: RtcSettings | None = None

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def next_payload(self) -> bytes:
        return self.payload

    def on_reply(self, payload: bytes) -> None:
        return None


class RtcFeed(Feed):
    """A robot with RTC: each observation carries its delay and the unexecuted tail of the chunk it was last sent."""

    def __init__(self, obs: ObservationMsg, rtc: RtcSettings, delay: int) -> None:
        self.obs, self.rtc, self.delay = obs, rtc, delay
        self.left: tuple[Any, Any] | None = None
        self.bad_replies = 0

    def next_payload(self) -> bytes:
        return encode_observation(with_prefix(self.obs, self.left, self.rtc.execution_horizon, self.delay))

    def on_reply(self, payload: bytes) -> None:
        try:
            chunk = decode_chunk(payload)
        except Exception:  # an event (a refusal, an inference error) instead of a chunk: counted, checked at the end
            self.bad_replies += 1
            return
        self.left = left_over(chunk.chunk_model, chunk.chunk_robot)


class GuidanceProbe:
    """Watches the backend's RTC guidance (`rtc_guidance.BatchedGuidance`) from outside: each pass's plan (rows with a
    prefix, their delays and horizons) and the denoise steps it guided with a prefix in force."""

    def __init__(self, guidance: Any) -> None:
        self.passes = self.rows = self.prefixed = self.guided_steps = self.max_guided_batch = self.max_settings = 0
        self.delays: set[int] = set()
        self.horizons: set[int] = set()
        self._active = False
        planned, denoise = guidance.planned, guidance.denoise_step

        @contextlib.contextmanager
        def counting_planned(plan: list[Any]) -> Iterator[None]:
            rows = [r for r in plan if r.prefix is not None]
            self.passes += 1
            self.rows += len(plan)
            self.prefixed += len(rows)
            self.max_guided_batch = max(self.max_guided_batch, len(rows))
            self.max_settings = max(self.max_settings, len({(r.inference_delay, r.execution_horizon) for r in rows}))
            self.delays.update(r.inference_delay for r in rows)
            self.horizons.update(r.execution_horizon for r in rows)
            self._active = bool(rows)
            try:
                with planned(plan):
                    yield
            finally:
                self._active = False

        def counting_denoise(*args: Any, **kwargs: Any) -> Any:
            if self._active:
                self.guided_steps += 1
            return denoise(*args, **kwargs)

        guidance.planned = counting_planned
        guidance.denoise_step = counting_denoise

    def counts(self) -> tuple[int, int]:
        return self.rows, self.prefixed


@dataclasses.dataclass
class Workload:
    """What the robots of one table send: plain observations, or (rtc) observations with RTC as a robot sends them."""

    cameras: dict[str, tuple[int, int]]
    rtc: bool = False

    def feeds(self, n: int) -> list[Feed]:
        rng = np.random.default_rng(n)
        if not self.rtc:
            return [Feed(encode_observation(observation(rng, self.cameras))) for _ in range(n)]
        return [RtcFeed(observation(rng, self.cameras), *robot_rtc(i)) for i in range(n)]

    def items(self, backend: Any, b: int) -> list[tuple[Any, ObservationMsg, RtcSettings | None]]:
        """b robots' requests for one direct backend pass (the model bound): `bench.models.requests`."""
        return requests(backend, b, self.cameras, self.rtc)


def model_time(backend: Any, items: list[tuple[Any, ObservationMsg, RtcSettings | None]], reps: int) -> float:
    """Median seconds of one backend pass over these robots' requests (the model's own time, no scheduler), after one
    untimed pass at this batch size (its first pass at a new shape allocates)."""
    times = []
    for k in range(reps + 1):
        t0 = time.perf_counter()
        if len(items) == 1:
            backend.infer(*items[0])
        else:
            backend.infer_batch(items)
        if k:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(
    backend: Any, n: int, batching: BatchingSpec, seconds: float, workload: Workload, settle: float
) -> dict[str, float]:
    """N saturating robots against the real worker for `seconds`; returns chunks/s, RTT p50/p99, Jain, mean batch."""
    manifest = Manifest(
        model=ModelSpec(repo_or_path="bench"),
        default_task=f"bench {uuid.uuid4().hex[:6]}",
        max_sessions=max(n, 1),
        health_port=0,
        warmup_inferences=0,
        batching=batching,
    )
    server = PolicyServer(manifest, backend=backend, progress=lambda s: None)
    feeds = workload.feeds(n)
    inboxes = [Inbox() for _ in range(n)]
    sessions = []
    for i in range(n):
        # the session as opened: with RTC, the robot's settings from its session open (what the worker hands the
        # backend)
        s = Session(new_session_id(), f"robot-{i}", backend.new_session_state(), feeds[i].rtc, SCHEMA_VERSION)
        s.pub = inboxes[i]
        server.registry.add(s)
        sessions.append(s)
    server.decoder.start()  # observations reach the worker as in the server: decoded ahead while it runs the model
    worker = threading.Thread(target=server.worker.run, name="bench-worker", daemon=True)
    worker.start()
    stop, measuring = threading.Event(), threading.Event()
    rtts: list[list[float]] = [[] for _ in range(n)]

    def robot(i: int) -> None:
        seq = 0
        while not stop.is_set():
            seq += 1
            payload = feeds[i].next_payload()  # the robot's own work (with RTC: its prefix), before the clock starts
            att = Header(SCHEMA_VERSION, MsgType.OBS, seq, 0, time.monotonic_ns(), 1).pack()
            inboxes[i].got.clear()
            t0 = time.perf_counter()
            server.deliver(sessions[i], Mail(payload, att, t0, len(payload)))
            if inboxes[i].got.wait(30) and not stop.is_set():
                if measuring.is_set():
                    rtts[i].append(time.perf_counter() - t0)
                feeds[i].on_reply(inboxes[i].payload)

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
    server.decoder.stop()
    counts = [len(r) for r in rtts]
    flat = sorted(x for r in rtts for x in r)
    recent = server.worker.stats.recent()[passes_before:] or server.worker.stats.recent()
    return {
        "chunks_s": sum(counts) / elapsed,
        "p50_ms": flat[len(flat) // 2] * 1e3 if flat else float("nan"),
        "p99_ms": flat[min(len(flat) - 1, int(len(flat) * 0.99))] * 1e3 if flat else float("nan"),
        "jain": jain([float(c) for c in counts]),
        "mean_batch": sum(b for b, _ in recent) / len(recent) if recent else 0.0,
        "errors": float(sum(s.errors for s in sessions) + sum(getattr(f, "bad_replies", 0) for f in feeds)),
    }


def table(
    name: str,
    backend: Any,
    seconds: float,
    reps: int,
    workload: Workload,
    probe: GuidanceProbe | None = None,
    device: str = "cpu",
) -> dict[int, dict[str, Any]]:
    """Prints one model's table; returns {N: {"on"/"opp": speedup over off, "bound": bound(N)/bound(1), "rows": cells}}.

    With a probe (RTC), a column says which fraction of the rows in the cell's passes carried a prefix. On a GPU, a
    line gives the memory the loaded model holds and the peak of a pass at each batch size."""
    cuda = device.startswith("cuda")
    if cuda:
        import torch

        resident = torch.cuda.memory_allocated()

    def times() -> None:  # on a serving thread, as the worker runs the model (server/torch_threads.py)
        backend.bind_serving_thread()
        for b in sorted({min(n, MAX_BATCH) for n in NS}):
            items = workload.items(backend, b)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            t[b] = model_time(backend, items, reps)
            if cuda:
                peak[b] = torch.cuda.max_memory_allocated()

    t: dict[int, float] = {}
    peak: dict[int, int] = {}
    th = threading.Thread(target=times, name="bench-model-time")
    th.start()
    th.join()
    if cuda:
        print(
            f"GPU memory: {resident / 2**30:.2f} GiB held by the loaded model; peak in a pass "
            + ", ".join(f"B={b}: {v / 2**30:.2f} GiB" for b, v in peak.items())
        )
    # A cell spans at least 20 passes, also when the model or the shared box is slow: each cell starts a fresh server,
    # whose batch window waits only once it has measured passes (docs/performance.md, the GPU rows).
    cell, settle = max(seconds, 20 * t[MAX_BATCH]), max(0.5, 2 * t[MAX_BATCH])
    print(
        f"\n== {name}: model time per pass "
        + ", ".join(f"B={b}: {v * 1e3:.1f} ms" for b, v in t.items())
        + f"; {cell:.1f} s per cell"
    )
    print(
        f"{'N':>3} {'mode':>4} {'chunks/s':>9} {'bound':>7} {'of bound':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'Jain':>6} {'batch':>6}" + (f" {'prefixed':>8}" if probe else "")
    )
    out = {}
    for n in NS:
        rows = {}
        for mode, spec in (
            ("off", BatchingSpec(1)),
            ("on", BatchingSpec(MAX_BATCH)),
            ("opp", BatchingSpec(MAX_BATCH, 0.0)),
        ):
            b = min(n, spec.max_batch)
            bound = b / t[b]
            before = probe.counts() if probe else (0, 0)
            r = rows[mode] = run(backend, n, spec, cell, workload, settle)
            extra = ""
            if probe:
                planned, prefixed = (x - y for x, y in zip(probe.counts(), before, strict=True))
                r["prefixed"] = prefixed / planned if planned else 0.0
                r["unprefixed"] = planned - prefixed
                extra = f" {r['prefixed']:>8.2f}"
            print(
                f"{n:>3} {mode:>4} {r['chunks_s']:>9.1f} {bound:>7.1f} {r['chunks_s'] / bound:>8.2f} "
                f"{r['p50_ms']:>8.1f} "
                f"{r['p99_ms']:>8.1f} {r['jain']:>6.3f} {r['mean_batch']:>6.2f}{extra}"
                + (f"  ERRORS {r['errors']:.0f}" if r["errors"] else "")
            )
        off = rows["off"]["chunks_s"]
        out[n] = {
            "on": rows["on"]["chunks_s"] / off,
            "opp": rows["opp"]["chunks_s"] / off,
            "bound": (min(n, MAX_BATCH) / t[min(n, MAX_BATCH)]) * t[1],
            "rows": rows,
        }
    return out


def vla_checks(res: dict[int, dict[str, Any]], probe: GuidanceProbe) -> None:
    """The VLA rows mean what they say: no robot got an error, robots with RTC shared passes, and the guidance ran on
    their prefixes with several robots' own delays and horizons in one pass."""
    errors = sum(r["errors"] for cells in res.values() for r in cells["rows"].values())
    print(
        f"RTC check: {probe.passes} passes planned, {probe.prefixed} of {probe.rows} rows with a prefix, up to "
        f"{probe.max_guided_batch} robots with a prefix in one pass "
        f"({probe.max_settings} different delay/horizon pairs), "
        f"delays {sorted(probe.delays)}, horizons {sorted(probe.horizons)}, {probe.guided_steps} denoise steps guided; "
        f"mean batch at N=8 on / opp {res[8]['rows']['on']['mean_batch']:.2f} / "
        f"{res[8]['rows']['opp']['mean_batch']:.2f}; "
        f"errors {errors:.0f}"
    )
    assert errors == 0, "a robot got an error instead of a chunk"
    assert probe.guided_steps > 0 and probe.prefixed > 0, "the backend never guided a pass with a prefix"
    assert probe.max_guided_batch > 1 and probe.max_settings > 1, "robots with RTC never shared a guided pass"
    assert probe.delays >= set(RTC_DELAYS) and probe.horizons >= set(RTC_HORIZONS), (
        "not every robot's own delay and horizon was applied"
    )
    for mode in ("on", "opp"):
        assert res[8]["rows"][mode]["mean_batch"] > 1.0, f"N=8 {mode}: robots with RTC were not batched"
    for n, cells in res.items():  # a robot's first request has no chunk behind it; every later one carries its prefix
        for mode, r in cells["rows"].items():
            assert r["unprefixed"] <= n, f"N={n} {mode}: {r['unprefixed']} rows without a prefix from {n} robots"


def engine_rows(args: argparse.Namespace) -> None:
    """`--models engine`: the compiled pass against the eager one per bucket (1 and MAX_BATCH) for the ACT and the VLA
    (`bench/engine.py`'s measurement: pass time eager / auto / on, compile time, GPU memory)."""
    from bench.engine import CHOICES, measure, summary

    spec = argparse.Namespace(
        device=args.device, buckets=[1, MAX_BATCH], reps=9 if args.quick else 21, split=True, choices=list(CHOICES)
    )
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        lines += summary(measure("ACT", save_act(Path(tmp) / "act", args.device), CAMERAS, False, spec))
        ckpt, cameras, title = save_vla(args.vla_model, Path(tmp) / args.vla_model, args.device)
        lines += summary(measure(title, ckpt, cameras, True, spec))
    print("\n".join(lines))


def compile_on_serving_thread(backend: Any) -> None:
    """The compiled pass for every bucket up to MAX_BATCH (`model.compile`), built as a server's worker builds it:
    on a thread that holds the worker's torch threads (each cell's server then finds it compiled)."""
    th = threading.Thread(
        target=lambda: (backend.bind_serving_thread(), backend.compile_engine(MAX_BATCH, print)), name="bench-compile"
    )
    th.start()
    th.join()
    print(f"engine: {backend.engine_stats().path} ({backend.engine_stats().reason or 'compiled'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs (about 1 min per model)")
    ap.add_argument(
        "--models",
        nargs="+",
        choices=MODELS,
        default=["stub", "act", "vla"],
        help="which tables to run (default: stub act vla; engine: the compiled pass against the eager one per bucket)",
    )
    ap.add_argument("--seconds", type=float, default=None, help="measuring window per (N, mode)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a small shared box)")
    ap.add_argument("--device", default="cpu", help="where the real ACT and the VLA run (cuda on a GPU box)")
    ap.add_argument(
        "--vla-model",
        choices=VLA_MODELS,
        default="tiny-smolvla",
        help="the VLA table's model: the tiny SmolVLA (CPU), or stock-size SmolVLA / pi0 with random weights (a GPU)",
    )
    ap.add_argument(
        "--compile",
        choices=("auto", "off", "on"),
        default="auto",
        help="the real models' model.compile (auto: compiled on CUDA; bench/engine.py compares the two)",
    )
    ap.add_argument("--stub-a", type=float, default=0.010, help="stub pass time a + b*B: a (s)")
    ap.add_argument("--stub-b", type=float, default=0.010, help="stub pass time a + b*B: b (s)")
    args = ap.parse_args()
    seconds = args.seconds or (1.5 if args.quick else 4.0)
    reps = 5 if args.quick else 15
    print(
        f"batching bench: N={list(NS)}; off = max_batch 1; on = max_batch {MAX_BATCH}, default window (up to half a "
        f"pass while fewer robots are ready than active); opp = max_batch {MAX_BATCH}, max_wait_ms 0 (opportunistic); "
        f">= {seconds:.1f} s per cell, torch threads {args.threads}; models {' '.join(args.models)}"
    )
    lines = []
    if "stub" in args.models:
        stub = StubBackend(
            args.stub_a + args.stub_b, ACTIONS, chunk_size=50, max_sessions=max(NS), per_robot_s=args.stub_b
        )
        table(f"stub a={args.stub_a * 1e3:.0f} ms b={args.stub_b * 1e3:.0f} ms", stub, seconds, reps, Workload({}))
    if "engine" in args.models:
        engine_rows(args)
    if "act" not in args.models and "vla" not in args.models:
        return

    import torch

    from lerobot_policy_remote.server.backend import LerobotBackend

    torch.set_num_threads(args.threads)

    if "act" in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = save_act(Path(tmp), args.device)
            manifest = Manifest(
                model=ModelSpec(repo_or_path=str(ckpt), device=args.device, compile=args.compile),
                default_task="bench",
                max_sessions=max(NS),
                health_port=0,
            )
            act = LerobotBackend(manifest, progress=lambda s: None)
            act.warmup(3, lambda s: None)
            compile_on_serving_thread(act)
            res = table(
                f"ACT (2x 96x128 cameras, chunk 50) on {args.device}",
                act,
                seconds,
                reps,
                Workload(CAMERAS),
                device=args.device,
            )
        r8 = res[8]
        lines += [
            f"with max_wait_ms 0 (opportunistic): speedup at N=8: {r8['opp']:.2f}",
            (
                f"batching speedup at N=8: {r8['on']:.2f} "
                f"(model bound {r8['bound']:.2f}, {r8['on'] / r8['bound']:.2f} of it)"
            ),
        ]
        print("\n".join(lines))
    if "vla" in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt, cameras, title = save_vla(args.vla_model, Path(tmp) / args.vla_model, args.device)
            manifest = Manifest(
                model=ModelSpec(repo_or_path=str(ckpt), device=args.device, compile=args.compile),
                default_task=VLA_TASK,
                max_sessions=max(NS),
                health_port=0,
            )
            manifest.rtc.enabled = True
            vla = LerobotBackend(manifest, progress=lambda s: None)
            assert vla.supports_rtc and vla.guidance is not None, f"the {args.vla_model} should serve RTC"
            vla.warmup(3, lambda s: None)  # before the probe: its guided pass has no robot behind it
            compile_on_serving_thread(vla)
            probe = GuidanceProbe(vla.guidance)
            res = table(
                f"{title} with RTC (per robot delay {list(RTC_DELAYS)}, horizon {list(RTC_HORIZONS)}) on {args.device}",
                vla,
                seconds,
                reps,
                Workload(cameras, rtc=True),
                probe,
                args.device,
            )
        vla_checks(res, probe)
        r8 = res[8]
        print(f"VLA with max_wait_ms 0 (opportunistic): speedup at N=8 with RTC: {r8['opp']:.2f}")
        print(
            f"VLA batching speedup at N=8 with RTC: {r8['on']:.2f} "
            f"(model bound {r8['bound']:.2f}, {r8['on'] / r8['bound']:.2f} of it)"
        )


if __name__ == "__main__":
    main()
