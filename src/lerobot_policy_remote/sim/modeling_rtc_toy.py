"""`RtcToyPolicy`: deterministic chunks that depend on the observation AND the RTC prefix.

Why: RTC paths (prefix shipping, delay hint, re-anchoring, replace-mode merge) and the golden parity
test are only meaningful if the policy's output actually changes with `inference_delay` and
`prev_chunk_left_over`. The maths is trivial on purpose (a linear map plus a ramp, then a hard
freeze of the first `inference_delay` steps to the prefix and a linear blend over the rest of the
execution horizon), so two runs on the same inputs give bit-identical chunks.
"""

from __future__ import annotations

from typing import Any

import torch
from lerobot.policies.pretrained import PreTrainedPolicy
from torch import Tensor, nn

from .configuration_rtc_toy import RtcToyConfig


class RtcToyPolicy(PreTrainedPolicy):
    config_class = RtcToyConfig
    name = "rtc_toy"
    # predict_action_chunk reads only its arguments and fixed weights: safe to share across sessions.
    supports_stateless_chunking = True

    def __init__(self, config: RtcToyConfig, **kwargs: Any) -> None:  # lerobot's factory may pass more
        super().__init__(config)
        config.validate_features()
        self.config = config
        action_dim = config.output_features["action"].shape[0]
        state = config.input_features.get("observation.state")
        state_dim = state.shape[0] if state is not None else 0
        self.state_dim = state_dim
        self.action_dim = action_dim
        gen = torch.Generator().manual_seed(1234)
        self.proj = nn.Linear(max(state_dim, 1), action_dim)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(action_dim, max(state_dim, 1), generator=gen) * 0.3)
            self.proj.bias.copy_(torch.randn(action_dim, generator=gen) * 0.1)
        self.image_keys = sorted(k for k in config.input_features if k.startswith("observation.images."))

    def supports_rtc(self) -> bool:
        return True

    def get_optim_params(self) -> dict[str, Any]:  # torch optimizer param groups
        return {"params": self.parameters()}

    def reset(self) -> None:
        """Stateless: nothing to reset."""

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        pred = self.predict_action_chunk(batch)
        target = batch["action"]
        loss = ((pred - target) ** 2).mean()
        return loss, {"loss": float(loss)}

    @torch.no_grad()
    def predict_action_chunk(
        self,
        batch: dict[str, Tensor],
        inference_delay: int = 0,
        prev_chunk_left_over: Tensor | None = None,
        **kwargs: Any,  # lerobot's RTC engine passes its own options
    ) -> Tensor:
        cfg = self.config
        if self.state_dim:
            state = batch["observation.state"].float()
        else:
            state = torch.zeros(1, 1)
        bsz = state.shape[0]
        base: Tensor = self.proj(state)  # (B, A)
        for key in self.image_keys:
            if key in batch:
                img = batch[key].float()
                base = base + cfg.image_gain * (img.mean(dim=(1, 2, 3)) - 0.5).unsqueeze(-1)
        t = torch.arange(cfg.chunk_size, dtype=torch.float32, device=base.device)
        ramp = (
            cfg.step_scale
            * t[None, :, None]
            * torch.linspace(1.0, -1.0, self.action_dim, device=base.device)[None, None, :]
        )
        chunk = base[:, None, :] + ramp  # (B, T, A)
        if prev_chunk_left_over is not None:
            prefix = prev_chunk_left_over.float().to(base.device)
            if prefix.ndim == 2:
                prefix = prefix.unsqueeze(0).expand(bsz, -1, -1)
            horizon = min(prefix.shape[1], cfg.chunk_size)
            rtc = getattr(cfg, "rtc_config", None)
            if rtc is not None and getattr(rtc, "execution_horizon", None):
                horizon = min(horizon, int(rtc.execution_horizon))
            delay = max(0, min(int(inference_delay), horizon))
            for i in range(horizon):
                if i < delay:
                    w = 1.0
                else:
                    w = max(0.0, 1.0 - (i - delay + 1) / max(1, horizon - delay + 1))
                chunk[:, i] = w * prefix[:, i] + (1.0 - w) * chunk[:, i]
        return chunk

    @torch.no_grad()
    def select_action(self, batch: dict[str, Tensor], **kwargs: Any) -> Tensor:
        return self.predict_action_chunk(batch)[:, 0]
