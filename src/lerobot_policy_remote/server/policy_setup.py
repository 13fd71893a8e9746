"""`LerobotBackend`'s one-time setup: lerobot's RTC configured on the loaded policy (with the per-robot guidance),
and the warm-up passes run before any robot can connect. A base of `LerobotBackend` (server/backend.py loads the
policy and runs the pass).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import RtcSettings
from .backend_base import Backend
from .capabilities import Classification
from .manifest import Manifest

log = logging.getLogger("lerobot.policy_server")


class PolicySetup(Backend):
    """RTC setup and warm-up methods of `LerobotBackend`; typed by the members they read."""

    policy: Any
    config: Any
    guidance: Any
    supports_rtc: bool
    classification: Classification
    other_state: dict[str, int]
    task: str

    def _enable_rtc(self, manifest: Manifest) -> bool:
        """Configure lerobot's RTC on the policy and give it the per-robot guidance (`rtc_guidance`)."""
        from lerobot.rollout.inference.rtc import supports_rtc_inference

        policy = self.policy
        if hasattr(policy.config, "rtc_config"):
            try:
                from lerobot.configs import RTCAttentionSchedule
                from lerobot.policies.rtc.configuration_rtc import RTCConfig

                from . import rtc_guidance

                policy.config.rtc_config = RTCConfig(
                    enabled=True,
                    execution_horizon=manifest.rtc.execution_horizon,
                    max_guidance_weight=manifest.rtc.max_guidance_weight,
                    prefix_attention_schedule=RTCAttentionSchedule(manifest.rtc.prefix_attention_schedule),
                )
                if hasattr(policy, "init_rtc_processor"):
                    policy.init_rtc_processor()
                    self.guidance = rtc_guidance.install(policy, policy.config.rtc_config)
            except Exception as exc:  # a policy whose config rejects RTC simply does not support it
                log.info("RTC not supported by this %s policy (%s): sessions get plain chunks", self.config.type, exc)
        return bool(supports_rtc_inference(policy))

    def dummy_observation(self) -> ObservationMsg:
        """A plausible observation for warm-up (trained image size, zero state)."""
        images: dict[str, NDArray[Any]] = {
            k: np.full((s[1], s[2], 3), 127, dtype=np.uint8) for k, s in self.caps.image_shapes.items()
        }
        state: dict[str, NDArray[Any]] = {k: np.zeros(d, dtype=np.float32) for k, d in self.other_state.items()}
        if self.caps.state_key:
            state[self.caps.state_key] = np.zeros(self.caps.state_dim, dtype=np.float32)
        return ObservationMsg(state=state, images=images, task=self.task)

    def warmup(self, n: int, progress: Callable[[str], None] = print) -> None:
        """`n` plain passes, then, when RTC is offered, one guided pass with a prefix: a policy whose RTC cannot
        run fails here, at startup, not on every robot's request."""
        state = self.new_session_state()
        obs = self.dummy_observation()
        model_chunk = None
        for i in range(n):
            t0 = time.perf_counter()
            model_chunk, _ = self.infer(state, obs, None)
            progress(f"Warm-up inference {i + 1}/{n}: {(time.perf_counter() - t0) * 1000:.0f} ms")
        if self.supports_rtc:
            t0 = time.perf_counter()
            try:
                if model_chunk is None:
                    model_chunk, _ = self.infer(state, obs, None)
                obs.prefix_model = model_chunk[1:]
                obs.inference_delay_steps = 1
                self.infer(
                    state, obs, RtcSettings(enabled=True, execution_horizon=max(1, min(10, len(model_chunk) // 2)))
                )
            except Exception as exc:
                from .capabilities import StartupRefusal

                raise StartupRefusal(
                    f"real-time chunking cannot run with this {self.config.type} policy "
                    f"({type(exc).__name__}: {exc}): serve it with --rtc.enabled=false"
                ) from exc
            progress(f"Warm-up RTC pass with a prefix: {(time.perf_counter() - t0) * 1000:.0f} ms")
        if self.classification.serving_mode == "exclusive":
            self.policy.reset()
