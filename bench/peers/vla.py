"""pi0 for the `vla` phase, the same checkpoint for every system: tiny on CPU, the stock size on a GPU box.

`save_pi0(dir, size, device)` builds lerobot 0.6.1's pi0 from config (random weights, nothing downloaded: the
tokenizer is trained offline by `testing.vla.save_tokenizer`) for the peers' workload (two cameras, 14-dim state,
50x14 chunks, 10 flow-matching steps as stock) and saves it as a training run does:
  tiny: the stock config under `testing.tiny_pi`'s hook (a few hundred thousand parameters, 64x64 images); every
        process that loads it needs `tiny_pi.SITE_DIR` on its PYTHONPATH (`pythonpath(dir)` says what to append);
  full: the stock gemma_2b + gemma_300m at 224x224 in bfloat16, without the hook (about 3.5 B parameters: a GPU box).
`device` is written into the saved config, so every system loads it there (as `act.save_act` does); the model is
built and saved on the CPU (pi0 moves itself to its config's device when built: a stock-size one would sit on the GPU
beside the servers' copies).

`VlaPolicy` is what the openpi/GR00T-style servers run: what their users write around a lerobot policy
(preprocess, `predict_action_chunk`, postprocess). No RTC: neither openpi's websocket protocol nor GR00T's carries
the robot's previous chunk, so their robots get plain chunks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .act import wrapper_batch
from .workload import CAMERAS, CHUNK, HEIGHT, STATE_DIM, WIDTH

SIZES = ("tiny", "full")
IMAGE = {"tiny": 64, "full": 224}  # the model's square input (pi0's stock image_resolution is 224)
TASK = "pick up the cube"
MARKER = "bench-vla.json"


def save_pi0(path: str | Path, size: str = "tiny", device: str = "cpu", seed: int = 0) -> Path:
    """Build and save the checkpoint (its size and the tiny hook's site in `MARKER`)."""
    from safetensors import safe_open

    from lerobot_policy_remote.testing import tiny_pi
    from lerobot_policy_remote.testing.vla import save_pi

    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {SIZES}")
    side = IMAGE[size]
    path = save_pi(
        "pi0",
        path,
        state_dim=STATE_DIM,
        action_dim=CHUNK[1],
        chunk_size=CHUNK[0],
        num_steps=10,
        image_size=side,
        cameras=list(CAMERAS),
        tiny=size == "tiny",
        dtype="float32" if size == "tiny" else "bfloat16",  # a GPU serves the stock size in bfloat16, as openpi does
        seed=seed,
    )
    with safe_open(str(path / "model.safetensors"), framework="pt") as weights:
        params = sum(int(np.prod(weights.get_slice(k).get_shape())) for k in weights.keys())
    saved = json.loads((path / "config.json").read_text())
    saved["device"] = device
    (path / "config.json").write_text(json.dumps(saved, indent=4))
    (path / MARKER).write_text(
        json.dumps(
            {
                "size": size,
                "device": device,
                "parameters": params,
                "image": side,
                "site": str(tiny_pi.SITE_DIR) if size == "tiny" else "",
            }
        )
    )
    return path


def info(path: str | Path) -> dict[str, Any]:
    """What `save_pi0` wrote about the checkpoint ({} for any other checkpoint)."""
    marker = Path(path) / MARKER
    return json.loads(marker.read_text()) if marker.exists() else {}


def pythonpath(path: str | Path) -> str:
    """The entry a process that loads this checkpoint appends to PYTHONPATH ('' for the stock size)."""
    return str(info(path).get("site", ""))


class VlaPolicy:
    """A lerobot VLA behind the openpi/GR00T-style servers: `infer(obs) -> {"actions": (50, 14)}`, no RTC."""

    def __init__(self, path: str) -> None:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        from lerobot_policy_remote.server.placement import built_on

        self.torch = torch
        cfg = PreTrainedConfig.from_pretrained(path)
        self.device = cfg.device
        with built_on(torch, cfg.device):  # as our server builds it (a stock-size pi0 initialises on the GPU)
            self.policy = get_policy_class(cfg.type).from_pretrained(path, config=cfg).eval()
        self.pre, self.post = make_pre_post_processors(
            cfg, pretrained_path=path, preprocessor_overrides={"device_processor": {"device": cfg.device}}
        )
        self.sizes = {c: tuple(cfg.input_features[f"observation.images.{c}"].shape[-2:]) for c in CAMERAS}
        blank: dict[str, Any] = {"observation/state": np.zeros(STATE_DIM, np.float32)}
        for c in CAMERAS:
            blank[f"observation/{'image' if c == CAMERAS[0] else c + '_image'}"] = np.zeros(
                (HEIGHT, WIDTH, 3), np.uint8
            )
        for _ in range(2):  # warm up as our server does (warmup_inferences: 2), so no arm's first request pays for it
            self.infer(blank)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        batch = wrapper_batch(torch, obs, self.sizes, TASK)
        with torch.inference_mode():
            chunk = self.policy.predict_action_chunk(self.pre(batch))
            out = self.post(chunk)
        return {"actions": out[0].float().cpu().numpy().astype(np.float32)}
