"""Pre/post processors of `rtc_toy`: lerobot's default scaffold (rename, batch, device, normalize)."""

from __future__ import annotations

from typing import Any

import torch
from lerobot.processor import PolicyAction, PolicyProcessorPipeline, make_default_pre_post_processors

from .configuration_rtc_toy import RtcToyConfig


def make_rtc_toy_pre_post_processors(
    config: RtcToyConfig, dataset_stats: dict[str, dict[str, torch.Tensor]] | None = None
) -> tuple[
    PolicyProcessorPipeline[dict[str, Any], dict[str, Any]], PolicyProcessorPipeline[PolicyAction, PolicyAction]
]:
    # lerobot is untyped: its factory's result is the pair this function promises
    pipelines: tuple[
        PolicyProcessorPipeline[dict[str, Any], dict[str, Any]], PolicyProcessorPipeline[PolicyAction, PolicyAction]
    ] = make_default_pre_post_processors(config, dataset_stats, normalizer_device=config.device)
    return pipelines
