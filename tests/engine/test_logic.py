"""Unit tests of isolated robot-side logic: stamped queue, windowed latency, fallbacks, resets."""

from __future__ import annotations

import math

import lerobot.rollout  # noqa: F401  (loads lerobot so the plugin registers)
import numpy as np
import pytest
import torch
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import FallbackBehavior, RemoteInferenceConfig
from lerobot_policy_remote.engine.provenance import Provenance
from lerobot_policy_remote.engine.queue import StampedActionQueue, WindowedLatency
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing.memory_link import MemoryLink

META = Provenance("s", 1, 0)


def chunk(n: int, start: float = 0.0, a: int = 2) -> torch.Tensor:
    return torch.arange(start, start + n, dtype=torch.float32)[:, None].repeat(1, a)


def test_first_chunk_over_trim_is_clamped_to_consumed_steps():
    q = StampedActionQueue(RTCConfig(enabled=True))
    trimmed = q.merge_stamped(chunk(10), chunk(10), real_delay=4, idx_before=0, src_t=100.0, meta=META)
    assert trimmed == 0 and q.qsize() == 10  # nothing was consumed while the first request was in flight
    for _ in range(3):
        q.pop_fresh(100.0, 3.0)
    idx = q.get_action_index()
    q.get()  # one more consumed during the "inference"
    trimmed = q.merge_stamped(chunk(10, 50), chunk(10, 50), real_delay=5, idx_before=idx, src_t=101.0, meta=META)
    assert trimmed == 1 and q.qsize() == 9
    assert float(q.pop_fresh(101.0, 3.0)[0][0]) == 51.0


def test_staleness_is_tracked_per_action_in_append_mode():
    q = StampedActionQueue(RTCConfig(enabled=False))
    q.merge_stamped(chunk(4, 0), chunk(4, 0), 0, None, src_t=10.0, meta=Provenance("s", 1, 0))
    q.pop_fresh(10.0, 3.0)
    q.merge_stamped(chunk(4, 100), chunk(4, 100), 0, None, src_t=12.0, meta=Provenance("s", 2, 0))
    assert q.qsize() == 7
    # at t=13.5 the first chunk's 3 leftovers are 3.5 s old (stale), the second chunk's 1.5 s
    assert q.fresh_count(13.5, 3.0) == 4
    action, src_t, meta = q.pop_fresh(13.5, 3.0)
    assert float(action[0]) == 100.0 and src_t == 12.0 and meta.seq_id == 2
    assert q.stale_dropped == 3
    assert q.pop_fresh(20.0, 3.0) is None  # everything is stale now: never returned


def test_fresh_count_bisects_only_while_stamps_are_oldest_first():
    """The worker asks `fresh_count` every step; it bisects the stamps, so it must fall back to counting once a
    merge leaves them out of order (an append whose source is older than what is queued), and agree with a count."""
    q = StampedActionQueue(RTCConfig(enabled=False))

    def brute(now: float) -> int:
        return sum(1 for t in q.src[q.last_index :] if now - t <= 3.0)

    q.merge_stamped(chunk(4, 0), chunk(4, 0), 0, None, src_t=10.0, meta=META)
    q.merge_stamped(chunk(4, 10), chunk(4, 10), 0, None, src_t=12.0, meta=META)
    q.pop_fresh(12.0, 3.0)
    assert q.src_sorted
    for now in (12.0, 13.0, 13.0001, 15.0, 15.5, 20.0):
        assert q.fresh_count(now, 3.0) == brute(now), now
    q.merge_stamped(chunk(4, 20), chunk(4, 20), 0, None, src_t=11.0, meta=META)  # older than the rows queued before it
    assert not q.src_sorted
    for now in (13.0, 14.5, 15.0, 20.0):
        assert q.fresh_count(now, 3.0) == brute(now), now
    q.clear()
    assert q.src_sorted and q.fresh_count(0.0, 3.0) == 0


def test_provenance_latest_and_its_age_agree():
    from lerobot_policy_remote.engine import provenance

    provenance.publish(Provenance("s", 7, 2, "r1"), 0.25)
    assert provenance.latest() == Provenance("s", 7, 2, "r1", 0.25) and provenance.latest_age() == 0.25
    provenance.publish(None, degraded=True)  # a fallback: nothing executed came from a chunk
    assert provenance.latest() is None and provenance.latest_age() is None


def test_staleness_in_replace_mode_and_clear():
    q = StampedActionQueue(RTCConfig(enabled=True))
    q.merge_stamped(chunk(5), chunk(5), 0, 0, src_t=1.0, meta=META)
    assert q.pop_fresh(3.9, 3.0) is not None
    assert q.pop_fresh(4.1, 3.0) is None
    q.clear()
    assert q.qsize() == 0 and q.src_t.size == 0 and q.meta == []


def test_windowed_latency_decays_after_a_slow_sample():
    w = WindowedLatency(maxlen=5)
    w.add(2.0)
    for _ in range(5):
        w.add(0.05)
    assert w.max() == pytest.approx(0.05)
    assert w.delay_steps(1 / 30) == math.ceil(0.05 * 30)
    w.reset()
    assert w.delay_steps(1 / 30) == 0


def make_engine(fallback: str, names: list[str]) -> RemoteInferenceEngine:
    cfg = RemoteInferenceConfig(fallback=FallbackBehavior(fallback), rtc=RTCConfig(enabled=False))
    return RemoteInferenceEngine(cfg, hw_features={}, ordered_action_keys=names, task="t", fps=30, model_id="m")


VEL = ["x.vel", "y.vel", "theta.vel"]
POS = ["a.pos", "b.pos"]
HW = {"observation.state": {"dtype": "float32", "shape": (2,), "names": POS}}


@pytest.mark.parametrize("fallback", ["hold", "repeat_last"])
def test_no_action_before_the_first_chunk_for_hold_and_repeat_last(fallback):
    e = make_engine(fallback, VEL)
    assert e.get_action(None) is None
    assert e.fallback_count == 0


def _feed(e: RemoteInferenceEngine, rows: np.ndarray, src_t: float) -> None:
    t = torch.from_numpy(rows.astype(np.float32))
    e.queue.merge_stamped(t, t, 0, None, src_t, Provenance("s", 1, e.episode_id))


ZEROS3 = [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "fallback, names, obs, first_tick, dry, after_reset",
    [
        # hold: never sends anything of its own
        ("hold", VEL, None, None, None, None),
        ("hold", POS, None, None, None, None),
        # repeat_last: the last action of THIS episode, so nothing before the first chunk and after a reset
        ("repeat_last", POS, None, None, [7.0, 7.0], None),
        # zero on a velocity base: 0 from the first tick of every episode (a slow first request never keeps a velocity)
        ("zero", VEL, None, ZEROS3, ZEROS3, ZEROS3),
        # zero on a mixed robot: velocities 0, positions hold (measured before the first command, then the last command)
        ("zero", ["arm.pos", "x.vel"], {"arm.pos": 5.0, "x.vel": 0.3}, [5.0, 0.0], [7.0, 0.0], [5.0, 0.0]),
        # ... and a position it cannot know: no partial command
        ("zero", ["arm.pos", "x.vel"], None, None, [7.0, 0.0], None),
        # zero on a position-only robot holds like hold (and warns at start)
        ("zero", POS, None, None, None, None),
    ],
)
def test_each_fallback_across_an_episode_reset(fallback, names, obs, first_tick, dry, after_reset):
    import time

    def tick(e):
        a = e.get_action(None)
        return None if a is None else a.tolist()

    e = make_engine(fallback, names)
    if obs is not None:
        e.notify_observation(obs)
    assert tick(e) == first_tick, "first tick of the episode, before any chunk"
    _feed(e, np.full((1, len(names)), 7.0), time.monotonic())
    assert tick(e) == [7.0] * len(names)  # a policy action always wins
    assert tick(e) == dry, "queue dry after the chunk"
    e.reset()
    assert tick(e) == after_reset, "first tick after the reset"


def test_zero_on_a_position_only_robot_warns_at_start(caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
        make_engine("zero", POS)
    assert any("fallback=zero has no effect on this robot" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
        make_engine("zero", ["arm.pos", "x.vel"])
        make_engine("hold", POS)
    assert not any("fallback=zero" in r.getMessage() for r in caplog.records)


def test_get_action_never_returns_stale_actions():
    import time

    e = make_engine("repeat_last", POS)
    _feed(e, np.ones((5, 2)), time.monotonic() - 10.0)  # source observation 10 s old
    assert e.get_action(None) is None
    assert e.queue.stale_dropped == 5


def test_reset_bumps_episode_and_a_late_chunk_of_the_old_episode_is_dropped():
    link = MemoryLink()  # silent server: the test answers by hand
    cfg = RemoteInferenceConfig(rtc=RTCConfig(enabled=False), buffer_time_s=10.0)
    e = RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=POS, task="t", fps=30, model_id="m", transport=link
    )
    e.start(worker=False)
    e.resume()
    e.notify_observation({"a.pos": 1.0, "b.pos": 2.0})
    e.step()
    old = link.requests[-1][0]
    ep = e.episode_id
    e.reset()
    assert e.episode_id == ep + 1
    link.reply(old, np.ones((5, 2)))
    e.step()  # drains the late chunk, then sends the new episode's first request
    assert e.counters["late_dropped"] == 1 and e.counters["chunks"] == 0
    assert link.requests[-1][1].episode_start and link.requests[-1][0].episode_id == ep + 1
    assert [r.episode_id for r in link.server_resets] == [ep + 1]  # the acked server reset
    e.latency.add(0.2)
    e.reset()
    assert len(e.latency) == 1  # latency survives episode resets
    e.stop()


def test_several_router_endpoints_and_the_single_form():
    import draccus

    one = draccus.parse(RemoteInferenceConfig, args=["--connect_endpoint=tcp/127.0.0.1:1"])
    assert one.zenoh_settings().connect_endpoints == ["tcp/127.0.0.1:1"]
    many = draccus.parse(RemoteInferenceConfig, args=["--connect_endpoints=[tcp/127.0.0.1:1,tcp/127.0.0.1:2]"])
    assert many.zenoh_settings().connect_endpoints == ["tcp/127.0.0.1:1", "tcp/127.0.0.1:2"]


@pytest.mark.parametrize("rtc", [True, False])
def test_a_robot_that_mutates_its_action_changes_nothing_queued(rtc: bool):
    """Rows handed to the robot share no memory with the queue's tensors (RTC prefixes) in either merge mode."""
    q = StampedActionQueue(RTCConfig(enabled=rtc))
    q.merge_stamped(chunk(6), chunk(6), 0, 0, src_t=1.0, meta=META)
    q.pop_fresh(1.1, 3.0)
    q.merge_stamped(chunk(6, 10), chunk(6, 10), 0, 1, src_t=1.2, meta=META)
    before = (q.queue.clone(), q.original_queue.clone(), [r.copy() for r in q.rows])
    while (item := q.pop_fresh(1.3, 3.0)) is not None:
        item[0].fill(float("nan"))
    assert torch.equal(q.queue, before[0]) and torch.equal(q.original_queue, before[1])
    assert not any(torch.isnan(r).any() for r in q.queue)


@pytest.mark.parametrize("replace", [False, True])
def test_a_chunk_in_robot_space_only_keeps_one_queue_tensor_with_the_same_actions(replace: bool):
    """A chunk without `chunk_model` is one tensor handed as both: both queues stay that one tensor, hold exactly the
    actions two separate copies would, and the robot's rows still share no memory with it."""
    shared, apart = StampedActionQueue(RTCConfig(enabled=False)), StampedActionQueue(RTCConfig(enabled=False))
    for start, src_t in ((0.0, 1.0), (10.0, 1.2), (20.0, 1.4)):
        t = chunk(6, start)
        shared.merge_stamped(t, t, 0, 0, src_t=src_t, meta=META, replace=replace)
        apart.merge_stamped(chunk(6, start), chunk(6, start), 0, 0, src_t=src_t, meta=META, replace=replace)
        for q in (shared, apart):
            q.pop_fresh(src_t + 0.05, 3.0)
            q.pop_fresh(src_t + 0.05, 3.0)
    assert shared.original_queue is shared.queue
    assert torch.equal(shared.queue, apart.queue) and torch.equal(shared.original_queue, apart.original_queue)
    before = shared.queue.clone()
    executed = []
    while (item := shared.pop_fresh(1.5, 3.0)) is not None:
        executed.append(item[0][0].item())
        item[0].fill(float("nan"))
    assert executed == [r[0].item() for r in apart.queue[apart.last_index :]]
    assert torch.equal(shared.queue, before)


def test_the_rtc_prefix_is_the_unconsumed_head_in_both_spaces_from_one_index():
    """The prefix a request carries: the next `horizon` actions in model and robot space from the same index, copies
    the request may keep, and nothing while the queue is empty or used up."""
    q = StampedActionQueue(RTCConfig(enabled=True))
    assert q.left_over_head(4) == (None, None)
    q.merge_stamped(chunk(6), chunk(6, 100), 0, 0, src_t=1.0, meta=META)
    q.pop_fresh(1.1, 3.0)
    model, robot = q.left_over_head(4)
    assert model[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0] and robot[:, 0].tolist() == [101.0, 102.0, 103.0, 104.0]
    model.fill(float("nan"))  # the request's copy: the queue keeps its own
    assert q.left_over_head(10)[0][:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    while q.pop_fresh(1.2, 3.0) is not None:
        pass
    assert q.left_over_head(4) == (None, None)
