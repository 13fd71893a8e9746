"""A replica is warm before any robot can find it: warm-up runs on the thread that serves, and the start-up
heap settle (a full collection) runs before the replica is announced, not during a robot's first handshake."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import make_manifest

from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.wire.codec import decode
from lerobot_policy_remote.wire.messages import ServerStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

NAMES = [f"joint_{i}.pos" for i in range(6)]


class RecordingBackend(StubBackend):
    """Records where and when warm-up ran; optionally fails it."""

    def __init__(self, fail: Exception | None = None) -> None:
        super().__init__(0.0, NAMES)
        self.fail = fail
        self.events: list[tuple[str, str]] = []
        self.server: PolicyServer | None = None

    def warmup(self, n: int, progress: Any = print) -> None:
        self.events.append(("warmup", threading.current_thread().name))
        assert self.server is not None and self.server.z is None  # nothing announced yet
        if self.fail is not None:
            raise self.fail

    def infer(self, state: Any, obs: Any, rtc: Any) -> Any:
        self.events.append(("infer", threading.current_thread().name))
        return super().infer(state, obs, rtc)


def build(router: Any, backend: RecordingBackend, settled: list[bool]) -> PolicyServer:
    server = PolicyServer(
        make_manifest(router, "stub", warmup_inferences=2, health_port=0),
        backend=backend,
        progress=lambda t: None,
        settle=lambda: settled.append(server.z is None),
    )
    backend.server = server
    return server


def status(router: Any, server: PolicyServer) -> ServerStatus:
    z = open_session(ZenohSettings(mode="client", connect_endpoints=[router.endpoint]))
    try:
        replies = [r for r in z.get(server.keys.server(server.replica, "status"), timeout=5.0) if r.ok is not None]
        assert replies, "the started server did not answer its status query"
        return decode(ServerStatus, replies[0].ok.payload.to_bytes())
    finally:
        z.close()


def test_warm_up_runs_on_the_inference_thread_and_the_settle_before_the_announcement(router: Any) -> None:
    backend, settled = RecordingBackend(), []
    server = build(router, backend, settled).start()
    try:
        assert backend.events == [("warmup", "inference-worker")]
        assert settled == [True]  # the collection ran before the session, the queryables and the token existed
        assert status(router, server).warmed_up
    finally:
        server.stop()


def test_a_failed_warm_up_fails_start_with_the_backends_error(router: Any) -> None:
    backend, settled = RecordingBackend(fail=RuntimeError("CUDA out of memory (warm-up)")), []
    server = build(router, backend, settled)
    with pytest.raises(RuntimeError, match="out of memory"):
        server.start()
    assert server.z is None and settled == [] and not server.warmed_up  # never announced, never settled
    # the worker ended with the warm-up: no thread left serving nothing
    wait_until(lambda: not server.worker_alive(), timeout=5, message="the inference worker's end")
    server.stop()  # the CLI's clean-up after a failed start still works
