"""The observation decode pool (server/decode_pool.py): decoding runs off the inference worker, a bad
observation is refused by the worker without disturbing anyone, a flood never queues without bound."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lerobot_policy_remote.server.decode_pool import DecodePool, decode_mail, take_decoded
from lerobot_policy_remote.server.sessions import Mail, Mailbox
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.wire.data import ObservationMsg, decode_observation, encode_observation
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.limits import DEFAULT_LIMITS

HEADER = Header(1, MsgType.OBS, 1, 0, 0, 1).pack()


def _payload(seed: int = 0) -> bytes:
    img = np.random.default_rng(seed).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    return encode_observation(
        ObservationMsg({"observation.state": np.zeros(6, np.float32)}, {"observation.images.front": img})
    )


class CountingDecode:
    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self, payload: bytes) -> ObservationMsg:
        self.threads.append(threading.current_thread().name)
        return decode_observation(payload, DEFAULT_LIMITS)


def test_pool_decodes_off_the_worker_and_the_worker_reuses_it() -> None:
    decode = CountingDecode()
    pool = DecodePool(decode, DEFAULT_LIMITS.max_payload_bytes)
    pool.start()
    try:
        mail = Mail(_payload(), HEADER, time.perf_counter())
        pool.submit(mail)
        wait_until(lambda: mail.decoded is not None, timeout=5, interval=0.002, message="the pool's decode")
        obs = take_decoded(mail, decode)  # the "worker" (this thread) gets the pool's result
        assert obs.images["observation.images.front"].shape == (96, 128, 3)
        assert (
            decode.threads and decode.threads[0].startswith("obs-decode-") and len(decode.threads) == 1
        )  # decoded once
        assert mail.decoded_by is not None and mail.decoded_by.startswith("obs-decode-")
    finally:
        pool.stop()


def test_worker_decodes_itself_when_no_decoder_got_to_it() -> None:
    decode = CountingDecode()
    mail = Mail(_payload(), HEADER, time.perf_counter())  # never submitted (e.g. a full queue)
    assert take_decoded(mail, decode).state["observation.state"].shape == (6,)
    assert decode.threads == [threading.current_thread().name]
    decode_mail(mail, decode, DEFAULT_LIMITS.max_payload_bytes)  # a decoder arriving late does nothing
    assert len(decode.threads) == 1


def test_malformed_jpeg_is_stored_and_refused_by_the_worker_others_unaffected() -> None:
    decode = CountingDecode()
    pool = DecodePool(decode, DEFAULT_LIMITS.max_payload_bytes)
    pool.start()
    try:
        good = _payload(1)
        i = good.index(b"\xff\xd8")  # the JPEG's start: keep its header (dimensions check passes), corrupt the scan
        bad = bytearray(good)
        for j in range(i + 700, min(i + 1400, len(bad))):
            bad[j] = 0xFF
        mails = [Mail(bytes(bad), HEADER, time.perf_counter()), Mail(good, HEADER, time.perf_counter())]
        for m in mails:
            pool.submit(m)
        wait_until(lambda: all(m.decoded is not None for m in mails), timeout=5, interval=0.002, message="every decode")
        assert isinstance(mails[0].decoded, WireError)
        try:
            take_decoded(mails[0], decode)
            raise AssertionError("a corrupt JPEG must be refused")
        except WireError as exc:
            assert "corrupt" in str(exc) or "JPEG" in str(exc)
        assert take_decoded(mails[1], decode).images["observation.images.front"].shape == (96, 128, 3)
    finally:
        pool.stop()


def test_bad_header_oversize_and_stale_mail_are_left_to_the_worker() -> None:
    decode = CountingDecode()
    limit = 10_000
    for mail in (
        Mail(_payload(), b"short", time.perf_counter()),
        Mail(b"", HEADER, time.perf_counter(), size=limit + 1),
    ):
        decode_mail(mail, decode, limit)
        assert mail.decoded is None
    box = Mailbox()
    first, second = Mail(_payload(), HEADER, time.perf_counter()), Mail(_payload(2), HEADER, time.perf_counter())
    box.deposit(first)
    assert box.deposit(second)  # superseded
    decode_mail(first, decode, DEFAULT_LIMITS.max_payload_bytes)
    assert first.stale and first.decoded is None and decode.threads == []


def test_a_full_queue_never_blocks_the_depositor() -> None:
    gate = threading.Event()

    def slow(payload: bytes) -> ObservationMsg:
        gate.wait(5)
        return decode_observation(payload, DEFAULT_LIMITS)

    pool = DecodePool(slow, DEFAULT_LIMITS.max_payload_bytes, threads=1, depth=4)
    pool.start()
    try:
        payload = _payload()
        t0 = time.perf_counter()
        for _ in range(1000):
            pool.submit(Mail(payload, HEADER, time.perf_counter()))
        assert time.perf_counter() - t0 < 1.0  # bounded queue, put_nowait: the callback never waits
    finally:
        gate.set()
        pool.stop()


@pytest.fixture
def decoded_by(monkeypatch) -> list[str | None]:
    """Which thread decoded each observation the worker served, in the order it served them."""
    from lerobot_policy_remote.server import worker as worker_mod

    seen: list[str | None] = []
    real = worker_mod.take_decoded

    def spy(mail: Mail, decode):
        obs = real(mail, decode)
        seen.append(mail.decoded_by)
        return obs

    monkeypatch.setattr(worker_mod, "take_decoded", spy)
    return seen


def test_a_busy_worker_leaves_the_decode_to_the_pool_an_idle_one_decodes_at_once(server_factory, robots, decoded_by):
    """Busy inferring: the next robot's observation is decoded by a pool thread meanwhile. Idle: the worker decodes it
    itself (two thread hand-offs saved on the round trip, worker.py `idle`)."""
    from lerobot_policy_remote.server.stub import StubBackend
    from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    server = server_factory("stub", backend=StubBackend(0.3, SIM_ARM_ACTION_NAMES))
    a, b = robots(server, 2)
    assert a.open(server.replica).ok and b.open(server.replica).ok
    wait_until(lambda: server.worker.idle, 5, interval=0.005, message="the worker to wait for work")
    first = a.send(np.zeros(6))
    wait_until(lambda: server.worker.in_flight == 1, 5, interval=0.005, message="the worker to start inferring")
    during = b.send(np.ones(6))
    a.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == first, 10)
    b.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == during, 10)
    assert decoded_by[0] == "inference-worker"  # a's, sent to the idle worker
    assert (decoded_by[1] or "").startswith("obs-decode-")  # b's, sent while a's was inferring


def test_a_batch_window_hands_what_arrived_while_idle_to_the_pool(server_factory, robots):
    """With batching, an observation the idle worker took for itself is still decoded by the pool while the worker
    waits in the batch window for the next robot's (worker.py `prefetch`), not serially after the window."""
    from lerobot_policy_remote.server.manifest import BatchingSpec
    from lerobot_policy_remote.server.stub import StubBackend
    from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    server = server_factory(
        "stub",
        backend=StubBackend(0.01, SIM_ARM_ACTION_NAMES, per_robot_s=0.001),
        batching=BatchingSpec(max_batch=2, max_wait_ms=500.0),
    )
    a, b = robots(server, 2)
    assert a.open(server.replica).ok and b.open(server.replica).ok
    for r in (a, b):  # both robots recently active: the window waits for the second one
        seq = r.send(np.zeros(6))
        r.wait_for(lambda h, m, seq=seq: isinstance(m, ActionChunkMsg) and h.seq_id == seq, 10)
    wait_until(lambda: server.worker.idle, 5, interval=0.005, message="the worker to wait for work")
    first = a.send(np.ones(6))
    session_a = server.registry.get(a.uuid)
    mail = wait_until(
        lambda: (m := session_a.mailbox.peek()) is not None and m.decoded is not None and m,
        5,
        interval=0.002,
        message="the pool to decode a's observation during the window",
    )
    second = b.send(
        np.ones(6)
    )  # within the window: one pass serves both (b's own decode may be the worker's: it never waits)
    a.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == first, 10)
    b.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == second, 10)
    assert (mail.decoded_by or "").startswith("obs-decode-"), mail.decoded_by
    assert max(n for n, _ in server.worker.stats.recent()) == 2  # one pass for both


def test_observations_that_arrive_together_at_an_idle_worker_are_decoded_by_it_and_the_pool(
    server_factory, robots, decoded_by
):
    """Two robots' observations reach an idle worker before it wakes: it decodes the first it serves, the pool the
    second while the first infers (worker.py `_prefetch`), not the worker after the first pass."""
    from lerobot_policy_remote.server.stub import StubBackend
    from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    server = server_factory("stub", backend=StubBackend(0.3, SIM_ARM_ACTION_NAMES))
    a, b = robots(server, 2)
    assert a.open(server.replica).ok and b.open(server.replica).ok
    gate = threading.Event()

    class Gated(threading.Event):  # the worker stays idle until the gate opens: both arrive while it is idle
        def wait(self, timeout: float | None = None) -> bool:
            gate.wait(10)
            return super().wait(timeout)

    wait_until(lambda: server.worker.idle, 5, interval=0.005, message="the worker to wait for work")
    wake, server.worker.wake = server.worker.wake, Gated()
    wake.set()  # the worker waits on the old event: let it go round once onto the gated one
    wait_until(lambda: server.worker.idle, 5, interval=0.005, message="the worker to wait on the gated event")
    sa, sb = a.send(np.zeros(6)), b.send(np.ones(6))
    wait_until(
        lambda: all(server.registry.get(r.uuid).mailbox.peek() is not None for r in (a, b)),
        5,
        interval=0.002,
        message="both observations deposited",
    )
    assert server.worker.idle  # neither went to the pool: the callback saw an idle worker
    gate.set()
    server.worker.wake.set()
    a.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == sa, 10)
    b.wait_for(lambda h, m: isinstance(m, ActionChunkMsg) and h.seq_id == sb, 10)
    assert decoded_by[0] == "inference-worker" and (decoded_by[1] or "").startswith("obs-decode-"), decoded_by


def test_an_observation_without_camera_frames_stays_with_the_worker() -> None:
    """A state-only observation decodes faster than a hand-off to the pool costs: the pool leaves it to the worker,
    while a camera frame submitted right after it is decoded by the pool."""
    from lerobot_policy_remote.server.decode_pool import INLINE_MAX_BYTES

    decode = CountingDecode()
    pool = DecodePool(decode, DEFAULT_LIMITS.max_payload_bytes)
    pool.start()
    try:
        small = encode_observation(ObservationMsg({"observation.state": np.zeros(6, np.float32)}, {}))
        assert len(small) <= INLINE_MAX_BYTES < len(_payload())
        state_only, framed = Mail(small, HEADER, time.perf_counter()), Mail(_payload(), HEADER, time.perf_counter())
        pool.submit(state_only)
        pool.submit(framed)
        wait_until(
            lambda: framed.decoded is not None, timeout=5, interval=0.002, message="the pool's decode of the frame"
        )
        assert state_only.decoded is None and decode.threads == [framed.decoded_by]
        assert take_decoded(state_only, decode).state["observation.state"].shape == (6,)
        assert state_only.decoded_by == threading.current_thread().name
    finally:
        pool.stop()
