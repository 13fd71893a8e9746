"""The batched RTC guidance remembers what does not change: a pass's plan tensors across its denoise steps, and each
(schedule, delay, horizon, length)'s prefix weights across passes. A guidance that has served other robots must
guide a pass exactly as a fresh one does, whatever the rows' settings."""

from __future__ import annotations

import itertools

import torch
from lerobot.configs import RTCAttentionSchedule
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.server.rtc_guidance import UNGUIDED, BatchedGuidance, RowPlan

TOTAL, DIMS = 20, 4


def velocity(x_t: torch.Tensor) -> torch.Tensor:
    """Stands in for the model's denoiser: any fixed function of x_t."""
    return torch.sin(x_t) * 0.5 + 0.1


def plan(settings: list[tuple[RTCAttentionSchedule, int, int] | None]) -> list[RowPlan]:
    gen = torch.Generator().manual_seed(len(settings))
    rows = []
    for s in settings:
        if s is None:
            rows.append(UNGUIDED)
            continue
        schedule, delay, horizon = s
        rows.append(RowPlan(torch.randn(horizon, DIMS, generator=gen), delay, horizon, 5.0, schedule))
    return rows


def guided_pass(guidance: BatchedGuidance, rows: list[RowPlan], steps: int = 3) -> torch.Tensor:
    """A flow-matching loop of `steps` Euler steps under this plan, as the policy runs it."""
    x_t = torch.randn(len(rows), TOTAL, DIMS, generator=torch.Generator().manual_seed(7))
    with guidance.planned(rows):
        for k in range(steps):
            time = 1.0 - k / steps
            x_t = x_t - (1 / steps) * guidance.denoise_step(x_t, None, None, time, velocity)
    return x_t


def test_a_used_guidance_guides_as_a_fresh_one_across_settings_and_passes() -> None:
    used = BatchedGuidance(RTCConfig())
    settings = list(itertools.product(list(RTCAttentionSchedule), (0, 1, 3), (2, 6, 12)))
    for start in range(0, len(settings), 5):
        rows = plan([*settings[start : start + 5], None])
        twice = [guided_pass(used, rows), guided_pass(used, rows)]
        fresh = guided_pass(BatchedGuidance(RTCConfig()), rows)
        for got in twice:
            torch.testing.assert_close(got, fresh, rtol=0, atol=0)


def test_a_robots_new_delay_or_horizon_changes_its_guidance() -> None:
    guidance = BatchedGuidance(RTCConfig())
    linear = RTCAttentionSchedule.LINEAR
    first = guided_pass(guidance, plan([(linear, 1, 8), (linear, 2, 8)]))
    for changed in ([(linear, 3, 8), (linear, 2, 8)], [(linear, 1, 8), (linear, 2, 10)]):
        got = guided_pass(guidance, plan(changed))
        torch.testing.assert_close(got, guided_pass(BatchedGuidance(RTCConfig()), plan(changed)), rtol=0, atol=0)
        assert not torch.equal(got, first)


def test_a_batch_of_a_different_size_is_planned_anew() -> None:
    guidance = BatchedGuidance(RTCConfig())
    linear = RTCAttentionSchedule.LINEAR
    guided_pass(guidance, plan([(linear, 1, 8)] * 3))
    rows = plan([(linear, 1, 8)] * 2)
    torch.testing.assert_close(
        guided_pass(guidance, rows), guided_pass(BatchedGuidance(RTCConfig()), rows), rtol=0, atol=0
    )
