"""The compiled pass of a tiny pi0 (`model.compile=on`, graphs for 1 and 3 robots) against the eager pass: the same
chunk alone and padded (two robots in the graph for three), RTC on and off; after warm-up, 1,000 mixed requests
(batch sizes, RTC on and off, delays, horizons, schedules, tasks) compile nothing new."""

from __future__ import annotations

import random

import numpy as np
import pytest
from compiled_pairs import TASK, check_parity, checkpoint, compiled_pair

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.testing.vla import wire_observation as observation
from lerobot_policy_remote.testing.vla import with_prefix
from lerobot_policy_remote.wire.messages import RtcSettings

# two buckets compile for about a minute each on a 2-core CPU; a cold cache on a busy box takes several
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BUCKETS = [1, 3]  # one robot runs its own graph; two run padded in the graph for three


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[LerobotBackend, LerobotBackend]:
    return compiled_pair(checkpoint("pi0", tmp_path_factory.mktemp("pi0")), BUCKETS)


@pytest.mark.parametrize("rtc", [False, True], ids=["plain", "rtc"])
def test_the_compiled_chunk_equals_the_eager_chunk_alone_and_in_a_padded_bucket(pair, rtc):
    check_parity(*pair, rtc)


def test_a_thousand_mixed_requests_compile_nothing_new(pair):
    """Batch sizes, RTC on and off, delays, horizons, weights, schedules and tasks all vary; the graphs do not."""
    eager, compiled = pair
    rng = random.Random(7)
    compiles, replays = compiled.engine.compiles, compiled.engine.replays
    assert compiles >= len(BUCKETS)
    base, _ = eager.infer(eager.new_session_state(), observation(eager, 1), None)
    tasks = [TASK, "open the drawer", "stack the blocks", "fold the towel", "push the t to the target"]
    states = [compiled.new_session_state() for _ in range(6)]
    served_n = passes = 0
    while served_n < 1000:
        n = rng.choice([1, 1, 2, 3])
        items = []
        for _ in range(n):
            obs = observation(eager, rng.randrange(10_000), task=rng.choice(tasks))
            rtc = None
            if rng.random() < 0.6:
                delay, horizon = rng.randrange(0, 6), rng.randrange(1, 20)
                obs = with_prefix(obs, base[rng.randrange(1, 10) :] * rng.uniform(0.5, 1.5), delay)
                rtc = RtcSettings(True, horizon, rng.choice([1.0, 5.0, 10.0]), rng.choice(["LINEAR", "EXP", "ZEROS"]))
            items.append((rng.choice(states), obs, rtc))
        out = compiled.infer_batch(items)
        assert all(np.isfinite(m).all() for m, _ in out)
        served_n, passes = served_n + n, passes + 1
    assert compiled.engine.compiles == compiles  # 0 new compiles
    assert compiled.engine.fallbacks == 0
    assert compiled.engine.replays == replays + passes
