"""Unit tests of request building (engine/request.py): pure functions, no engine, no network."""

from __future__ import annotations

import lerobot.rollout  # noqa: F401
import numpy as np
import torch
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.utils.feature_utils import hw_to_dataset_features

from lerobot_policy_remote.engine import request
from lerobot_policy_remote.wire.data import decode_observation, encode_observation

JOINTS = ["a.pos", "b.pos", "c.pos"]
HW = hw_to_dataset_features({**{k: float for k in JOINTS}, "front": (4, 6, 3)}, "observation")


def raw_obs() -> dict:
    return {"a.pos": 1.0, "b.pos": 2.0, "c.pos": 3.0, "front": np.full((4, 6, 3), 7, dtype=np.uint8)}


def test_observation_splits_state_and_images_under_canonical_keys():
    msg = request.build_observation(HW, raw_obs(), task="pick", delay_steps=3, episode_start=True)
    assert list(msg.state) == ["observation.state"]
    assert msg.state["observation.state"].dtype == np.float32
    assert msg.state["observation.state"].tolist() == [1.0, 2.0, 3.0]
    assert list(msg.images) == ["observation.images.front"] and msg.images["observation.images.front"].shape == (
        4,
        6,
        3,
    )
    assert (msg.task, msg.inference_delay_steps, msg.episode_start) == ("pick", 3, True)
    assert msg.prefix_model is None and msg.prefix_robot is None
    back = decode_observation(encode_observation(msg, jpeg_quality=0))  # what the server decodes
    assert back.state["observation.state"].tolist() == [1.0, 2.0, 3.0] and back.episode_start


def test_rtc_prefix_is_the_head_of_the_leftover_in_both_spaces():
    left = torch.arange(20, dtype=torch.float32).reshape(10, 2)
    model, robot = request.rtc_prefix(left, left + 100, horizon=4)
    assert model.tolist() == left[:4].tolist() and robot.tolist() == (left[:4] + 100).tolist()
    short_model, _ = request.rtc_prefix(left[:2], left[:2], horizon=4)
    assert short_model.shape == (2, 2)  # a shorter leftover is sent as it is (the server pads)
    assert request.rtc_prefix(None, None, 4) == (None, None)
    assert request.rtc_prefix(left[:0], left[:0], 4) == (None, None)  # empty: no prefix (documented divergence)


def test_session_open_describes_features_rtc_and_contract():
    req = request.session_open(
        client_uuid="r1",
        action_names=JOINTS,
        hw_features=HW,
        model_id="m",
        revision="main",
        service="pick",
        policy_type="act",
        fps=30.0,
        task="pick",
        rtc=RTCConfig(enabled=True, execution_horizon=8),
        tags={"site": "lab"},
        expect_fingerprint="fp",
    )
    kinds = {f.name: (f.kind, f.shape) for f in req.features}
    assert kinds == {"observation.state": ("state", [3]), "observation.images.front": ("image", [4, 6, 3])}
    assert req.rtc.enabled and req.rtc.execution_horizon == 8 and req.rtc.prefix_attention_schedule == "LINEAR"
    assert req.action_names == JOINTS and req.expect_fingerprint == "fp" and req.tags == {"site": "lab"}


def test_the_rtc_delay_sent_never_passes_the_horizon_nor_the_chunk():
    assert request.capped_delay(3, execution_horizon=10, chunk_size=50) == 3  # within both: as measured
    assert request.capped_delay(60, execution_horizon=10, chunk_size=50) == 10  # the server guides 10 steps
    assert request.capped_delay(60, execution_horizon=50, chunk_size=20) == 20  # the chunk is shorter than the horizon
    assert request.capped_delay(60, execution_horizon=10, chunk_size=0) == 10  # chunk size not known yet: the horizon
    assert request.capped_delay(5, execution_horizon=0, chunk_size=20) == 1  # the server guides at least one step
    assert request.capped_delay(-1, execution_horizon=10, chunk_size=20) == 0
