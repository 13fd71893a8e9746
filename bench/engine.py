"""The compiled pass against the eager pass, per batch bucket: pass time, compile time and GPU memory.

For each model, backends of one checkpoint: `model.compile=off` (eager), `auto` (what a server does by default on
this device) and `on` (compiled where the family has a compiled path: pi0, pi0.5, SmolVLA), each warmed up as a
server warms up (warm-up passes, then `compile_engine` with the bucket list, on the serving thread), then timed with
their passes interleaved (one pass of each in turn, the order rotated each round, on one serving thread with the
worker's torch threads), so the box's drift falls on every row alike. A pass is the backend's whole `infer_batch`
(preprocess, model, postprocess); the VLA rows carry RTC (each robot its own prefix, delay and horizon). On a GPU
each pass is also split into its parts (preprocess with the copy to the device, the model, the copy back with
postprocess) and the peak memory of a pass is given. `--restart N` then starts the real server N times with the
compiled pass and gives the seconds to `Policy server up` (the compile cache is warm after the first).

Models (`--models`, default both): `act` (`bench.models.save_act`: two 96x128 cameras, chunk 50) and `vla`
(`--vla-model`: the tiny SmolVLA on a CPU; stock-size `pi0` (bfloat16, 224 px, 10 steps) or `smolvla` on a GPU).
Last lines: `<model> auto / eager pass time: B=1 <x>, B=<max> <y> (auto serves <path>)` and, for the VLA,
`<model> compiled / eager pass time: ...`.

Run: `.venv/bin/python bench/engine.py` (CPU), `--device cuda --vla-model pi0 --buckets 1 8` (a GPU:
`bench/gpu/run.sh`); `--json PATH` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `python bench/engine.py`

from bench.models import CAMERAS, VLA_MODELS, VLA_TASK, requests, save_act, save_vla  # noqa: E402
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec  # noqa: E402

CHOICES = ("off", "auto", "on")


class Split:
    """Times the parts of a backend's pass from outside (GPU only: each part ends with a device synchronize)."""

    def __init__(self, backend: Any, torch: Any) -> None:
        self.parts: dict[str, list[float]] = {"prep": [], "model": [], "post": []}
        self._torch = torch
        for attr, part in (("_pre", "prep"), ("_post_rows", "post")):
            self._wrap(backend, attr, part)
        self._wrap(backend.policy, "predict_action_chunk", "model")
        self._pass: dict[str, float] = {}

    def _wrap(self, owner: Any, attr: str, part: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            self._torch.cuda.synchronize()
            self._pass[part] = self._pass.get(part, 0.0) + time.perf_counter() - t0
            return out

        setattr(owner, attr, timed)

    def end_pass(self) -> None:
        for part, seconds in self._pass.items():
            self.parts[part].append(seconds)
        self._pass = {}

    def medians_ms(self) -> dict[str, float]:
        return {p: statistics.median(v) * 1e3 for p, v in self.parts.items() if v}


def build(ckpt: Path, choice: str, device: str, buckets: list[int], task: str, rtc: bool) -> Any:
    from lerobot_policy_remote.server.backend import LerobotBackend

    manifest = Manifest(
        model=ModelSpec(repo_or_path=str(ckpt), device=device, compile=choice),
        default_task=task,
        max_sessions=16,
        health_port=0,
    )
    manifest.model.compile_buckets = list(buckets)
    manifest.rtc.enabled = rtc
    return LerobotBackend(manifest, progress=lambda _line: None)


def warm(backend: Any, choice: str, buckets: list[int]) -> None:
    """What a server's worker does before serving, on the serving thread: warm-up passes, then `compile_engine`."""
    backend.warmup(2, lambda _line: None)
    t0 = time.perf_counter()
    backend.compile_engine(max(buckets), lambda line: print(f"  [{choice}] {line}", flush=True))
    backend.bench_start_s = time.perf_counter() - t0


def one_pass(backend: Any, items: list[Any]) -> float:
    t0 = time.perf_counter()
    if len(items) == 1:
        backend.infer(*items[0])
    else:
        backend.infer_batch(items)
    return time.perf_counter() - t0


def measure(
    name: str, ckpt: Path, cameras: dict[str, tuple[int, int]], rtc: bool, args: argparse.Namespace
) -> dict[str, Any]:
    """One model's rows: per bucket, each choice's median pass time, and the compiled path's figures."""
    import torch

    cuda = args.device.startswith("cuda")
    print(f"\n== {name} on {args.device}: building and warming up off / auto / on ...", flush=True)
    backends = {c: build(ckpt, c, args.device, args.buckets, VLA_TASK if rtc else "bench", rtc) for c in args.choices}
    result: dict[str, Any] = {"model": name, "device": args.device, "buckets": {}}

    def run() -> None:
        backends["off"].bind_serving_thread()  # the worker's torch threads, as a server runs its passes
        for c, be in backends.items():
            warm(be, c, args.buckets)
        for b in args.buckets:
            items = {c: requests(be, b, cameras, rtc) for c, be in backends.items()}
            times: dict[str, list[float]] = {c: [] for c in backends}
            peak: dict[str, float] = {}
            splits = {c: Split(be, torch) for c, be in backends.items()} if cuda and args.split else {}
            for c in backends:
                one_pass(backends[c], items[c])  # untimed: the first pass at this size
                if c in splits:
                    splits[c].end_pass()
                    splits[c].parts = {p: [] for p in splits[c].parts}
            order = list(backends)
            for rep in range(args.reps):
                for c in order[rep % len(order) :] + order[: rep % len(order)]:  # each choice first in turn
                    if cuda:
                        torch.cuda.reset_peak_memory_stats()
                    times[c].append(one_pass(backends[c], items[c]))
                    if cuda:
                        peak[c] = max(peak.get(c, 0.0), torch.cuda.max_memory_allocated() / 2**30)
                    if c in splits:
                        splits[c].end_pass()
            med = {c: statistics.median(v) * 1e3 for c, v in times.items()}
            spread = {c: (min(v) * 1e3, max(v) * 1e3) for c, v in times.items()}
            row = {
                "ms": med,
                "spread_ms": spread,
                "compile_s": max((be.engine.bucket_seconds.get(b) or 0.0 for be in backends.values()), default=0.0),
                "peak_gib": peak or None,
                "split_ms": {c: s.medians_ms() for c, s in splits.items()} or None,
            }
            result["buckets"][b] = row
            print(
                f"B={b:>2}  "
                + "  ".join(f"{c} {med[c]:8.2f} ms ({med[c] / med['off']:4.2f})" for c in backends)
                + f"  compile {row['compile_s'] or 0:6.1f} s"
                + ("  peak GiB " + " ".join(f"{c} {v:.2f}" for c, v in peak.items()) if peak else "")
                + (
                    "  split prep/model/post ms "
                    + "  ".join(
                        f"{c} " + "/".join(f"{v:.1f}" for v in sp.values()) for c, sp in row["split_ms"].items()
                    )
                    if row["split_ms"]
                    else ""
                ),
                flush=True,
            )

    th = threading.Thread(target=run, name="bench-engine")
    th.start()
    th.join()
    for c, be in backends.items():
        stats = be.engine_stats()
        result[c] = {
            "path": stats.path,
            "reason": stats.reason,
            "compiles": stats.compiles,
            "replays": stats.replays,
            "fallbacks": stats.fallbacks,
            "start_s": round(be.bench_start_s, 2),
        }
    return result


def restarts(ckpt: Path, args: argparse.Namespace, task: str) -> list[float]:
    """Seconds from launch to `Policy server up` of the real `lerobot-policy-server` with the compiled pass, started
    `--restart` times one after another on one router (the first fills `model.compile_cache_dir` if it is cold)."""
    from lerobot_policy_remote.testing.procs import Router, policy_server

    router = Router().start()
    out = []
    try:
        for i in range(args.restart):
            t0 = time.perf_counter()
            proc = policy_server(
                ckpt,
                task,
                router.endpoint,
                f"--model.device={args.device}",
                "--model.compile=on",
                f"--model.compile_buckets=[{','.join(str(b) for b in args.buckets)}]",
                f"--batching.max_batch={max(args.buckets)}",
                "--warmup_inferences=1",
                "--audit_log=off",
                max_seconds=900,
                ready_timeout=900,
            )
            out.append(time.perf_counter() - t0)
            engine = next((w for w in proc.output(0).split() if w.startswith("engine=")), "engine=?")
            print(f"start {i + 1}: serving in {out[-1]:.1f} s ({engine})", flush=True)
            proc.stop()
    finally:
        router.stop()
    return out


def summary(res: dict[str, Any]) -> list[str]:
    rows = res["buckets"]
    first, last = min(rows), max(rows)

    def ratio(c: str, b: int) -> float:
        return float(rows[b]["ms"][c] / rows[b]["ms"]["off"])

    lines = []
    if "auto" in res:
        lines.append(
            f"{res['model']} auto / eager pass time: B={first} {ratio('auto', first):.2f}, B={last} "
            f"{ratio('auto', last):.2f} (auto serves {res['auto']['path']}: {res['auto']['reason'] or 'compiled'})"
        )
    if "on" in res and res["on"]["path"] == "compiled":
        lines.append(
            f"{res['model']} compiled / eager pass time: B={first} {ratio('on', first):.2f}, B={last} "
            f"{ratio('on', last):.2f}; {res['on']['compiles']} graphs compiled at warm-up, "
            f"{res['on']['fallbacks']} eager fallbacks, {res['on']['replays']} graph passes"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=("act", "vla"), default=["act", "vla"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vla-model", choices=VLA_MODELS, default="tiny-smolvla")
    ap.add_argument("--buckets", nargs="+", type=int, default=[1, 8], help="batch sizes compiled and timed")
    ap.add_argument("--reps", type=int, default=15, help="timed passes per choice and bucket (interleaved)")
    ap.add_argument("--no-split", dest="split", action="store_false", help="GPU: no per-part timing")
    ap.add_argument(
        "--choices", nargs="+", choices=CHOICES, default=list(CHOICES), help="the rows (default all; off always)"
    )
    ap.add_argument("--restart", type=int, default=0, help="then start the real server this many times (VLA)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    args.choices = ["off", *(c for c in CHOICES[1:] if c in args.choices)]
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "args": vars(args) | {"json": str(args.json)}}
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if "act" in args.models:
            res = measure("ACT", save_act(Path(tmp) / "act", args.device), CAMERAS, False, args)
            out["act"] = res
            lines += summary(res)
        if "vla" in args.models:
            ckpt, cameras, title = save_vla(args.vla_model, Path(tmp) / args.vla_model, args.device)
            res = measure(title, ckpt, cameras, True, args)
            out["vla"] = res
            lines += summary(res)
            if args.restart:
                res["restarts_s"] = restarts(ckpt, args, VLA_TASK)
                lines.append(f"{title}: served after " + ", ".join(f"{x:.1f} s" for x in res["restarts_s"]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
