"""The server's model path against a bare wrapper of the same checkpoint: time per request, medians.

`LerobotBackend.infer` (what the inference worker calls: the robot's own preprocessor, resize to the trained
size, `predict_action_chunk`, its own postprocessor, both action spaces out) against `bench/peers/act.py`'s
`ActPolicy.infer` (the ~30-line openpi/GR00T-style wrapper: preprocess, predict, postprocess), with the same
ACT checkpoint (two 480x640 cameras resized to 120x160, 14-dim state, 50x14 chunks) and the same raw frames.
Both run in a non-main thread, as the server's worker does, alternating request by request so both see the
same load. The aim: backend <= 1.05x the wrapper. `--profile` adds a cProfile of each.

    .venv/bin/python bench/backend_vs_wrapper.py [--n 200] [--threads 0] [--device cpu|cuda] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers.act import ActPolicy, save_act  # noqa: E402
from bench.peers.workload import CAMERAS, HEIGHT, STATE_DIM, WIDTH  # noqa: E402
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec  # noqa: E402
from lerobot_policy_remote.wire.data import ObservationMsg  # noqa: E402


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run `fn` on a fresh non-main thread (the server's worker is one) and return its result."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="requests per side")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="where both run the model (cuda on a GPU box)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import torch

    from lerobot_policy_remote.server import torch_threads
    from lerobot_policy_remote.server.backend import LerobotBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    torch_threads.release_main_thread(torch)  # both models load on this thread and run on another (the server's way)
    rng = np.random.default_rng(0)
    images = {c: rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8) for c in CAMERAS}
    state = rng.uniform(-1, 1, STATE_DIM).astype(np.float32)
    wrapper_obs = {f"observation/{'image' if c == CAMERAS[0] else c + '_image'}": img for c, img in images.items()}
    wrapper_obs["observation/state"] = state
    ours_obs = ObservationMsg(
        {"observation.state": state}, {f"observation.images.{c}": img for c, img in images.items()}
    )

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = save_act(Path(tmp) / "act", device=args.device)
        wrapper = ActPolicy(str(ckpt))
        backend = LerobotBackend(
            Manifest(model=ModelSpec(repo_or_path=str(ckpt), device=args.device), default_task="bench", health_port=0),
            progress=lambda s: None,
        )
        session = backend.new_session_state()
        calls = {
            "wrapper": lambda: wrapper.infer(wrapper_obs),
            "backend": lambda: backend.infer(session, ours_obs, None),
        }

        def measure() -> dict[str, list[float]]:
            backend.bind_serving_thread()  # what the server's worker does first (server/torch_threads.py)
            for fn in calls.values():  # warm-up
                for _ in range(5):
                    fn()
            times: dict[str, list[float]] = {k: [] for k in calls}
            for i in range(args.n):
                order = list(calls) if i % 2 == 0 else list(reversed(calls))
                for name in order:
                    t0 = time.perf_counter()
                    calls[name]()
                    times[name].append(time.perf_counter() - t0)
            return times

        times = in_thread(measure)
        w, b = statistics.median(times["wrapper"]) * 1e3, statistics.median(times["backend"]) * 1e3
        print(f"torch threads {torch.get_num_threads()}, {args.n} requests each, alternating, in a non-main thread")
        for name in calls:
            v = sorted(times[name])
            print(
                f"{name:8} median {statistics.median(v) * 1e3:8.2f} ms  p10 {v[len(v) // 10] * 1e3:8.2f}  "
                f"p90 {v[9 * len(v) // 10] * 1e3:8.2f}"
            )
        print(f"backend / wrapper: {b / w:.3f} (aim <= 1.05)")
        if args.profile:
            for name, fn in calls.items():
                prof = cProfile.Profile()
                in_thread(lambda fn=fn, prof=prof: prof.runcall(lambda: [fn() for _ in range(min(args.n, 50))]))
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(18)
                print(f"\n== cProfile: {name}\n{buf.getvalue()}")


if __name__ == "__main__":
    main()
