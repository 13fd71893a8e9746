"""The one workload every system carries: two 640x480 RGB cameras, 14-dim state, a 50x14 chunk.

Frames are deterministic and natural-looking (gradients, shapes, mild noise) so JPEG sizes are
realistic; uniform noise would make JPEG look worse than any real camera does.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

CAMERAS = ("front", "wrist")
HEIGHT, WIDTH = 480, 640
STATE_DIM = 14
CHUNK = (50, 14)
ACTION_NAMES = [f"joint_{i}.pos" for i in range(STATE_DIM)]
CLK_TCK = os.sysconf("SC_CLK_TCK")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
# The camera frames a robot sends (name -> HxWx3 RGB) and what a phase logs its progress with.
Images = dict[str, NDArray[np.uint8]]
Log = Callable[[str], None]


class PeerClient(Protocol):
    """One robot of a system in closed loop (`client.make_client`): the chunk that answers an observation."""

    def infer(self, images: Images, state: NDArray[np.float32]) -> NDArray[np.float32]: ...

    def close(self) -> None: ...


class Measure(Protocol[T_co]):
    """One measurement of one arm, as `interleaved` calls it."""

    def __call__(self, *, arm: str) -> T_co: ...


@dataclass(frozen=True)
class Sizes:
    """How much work a run does; `--quick` is the smoke-test size."""

    warmup: int = 5
    # per repeat. `pct` takes the second-largest of 60 or of 150 as p99: of 60 that is about the 97th
    # percentile, of 150 the 99th the row names. The ACT rows: 30 passes (were 12, spread 10-30 ms by repeat).
    requests: int = 150
    act_requests: int = 30
    vla_requests: int = 30  # per robot, as the ACT rows
    link_requests: int = 12
    repeats: int = 3
    # The loopback latency rows and the 1-robot ACT: one repeat's p50 moves by up to +-30 % on a 2-vCPU VM, so the
    # median of 3 cannot resolve a 10 % difference. 5 cost about 11 more minutes for the loopback rows (62 min for the
    # four phases) and under one for the ACT.
    latency_repeats: int = 5
    # A kill's "fresh actions again" is mostly the restarted server's start, which moves by +-0.2 s on a 2-vCPU VM
    # (one trial 0.66 s, three more of the same code 0.36-0.53 s), so the row is a median of 3.
    kill_trials: int = 3
    scale_seconds: float = 4.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            warmup=2,
            requests=5,
            act_requests=3,
            vla_requests=3,
            link_requests=5,
            repeats=1,
            latency_repeats=1,
            kill_trials=1,
            scale_seconds=1.5,
        )


def frame(cam: int, t: int = 0) -> NDArray[np.uint8]:
    """A synthetic camera frame: smooth gradient, a few shapes that move with `t`, mild noise."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    img = np.empty((HEIGHT, WIDTH, 3), np.float32)
    img[..., 0] = 90 + 80 * x / WIDTH
    img[..., 1] = 60 + 90 * y / HEIGHT
    img[..., 2] = 140 - 40 * (x + y) / (WIDTH + HEIGHT)
    rng = np.random.default_rng(1000 * cam + t)
    for k in range(6):
        cx, cy = (90 + 97 * k + 7 * t + 40 * cam) % WIDTH, (60 + 71 * k + 3 * t) % HEIGHT
        r = 25 + 9 * k
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[mask] = rng.integers(20, 235, 3)
    img += rng.normal(0, 3.0, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def frames(t: int = 0) -> Images:
    return {name: frame(i, t) for i, name in enumerate(CAMERAS)}


def state(i: int) -> NDArray[np.float32]:
    """A state that changes every request (legacy's similarity filter would otherwise drop it)."""
    return (np.arange(STATE_DIM, dtype=np.float32) * 0.1 + i * 2.0).astype(np.float32)


def stub_chunk(base: NDArray[np.floating[Any]] | None = None) -> NDArray[np.float32]:
    """What every stub policy returns: rows = state + step index (so a robot can check whose chunk it got)."""
    b = np.zeros(STATE_DIM, np.float32) if base is None else np.asarray(base, np.float32).reshape(-1)
    return (b[None, :] + np.arange(CHUNK[0], dtype=np.float32)[:, None]).astype(np.float32)


def proc_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def now() -> float:
    return time.perf_counter()


def interleaved(arms: list[str], repeats: int, measure: Measure[T]) -> dict[str, list[T]]:
    """Every arm once per repeat, the order rotated each repeat, all servers up throughout.

    This box's speed swings by tens of percent over minutes; measured arm by arm, a slow window lands on
    whichever arm's block it falls in and the ratio measures the box. Interleaved, it lands on every arm.
    """
    reps: dict[str, list[T]] = {a: [] for a in arms}
    for r in range(repeats):
        k = r % len(arms)
        for arm in arms[k:] + arms[:k]:
            reps[arm].append(measure(arm=arm))
    return reps
