"""The small real ACT (on CPU, or `--device cuda`), the same checkpoint for every system.

`save_act(dir)` builds ACT from config (random weights, no backbone download) for this workload
(two cameras, 14-dim state, 50x14 chunks; 480x640 frames on the wire, 120x160 into the model) and saves it with its
processors, so each system runs a real load path: ours through `lerobot-policy-server`, legacy through its own
`SendPolicyInstructions`, and the openpi/GR00T-style servers through `ActPolicy` below (what their
users write: preprocess, `predict_action_chunk`, postprocess).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .workload import CAMERAS, CHUNK, HEIGHT, STATE_DIM, WIDTH

TRAINED_HW = (120, 160)  # the model's input size: every server resizes the 480x640 frames to it, as real deployments do


def save_act(path: str | Path, seed: int = 0, device: str = "cpu") -> Path:
    """Build and save the checkpoint; `device` is stored in its config, so every system loads it there."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    inputs: dict[str, Any] = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(STATE_DIM,))}
    inputs.update(
        {f"observation.images.{c}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, *TRAINED_HW)) for c in CAMERAS}
    )
    config = ACTConfig(
        device=device,
        input_features=inputs,
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(CHUNK[1],))},
        chunk_size=CHUNK[0],
        n_action_steps=CHUNK[0],
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
    policy = ACTPolicy(config).eval()
    stats: dict[str, dict[str, Any]] = {
        k: {
            "mean": torch.zeros(STATE_DIM),
            "std": torch.ones(STATE_DIM),
            "min": -torch.ones(STATE_DIM),
            "max": torch.ones(STATE_DIM),
        }
        for k in ("observation.state", "action")
    }
    for c in CAMERAS:
        stats[f"observation.images.{c}"] = {
            "mean": torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1),
            "std": torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1),
            "min": torch.zeros(3, 1, 1),
            "max": torch.ones(3, 1, 1),
        }
    path = Path(path)
    policy.save_pretrained(path)
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    pre.save_pretrained(path)
    post.save_pretrained(path)
    return path


def wrapper_batch(torch: Any, obs: dict[str, Any], sizes: dict[str, tuple[int, int]], task: str) -> dict[str, Any]:
    """What a peer's wrapper writes around a lerobot policy: the openpi-style request as lerobot's batch, each camera
    resized to the model's input."""
    batch: dict[str, Any] = {
        "observation.state": torch.from_numpy(np.asarray(obs["observation/state"], np.float32)).unsqueeze(0)
    }
    for c in CAMERAS:
        img = np.asarray(obs[f"observation/{'image' if c == CAMERAS[0] else c + '_image'}"]).reshape(HEIGHT, WIDTH, 3)
        t = torch.from_numpy(img).permute(2, 0, 1).float().div_(255.0).unsqueeze(0)
        batch[f"observation.images.{c}"] = torch.nn.functional.interpolate(
            t, size=sizes[c], mode="bilinear", align_corners=False
        )
    batch["task"] = [task]
    return batch


class ActPolicy:
    """A lerobot policy behind the openpi/GR00T-style servers: `infer(obs) -> {"actions": (50, 14)}`."""

    def __init__(self, path: str) -> None:
        import torch
        from lerobot.policies.act.modeling_act import ACTPolicy
        from lerobot.policies.factory import make_pre_post_processors

        self.torch = torch
        self.policy = ACTPolicy.from_pretrained(path).eval()
        self.pre, self.post = make_pre_post_processors(self.policy.config, pretrained_path=path)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        batch = wrapper_batch(torch, obs, {c: TRAINED_HW for c in CAMERAS}, "")
        with torch.inference_mode():
            chunk = self.policy.predict_action_chunk(self.pre(batch))
            out = torch.stack([self.post(chunk[:, i, :]) for i in range(chunk.shape[1])], dim=1)
        return {"actions": out[0].numpy().astype(np.float32)}
