"""`settle_after_startup`: start-up's survivors leave the collector's walks; young garbage is still collected."""

import subprocess
import sys

CHECK = """
import gc, time
from lerobot_policy_remote.heap import settle_after_startup
kept = [[i] for i in range(300_000)]  # a model's worth of long-lived objects
t0 = time.process_time(); gc.collect(2); before = time.process_time() - t0  # CPU time: a preemption is not counted
frozen = settle_after_startup()
t0 = time.process_time(); gc.collect(2); after = time.process_time() - t0
cycle = []; cycle.append(cycle); del cycle  # garbage made after start-up is still found
print(frozen >= 300_000, gc.collect(2) >= 1, after < before / 3)
"""


def test_startup_objects_are_frozen_and_later_garbage_still_collected():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True", "True"], out.stdout + out.stderr[-2000:]
