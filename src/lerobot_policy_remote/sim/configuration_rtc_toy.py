"""`rtc_toy`: a tiny, deterministic, RTC-capable policy config (tests, demo, golden parity).

Registered through lerobot's config registry; lerobot's factory finds `RtcToyPolicy` in the sibling
`modeling_rtc_toy` module and `make_rtc_toy_pre_post_processors` in `processor_rtc_toy` by convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.configs import FeatureType, NormalizationMode, PreTrainedConfig
from lerobot.optim.optimizers import AdamConfig
from lerobot.policies.rtc.configuration_rtc import RTCConfig


@PreTrainedConfig.register_subclass("rtc_toy")
@dataclass
class RtcToyConfig(PreTrainedConfig):
    n_obs_steps: int = 1
    chunk_size: int = 20
    n_action_steps: int = 20
    step_scale: float = 0.05  # how far each chunk step moves (normalized units)
    image_gain: float = 0.5  # how much the camera image shifts the chunk
    normalization_mapping: dict[str, NormalizationMode] = field(
        default_factory=lambda: {
            "VISUAL": NormalizationMode.IDENTITY,
            "STATE": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MEAN_STD,
        }
    )
    rtc_config: RTCConfig | None = None  # set by lerobot's RTC engine; caps the blended horizon

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    @property
    def reward_delta_indices(self) -> None:
        return None

    def get_optimizer_preset(self) -> AdamConfig:
        return AdamConfig(lr=1e-4)

    def get_scheduler_preset(self) -> None:
        return None

    def validate_features(self) -> None:
        if not self.output_features or FeatureType.ACTION not in {f.type for f in self.output_features.values()}:
            raise ValueError("rtc_toy needs an ACTION output feature")
