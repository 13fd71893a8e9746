"""Golden parity: the remote engine's merged queue equals lerobot's local `RTCInferenceEngine`'s.

Both engines are the real ones. Local: `RTCInferenceEngine` with the `rtc_toy` policy loaded from the
checkpoint dir (its own thread, its own `ActionQueue.merge`). Remote: `RemoteInferenceEngine` talking
through the shared router to an in-process `PolicyServer` serving the same dir with RTC enabled.

Determinism: both are stepped by hand with the same observations and the same "robot" consumption:
- local: the policy call is gated; while it is blocked the test consumes `k` actions and advances a
  fake `perf_counter` by (k - 0.5) frames, so lerobot measures a latency of exactly k steps;
- remote: the worker thread is not started; the test drives the engine's public `step()` (send, then
  consume the same `k` actions, then merge) with the engine's request clock advanced by the same amount.
So both see the same delay hint (max latency so far), the same prefix, the same trim. Extra actions
consumed between merges make the leftover shorter than the execution horizon (zero padding path).

Deliberate divergences NOT exercised here (documented in docs/robot.md):
- first chunk: lerobot trims `real_delay` steps even though nothing was consumed; we clamp the trim
  to steps actually consumed. The sequence starts with k=0, where both agree.
- empty leftover: lerobot sends an all-zeros prefix of `execution_horizon` rows; we send no prefix.
  The sequence never drains the queue before a request.
"""

from __future__ import annotations

import threading
import time
import types
import uuid

import lerobot.rollout  # noqa: F401  (registers the plugin: rtc_toy, remote)
import numpy as np
import pytest
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import make_pre_post_processors
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.processor import RelativeActionsProcessorStep
from lerobot.rollout.inference import rtc as rtc_mod
from lerobot.rollout.inference.rtc import RTCInferenceEngine
from lerobot.utils.feature_utils import hw_to_dataset_features

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec, RtcSpec
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.sim.modeling_rtc_toy import RtcToyPolicy
from lerobot_policy_remote.sim.toy import SIM_ARM_ACTIONS, save_rtc_toy
from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.zenoh_config import ZenohSettings

FPS = 30.0
DT = 1.0 / FPS
H = 8  # execution horizon (chunk_size 20)
CAM = (24, 32)
# (actions consumed during inference, actions consumed before the next request)
STEPS = [(0, 0), (3, 0), (2, 12), (5, 0), (1, 14), (4, 2), (3, 0), (6, 3), (2, 0), (3, 11), (1, 0), (4, 0)]
OBS_FEATURES = {**{k: float for k in SIM_ARM_ACTIONS}, "front": (CAM[0], CAM[1], 3)}


def observations(n: int, camera: bool = True) -> list[dict]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(n):
        obs: dict = {
            k: float(v) for k, v in zip(SIM_ARM_ACTIONS, rng.normal([0, -30, 40, 20, 0, 25], 5.0), strict=True)
        }
        img = rng.integers(0, 256, size=(*CAM, 3), dtype=np.uint8)
        if camera:
            obs["front"] = img
        out.append(obs)
    return out


class FakeClock:
    """perf_counter for lerobot's engine: time only moves when the test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def perf_counter(self) -> float:
        return self.t

    def monotonic_ns(self) -> int:
        return int(round(self.t * 1e9))


class LocalRig:
    """lerobot's RTCInferenceEngine with a gated policy call and an instrumented merge."""

    def __init__(self, path, rtc_cfg: RTCConfig, hw: dict, clock: FakeClock, monkeypatch) -> None:
        cfg = PreTrainedConfig.from_pretrained(path)
        cfg.device = "cpu"
        policy = RtcToyPolicy.from_pretrained(path, config=cfg)
        policy.eval()
        pre, post = make_pre_post_processors(cfg, pretrained_path=str(path))
        self.pre = pre
        self.entered, self.release, self.merged = threading.Event(), threading.Event(), threading.Event()
        real_predict = policy.predict_action_chunk

        def gated(*a, **k):
            self.entered.set()
            assert self.release.wait(30), "test never released the local policy call"
            self.release.clear()
            return real_predict(*a, **k)

        policy.predict_action_chunk = gated
        monkeypatch.setattr(rtc_mod, "time", types.SimpleNamespace(perf_counter=clock.perf_counter, sleep=time.sleep))
        robot = types.SimpleNamespace(robot_type="sim_arm", action_features={k: float for k in SIM_ARM_ACTIONS})
        self.engine = RTCInferenceEngine(policy, pre, post, robot, rtc_cfg, hw, task="pick", fps=FPS, device="cpu")
        self.engine.start()
        q = self.engine.action_queue
        real_merge = q.merge

        def merge(*a, **k):
            real_merge(*a, **k)
            self.merged.set()

        q.merge = merge

    def step(self, obs: dict, consume: int, clock: FakeClock) -> list[torch.Tensor]:
        e = self.engine
        e.notify_observation(obs)
        self.entered.clear()
        self.merged.clear()
        e.resume()
        assert self.entered.wait(30), "local engine never called the policy"
        e.pause()  # the loop checks this at its top: exactly one inference per step
        taken = [e.get_action(None) for _ in range(consume)]
        clock.t += (consume - 0.5) * DT if consume else 0.0
        self.release.set()
        assert self.merged.wait(30), "local engine never merged"
        return taken


def remote_step(e: RemoteInferenceEngine, obs: dict, consume: int, clock: FakeClock) -> list[torch.Tensor]:
    """One request through the engine's public worker step: send, consume `k`, then merge at latency k."""
    e.notify_observation(obs)
    sent, merged = e.counters["requests"], e.counters["chunks"]
    e.resume()
    e.step()
    e.pause()  # paused: the steps below only receive and merge, they never send
    assert e.counters["requests"] == sent + 1, "remote engine did not send the request"
    taken = [e.get_action(None) for _ in range(consume)]
    clock.t += (consume - 0.5) * DT if consume else 0.0
    wait_until(lambda: (e.step(), e.counters["chunks"] > merged)[1], 30, interval=0.002, message="the reply merged")
    assert e.counters["chunks"] == merged + 1, f"reply not merged: {dict(e.counters)}"
    return taken


def same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize(
    ("relative", "camera"),
    [(False, False), (True, False), (True, True)],
    ids=["absolute", "relative_reanchor", "relative_reanchor-camera"],
)
def test_remote_merged_queue_equals_local_rtc_engine(router, tmp_path, monkeypatch, relative, camera):
    """Byte-identical queues, executed actions and drain, with and without a camera."""
    path = save_rtc_toy(tmp_path / "toy", cameras={"front": CAM} if camera else {}, relative_actions=relative)
    task = f"pick {uuid.uuid4().hex[:6]}"
    manifest = Manifest(
        model=ModelSpec(repo_or_path=str(path)),
        default_task=task,
        health_port=0,
        warmup_inferences=1,
        rtc=RtcSpec(enabled=True, execution_horizon=H),
        zenoh=ZenohSettings(mode="client", connect_endpoints=[router.endpoint]),
    )
    server = PolicyServer(manifest, progress=lambda t: None).start()
    rtc_cfg = RTCConfig(enabled=True, execution_horizon=H)
    feats = OBS_FEATURES if camera else {k: v for k, v in OBS_FEATURES.items() if k != "front"}
    hw = hw_to_dataset_features(feats, "observation")
    clock = FakeClock()
    local = LocalRig(path, rtc_cfg, hw, clock, monkeypatch)
    if relative:
        relative_steps = [s for s in local.pre.steps if isinstance(s, RelativeActionsProcessorStep) and s.enabled]
        assert relative_steps, "the toy pipeline lost its relative step"  # what lerobot's engine re-anchors with
    # Exact parity is a float32 property: float16 replies (bounded by reply_max_error) are checked in
    # test_reply_size.py.
    cfg = RemoteInferenceConfig(
        connect_endpoint=router.endpoint,
        rtc=RTCConfig(enabled=True, execution_horizon=H),
        jpeg_quality=0,
        reply_dtype="float32",
        max_action_age_s=600.0,
        request_timeout_s=30.0,
        max_offline_s=600.0,
        buffer_time_s=600.0,
    )
    remote = RemoteInferenceEngine(
        cfg,
        hw_features=hw,
        ordered_action_keys=list(SIM_ARM_ACTIONS),
        task=task,
        fps=FPS,
        model_id=str(path),
        policy_type="rtc_toy",
        request_clock_ns=clock.monotonic_ns,
    )
    try:
        remote.start(worker=False)
        assert remote.rtc_active, "server did not activate RTC for this session"
        lq, rq = local.engine.action_queue, remote.queue
        short_prefix = 0
        for i, (obs, (k, pre)) in enumerate(zip(observations(len(STEPS), camera), STEPS, strict=True)):
            for _ in range(pre):  # the robot keeps executing between merges
                x, y = local.engine.get_action(None), remote.get_action(None)
                assert same(x, y), f"step {i}: pre-consumed action differs"
            left = rq.qsize()
            short_prefix += 0 < left < H
            assert (left > 0) == (i > 0), "the sequence must never send with a drained queue (documented divergence)"
            t0 = clock.t
            a_local = local.step(obs, k, clock)
            clock.t = t0  # same latency for the remote step
            a_remote = remote_step(remote, obs, k, clock)
            for x, y in zip(a_local, a_remote, strict=True):
                assert same(x, y), f"step {i}: executed actions differ"
            assert rq.last_trim == k, f"step {i}: remote trimmed {rq.last_trim}, expected {k}"
            assert lq.last_index == rq.last_index == 0
            assert same(lq.original_queue, rq.original_queue), f"step {i}: original (model-space) queue differs"
            assert same(lq.queue, rq.queue), f"step {i}: processed queue differs\nlocal={lq.queue}\nremote={rq.queue}"
        assert short_prefix >= 2, "the zero-padded short-prefix path was not exercised"
        assert remote.latency.delay_steps(DT) == max(k for k, _ in STEPS)
        # The whole remaining queue drains identically too.
        while not rq.empty():
            x, y = local.engine.get_action(None), remote.get_action(None)
            assert same(x, y)
        assert local.engine.get_action(None) is None
    finally:
        remote.stop()
        local.engine.stop()
        server.stop()
