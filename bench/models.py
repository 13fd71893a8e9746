"""The benches' models and what their robots send: a small ACT, the VLA checkpoints (tiny on a CPU, stock size on a
GPU), observations, and RTC requests as a robot states them. Shared by `bench/batching.py` and `bench/engine.py`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lerobot_policy_remote.wire.data import ObservationMsg
from lerobot_policy_remote.wire.messages import RtcSettings

ACTIONS = [f"joint{i}.pos" for i in range(6)]
CAMERAS = {"front": (96, 128), "wrist": (96, 128)}
VLA_MODELS = ("tiny-smolvla", "smolvla", "pi0")
VLA_CAMERAS = {"front": (64, 64)}  # testing.vla's camera at the tiny SmolVLA's trained size (the robot resizes to it)
VLA_TASK = "pick up the cube"
# Robot i's RTC: its session's execution horizon and its observations' inference delay (steps), different by robot.
RTC_HORIZONS = (6, 8, 10, 12)
RTC_DELAYS = (1, 2, 3)
# Steps left in a robot's queue when it asks for the next chunk: the engine's buffer_time_s (0.5 s) at 30 fps. The
# robot's prefix is the head of this leftover, cut to its horizon (engine.request.rtc_prefix).
LEFTOVER_STEPS = 15


def robot_rtc(i: int) -> tuple[RtcSettings, int]:
    """Robot i's RTC as a real robot states it: the settings its session open carries (built from the rollout's
    `--inference.rtc.*` config by the engine's own code) and the inference delay its observations carry."""
    from lerobot_policy_remote.engine.config import RemoteRTCConfig
    from lerobot_policy_remote.engine.request import rtc_settings

    return rtc_settings(
        RemoteRTCConfig(enabled=True, execution_horizon=RTC_HORIZONS[i % len(RTC_HORIZONS)])
    ), RTC_DELAYS[i % len(RTC_DELAYS)]


# What is left of a chunk in a robot's queue: (model space, robot space), each (LEFTOVER_STEPS, A) float32.
LeftOver = tuple[NDArray[np.float32], NDArray[np.float32]]


def with_prefix(obs: ObservationMsg, left_over: LeftOver | None, horizon: int, delay: int) -> ObservationMsg:
    """The observation as the engine sends it with RTC on: its delay, and the head of the leftover (model and robot
    space) cut to the horizon by the engine's `rtc_prefix` (no prefix while the queue is empty: the first request)."""
    from lerobot_policy_remote.engine.request import rtc_prefix

    heads: tuple[NDArray[np.float32] | None, NDArray[np.float32] | None] = left_over or (None, None)
    model, robot = rtc_prefix(*heads, horizon)
    return dataclasses.replace(obs, inference_delay_steps=delay, prefix_model=model, prefix_robot=robot)


def left_over(chunk_model: NDArray[np.float32], chunk_robot: NDArray[np.float32]) -> LeftOver:
    """What is left of a chunk in the robot's queue when it asks for the next one (LEFTOVER_STEPS), as the engine's
    queue hands it over (`left_over_head`: numpy copies)."""
    return (
        np.array(chunk_model[-LEFTOVER_STEPS:], dtype=np.float32),
        np.array(chunk_robot[-LEFTOVER_STEPS:], dtype=np.float32),
    )


def save_act(path: Path, device: str = "cpu") -> Path:
    """A small random-weight ACT checkpoint saved like a training run (config, weights, processors)."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    feats = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,))}
    feats |= {
        f"observation.images.{c}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w))
        for c, (h, w) in CAMERAS.items()
    }
    cfg = ACTConfig(
        device=device,
        input_features=feats,
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
        chunk_size=50,
        n_action_steps=50,
        pretrained_backbone_weights=None,
        dim_model=64,
        n_heads=2,
        dim_feedforward=128,
        n_encoder_layers=1,
        n_decoder_layers=1,
        use_vae=False,
        push_to_hub=False,
    )
    torch.manual_seed(0)
    unit = {
        "mean": torch.zeros(6),
        "std": torch.full((6,), 20.0),
        "min": torch.full((6,), -60.0),
        "max": torch.full((6,), 60.0),
    }
    image = {
        "mean": torch.full((3, 1, 1), 0.45),
        "std": torch.full((3, 1, 1), 0.22),
        "min": torch.zeros(3, 1, 1),
        "max": torch.ones(3, 1, 1),
    }
    stats = {"observation.state": unit, "action": unit} | {f"observation.images.{c}": image for c in CAMERAS}
    ACTPolicy(cfg).eval().save_pretrained(path)
    for pipeline in make_pre_post_processors(cfg, dataset_stats=stats):
        pipeline.save_pretrained(path)
    return path


def save_vla(model: str, path: Path, device: str) -> tuple[Path, dict[str, tuple[int, int]], str]:
    """The VLA table's checkpoint, the camera its robots send (at the model's input size) and its title."""
    from lerobot_policy_remote.testing.vla import STOCK_SMOLVLA_IMAGE, save_pi, save_stock_smolvla, save_tiny_smolvla

    if model == "tiny-smolvla":
        title = "tiny SmolVLA (64x64 camera, chunk 50, 3 flow steps)"
        return save_tiny_smolvla(path, chunk_size=50), VLA_CAMERAS, title
    if model == "smolvla":
        side = STOCK_SMOLVLA_IMAGE
        return (
            save_stock_smolvla(path, device=device),
            {"front": (side, side)},
            f"stock-size SmolVLA ({side}x{side} camera, chunk 50, 10 flow steps, float32)",
        )
    side = 224  # pi0's stock image_resolution
    ckpt = save_pi(
        "pi0", path, chunk_size=50, num_steps=10, image_size=side, tiny=False, dtype="bfloat16", cameras=["front"]
    )
    return ckpt, {"front": (side, side)}, f"stock-size pi0 ({side}x{side} camera, chunk 50, 10 flow steps, bfloat16)"


def observation(rng: np.random.Generator, cameras: dict[str, tuple[int, int]]) -> ObservationMsg:
    images = {
        f"observation.images.{c}": rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for c, (h, w) in cameras.items()
    }
    return ObservationMsg({"observation.state": rng.uniform(-50, 50, 6).astype(np.float32)}, images)


def requests(
    backend: Any, b: int, cameras: dict[str, tuple[int, int]], rtc: bool
) -> list[tuple[Any, ObservationMsg, RtcSettings | None]]:
    """b robots' requests for one direct backend pass: with RTC, each row its robot's own prefix (the tail of a chunk
    this model computed), delay and horizon, as in a served run."""
    obs = observation(np.random.default_rng(0), cameras)
    states = [backend.new_session_state() for _ in range(b)]
    if not rtc:
        return [(s, obs, None) for s in states]
    left = left_over(*backend.infer(backend.new_session_state(), obs, None))
    out: list[tuple[Any, ObservationMsg, RtcSettings | None]] = []
    for i, s in enumerate(states):
        settings, delay = robot_rtc(i)
        out.append((s, with_prefix(obs, left, settings.execution_horizon, delay), settings))
    return out
