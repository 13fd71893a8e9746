"""Save an `rtc_toy` checkpoint like a real one (config.json, model.safetensors, processors)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # for the checker only: the module imports lerobot once it needs it
    from .configuration_rtc_toy import RtcToyConfig

SIM_ARM_ACTIONS = [
    f"{m}.pos" for m in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
]


def save_rtc_toy(
    path: str | Path,
    state_dim: int = 6,
    action_dim: int = 6,
    cameras: dict[str, tuple[int, int]] | None = None,
    chunk_size: int = 20,
    relative_actions: bool = False,
) -> Path:
    """Build an rtc_toy policy with fixed weights and realistic stats; save it to `path`.

    `relative_actions=True` saves lerobot's Relative/Absolute action steps around the normalizer
    (gripper excluded), so RTC prefixes must be re-anchored at the current state (the contract the
    golden parity test checks against lerobot's local engine).
    """
    from lerobot.configs.types import FeatureType, PolicyFeature

    from .configuration_rtc_toy import RtcToyConfig
    from .modeling_rtc_toy import RtcToyPolicy
    from .processor_rtc_toy import make_rtc_toy_pre_post_processors

    cameras = {"front": (96, 128)} if cameras is None else cameras
    inputs = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(state_dim,))}
    for cam, (h, w) in cameras.items():
        inputs[f"observation.images.{cam}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))}
    cfg = RtcToyConfig(
        input_features=inputs, output_features=outputs, chunk_size=chunk_size, n_action_steps=chunk_size, device="cpu"
    )
    mean = torch.tensor([0.0, -30.0, 40.0, 20.0, 0.0, 25.0] * ((max(state_dim, action_dim) // 6) + 1))
    std = torch.tensor([20.0, 15.0, 15.0, 10.0, 30.0, 10.0] * ((max(state_dim, action_dim) // 6) + 1))
    stats = {
        "observation.state": {"mean": mean[:state_dim], "std": std[:state_dim]},
        "action": {"mean": mean[:action_dim], "std": std[:action_dim]},
    }
    policy = RtcToyPolicy(cfg)
    if relative_actions:
        pre, post = _relative_pipelines(cfg, stats, SIM_ARM_ACTIONS[:action_dim] if action_dim <= 6 else None)
    else:
        pre, post = make_rtc_toy_pre_post_processors(cfg, stats)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return out


def write_action_names(path: str | Path, names: list[str] | None = None) -> Path:
    """Name the checkpoint's actions as a training run's dataset does (`meta/info.json` features.action.names),
    so a server checks a robot's action order by name (the sim arm's six joints unless told otherwise)."""
    import json

    info = Path(path) / "meta" / "info.json"
    info.parent.mkdir(parents=True, exist_ok=True)
    info.write_text(json.dumps({"features": {"action": {"names": list(names or SIM_ARM_ACTIONS)}}}, indent=1))
    return info


def _relative_pipelines(
    config: RtcToyConfig, stats: dict[str, dict[str, torch.Tensor]], action_names: list[str] | None
) -> tuple[Any, Any]:
    """raw -> relative -> normalize -> model -> unnormalize -> absolute (lerobot's OpenPI order)."""
    from lerobot.processor.factory import make_default_policy_processor_steps, make_policy_processor_pipelines
    from lerobot.processor.relative_action_processor import AbsoluteActionsProcessorStep, RelativeActionsProcessorStep

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


if __name__ == "__main__":  # `python -m lerobot_policy_remote.sim.toy DIR`: the demo's policy, one camera
    import sys

    from lerobot_policy_remote import register_lerobot_plugins

    register_lerobot_plugins()
    out = save_rtc_toy(sys.argv[1], cameras={"front": (96, 128)})
    write_action_names(out)  # the demo's arms are sim arms: their order is checked by name
    print(f"saved rtc_toy policy to {out}")
