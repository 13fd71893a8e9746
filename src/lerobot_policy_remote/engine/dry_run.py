"""The SessionOpen a `lerobot-rollout --inference.type=remote` would send, built without hardware.

For `lerobot-fleet doctor`: the robot's features come from its config and Robot class (never
`connect()`), filtered exactly as lerobot 0.6.1's `build_rollout_context` does, and the message is
built by the engine itself so the doctor checks what the robot really sends. Limit: robot types whose
config needs values without defaults (serial ports, IPs) cannot be built from `--robot.type` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..wire.messages import SessionOpen


class DryRunError(ValueError):
    """The robot or policy could not be described without hardware; the message says why."""


@dataclass
class RobotDescription:
    robot_type: str
    policy_type: str
    model_id: str
    action_names: list[str]
    features: dict[str, dict[str, Any]]
    request: SessionOpen


def describe(
    policy_path: str,
    robot_type: str,
    task: str,
    fps: float,
    service_model_id: str = "",
    revision: str = "main",
    service_task: str = "",
) -> RobotDescription:
    import lerobot.rollout.context as context
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.robots import RobotConfig, make_robot_from_config
    from lerobot.utils.feature_utils import hw_to_dataset_features

    from .. import register_lerobot_plugins
    from .config import RemoteInferenceConfig
    from .remote import RemoteInferenceEngine

    register_lerobot_plugins()
    try:
        robot_cfg = RobotConfig.get_choice_class(robot_type)()
    except KeyError:
        raise DryRunError(
            f"unknown robot type {robot_type!r}: use one lerobot-rollout accepts (--robot.type)"
        ) from None
    except TypeError as exc:
        raise DryRunError(
            f"robot type {robot_type!r} needs settings doctor cannot guess ({exc}): "
            "check the robot side with a real lerobot-rollout instead"
        ) from None
    robot = make_robot_from_config(robot_cfg)  # builds the object; no connect(), no hardware touched
    try:
        policy_cfg = PreTrainedConfig.from_pretrained(policy_path)
    except Exception as exc:
        raise DryRunError(
            f"cannot read the policy config at {policy_path!r} ({type(exc).__name__}): pass the "
            "same --policy.path as the rollout (a checkpoint directory or a hub id you can reach)"
        ) from None
    # The same selection as build_rollout_context (cameras, .pos/.vel state; .pos/.vel actions).
    obs_hw = {
        k: v
        for k, v in robot.observation_features.items()
        if isinstance(v, tuple) or (v is float and k.endswith((".pos", ".vel")))
    }
    raw_actions = [k for k in robot.action_features if k.endswith((".pos", ".vel"))]
    names = getattr(policy_cfg, "action_feature_names", None)
    ordered = context._resolve_action_key_order(list(names) if names else None, raw_actions)
    hw_features = hw_to_dataset_features(obs_hw, "observation")
    inference = RemoteInferenceConfig(
        service_model_id=service_model_id, service_revision=revision, service_task=service_task
    )
    model_id = service_model_id or policy_path
    engine = RemoteInferenceEngine(
        inference,
        hw_features=hw_features,
        ordered_action_keys=ordered,
        task=task,
        fps=fps,
        model_id=model_id,
        policy_type=policy_cfg.type,
        robot_type=robot_type,
    )
    request = replace(engine.session_open_request(), dry_run=True)
    return RobotDescription(robot_type, policy_cfg.type, model_id, ordered, hw_features, request)
