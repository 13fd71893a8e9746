"""The model seam: load a lerobot policy once and run one request for one session.

Why a seam: the worker, scheduler and control plane are the same whether the model is a real
lerobot policy or a fixed-time stub (benchmarks, fairness tests); only this object differs. Configuring RTC on the
loaded policy and the warm-up passes are `policy_setup.py`.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import ModelInfo, RtcSettings
from . import torch_threads
from .backend_base import ObsContractError
from .capabilities import Capabilities, Classification, classify, resolve_action_names
from .compiled import CompiledSampler, EngineStats
from .manifest import Manifest
from .placement import built_on
from .policy_setup import PolicySetup
from .token_cache import TokenCache
from .token_cache import install as install_token_cache
from .weights import check_weights, find_weight_files, fingerprint_files, load_error_refusal

log = logging.getLogger("lerobot.policy_server")


@dataclass
class SessionPipelines:
    """One session's own copy of the pre/post processors (relative-action state never crosses robots)."""

    pre: Any
    post: Any
    relative_step: Any = None
    normalizer_step: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    token_caches: list[TokenCache] = field(default_factory=list)  # its tokenizer steps' memos (token_cache.py)


class LerobotBackend(PolicySetup):
    """A real lerobot policy loaded through the generic factory path (third-party types included). Its RTC setup and
    warm-up are `policy_setup.PolicySetup`."""

    def __init__(self, manifest: Manifest, progress: Callable[[str], None] = print) -> None:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.configs.types import FeatureType
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        from lerobot.utils.import_utils import register_third_party_plugins

        self._torch = torch
        self._cpu_threads = torch_threads.release_main_thread(torch)  # before any torch work (torch_threads.py)
        register_third_party_plugins()
        # Our own package was imported before lerobot (by this CLI), so its hooks were skipped: register now.
        import lerobot_policy_remote

        lerobot_policy_remote.register_lerobot_plugins()
        m = manifest.model
        local = Path(m.repo_or_path).is_dir()
        revision = None if local else (m.revision or "main")
        progress(f"Loading policy config from {m.repo_or_path} (revision {m.revision or 'main'})...")
        cfg = PreTrainedConfig.from_pretrained(m.repo_or_path, revision=revision)
        cfg.device = m.device
        progress(f"Loading {cfg.type} weights on {m.device}...")
        try:
            with built_on(torch, m.device):
                policy = get_policy_class(cfg.type).from_pretrained(m.repo_or_path, config=cfg, revision=revision)
        except RuntimeError as exc:  # torch's multi-line state_dict error (a shape mismatch) -> the same one line
            refusal = load_error_refusal(cfg.type, exc)
            if refusal is None:
                raise
            raise refusal from exc
        weight_files = find_weight_files(m.repo_or_path, revision)
        check_weights(policy, cfg.type, weight_files)  # before anything else: never serve weights that did not load
        if m.dtype:
            policy = policy.to(getattr(torch, m.dtype))
        policy.eval()
        self.dtype = next(policy.parameters()).dtype if any(True for _ in policy.parameters()) else torch.float32
        progress("Building processor pipelines (once; each session gets its own copy)...")
        self.pre, self.post = make_pre_post_processors(
            cfg,
            pretrained_path=m.repo_or_path,
            pretrained_revision=revision,
            preprocessor_overrides={"device_processor": {"device": m.device}},
        )
        self.policy, self.config, self.device = policy, cfg, m.device
        self.manifest_model = m
        self.engine = EngineStats()  # eager until compile_engine compiles the pass (policy_setup.py)
        self.sampler: CompiledSampler | None = None
        self.classification: Classification = classify(policy, cfg.type, manifest.serving_mode)
        self.fingerprint = fingerprint_files(weight_files)

        self.supports_rtc = False
        self.guidance: Any = None
        if manifest.rtc.enabled:
            self.supports_rtc = self._enable_rtc(manifest)

        action_ft = cfg.output_features.get("action")
        if action_ft is None:
            from .capabilities import StartupRefusal

            raise StartupRefusal(f"policy {cfg.type!r} has no 'action' output feature: nothing to serve")
        action_dim = int(math.prod(action_ft.shape))
        names, warning, names_source = resolve_action_names(
            manifest.action_feature_names, cfg, action_dim, m.repo_or_path if local else None
        )
        progress(
            f"Action order: checked against {len(names)} names from {names_source}"
            if names
            else "Action order: UNCHECKED (no action names known; only the dimension is checked). "
            "Set action_feature_names in the manifest"
            + (
                " or strict_action_names to refuse such robots"
                if not manifest.strict_action_names
                else "; strict_action_names refuses every robot until then"
            )
        )
        images = {k: tuple(ft.shape) for k, ft in cfg.input_features.items() if ft.type is FeatureType.VISUAL}
        state_key = "observation.state" if "observation.state" in cfg.input_features else None
        state_dim = int(math.prod(cfg.input_features[state_key].shape)) if state_key else 0
        self.other_state = {
            k: int(math.prod(ft.shape))
            for k, ft in cfg.input_features.items()
            if ft.type is not FeatureType.VISUAL and k != state_key
        }
        exclusive = self.classification.serving_mode == "exclusive"
        chunk = int(getattr(cfg, "chunk_size", 0) or getattr(cfg, "n_action_steps", 0) or 0)
        self.caps = Capabilities(
            policy_type=cfg.type,
            action_dim=action_dim,
            action_names=names,
            image_keys=sorted(images),
            image_shapes=images,
            state_dim=state_dim,
            state_key=state_key,
            chunk_size=chunk,
            trained_fps=manifest.trained_fps,
            strict_fps=manifest.strict_fps,
            fps_tolerance=manifest.fps_tolerance,
            default_task=manifest.default_task,
            pin_task=manifest.pin_task,
            supports_rtc=self.supports_rtc,
            serving_mode=self.classification.serving_mode,
            max_sessions=1 if exclusive else manifest.max_sessions,
            fingerprint=self.fingerprint,
            names_warning=warning,
            strict_action_names=manifest.strict_action_names,
            serving_reason=self.classification.reason,
        )
        self.model_info = ModelInfo(
            repo_or_path=m.repo_or_path,
            revision=m.revision or "main",
            policy_type=cfg.type,
            fingerprint=self.fingerprint,
            dtype=str(self.dtype).replace("torch.", ""),
            device=m.device,
        )
        self.task = manifest.default_task

    # ------------------------------------------------------------------ sessions
    def new_session_state(self) -> SessionPipelines:
        """Deep-copy both pipelines in ONE deepcopy so the absolute step keeps pointing at its own relative step.
        The session's tokenizer steps remember the task texts they tokenized (token_cache.py)."""
        from lerobot.processor import NormalizerProcessorStep, RelativeActionsProcessorStep

        pre, post = copy.deepcopy((self.pre, self.post))
        rel = next((s for s in pre.steps if isinstance(s, RelativeActionsProcessorStep) and s.enabled), None)
        norm = next((s for s in pre.steps if isinstance(s, NormalizerProcessorStep)), None)
        return SessionPipelines(pre, post, rel, norm, token_caches=install_token_cache(pre))

    def on_session_open(self, state: SessionPipelines) -> None:
        if self.classification.serving_mode == "exclusive":
            self.policy.reset()  # exclusive: the policy's own state belongs to this one robot

    def reset_session(self, state: SessionPipelines) -> None:
        for pipe in (state.pre, state.post):
            pipe.reset()
        for cache in state.token_caches:
            cache.clear()
        if self.classification.serving_mode == "exclusive":
            self.policy.reset()  # never in shared mode: it is global to the shared instance

    # ------------------------------------------------------------------ inference
    def validate_obs(self, obs: ObservationMsg) -> None:
        caps = self.caps
        for key in caps.image_keys:
            if key not in obs.images:
                raise ObsContractError(f"images.{key}", "missing camera")
            if obs.images[key].ndim != 3 or obs.images[key].shape[2] != 3:
                raise ObsContractError(f"images.{key}", f"expected HxWx3 RGB, got shape {obs.images[key].shape}")
        wanted = dict(self.other_state)
        if caps.state_key:
            wanted[caps.state_key] = caps.state_dim
        for key, dim in wanted.items():
            if key not in obs.state:
                raise ObsContractError(f"state.{key}", "missing")
            if obs.state[key].size != dim:
                raise ObsContractError(f"state.{key}", f"expected {dim} values, got {obs.state[key].size}")

    def _batch(self, obs: ObservationMsg) -> dict[str, Any]:
        """Mirror lerobot's prepare_observation_for_inference, plus a canonical resize to the trained size."""
        torch = self._torch
        batch: dict[str, Any] = {}
        for key, value in obs.state.items():
            batch[key] = torch.from_numpy(np.array(value, dtype=np.float32).reshape(-1)).unsqueeze(0)
        on_gpu = self._images_on_device
        for key in self.caps.image_keys:
            # HWC -> CHW in the one copy numpy makes of the (possibly read-only, decoded) frame
            chw = torch.from_numpy(np.array(np.asarray(obs.images[key]).transpose(2, 0, 1), order="C"))
            if on_gpu:  # the uint8 frame crosses (a quarter of the float bytes); scaling and resizing run on the GPU
                chw = chw.pin_memory().to(self.device, non_blocking=True)
            img = chw.float().div_(255.0).unsqueeze(0)
            want = self.caps.image_shapes[key]
            if tuple(img.shape[-2:]) != tuple(want[-2:]):
                img = torch.nn.functional.interpolate(img, size=tuple(want[-2:]), mode="bilinear", align_corners=False)
            batch[key] = img
        batch["task"] = [obs.task or self.task]
        batch["robot_type"] = ""
        return batch

    @functools.cached_property
    def _images_on_device(self) -> bool:
        """Frames go to a CUDA device as uint8 and are scaled and resized there (the CPU path is unchanged)."""
        return str(self.device).startswith("cuda") and bool(self._torch.cuda.is_available())

    def infer(
        self, state: SessionPipelines, obs: ObservationMsg, rtc: RtcSettings | None
    ) -> tuple[NDArray[Any], NDArray[Any]]:
        if self.classification.queue_fed:
            with self._torch.inference_mode():
                return self._post(state, self._queue_fed_chunk(self._pre(state, obs)))
        return self.infer_batch([(state, obs, rtc)])[0]

    @property
    def batches(self) -> bool:
        return self.classification.serving_mode == "shared" and not self.classification.queue_fed

    @property
    def batches_rtc(self) -> bool:
        return self.batches and self.guidance is not None

    def can_batch(self, state: SessionPipelines, obs: ObservationMsg, rtc: RtcSettings | None) -> bool:
        """Shared and chunk-stateless; RTC robots too, each guided by its own delay and prefix (`rtc_guidance`)."""
        return self.batches and (rtc is None or self.batches_rtc)

    def infer_batch(
        self, items: list[tuple[SessionPipelines, ObservationMsg, RtcSettings | None]]
    ) -> list[tuple[NDArray[Any], NDArray[Any]]]:
        """Each robot's own preprocessor, one forward pass over the stacked batch, each robot's own postprocessor.

        Each robot's noise is drawn on its own, in order, so a robot's chunk does not depend on who shares its pass.
        """
        from . import rtc_guidance

        torch = self._torch
        guided = self.supports_rtc and any(
            rtc is not None and obs.prefix_model is not None and obs.prefix_model.size for _, obs, rtc in items
        )
        with rtc_guidance.autograd_context(torch, self.guidance is not None, guided):
            pres = [self._pre(state, obs) for state, obs, _ in items]
            # after preprocessing: a relative-action prefix is re-anchored at the state this observation cached
            plan = [self._rtc_row(state, obs, rtc) for state, obs, rtc in items]
            batch = pres[0] if len(pres) == 1 else stack_batches(pres, torch)
            kwargs: dict[str, Any] = {}
            noise = self._noise(len(items))
            if noise is not None:
                kwargs["noise"] = noise
            if self.guidance is not None and any(row is not None for row in plan):
                rows = [row if row is not None else rtc_guidance.UNGUIDED for row in plan]
                with self.guidance.planned(rows):
                    chunk = self.policy.predict_action_chunk(batch, **kwargs)
            else:  # a policy that takes RTC as arguments (no lerobot RTC processor) guides one robot per pass
                if plan[0] is not None and len(plan) == 1:
                    kwargs.update(rtc_guidance.rtc_call_kwargs(self.policy, plan[0]))
                chunk = self.policy.predict_action_chunk(batch, **kwargs)
            return self._post_rows([state for state, _, _ in items], chunk)

    @functools.cached_property
    def _noise_spec(self) -> tuple[Callable[..., Any], tuple[int, int, int]] | None:
        """The policy's own noise sampler and one robot's noise shape, or None for families that draw none here
        (no `sample_noise`, or a `sample_actions` that takes no `noise`). Looked up once, not per pass."""
        import inspect

        model = getattr(self.policy, "model", None)
        sample, sampler = getattr(model, "sample_noise", None), getattr(model, "sample_actions", None)
        steps, dims = getattr(self.config, "chunk_size", None), getattr(self.config, "max_action_dim", None)
        if (
            sample is None
            or sampler is None
            or not steps
            or not dims
            or "noise" not in inspect.signature(sampler).parameters
        ):
            return None
        return sample, (1, int(steps), int(dims))

    def _noise(self, n: int) -> Any:
        """Flow-matching noise, one draw per robot in order with the policy's own sampler; None for other families."""
        spec = self._noise_spec
        if spec is None:
            return None
        sample, shape = spec
        return self._torch.cat([sample(shape, self.device) for _ in range(n)], dim=0)

    def _pre(self, state: SessionPipelines, obs: ObservationMsg) -> dict[str, Any]:
        torch = self._torch
        pre: dict[str, Any] = state.pre(self._batch(obs))  # lerobot's pipeline: a batch dict in, a batch dict out
        if self.dtype != torch.float32:
            pre = {
                k: (v.to(self.dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                for k, v in pre.items()
            }
        return pre

    def _post(self, state: SessionPipelines, chunk: Any) -> tuple[NDArray[Any], NDArray[Any]]:
        """(1, T, A) model-space chunk -> (model-space, robot-space) arrays through this session's postprocessor."""
        return self._post_rows([state], chunk)[0]

    def _post_rows(self, states: list[SessionPipelines], chunk: Any) -> list[tuple[NDArray[Any], NDArray[Any]]]:
        """(B, T, A) model-space chunk -> each row's (model-space, robot-space) arrays through its session's own
        postprocessor. The model-space rows are one copy of the whole batch, taken before any postprocessor runs (a
        step may work in place); each row is its own slice of it."""
        chunk = chunk.float()
        model = np.array(chunk.detach().cpu().numpy(), dtype=np.float32)
        out = []
        for i, state in enumerate(states):
            processed = state.post(chunk[i : i + 1]).squeeze(0).detach().float().cpu()
            out.append((model[i], processed.numpy().astype(np.float32)))
        return out

    def _queue_fed_chunk(self, batch: dict[str, Any]) -> Any:
        """Diffusion family: feed the observation queues through select_action and read the whole chunk."""
        torch = self._torch
        queues = getattr(self.policy, "_queues", None)
        if queues is not None and "action" in queues:
            queues["action"].clear()
            first = self.policy.select_action(dict(batch))
            rest = list(self.policy._queues["action"])
            self.policy._queues["action"].clear()
            return torch.stack([first, *rest], dim=1)
        return self.policy.predict_action_chunk(batch)

    def _rtc_row(self, state: SessionPipelines, obs: ObservationMsg, rtc: RtcSettings | None) -> Any:
        """This robot's guidance plan (rtc_guidance.row_plan); None without RTC."""
        if rtc is None or not self.supports_rtc:
            return None
        from .rtc_guidance import row_plan

        return row_plan(obs, rtc, state.relative_step, state.normalizer_step, self.device)

    def bind_serving_thread(self) -> None:
        torch_threads.claim(self._torch, self._cpu_threads)


def stack_batches(batches: list[dict[str, Any]], torch: Any) -> dict[str, Any]:
    """Concatenate per-robot preprocessed batches (batch dim 1) along dim 0.

    Raises ValueError when they cannot share a pass (different keys or feature shapes, differing
    non-tensor values); the worker then serves those robots alone rather than change a result.
    """
    keys = set(batches[0])
    if any(set(b) != keys for b in batches[1:]):
        raise ValueError("robots' preprocessed batches have different keys")
    out: dict[str, Any] = {}
    for k in batches[0]:
        vals = [b[k] for b in batches]
        first = vals[0]
        if isinstance(first, torch.Tensor):
            if any(
                not isinstance(v, torch.Tensor) or v.ndim == 0 or v.shape[0] != 1 or v.shape[1:] != first.shape[1:]
                for v in vals
            ):
                raise ValueError(f"{k}: shapes differ across robots ({[tuple(v.shape) for v in vals]})")
            out[k] = torch.cat(vals, dim=0)
        elif isinstance(first, list) and all(isinstance(v, list) and len(v) == 1 for v in vals):
            out[k] = [v[0] for v in vals]
        elif all(v == first for v in vals):
            out[k] = first
        else:
            raise ValueError(f"{k}: differs across robots and is not per-sample")
    return out
