"""The direct link on one host: a robot that reaches its replica over shared memory, without TLS,
sends its observations straight to the replica's loopback listener and gets its chunks back the same way;
the router still carries its liveliness token (the fleet sees it), and any other path keeps the router.

Real parts: the shared test router, real `PolicyServer`s (StubBackend) and the product engine over its real
`ZenohLink`. A spy session on the router subscribes to the robot's observation key: on the direct link it
must see nothing, because nothing crossed the router.
"""

from __future__ import annotations

import contextlib
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
from lerobot_policy_remote.engine.zenoh_link import MAX_DIRECT_ENDPOINTS, ZenohLink, direct_endpoints
from lerobot_policy_remote.server.direct import eligible
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing import assert_never
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings

NAMES = [f"j{i}.pos" for i in range(6)]
HW = {
    "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
    "observation.images.front": {"dtype": "image", "shape": (96, 128, 3), "names": ["height", "width", "channels"]},
}
FRAME = np.random.default_rng(0).integers(0, 255, (96, 128, 3), dtype=np.uint8)


def _server(router, task: str, *, shm: bool = True, direct_link: bool = True) -> PolicyServer:
    backend = StubBackend(0.0, NAMES, chunk_size=10, image_keys=("observation.images.front",))
    return PolicyServer(
        Manifest(
            model=ModelSpec(repo_or_path="stub"),
            default_task=task,
            health_port=0,
            direct_link=direct_link,
            replica_id=f"rep-{uuid.uuid4().hex[:6]}",
            zenoh=ZenohSettings(mode="client", connect_endpoints=[router.endpoint], shared_memory=shm),
        ),
        backend=backend,
        progress=lambda t: None,
    ).start()


def _engine(router, task: str, *, shm: bool = True, direct: bool = True) -> RemoteInferenceEngine:
    robot = f"r{uuid.uuid4().hex[:8]}"
    cfg = RemoteInferenceConfig(
        connect_endpoint=router.endpoint,
        client_uuid=robot,
        rtc=RTCConfig(enabled=False),
        request_timeout_s=5.0,
        buffer_time_s=0.2,
        direct_on_same_host=direct,
        reconnect_initial_backoff_s=0.1,
        reconnect_max_backoff_s=0.5,
        handshake_jitter_s=0.0,
    )
    keys = ServiceKeys.for_service("stub", cfg.service_revision, task)
    link = ZenohLink(dataclasses.replace(cfg.zenoh_settings(), shared_memory=shm), keys, robot, direct=direct)
    return RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task=task, fps=30, model_id="stub", transport=link
    )


def _tick(e: RemoteInferenceEngine) -> None:
    """One tick of the robot's control loop: observe, act, then the 30 Hz pacing lerobot-rollout keeps."""
    e.notify_observation({**{n: 1.0 for n in NAMES}, "front": FRAME})
    e.get_action(None)
    time.sleep(1 / 30)


def _drive(e: RemoteInferenceEngine, chunks: int, timeout_s: float = 10.0) -> None:
    """The robot's 30 Hz loop until `chunks` more chunks were merged."""
    goal = e.counters["chunks"] + chunks
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and e.counters["chunks"] < goal:
        _tick(e)
    assert e.counters["chunks"] >= goal, f"no chunks came back: {dict(e.counters)} (state {e.state.value})"


@contextlib.contextmanager
def _running(e: RemoteInferenceEngine, *servers: PolicyServer, spy: Spy | None = None):
    """The robot started and streaming-ready; the robot, its servers and the spy stopped on the way out."""
    try:
        e.reset()
        e.start()
        e.resume()
        yield e
    finally:
        if spy is not None:
            spy.close()
        e.stop()
        for server in servers:
            server.stop()


class Spy:
    """Counts the robot's observations that cross the router."""

    def __init__(self, zenoh_client, key: str) -> None:
        self.n = 0
        self._lock = threading.Lock()
        self._sub = zenoh_client().declare_subscriber(key, self._on)

    def _on(self, _sample) -> None:
        with self._lock:
            self.n += 1

    def close(self) -> None:
        self._sub.undeclare()


def test_a_robot_on_the_servers_host_skips_the_router(router, zenoh_client):
    task = f"direct {uuid.uuid4().hex[:6]}"
    server = _server(router, task)
    e = _engine(router, task)
    spy = Spy(zenoh_client, e.keys.obs("*", e.client_uuid))
    with _running(e, server, spy=spy):
        _drive(e, 5)
        assert e.transport.direct and e.session.same_host and e.frame_quality == 0
        assert server.direct is not None and server.direct.endpoint.startswith("tcp/127.0.0.1:")
        assert server.registry.get(e.client_uuid).via_direct
        # anything that did cross the router reaches the spy well within this
        assert_never(lambda: spy.n, 0.2, message="an observation crossing the router")
        # the fleet still sees the robot: its token is on the router
        replies = list(zenoh_client().liveliness().get(e.keys.robot(e.client_uuid, "alive"), timeout=2.0))
        assert any(r.ok is not None for r in replies)


def test_a_drained_replica_hands_a_direct_robot_to_the_next(router):
    """The DRAINING event comes back over the direct link; the robot closes it and dials the next replica's."""
    task = f"direct {uuid.uuid4().hex[:6]}"
    a, b = _server(router, task), _server(router, task)
    e = _engine(router, task)
    with _running(e, a, b):
        _drive(e, 3)
        first = e.replica
        assert e.transport.direct
        (a if a.replica == first else b).drain("test")
        end = time.monotonic() + 10.0
        while time.monotonic() < end and e.replica == first:
            _drive(e, 1)
        assert e.replica != first, "the robot stayed on the drained replica"
        _drive(e, 3)
        assert e.transport.direct, "the next replica on this host is dialled directly too"
        assert (a if a.replica == e.replica else b).registry.get(e.client_uuid).via_direct


def test_a_router_restart_under_a_direct_robot(own_router):
    """The direct link does not hide a router restart: the replica's token goes, the robot re-handshakes through
    the new router, binds a fresh direct link, and streams again."""
    task = f"direct {uuid.uuid4().hex[:6]}"
    server = _server(own_router, task)
    e = _engine(own_router, task)
    with _running(e, server):
        _drive(e, 3)
        assert e.transport.direct
        epoch = e.session_epoch
        own_router.restart()
        end = time.monotonic() + 30.0
        while time.monotonic() < end and e.session_epoch == epoch:
            _tick(e)
        assert e.session_epoch > epoch, f"no fresh handshake after the router restart (state {e.state.value})"
        _drive(e, 3)
        assert e.transport.direct and server.registry.get(e.client_uuid).via_direct


@pytest.mark.parametrize(
    ("robot_direct", "server_direct", "robot_shm"),
    [
        (False, True, True),  # the robot was told to keep the router (--inference.direct_on_same_host=false)
        (True, False, True),  # the server offers no listener (direct_link: false in its manifest)
        (True, True, False),  # the robot's link is not shared memory: as if on another host
    ],
    ids=["robot-off", "server-off", "other-host"],
)
def test_any_other_case_goes_through_the_router(router, zenoh_client, robot_direct, server_direct, robot_shm):
    task = f"direct {uuid.uuid4().hex[:6]}"
    server = _server(router, task, direct_link=server_direct)
    e = _engine(router, task, shm=robot_shm, direct=robot_direct)
    spy = Spy(zenoh_client, e.keys.obs("*", e.client_uuid))
    with _running(e, server, spy=spy):
        _drive(e, 3)
        assert not e.transport.direct
        assert not server.registry.get(e.client_uuid).via_direct
        assert spy.n >= 3


def test_a_robot_dials_only_loopback_endpoints_from_an_ack():
    offered = [
        "tcp/10.0.0.5:7447",
        "tcp/127.0.0.1:7500",
        "udp/127.0.0.1:1",
        "tcp/127.0.0.1:7501;x",
        "tcp/127.0.0.1:7502",
    ]
    assert direct_endpoints(offered) == ["tcp/127.0.0.1:7500"]  # only the first MAX_DIRECT_ENDPOINTS are looked at
    assert direct_endpoints([None, 7, "tcp/127.0.0.1:7500"]) == ["tcp/127.0.0.1:7500"]
    assert direct_endpoints("tcp/127.0.0.1:7500") == []  # not a list
    assert len(direct_endpoints([f"tcp/127.0.0.1:{7000 + i}" for i in range(1000)])) == MAX_DIRECT_ENDPOINTS


def test_no_direct_link_under_tls():
    """A fleet with certificates has the router's access control, which must see every message."""
    assert eligible(ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"]))
    assert not eligible(ZenohSettings(mode="client", connect_endpoints=["tls/127.0.0.1:7447"]))
    plain, tls = (
        ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"]),
        ZenohSettings(mode="client", connect_endpoints=["tls/r:7447"]),
    )
    keys = ServiceKeys.for_service("stub", "main", "t")
    assert ZenohLink(plain, keys, "r1").direct_allowed
    assert not ZenohLink(tls, keys, "r1").direct_allowed
    assert not ZenohLink(plain, keys, "r1", direct=False).direct_allowed
    assert not ZenohLink(plain, keys, "r1", session=object()).direct_allowed  # many robots on one session: no
