"""The robot's timing windows: a percentile is read off a list kept sorted as samples come and go."""

from __future__ import annotations

import math
import random

from lerobot_policy_remote.engine.telemetry import RttWindow


def _expected(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def test_percentiles_are_those_of_the_last_maxlen_samples_with_repeated_values() -> None:
    rng = random.Random(7)
    w, kept = RttWindow(maxlen=16), []
    for _ in range(500):
        ms = float(rng.choice([1, 2, 2, 3, 5, 8])) if rng.random() < 0.5 else rng.uniform(0, 50)
        w.add(ms)
        kept = (kept + [ms])[-16:]
        for q in (0.0, 0.5, 0.95, 1.0):
            assert w.percentile(q) == _expected(kept, q)


def test_an_empty_window_reads_zero_and_a_non_finite_sample_is_no_sample() -> None:
    w = RttWindow(maxlen=4)
    assert w.percentile(0.5) == 0.0
    for ms in (3.0, math.nan, 1.0, math.inf, 2.0, -math.inf, 4.0, 5.0):
        w.add(ms)
    assert [w.percentile(q) for q in (0.0, 0.5, 1.0)] == [1.0, 4.0, 5.0]  # the last four finite: 1, 2, 4, 5
