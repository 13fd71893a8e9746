"""Building what the robot sends: the session-open request and each observation request (pure).

No I/O, no engine state: inputs in, message out, so each rule is unit-tested on its own
(tests/engine/test_request.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.utils.feature_utils import build_dataset_frame
from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import FeatureSpec, RtcSettings, SessionOpen


@dataclass(frozen=True)
class Outstanding:
    """The one request the robot is waiting for."""

    seq_id: int
    mono_ns: int  # request clock at send: echoed by the server, gives the RTT
    t_obs: float  # monotonic time of the source observation (stamps every action of the reply)
    t_send: float  # monotonic time it was published (timeouts, DEGRADED)
    idx_before: int  # queue index at send: the merge trims what was consumed meanwhile
    episode_id: int
    epoch: int


def renamed(key: str, rename_map: dict[str, str] | None) -> str:
    """A canonical observation key under the rollout's `--rename_map` (lerobot's rename step: unmapped keys stay)."""
    return rename_map.get(key, key) if rename_map else key


def feature_specs(hw_features: dict[str, Any], rename_map: dict[str, str] | None = None) -> list[FeatureSpec]:
    """What the robot will send, as the server checks it at session open (names as the policy knows them)."""
    feats = []
    for key, ft in hw_features.items():
        kind = "image" if ft.get("dtype") in ("image", "video") else "state"
        feats.append(FeatureSpec(name=renamed(key, rename_map), kind=kind, shape=[int(x) for x in ft.get("shape", ())]))
    return feats


def rtc_settings(rtc: RTCConfig) -> RtcSettings:
    schedule = rtc.prefix_attention_schedule
    return RtcSettings(
        enabled=bool(rtc.enabled),
        execution_horizon=int(rtc.execution_horizon),
        max_guidance_weight=float(rtc.max_guidance_weight),
        prefix_attention_schedule=str(getattr(schedule, "value", schedule)),
    )


def split_frame(frame: dict[str, Any]) -> tuple[dict[str, NDArray[Any]], dict[str, NDArray[Any]]]:
    """A dataset frame -> (flat float32 state vectors, HxWx3 uint8 images)."""
    state: dict[str, NDArray[Any]] = {}
    images: dict[str, NDArray[Any]] = {}
    for key, value in frame.items():
        arr = np.asarray(value)
        if arr.ndim == 3 and arr.dtype == np.uint8:
            images[key] = arr
        else:
            state[key] = arr.astype(np.float32).reshape(-1)
    return state, images


def rtc_prefix(
    left_over: NDArray[Any] | None, processed_left_over: NDArray[Any] | None, horizon: int
) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
    """The unexecuted head of the queue (model and robot space) the server conditions on.

    An empty leftover sends no prefix (lerobot sends zeros: a documented divergence).
    """
    if left_over is None or len(left_over) == 0:
        return None, None
    robot = np.asarray(processed_left_over[:horizon]) if processed_left_over is not None else None
    return np.asarray(left_over[:horizon]), robot


def capped_delay(delay_steps: int, execution_horizon: int, chunk_size: int) -> int:
    """The RTC inference delay a request carries: the measured one, never past the server's horizon (it guides
    `max(1, execution_horizon)` steps) nor the session's chunk size (0: not known, no bound from it).

    A delay past either means nothing more to the guidance (lerobot clamps it to the horizon), and one past the chunk
    asks the prefix weights for more steps than the chunk has."""
    bound = max(1, int(execution_horizon))
    if chunk_size > 0:
        bound = min(bound, int(chunk_size))
    return max(0, min(int(delay_steps), bound))


def build_observation(
    hw_features: dict[str, Any],
    obs: dict[str, Any],
    *,
    task: str,
    delay_steps: int,
    episode_start: bool,
    prefix: tuple[NDArray[Any] | None, NDArray[Any] | None] = (None, None),
    rename_map: dict[str, str] | None = None,
) -> ObservationMsg:
    """The robot's raw observation dict -> the request body (canonical `observation.*` keys, renamed by
    `rename_map`)."""
    frame = build_dataset_frame(hw_features, obs, prefix="observation")
    if rename_map:
        frame = {renamed(k, rename_map): v for k, v in frame.items()}
    state, images = split_frame(frame)
    return ObservationMsg(
        state=state,
        images=images,
        task=task,
        inference_delay_steps=int(delay_steps),
        prefix_model=prefix[0],
        prefix_robot=prefix[1],
        episode_start=bool(episode_start),
    )


def resize_for_model(images: dict[str, NDArray[Any]], sizes: dict[str, tuple[int, int]]) -> dict[str, NDArray[Any]]:
    """Each camera frame shrunk to its trained (h, w) before encoding: send what the model eats.

    Area interpolation on uint8, stretched to the target like the server's own resize (no crop, no pad), so
    the aspect ratio is handled exactly as before. Only ever shrinks: a frame already at (or below) the
    trained size goes as it is and the server resizes it (docs/wire.md, parity in tests/engine).
    """
    out = dict(images)
    for key, img in images.items():
        want = sizes.get(key)
        if want is None or img.ndim != 3:
            continue
        h, w = want
        if (img.shape[0], img.shape[1]) != (h, w) and h <= img.shape[0] and w <= img.shape[1]:
            out[key] = cv2.resize(np.ascontiguousarray(img), (w, h), interpolation=cv2.INTER_AREA)
    return out


def session_open(
    *,
    client_uuid: str,
    action_names: list[str],
    hw_features: dict[str, Any],
    model_id: str,
    revision: str,
    service: str,
    policy_type: str,
    fps: float,
    task: str,
    rtc: RTCConfig,
    tags: dict[str, str],
    expect_fingerprint: str,
    rename_map: dict[str, str] | None = None,
    reply_dtype: str = "float32",
    reply_max_error: float = 0.0,
) -> SessionOpen:
    return SessionOpen(
        client_uuid=client_uuid,
        action_names=list(action_names),
        features=feature_specs(hw_features, rename_map),
        model_id=model_id,
        revision=revision,
        service=service,
        policy_type=policy_type,
        fps=fps,
        task=task,
        rtc=rtc_settings(rtc),
        tags=dict(tags),
        expect_fingerprint=expect_fingerprint,
        reply_dtype=reply_dtype,
        reply_max_error=float(reply_max_error),
        reply_robot_only=True,
    )
