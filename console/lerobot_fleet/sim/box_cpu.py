"""Whose CPU a run measured: the whole box's (/proc/stat) next to the fleet's own processes'.

A simulated fleet on one box stands for many machines; when the box runs out of CPU the figures describe
the box, not the product. `simulate` samples the box during its window and prints a verdict beside its
figures: "box saturated: 187 % of 200 %" when the box was busy for at least SATURATED_SHARE of its
capacity, with the fleet's processes, the console and everything else on the box apart.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

SATURATED_SHARE = 0.9  # a box busy for this share of all its cores (mean over the window) is saturated
PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class BoxTimes:
    """Cumulative CPU jiffies of the whole box, all cores together."""

    busy: int
    total: int
    cpus: int


def read_box(path: Path = PROC_STAT) -> BoxTimes | None:
    """The box's CPU counters now (None where /proc/stat is unreadable: not Linux)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    head = next((ln.split() for ln in lines if ln.startswith("cpu ")), None)
    if head is None:
        return None
    v = [int(x) for x in head[1:]] + [0] * 8
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]  # guest time is counted in user already
    busy = user + nice + system + irq + softirq + steal
    cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
    return BoxTimes(busy, busy + idle + iowait, max(1, cpus))


def busy_pct(a: BoxTimes, b: BoxTimes) -> float:
    """Percent of one core the box used between two readings, all cores together (0 .. 100 x cpus)."""
    dt = b.total - a.total
    return 0.0 if dt <= 0 else 100.0 * b.cpus * (b.busy - a.busy) / dt


class PeriodicReader:
    """A background thread that calls `_take` every `period_s` until `_finish`, which takes one last reading."""

    def __init__(self, period_s: float, name: str) -> None:
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _take(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    def _finish(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * self.period_s)
        self._take()


class BoxSampler(PeriodicReader):
    """Reads /proc/stat at start, every `period_s` and at stop: the window's mean and its busiest second."""

    def __init__(self, period_s: float = 1.0, path: Path = PROC_STAT) -> None:
        super().__init__(period_s, "box-cpu")
        self.path = path
        self.samples: list[float] = []  # busy percent of each period
        self._first: BoxTimes | None = None
        self._last: BoxTimes | None = None

    def start(self) -> BoxSampler:
        self._first = self._last = read_box(self.path)
        if self._first is not None:
            self._thread.start()
        return self

    def _take(self) -> None:
        now = read_box(self.path)
        if now is not None and self._last is not None:
            self.samples.append(busy_pct(self._last, now))
            self._last = now

    def stop(self) -> tuple[float, int] | None:
        """(mean busy percent over the window, cores); None where the box could not be read."""
        self._finish()
        if self._first is None or self._last is None:
            return None
        return busy_pct(self._first, self._last), self._last.cpus


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ProcessCpu(PeriodicReader):
    """The CPU seconds each of a run's processes spent in a window, read every `period_s` in the background: a
    process that exits mid-window (a drained replica) counts up to its last reading, never as a negative."""

    def __init__(self, pids: dict[str, list[int]], period_s: float = 0.5) -> None:
        super().__init__(period_s, "process-cpu")
        self.pids = {k: list(v) for k, v in pids.items()}
        self._start = {k: [process_cpu_s(p) for p in v] for k, v in self.pids.items()}
        self._last = {k: list(v) for k, v in self._start.items()}

    def start(self) -> ProcessCpu:
        self._thread.start()
        return self

    def _take(self) -> None:
        for k, pids in self.pids.items():
            for i, pid in enumerate(pids):  # a gone process reads 0 and a reused PID less: the largest reading counts
                self._last[k][i] = max(self._last[k][i], process_cpu_s(pid))

    def stop(self) -> dict[str, float]:
        """CPU seconds spent in the window by each group of processes, all of them together."""
        self._finish()
        return {k: sum(b - a for a, b in zip(self._start[k], self._last[k], strict=True)) for k in self.pids}


def verdict(
    box_pct: float,
    cpus: int,
    fleet_pct: float,
    console_pct: float = 0.0,
    samples: list[float] | tuple[float, ...] = (),
    share: float = SATURATED_SHARE,
) -> dict[str, object]:
    """The box's verdict on one run: saturated when its mean busy percent reached `share` of its capacity.

    `fleet_pct` is the fleet's own processes (routers, replicas, robot hosts) together, `console_pct` the console
    (the process that ran the simulation); what remains of the box's figure ran outside the fleet."""
    capacity = 100 * cpus
    saturated = box_pct >= share * capacity
    other = max(0.0, box_pct - fleet_pct - console_pct)
    near = sum(1 for s in samples if s >= share * capacity)
    line = (
        f"box {'saturated' if saturated else 'not saturated'}: {box_pct:.0f} % of {capacity} % "
        f"(fleet {fleet_pct:.0f} %, console {console_pct:.0f} %, other processes {other:.0f} %)"
    )
    if saturated:
        line += ": these figures describe this box, not the product"
    return {
        "saturated": saturated,
        "box_cpu_pct": round(box_pct, 1),
        "capacity_pct": capacity,
        "fleet_cpu_pct": round(fleet_pct, 1),
        "console_cpu_pct": round(console_pct, 1),
        "other_cpu_pct": round(other, 1),
        "saturated_seconds": near,
        "seconds": len(samples),
        "threshold_pct": round(share * capacity, 1),
        "line": line,
    }
