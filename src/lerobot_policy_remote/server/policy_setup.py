"""`LerobotBackend`'s one-time setup: lerobot's RTC configured on the loaded policy (with the per-robot guidance),
and the warm-up passes run before any robot can connect. A base of `LerobotBackend` (server/backend.py loads the
policy and runs the pass).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import RtcSettings
from .backend_base import Backend
from .capabilities import Classification
from .manifest import Manifest, ModelSpec

if TYPE_CHECKING:
    from .compiled import CompiledSampler, EngineStats

log = logging.getLogger("lerobot.policy_server")


def use_cache_dir(chosen: str) -> Path:
    """Point torch's compile caches (inductor, autograd, Triton) at `model.compile_cache_dir`, so a restart of the
    same model on this machine compiles from cache. With none chosen, a cache directory the user named in the
    environment stands; torch's own default is not one (importing inductor writes `/tmp/torchinductor_<user>` into
    the environment, and /tmp does not survive a reboot), so it becomes `~/.cache/lerobot_policy_remote/compile`."""
    root = Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "lerobot_policy_remote" / "compile"
    root.mkdir(parents=True, exist_ok=True)
    for variable, leaf in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        if chosen or os.environ.get(variable, "") in ("", _torch_default(variable)):
            os.environ[variable] = str(root / leaf)
    return root


def _torch_default(variable: str) -> str:
    """The directory torch would write into `variable` by itself ("" when it writes none)."""
    if variable != "TORCHINDUCTOR_CACHE_DIR":
        return ""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return str(default_cache_dir())


class PolicySetup(Backend):
    """RTC setup, warm-up and compile methods of `LerobotBackend`; typed by the members they read."""

    policy: Any
    config: Any
    guidance: Any
    supports_rtc: bool
    classification: Classification
    other_state: dict[str, int]
    task: str
    manifest_model: ModelSpec
    engine: EngineStats
    sampler: CompiledSampler | None
    _torch: Any

    @property
    def _noise_spec(self) -> tuple[Callable[..., Any], tuple[int, int, int]] | None:
        """The flow-matching noise sampler and one robot's noise shape (`LerobotBackend`); None here."""
        return None

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

    def compile_engine(self, max_batch: int, progress: Callable[[str], None] = print) -> None:
        """Compile (on a GPU also capture) a pass per batch bucket before any robot connects (`model.compile`);
        a compile that fails leaves the eager pass serving, with one WARNING line, never a failed start."""
        from .buckets import batch_buckets
        from .compiled import CompiledSampler, wants_compile

        m = self.manifest_model
        model = getattr(self.policy, "model", None)
        if self.sampler is not None or self.engine.reason.startswith("compile failed"):
            return  # compiled once per process (a server built again on this backend reuses its graphs)
        if not wants_compile(m.compile, m.device):
            self.engine.reason = f"model.compile={m.compile}" + (f" on {m.device}" if m.compile == "auto" else "")
            return
        if self._noise_spec is None or not callable(getattr(model, "sample_actions", None)) or not self.batches:
            self.engine.reason = f"no compiled path for {self.config.type}"
            if m.compile == "on":
                log.warning(
                    "model.compile=on: %s has no compiled path (pi0, pi0.5, SmolVLA do): serving eagerly",
                    self.config.type,
                )
            return
        use_cache_dir(m.compile_cache_dir)
        steps, dims = self._noise_spec[1][1:]
        sampler = CompiledSampler(
            self._torch,
            model,
            self.guidance,
            device=m.device,
            buckets=batch_buckets(max_batch, m.compile_buckets),
            token_length=getattr(self.config, "tokenizer_max_length", None),
            chunk=(steps, dims),
            stats=self.engine,
        )
        sampler.install()
        sampler.compiling = True
        state, obs = self.new_session_state(), self.dummy_observation()
        try:
            for bucket in reversed(sampler.buckets):  # the largest first: smaller CUDA graphs reuse its memory pool
                progress(f"Compiling the pass for batch {bucket}...")
                self.infer_batch([(state, obs, None)] * bucket)
                t0 = time.perf_counter()
                self.infer_batch([(state, obs, None)] * bucket)
                progress(
                    f"Compiled batch {bucket} in {self.engine.bucket_seconds[bucket]:.1f} s: "
                    f"{(time.perf_counter() - t0) * 1000:.1f} ms a pass"
                    + (" (CUDA graph)" if self.engine.graphs else "")
                )
        except Exception as exc:  # a compiler or capture error: the eager pass serves, as it always could
            sampler.uninstall()
            self.engine.path, self.engine.reason = "eager", f"compile failed: {type(exc).__name__}: {exc}"[:300]
            log.warning(
                "model.compile: compiling the %s pass failed (%s: %s); serving eagerly "
                "(--model.compile=off skips the attempt)",
                self.config.type,
                type(exc).__name__,
                str(exc).splitlines()[0][:200] if str(exc) else "",
            )
            return
        sampler.freeze()
        self.engine.path, self.engine.reason = "compiled", ""
        self.sampler = sampler

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
