"""Raw frames over 20 Mbit/s with 40 ms round trip: every request is delivered.

The product engine (two raw 480x640 frames, resize on the robot off: 1.84 MB per observation, ~0.74 s of
link each, the raw case) talks through a shaping relay to the shared router and a real server (StubBackend,
20 ms).
Large observations go with BLOCK and are never re-sent (engine/resend.py): a fixed 0.5 s re-send of a
0.74 s observation superseded the one in flight forever (the bench's old loop never delivered). Note: on
loopback the kernel's socket buffers absorb a whole observation, so this relay does not make zenoh drop a
DROP put; BLOCK guards the real bottleneck (a shaped NIC queue), where it did.
The relay paces its reads at the link rate with a small receive buffer (TCP back-pressure, like `tc tbf`
in bench/peers/link.py, which needs network namespaces) and holds every segment RTT/2 each way.
"""

from __future__ import annotations

import collections
import dataclasses
import socket
import threading
import time
import uuid

import lerobot.rollout  # noqa: F401
import numpy as np
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.engine.zenoh_link import ZenohLink
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings

NAMES = [f"j{i}.pos" for i in range(6)]
HW = {
    "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
    **{
        f"observation.images.{cam}": {
            "dtype": "image",
            "shape": (480, 640, 3),
            "names": ["height", "width", "channels"],
        }
        for cam in ("front", "wrist")
    },
}
RATE_BPS, ONE_WAY_S = 20e6, 0.020


class ShapedRelay:
    """TCP relay: `rate_bps` each way (paced reads, 64 KiB receive buffer) and `one_way_s` hold per segment."""

    def __init__(self, target: tuple[str, int], rate_bps: float, one_way_s: float) -> None:
        self.target, self.rate, self.delay = target, rate_bps, one_way_s
        self.stop = threading.Event()
        self.socks: list[socket.socket] = []
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                continue
            s = socket.create_connection(self.target, timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            for sk in (c, s):
                sk.settimeout(None)
                sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks += [c, s]
            for src, dst in ((c, s), (s, c)):
                self._pump(src, dst)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        held: collections.deque[tuple[float, bytes]] = collections.deque()
        cv = threading.Condition()

        def reader() -> None:
            t_next = time.monotonic()
            while not self.stop.is_set():
                try:
                    data = src.recv(16384)
                except OSError:
                    data = b""
                if not data:
                    break
                t_next = max(t_next, time.monotonic()) + len(data) * 8 / self.rate
                time.sleep(max(0.0, t_next - time.monotonic()))  # the link's rate: the sender's queue backs up
                with cv:
                    held.append((time.monotonic() + self.delay, data))
                    cv.notify()

        def writer() -> None:
            while not self.stop.is_set():
                with cv:
                    while not held and not self.stop.is_set():
                        cv.wait(0.1)
                    if not held:
                        return
                    due, data = held[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                with cv:
                    held.popleft()
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=reader, daemon=True).start()
        threading.Thread(target=writer, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        for sk in [self.lsock, *self.socks]:
            try:
                sk.close()
            except OSError:
                pass


@pytest.mark.slow
def test_raw_frames_at_20mbit_40ms_deliver_every_request(router):
    task = f"raw {uuid.uuid4().hex[:6]}"
    backend = StubBackend(
        0.02, NAMES, chunk_size=30, image_keys=("observation.images.front", "observation.images.wrist")
    )
    server = PolicyServer(
        Manifest(
            model=ModelSpec(repo_or_path="stub"),
            default_task=task,
            health_port=0,
            zenoh=ZenohSettings(mode="client", connect_endpoints=[router.endpoint]),
        ),
        backend=backend,
        progress=lambda t: None,
    ).start()
    host, port = router.endpoint.split("/", 1)[1].rsplit(":", 1)
    relay = ShapedRelay((host, int(port)), RATE_BPS, ONE_WAY_S)
    robot = f"raw{uuid.uuid4().hex[:8]}"
    cfg = RemoteInferenceConfig(
        connect_endpoint=f"tcp/127.0.0.1:{relay.port}",
        client_uuid=robot,
        rtc=RTCConfig(enabled=False),
        jpeg_quality=0,
        resize_on_robot=False,
        request_timeout_s=5.0,
        buffer_time_s=10.0,
        max_action_age_s=30.0,
    )
    # shared memory off on the robot, as across a real network: with it on, zenoh passes each frame through /dev/shm
    # and only a descriptor crosses the relay, so the link would not be tested at all
    link = ZenohLink(
        dataclasses.replace(cfg.zenoh_settings(), shared_memory=False),
        ServiceKeys.for_service("stub", cfg.service_revision, task),
        robot,
    )
    e = RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task=task, fps=30, model_id="stub", transport=link
    )
    frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    try:
        e.reset()
        e.start()
        e.resume()
        end = time.monotonic() + 9.0
        while time.monotonic() < end:  # buffer_time_s=10: a request whenever the last one is answered
            e.notify_observation({**{n: 1.0 for n in NAMES}, "front": frame, "wrist": frame})
            e.get_action(None)
            time.sleep(1 / 30)
        c = e.counters
        assert c["chunks"] >= 5, f"raw frames did not get through a 20 Mbit/s link: {dict(c)}"
        assert c["timeouts"] == 0 and c["requests"] - c["chunks"] <= 1, f"a request was lost: {dict(c)}"
        assert c["resent"] == 0  # large observations are never re-sent (they would queue behind themselves)
    finally:
        e.stop()
        relay.close()
        server.stop()
