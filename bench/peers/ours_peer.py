"""Our arm: the real PolicyServer (stub backend, or the real `lerobot-policy-server` for ACT) through a
real router, and the product's robot side: `RemoteInferenceEngine` over its `ZenohLink`, as
`lerobot-rollout --inference.type=remote` runs it (the closed-loop client steps its worker itself).

Shared memory is off on both sides (it would not cross a real network), except in the same-host arm
(`shm=True`): the product's defaults on one machine, where the robot sends raw frames over shared memory.
`quality` 0 sends raw frames, otherwise JPEG at that quality (the rollout backend's default is 90).
With `rtc` (the vla phase) the robot asks for real-time chunking, as `--inference.rtc.enabled` does by default, and
each request carries the unexecuted head of its previous chunk, which the closed-loop client leaves in the queue.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lerobot_policy_remote.wire.codec import decode
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import ServerStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

from .workload import ACTION_NAMES, CAMERAS, HEIGHT, STATE_DIM, WIDTH, Images

if TYPE_CHECKING:  # imported where it is built: the server side of this module never loads the engine
    from lerobot_policy_remote.engine.remote import RemoteInferenceEngine


def settings(endpoint: str, shm: bool = False) -> ZenohSettings:
    return ZenohSettings(mode="client", connect_endpoints=[endpoint], shared_memory=shm)


def serve(endpoint: str, sleep_s: float, ready: Callable[[], None], shm: bool = False) -> None:
    import threading

    from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
    from lerobot_policy_remote.server.service import PolicyServer
    from lerobot_policy_remote.server.stub import StubBackend

    manifest = Manifest(
        model=ModelSpec(repo_or_path="stub"),
        default_task="peers bench",
        max_sessions=32,
        health_port=0,
        warmup_inferences=0,
        zenoh=settings(endpoint, shm),
    )
    backend = StubBackend(sleep_s, ACTION_NAMES, chunk_size=50, max_sessions=32)
    server = PolicyServer(manifest, backend=backend, progress=lambda s: None).start()
    ready()
    threading.Event().wait()
    server.stop()


def find_service(z: Any, timeout: float = 10.0) -> ServerStatus:
    """The first server answering a status query (it names the model, revision and service the robot asks for)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rp in z.get(ServiceKeys.any().server("*", "status"), timeout=2.0):
            if rp.ok is not None:
                return decode(ServerStatus, rp.ok.payload.to_bytes())
        time.sleep(0.2)
    raise TimeoutError("no policy server answered a status query: is the server connected to the same router?")


def discover(endpoint: str) -> ServerStatus:
    z = open_session(settings(endpoint))
    try:
        return find_service(z)
    finally:
        z.close()


def hw_features() -> dict[str, dict[str, object]]:
    """What `hw_to_dataset_features` makes of a robot with the workload's joints and cameras."""
    feats: dict[str, dict[str, object]] = {
        "observation.state": {"dtype": "float32", "shape": (STATE_DIM,), "names": list(ACTION_NAMES)}
    }
    for c in CAMERAS:
        feats[f"observation.images.{c}"] = {
            "dtype": "video",
            "shape": (HEIGHT, WIDTH, 3),
            "names": ["height", "width", "channels"],
        }
    return feats


def observation(images: Images, st: NDArray[np.float32]) -> dict[str, float | NDArray[np.uint8]]:
    """The robot's raw observation dict, as `robot.get_observation()` returns it."""
    return {**{n: float(v) for n, v in zip(ACTION_NAMES, st, strict=True)}, **images}


def engine(
    endpoint: str,
    robot: int,
    quality: int,
    timeout_s: float,
    *,
    buffer_time_s: float,
    worker: bool,
    max_action_age_s: float = 3.0,
    shm: bool = False,
    rtc: bool = False,
) -> RemoteInferenceEngine:
    """The product's robot side: `RemoteInferenceEngine` over its real `ZenohLink` (shared memory off, as on a LAN,
    unless `shm`: the defaults on one machine); `rtc`: the rollout's RTC defaults (`RemoteRTCConfig`), else RTC off."""
    import dataclasses

    from lerobot.policies.rtc.configuration_rtc import RTCConfig

    from lerobot_policy_remote.engine.config import RemoteInferenceConfig, RemoteRTCConfig
    from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
    from lerobot_policy_remote.engine.zenoh_link import ZenohLink

    st = discover(endpoint)
    uuid_ = f"peers-{robot}-{uuid.uuid4().hex[:8]}"
    cfg = RemoteInferenceConfig(
        connect_endpoint=endpoint,
        client_uuid=uuid_,
        jpeg_quality=quality,
        rtc=RemoteRTCConfig() if rtc else RTCConfig(enabled=False),
        buffer_time_s=buffer_time_s,
        request_timeout_s=timeout_s,
        max_action_age_s=max_action_age_s,
        degraded_after_s=min(1.0, timeout_s),
        reconnect_initial_backoff_s=0.2,
        reconnect_max_backoff_s=1.0,
        handshake_jitter_s=0.0,
        max_offline_s=3600,
        service_revision=st.model.revision or "main",
        service_task=st.service,
    )
    keys = ServiceKeys.for_service(st.model.repo_or_path, cfg.service_revision, st.service)
    link = ZenohLink(dataclasses.replace(cfg.zenoh_settings(), shared_memory=shm), keys, uuid_)
    e = RemoteInferenceEngine(
        cfg,
        hw_features=hw_features(),
        ordered_action_keys=list(ACTION_NAMES),
        task=st.default_task or "peers",
        fps=30.0,
        model_id=st.model.repo_or_path,
        transport=link,
    )
    e.start(worker=worker)
    e.resume()
    return e


class Client:
    """One robot in closed loop: the product's engine (its `ZenohLink`, request builder, codec and chunk checks),
    its worker stepped here: send the observation, step until the chunk answering it is merged, return it.

    `re-sends` stays 0: the engine never re-sends an observation; a lost one ends in its request timeout.
    With `rtc`, the robot executes (`get_action`) the chunk down to its 0.5 s buffer before the next request instead of
    emptying the queue, so the request carries that leftover's head as its prefix, as a robot with RTC sends it;
    `prefixed` counts such requests and `rtc_active` says the server granted RTC.
    """

    def __init__(
        self,
        endpoint: str,
        robot: int = 0,
        quality: int = 90,
        timeout_s: float = 30.0,
        shm: bool = False,
        rtc: bool = False,
    ) -> None:
        self.timeout_s, self.resends, self.rtc, self.prefixed = timeout_s, 0, rtc, 0
        # A merged 50-step chunk (1.7 s at 30 fps) is above the 0.5 s buffer, so nothing more is sent until
        # the next call empties the queue (or, with RTC, executes it down to the buffer): one request per call,
        # as the other systems' clients do.
        self.e = engine(endpoint, robot, quality, timeout_s, buffer_time_s=0.5, worker=False, shm=shm, rtc=rtc)
        cfg = self.e.cfg
        # float16 replies (the default) are exact to the bound the robot asked for, not to float32's 1e-4
        self.atol = max(1e-4, cfg.reply_max_error) if cfg.reply_dtype == "float16" else 1e-4

    def infer(self, images: Images, state: NDArray[np.float32]) -> NDArray[np.float32]:
        e = self.e
        if self.rtc:  # the robot executes its chunk until the buffer asks for the next one: the rest is the prefix
            while e.queue.qsize() / e.fps > e.cfg.buffer_time_s:
                e.get_action()
            left = e.queue.get_left_over()
            self.prefixed += int(e.rtc_active and left is not None and len(left) > 0)
        else:
            e.queue.clear()  # nothing consumes in a closed loop: the queue holds exactly the chunk that answers
        e.notify_observation(observation(images, state))
        sent, merged = e.counters["requests"], e.counters["chunks"]
        deadline = time.monotonic() + self.timeout_s
        e.step()  # sends: nothing is outstanding and the queue is empty
        if e.counters["requests"] != sent + 1:
            raise RuntimeError(f"the engine did not send (state {e.state.value}, last outcome {e.last_outcome})")
        while e.counters["chunks"] == merged:
            if time.monotonic() >= deadline or e.requests.current is None:  # expired, refused or the link went
                raise TimeoutError(f"no chunk within {self.timeout_s}s ({e.last_outcome or 'no reply'})")
            e._wake.wait(0.05)  # the link's callback sets it on arrival
            e._wake.clear()
            e.step()
        q = e.queue.queue
        return q.numpy() if q is not None else np.empty((0, STATE_DIM), np.float32)

    @property
    def rtc_active(self) -> bool:
        return bool(self.e.rtc_active)

    def close(self) -> None:
        self.e.stop()
