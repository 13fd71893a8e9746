"""Build tiny but real lerobot 0.6.1 policies and save them like hub checkpoints.

Why: the server and the robot-side backend must be tested against real policies loaded
through lerobot's generic factory path (config.json + model.safetensors + the saved
pre/post processor pipelines), without hub downloads and fast enough for a 2-core CPU box.
Weights are random (``pretrained_backbone_weights=None``); normalization stats are realistic
so the (un)normalizer steps are never a no-op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES

# Plausible joint statistics (degrees / gripper percent) for the 6-joint sim arm.
_JOINT_MEAN = [0.0, -30.0, 40.0, 20.0, 0.0, 25.0]
_JOINT_STD = [20.0, 15.0, 15.0, 10.0, 30.0, 10.0]


def _features(
    state_dim: int, action_dim: int, cameras: dict[str, tuple[int, int]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Input/output PolicyFeature dicts with canonical lerobot keys (lerobot's PolicyFeature: untyped)."""
    from lerobot.configs.types import FeatureType, PolicyFeature

    inputs: dict[str, Any] = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(state_dim,))}
    for cam, (h, w) in cameras.items():
        inputs[f"observation.images.{cam}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))}
    return inputs, outputs


def _vec(values: list[float], dim: int) -> torch.Tensor:
    """Repeat/cut a template vector to ``dim`` entries."""
    return torch.tensor([values[i % len(values)] for i in range(dim)], dtype=torch.float32)


def make_dataset_stats(
    state_dim: int, action_dim: int, cameras: dict[str, tuple[int, int]]
) -> dict[str, dict[str, torch.Tensor]]:
    """Realistic mean/std/min/max for state, action and each camera (non-trivial normalization)."""
    stats: dict[str, dict[str, torch.Tensor]] = {}
    for key, dim in (("observation.state", state_dim), ("action", action_dim)):
        mean, std = _vec(_JOINT_MEAN, dim), _vec(_JOINT_STD, dim)
        stats[key] = {"mean": mean, "std": std, "min": mean - 3 * std, "max": mean + 3 * std}
    for cam in cameras:
        stats[f"observation.images.{cam}"] = {
            "mean": torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1),
            "std": torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1),
            "min": torch.zeros(3, 1, 1),
            "max": torch.ones(3, 1, 1),
        }
    return stats


def _relative_pipelines(
    config: Any, stats: dict[str, dict[str, torch.Tensor]], action_names: list[str] | None
) -> tuple[Any, Any]:
    """Default pipeline pair with lerobot's Relative/Absolute action steps (OpenPI order).

    raw -> relative -> normalize -> model -> unnormalize -> absolute. The relative step caches
    the state at preprocess and the absolute step reads it at postprocess: sharing one pipeline
    between robots would anchor one robot's chunk at another robot's state.
    """
    from lerobot.processor.factory import (
        make_default_policy_processor_steps,
        make_policy_processor_pipelines,
    )
    from lerobot.processor.relative_action_processor import (
        AbsoluteActionsProcessorStep,
        RelativeActionsProcessorStep,
    )

    steps = make_default_policy_processor_steps(config, stats)
    relative = RelativeActionsProcessorStep(enabled=True, exclude_joints=["gripper"], action_names=action_names)
    pipelines: tuple[Any, Any] = make_policy_processor_pipelines(  # lerobot is untyped: (preprocessor, postprocessor)
        input_steps=[steps.rename_observations, steps.add_batch_dim, relative, steps.to_device, steps.normalize],
        output_steps=[
            steps.unnormalize,
            AbsoluteActionsProcessorStep(enabled=True, relative_step=relative),
            steps.to_cpu,
        ],
    )
    return pipelines


def _save(
    policy: Any,
    config: Any,
    stats: dict[str, dict[str, torch.Tensor]],
    path: Path,
    relative_actions: bool,
    action_names: list[str] | None,
) -> Path:
    """Write config, weights and processor pipelines exactly like a training checkpoint."""
    from lerobot.policies.factory import make_pre_post_processors

    path.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(path)
    if relative_actions:
        pre, post = _relative_pipelines(config, stats, action_names)
    else:
        pre, post = make_pre_post_processors(config, dataset_stats=stats)
    pre.save_pretrained(path)
    post.save_pretrained(path)
    return path


def save_tiny_act(
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    cameras: dict[str, tuple[int, int]] | None = None,
    chunk_size: int = 20,
    n_action_steps: int | None = None,
    relative_actions: bool = False,
    seed: int = 0,
) -> Path:
    """Save a small random-weight ACT checkpoint (resnet18 backbone, 1-layer transformer)."""
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    cameras = {"front": (96, 128)} if cameras is None else cameras
    inputs, outputs = _features(state_dim, action_dim, cameras)
    config = ACTConfig(
        device="cpu",
        input_features=inputs,
        output_features=outputs,
        chunk_size=chunk_size,
        n_action_steps=n_action_steps or chunk_size,
        pretrained_backbone_weights=None,
        dim_model=64,
        n_heads=2,
        dim_feedforward=128,
        n_encoder_layers=1,
        n_decoder_layers=1,
        use_vae=False,
        latent_dim=8,
        push_to_hub=False,
    )
    torch.manual_seed(seed)
    policy = ACTPolicy(config)
    policy.eval()
    stats = make_dataset_stats(state_dim, action_dim, cameras)
    names = SIM_ARM_ACTION_NAMES if action_dim == len(SIM_ARM_ACTION_NAMES) else None
    return _save(policy, config, stats, Path(path), relative_actions, names)


def save_tiny_diffusion(
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    cameras: dict[str, tuple[int, int]] | None = None,
    horizon: int = 16,
    n_obs_steps: int = 2,
    n_action_steps: int = 8,
    num_inference_steps: int = 3,
    num_train_timesteps: int = 100,
    seed: int = 0,
) -> Path:
    """Save a small random-weight Diffusion Policy checkpoint (stateful: observation queues)."""
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

    cameras = {"front": (96, 128)} if cameras is None else cameras
    inputs, outputs = _features(state_dim, action_dim, cameras)
    h, w = next(iter(cameras.values())) if cameras else (96, 128)
    config = DiffusionConfig(
        device="cpu",
        input_features=inputs,
        output_features=outputs,
        n_obs_steps=n_obs_steps,
        horizon=horizon,
        n_action_steps=n_action_steps,
        drop_n_last_frames=max(0, horizon - n_action_steps - n_obs_steps + 1),
        pretrained_backbone_weights=None,
        use_group_norm=True,
        crop_shape=(min(84, h), min(84, w)),
        down_dims=(32, 64),
        diffusion_step_embed_dim=32,
        spatial_softmax_num_keypoints=16,
        num_inference_steps=num_inference_steps,
        num_train_timesteps=num_train_timesteps,
        push_to_hub=False,
    )
    torch.manual_seed(seed)
    policy = DiffusionPolicy(config)
    policy.eval()
    stats = make_dataset_stats(state_dim, action_dim, cameras)
    return _save(policy, config, stats, Path(path), False, None)
