"""Real-time chunking guidance for a batch of robots, each with its own delay, prefix, horizon and weight.

lerobot 0.6.1's `RTCProcessor.denoise_step` takes one `inference_delay` and one `execution_horizon` for the
whole batch, so robots with RTC could not share a forward pass. `BatchedGuidance` is an `RTCProcessor` whose
`denoise_step` reads a per-row plan instead (set by the backend around each pass with `planned`) and builds each
row's prefix weights with lerobot's own schedule code. A row without a prefix gets zero weights and so exactly
its unguided velocity, as lerobot returns it.

lerobot's step runs `torch.autograd.grad` under `torch.enable_grad()`, which fails under `torch.inference_mode()`
and records the whole denoiser's graph under `no_grad`. The gradient it takes is of x1 = x_t - t * v_t with
respect to x_t, with v_t computed before x_t requires grad: it is the weighted error itself. This step computes
that error directly, so a guided pass builds no graph, runs under `inference_mode`, and costs what an unguided
pass costs; `tests/server/test_vla_rtc.py` checks the chunks against lerobot's own local RTC path.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from lerobot.configs import RTCAttentionSchedule
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.policies.rtc.modeling_rtc import RTCProcessor

# Prefix weight sets remembered (schedule, delay, horizon, length): robots use a handful; a bound all the same.
MAX_WEIGHT_SETS = 1024


@dataclass(frozen=True)
class RowPlan:
    """One robot's guidance in a pass: its prefix (model space, (T', A) or None) and its settings."""

    prefix: torch.Tensor | None
    inference_delay: int
    execution_horizon: int
    max_guidance_weight: float
    schedule: RTCAttentionSchedule


class BatchedGuidance(RTCProcessor):
    """lerobot's RTC processor with a per-row plan; without a plan it is lerobot's processor unchanged."""

    def __init__(self, rtc_config: RTCConfig) -> None:
        super().__init__(rtc_config)
        self._plan: list[RowPlan] | None = None
        self._schedules: dict[RTCAttentionSchedule, RTCProcessor] = {}
        self._weight_memo: dict[tuple[RTCAttentionSchedule, int, int, int], torch.Tensor] = {}
        # The plan's (target, weights, max weight) tensors, built at its first denoise step and reused by the others:
        # they depend on the plan and x_t's shape and device only, which do not change within a pass.
        self._built: tuple[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None
        # The compiled path's plan: (target, weights, max weight) tensors padded to the pass's bucket, bound for one
        # pass by `bound` (server/compiled.py). Every row is guided through them; a row without a prefix has zero
        # weights and a zero max weight, so its velocity is returned unchanged.
        self._bound: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    @contextlib.contextmanager
    def planned(self, plan: list[RowPlan]) -> Iterator[None]:
        """Guide the next pass row by row (the inference worker is the only caller, one pass at a time)."""
        self._plan, self._built = plan, None
        try:
            yield
        finally:
            self._plan, self._built = None, None

    @contextlib.contextmanager
    def bound(self, tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> Iterator[None]:
        """Guide the next pass with plan tensors built beforehand (`plan_tensors`): the compiled path's inputs."""
        self._bound = tensors
        try:
            yield
        finally:
            self._bound = None

    def plan_tensors(
        self, plan: list[RowPlan] | None, batch: int, total: int, action_dim: int, device: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The plan as tensors for a pass of `batch` rows (rows past the plan's unguided); no plan: all unguided."""
        rows = list(plan or [])
        rows += [UNGUIDED] * (batch - len(rows))
        x_t = torch.empty(batch, total, action_dim, device=device)
        return self._build(rows, x_t)

    def _weights(self, row: RowPlan, horizon: int, total: int) -> torch.Tensor:
        """lerobot's prefix weights for this row's schedule (its own `get_prefix_weights`, a pure function of the
        schedule, delay, horizon and length: remembered, so a robot's pass does not rebuild them). Read-only: the
        caller copies them into the pass's weights."""
        key = (row.schedule, row.inference_delay, horizon, total)
        weights = self._weight_memo.get(key)
        if weights is None:
            proc = self._schedules.get(row.schedule)
            if proc is None:
                proc = self._schedules[row.schedule] = RTCProcessor(RTCConfig(prefix_attention_schedule=row.schedule))
            weights = proc.get_prefix_weights(row.inference_delay, horizon, total)  # lerobot: untyped
            if len(self._weight_memo) >= MAX_WEIGHT_SETS:
                self._weight_memo.clear()
            self._weight_memo[key] = weights
        return weights

    def _build(self, plan: list[RowPlan], x_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The plan as batch tensors: each row's prefix (zero-padded), its prefix weights and its max weight."""
        batch, total, action_dim = x_t.shape
        if batch != len(plan):
            raise ValueError(f"RTC plan has {len(plan)} rows for a batch of {batch}")
        target = torch.zeros(batch, total, action_dim, device=x_t.device)
        weights = torch.zeros(batch, total, 1, device=x_t.device)
        max_weight = torch.tensor([row.max_guidance_weight for row in plan], dtype=torch.float32).view(batch, 1, 1)
        max_weight = max_weight.to(x_t.device)
        for i, row in enumerate(plan):
            if row.prefix is None:
                continue
            steps, dims = min(row.prefix.shape[0], total), min(row.prefix.shape[1], action_dim)
            target[i, :steps, :dims] = row.prefix[:steps, :dims].to(x_t.device)
            horizon = min(row.execution_horizon, row.prefix.shape[0])  # lerobot: no longer than the prefix
            weights[i, :, 0] = self._weights(row, horizon, total).to(x_t.device)
        return target, weights, max_weight

    def denoise_step(
        self,
        x_t: torch.Tensor,
        prev_chunk_left_over: torch.Tensor | None,
        inference_delay: int | None,
        time: float | torch.Tensor,
        original_denoise_step_partial: Callable[[torch.Tensor], torch.Tensor],
        execution_horizon: int | None = None,
    ) -> torch.Tensor:
        if self._bound is not None:
            return guided_velocity(x_t, time, original_denoise_step_partial, self._bound)
        plan = self._plan
        if plan is None:
            v_t: torch.Tensor = super().denoise_step(  # lerobot's own step (untyped)
                x_t, prev_chunk_left_over, inference_delay, time, original_denoise_step_partial, execution_horizon
            )
            return v_t
        if all(row.prefix is None for row in plan):
            return original_denoise_step_partial(x_t)
        key = (tuple(x_t.shape), x_t.device)
        if self._built is None or self._built[0] != key:
            self._built = key, self._build(plan, x_t)
        return guided_velocity(x_t, time, original_denoise_step_partial, self._built[1])


def guidance_cap(time: float) -> float:
    """lerobot's guidance weight before the max-weight clamp, min(c / r^2 ...) at flow time `time`, as a number: the
    same formula lerobot evaluates in tensors (tau = 1 - time; +inf where tau = 0; 0 where lerobot's 0 * inf is NaN,
    which its nan_to_num makes 0). A number, so a compiled or captured pass holds no host-to-device copy for it."""
    tau = 1.0 - float(time)
    squared_one_minus_tau = (1.0 - tau) ** 2
    if tau == 0.0:
        return math.inf
    if squared_one_minus_tau == 0.0:
        return 0.0
    return ((1.0 - tau) / tau) * ((squared_one_minus_tau + tau**2) / squared_one_minus_tau)


def guided_velocity(
    x_t: torch.Tensor,
    time: float | torch.Tensor,
    denoise: Callable[[torch.Tensor], torch.Tensor],
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """One guided Euler velocity for every row: v_t minus each row's clamped weight times its weighted error.

    lerobot computes v_t before x_t requires grad, so autograd.grad(x1_t, x_t, err) through x1_t = x_t - time * v_t
    is err itself (the model's Jacobian is not in it): the same correction, no graph."""
    target, weights, max_weight = plan
    v_t = denoise(x_t)
    x1_t = x_t - time * v_t
    correction = (target - x1_t) * weights
    cap = guidance_cap(float(time)) if not isinstance(time, torch.Tensor) else guidance_cap(float(time.reshape(-1)[0]))
    guidance = max_weight.clamp(max=cap)
    return v_t - guidance.to(v_t.device, v_t.dtype) * correction


UNGUIDED = RowPlan(None, 0, 1, 0.0, RTCAttentionSchedule.LINEAR)  # a row in a guided pass that asked for no RTC


def install(policy: Any, rtc_config: RTCConfig) -> BatchedGuidance:
    """Replace the policy's RTC processor (on the policy and its inner model) with a `BatchedGuidance`."""
    guidance = BatchedGuidance(rtc_config)
    policy.rtc_processor = guidance
    inner = getattr(policy, "model", None)
    if inner is not None and hasattr(inner, "rtc_processor"):
        inner.rtc_processor = guidance
    return guidance


def autograd_context(torch_module: Any, own_guidance: bool, guided: bool) -> contextlib.AbstractContextManager[Any]:
    """What a pass runs under: `inference_mode`, except a guided pass of a policy that guides itself (RTC taken as
    arguments, no `BatchedGuidance`), which may need autograd: `no_grad`, as lerobot decorates
    `predict_action_chunk`."""
    context: contextlib.AbstractContextManager[Any] = (
        torch_module.no_grad() if guided and not own_guidance else torch_module.inference_mode()
    )
    return context


def rtc_call_kwargs(policy: Any, row: RowPlan) -> dict[str, Any]:
    """lerobot's RTC call convention for a policy without an RTC processor: the robot's settings on the policy's
    `rtc_config`, its delay and prefix as arguments."""
    rtc_cfg = getattr(policy.config, "rtc_config", None)
    if rtc_cfg is not None:
        rtc_cfg.execution_horizon = row.execution_horizon
        rtc_cfg.max_guidance_weight = row.max_guidance_weight
        rtc_cfg.prefix_attention_schedule = row.schedule
    return {"inference_delay": row.inference_delay, "prev_chunk_left_over": row.prefix}


def row_plan(obs: Any, rtc: Any, relative_step: Any, normalizer_step: Any, device: Any) -> RowPlan:
    """One robot's guidance: its prefix (re-anchored for relative-action policies, padded or cut to its horizon
    as lerobot's RTC engine does) and its own settings."""
    from lerobot.rollout.inference.rtc import _normalize_prev_actions_length

    try:
        schedule = RTCAttentionSchedule(rtc.prefix_attention_schedule)
    except ValueError:
        schedule = RTCAttentionSchedule.LINEAR
    horizon = max(1, int(rtc.execution_horizon))
    prefix = None
    if obs.prefix_model is not None and obs.prefix_model.size:
        prefix = torch.from_numpy(np.array(obs.prefix_model, dtype=np.float32))
        if relative_step is not None and obs.prefix_robot is not None and obs.prefix_robot.size:
            from lerobot.policies.rtc.relative import reanchor_relative_rtc_prefix

            raw_state = relative_step.get_cached_state()
            if raw_state is not None:
                prefix = reanchor_relative_rtc_prefix(
                    prev_actions_absolute=torch.from_numpy(np.array(obs.prefix_robot, dtype=np.float32)),
                    current_state=raw_state,
                    relative_step=relative_step,
                    normalizer_step=normalizer_step,
                    policy_device=device,
                )
                if prefix.ndim == 3:
                    prefix = prefix.squeeze(0)
        prefix = _normalize_prev_actions_length(prefix.cpu(), target_steps=horizon).to(device)
    return RowPlan(prefix, int(obs.inference_delay_steps), horizon, float(rtc.max_guidance_weight), schedule)
