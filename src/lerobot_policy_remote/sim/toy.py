"""Save an `rtc_toy` checkpoint like a real one (config.json, model.safetensors, processors)."""

from __future__ import annotations

from pathlib import Path

import torch

SIM_ARM_ACTIONS = [f"{m}.pos" for m in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")]


def save_rtc_toy(
    path: str | Path,
    state_dim: int = 6,
    action_dim: int = 6,
    cameras: dict[str, tuple[int, int]] | None = None,
    chunk_size: int = 20,
) -> Path:
    """Build an rtc_toy policy with fixed weights and realistic stats; save it to `path`."""
    from lerobot.configs.types import FeatureType, PolicyFeature

    from .configuration_rtc_toy import RtcToyConfig
    from .modeling_rtc_toy import RtcToyPolicy
    from .processor_rtc_toy import make_rtc_toy_pre_post_processors

    cameras = {"front": (96, 128)} if cameras is None else cameras
    inputs = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(state_dim,))}
    for cam, (h, w) in cameras.items():
        inputs[f"observation.images.{cam}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))}
    cfg = RtcToyConfig(input_features=inputs, output_features=outputs, chunk_size=chunk_size, n_action_steps=chunk_size, device="cpu")
    mean = torch.tensor([0.0, -30.0, 40.0, 20.0, 0.0, 25.0] * ((max(state_dim, action_dim) // 6) + 1))
    std = torch.tensor([20.0, 15.0, 15.0, 10.0, 30.0, 10.0] * ((max(state_dim, action_dim) // 6) + 1))
    stats = {
        "observation.state": {"mean": mean[:state_dim], "std": std[:state_dim]},
        "action": {"mean": mean[:action_dim], "std": std[:action_dim]},
    }
    policy = RtcToyPolicy(cfg)
    pre, post = make_rtc_toy_pre_post_processors(cfg, stats)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return out
