"""Raw frames on the same host: a robot whose replica it reaches over zenoh shared memory sends
its camera frames raw; over any other path (or when told not to) it sends JPEG.

Real parts: the shared test router, a real `PolicyServer` (StubBackend with two cameras) and the product
engine over its real `ZenohLink`. A third session on the router reads what crosses the wire on the
robot's observation key (with shared memory, as the server does), so the test sees the codec, not a flag.
"""

from __future__ import annotations

import dataclasses
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
from lerobot_policy_remote.wire.codec import unpack_map
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.limits import DEFAULT_LIMITS
from lerobot_policy_remote.zenoh_config import ZenohSettings

pytestmark = pytest.mark.slow

NAMES = [f"j{i}.pos" for i in range(6)]
CAMS = ("front", "wrist")
HW = {
    "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
    **{
        f"observation.images.{c}": {"dtype": "image", "shape": (96, 128, 3), "names": ["height", "width", "channels"]}
        for c in CAMS
    },
}


def _run(
    router, zenoh_client, *, robot_shm: bool, server_shm: bool, raw_on_same_host: bool
) -> tuple[RemoteInferenceEngine, set[str]]:
    """Serve, connect one robot, collect the codecs of the frames it sends until 3 chunks came back."""
    task = f"same host {uuid.uuid4().hex[:6]}"
    backend = StubBackend(0.0, NAMES, chunk_size=10, image_keys=tuple(f"observation.images.{c}" for c in CAMS))
    server = PolicyServer(
        Manifest(
            model=ModelSpec(repo_or_path="stub"),
            default_task=task,
            health_port=0,
            zenoh=ZenohSettings(mode="client", connect_endpoints=[router.endpoint], shared_memory=server_shm),
        ),
        backend=backend,
        progress=lambda t: None,
    ).start()
    robot = f"r{uuid.uuid4().hex[:8]}"
    cfg = RemoteInferenceConfig(
        connect_endpoint=router.endpoint,
        client_uuid=robot,
        rtc=RTCConfig(enabled=False),
        raw_frames_on_same_host=raw_on_same_host,
        request_timeout_s=5.0,
        buffer_time_s=0.2,
    )
    keys = ServiceKeys.for_service("stub", cfg.service_revision, task)
    # The router path (direct=False): the spy reads the frames on the router; test_direct_link.py covers the other.
    link = ZenohLink(dataclasses.replace(cfg.zenoh_settings(), shared_memory=robot_shm), keys, robot, direct=False)
    codecs: set[str] = set()
    seen = [0]
    lock = threading.Lock()
    three_seen = threading.Event()

    def on_obs(sample) -> None:  # what the server receives: the images' codec field of the observation body
        body = unpack_map(sample.payload.to_bytes(), "obs", DEFAULT_LIMITS, DEFAULT_LIMITS.max_payload_bytes)
        with lock:
            codecs.update(v["codec"] for v in body["images"].values())
            seen[0] += 1
            if seen[0] >= 3:
                three_seen.set()

    spy = zenoh_client().declare_subscriber(keys.obs("*", robot), on_obs)
    e = RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task=task, fps=30, model_id="stub", transport=link
    )
    frame = np.random.default_rng(0).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    try:
        e.reset()
        e.start()
        e.resume()
        end = time.monotonic() + 10.0
        while time.monotonic() < end and e.counters["chunks"] < 3:
            e.notify_observation({**{n: 1.0 for n in NAMES}, **{c: frame for c in CAMS}})
            e.get_action(None)
            time.sleep(1 / 30)  # the robot's 30 Hz control tick, as lerobot-rollout paces it
        assert e.counters["chunks"] >= 3, f"no chunks came back: {dict(e.counters)}"
        assert three_seen.wait(5.0), f"the spy saw {seen[0]} observations of {e.counters['requests']} sent"
        with lock:
            return e, set(codecs)
    finally:
        spy.undeclare()
        e.stop()
        server.stop()


def test_a_robot_on_the_servers_host_sends_raw_frames_over_shared_memory(router, zenoh_client):
    e, codecs = _run(router, zenoh_client, robot_shm=True, server_shm=True, raw_on_same_host=True)
    assert e.session.same_host and e.frame_quality == 0
    assert codecs == {"raw"}


@pytest.mark.parametrize(
    ("robot_shm", "server_shm", "raw_on_same_host"),
    [
        (False, True, True),  # the robot's link is not shared memory: as if across a network
        (True, False, True),  # the server's link is not: its frames would cross a network to reach it
        (True, True, False),  # same host, but the operator asked for JPEG
    ],
    ids=["robot-link-not-shm", "server-link-not-shm", "raw-off"],
)
def test_any_other_path_keeps_jpeg(router, zenoh_client, robot_shm, server_shm, raw_on_same_host):
    e, codecs = _run(
        router, zenoh_client, robot_shm=robot_shm, server_shm=server_shm, raw_on_same_host=raw_on_same_host
    )
    assert e.session.same_host == (robot_shm and server_shm)
    assert e.frame_quality == e.cfg.jpeg_quality == 90
    assert codecs == {"jpeg"}
