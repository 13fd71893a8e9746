"""Decode observations off the inference worker, on a few threads.

Why: JPEG decoding and validation of a robot's observation took the inference worker's time, so the
model idled while it decoded. With the pool, the zenoh callback hands each deposited mail to a decoder
thread (a non-blocking put into a bounded queue), so the next robot's observation is decoded while the
current one infers, and the worker only runs the model. An idle worker (waiting for work) decodes a new mail
itself: there is nothing to overlap, and the hand-off and hand-back would cost two thread wake-ups (~0.2 ms on a
2-core box) on that robot's round trip. When it wakes, the other mails that arrived meanwhile, and all of them while
it waits in a batch window, go to the pool (worker.py `_prefetch`). Only a mail that lands in an empty mailbox is
handed to the pool: a robot that sends faster than it is served (a flood) supersedes its own mail, and the worker
decodes its newest one as before, so a flood costs the pool at most one decode per robot per worker cycle. An
observation without camera frames (`INLINE_MAX_BYTES`) is always the worker's: its decode costs less than a hand-off.

Ownership of one mail's decode is its `claim` lock: a decoder takes it without blocking and skips the mail
if the worker (or another decoder) already has it; the worker takes it blocking, so it waits only for a
decode already under way and decodes the mail itself when no decoder got to it (queue full, superseded
before its turn, or a decoder busy with another robot). A decode error is stored on the mail and refused
by the worker, which counts it like any bad observation; nothing here ever raises out of a thread, and a
bad observation never delays another robot's.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..wire.data import ObservationMsg
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from .sessions import Mail

log = logging.getLogger("lerobot.policy_server")

Decode = Callable[[bytes], ObservationMsg]

# An observation this small holds no camera frame (a JPEG's headers alone take ~600 bytes): the worker decodes it in
# ~10 us, less than the pool's hand-off and hand-back cost (a queue put, two thread wake-ups), so it stays there.
INLINE_MAX_BYTES = 512


def decode_targets(backend: Any) -> dict[str, tuple[int, int]]:
    """Camera key -> the (height, width) the model resizes it to: a much larger JPEG is decoded at a DCT scale
    (wire/images.py). The worker and `replay` use the same targets, so a replay stays bit-identical."""
    shapes = getattr(getattr(backend, "caps", None), "image_shapes", None) or {}
    return {k: (int(s[-2]), int(s[-1])) for k, s in shapes.items() if len(s) >= 2}


def decode_mail(mail: Mail, decode: Decode, max_bytes: int) -> None:
    """Decode `mail` into `mail.decoded` unless someone else has it, it is stale, or its header or size is bad
    (the worker refuses those before any decode, as before). Never raises."""
    if mail.stale or mail.decoded is not None or not mail.claim.acquire(blocking=False):
        return
    try:
        if mail.decoded is not None or not mail.payload or (mail.size or len(mail.payload)) > max_bytes:
            return
        try:
            Header.unpack(mail.attachment, expect=MsgType.OBS)
        except WireError:
            return  # refused by the worker without a decode
        try:
            mail.decoded = decode(mail.payload)
            mail.decoded_by = threading.current_thread().name
        except WireError as exc:
            mail.decoded = exc
        except Exception:  # unexpected: leave it to the worker's own decode, which reports it as it always did
            log.debug("decode pool: unexpected error, the worker decodes this one", exc_info=True)
    finally:
        mail.claim.release()


def take_decoded(mail: Mail, decode: Decode) -> ObservationMsg:
    """The worker's side: the pool's result (waiting only for a decode under way), else decode now. Raises
    the WireError of a bad observation."""
    with mail.claim:
        if mail.decoded is None:
            try:
                mail.decoded = decode(mail.payload)
                mail.decoded_by = threading.current_thread().name
            except WireError as exc:
                mail.decoded = exc
        result = mail.decoded
    if isinstance(result, WireError):
        raise result
    return result


class DecodePool:
    """`threads` decoder threads fed by a bounded queue; `submit` never blocks (a full queue leaves the decode to
    the worker)."""

    def __init__(self, decode: Decode, max_bytes: int, threads: int = 2, depth: int = 64) -> None:
        self.decode, self.max_bytes, self.n_threads = decode, max_bytes, threads
        self._q: queue.Queue[Mail | None] = queue.Queue(maxsize=depth)
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads = [
            threading.Thread(target=self._loop, name=f"obs-decode-{i}", daemon=True) for i in range(self.n_threads)
        ]
        for t in self._threads:
            t.start()

    def submit(self, mail: Mail) -> None:
        if (mail.size or len(mail.payload)) <= INLINE_MAX_BYTES:
            return  # cheaper on the worker (INLINE_MAX_BYTES)
        try:
            self._q.put_nowait(mail)
        except queue.Full:
            pass  # the worker decodes it itself

    def _loop(self) -> None:
        while True:
            mail = self._q.get()
            if mail is None:
                return
            decode_mail(mail, self.decode, self.max_bytes)

    def stop(self, timeout: float = 2.0) -> None:
        for _ in self._threads:
            try:
                self._q.put(None, timeout=timeout)
            except queue.Full:
                break
        for t in self._threads:
            t.join(timeout)
