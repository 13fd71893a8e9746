"""Robot-side resize: the chunks match the server-side resize within a stated tolerance.

A real ACT (random weights, 120x160 camera input) served by the real LerobotBackend. Path A sends the full
camera frame and the server resizes it (torch bilinear, stretched to the trained size); path B resizes on
the robot (`request.resize_for_model`: cv2 INTER_AREA, stretched the same way) and the server takes it as is.

Tolerance, measured (8 scenes per camera; the test runs 3, smooth synthetic scenes with sensor noise): max |A - B| in
robot space was 0.22 action units (degrees) for a 480x640 camera and 0.23 for 480x720 (another aspect ratio), out
of actions up to ~46 with a std of 10-30: the two resamplers differ (area averaging vs bilinear point
samples), nothing else. PARITY_ATOL leaves 1.5x margin; a different scene moves the chunk by >= 1.2, so
a robot that sent the wrong frame or a wrongly oriented/cropped one would fail. Documented in docs/wire.md.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from lerobot_policy_remote.engine.request import resize_for_model
from lerobot_policy_remote.wire.data import ObservationMsg, decode_observation, encode_observation

PARITY_ATOL = 0.35
CAM = "observation.images.front"


def scene(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth scene (gradient, shapes, slight blur) with sensor noise: what a camera sees, not white noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([x / w * 200 + 20, y / h * 180 + 30, (x + y) / (h + w) * 120 + 60], -1).astype(np.uint8).copy()
    for _ in range(12):
        c = tuple(int(v) for v in rng.integers(0, 255, 3))
        cv2.circle(img, (int(rng.integers(0, w)), int(rng.integers(0, h))), int(rng.integers(h // 20, h // 5)), c, -1)
        cv2.rectangle(
            img,
            (int(rng.integers(0, w)), int(rng.integers(0, h))),
            (int(rng.integers(0, w)), int(rng.integers(0, h))),
            c,
            -1,
        )
    img = cv2.GaussianBlur(img, (0, 0), 1.0)
    return np.clip(img + rng.normal(0, 3, img.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):
    from lerobot_policy_remote.server.backend import LerobotBackend
    from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
    from lerobot_policy_remote.testing.policies import save_tiny_act

    ckpt = save_tiny_act(tmp_path_factory.mktemp("act120"), cameras={"front": (120, 160)})
    return LerobotBackend(
        Manifest(model=ModelSpec(repo_or_path=str(ckpt)), default_task="t", health_port=0), progress=lambda t: None
    )


def _chunk(backend, state: np.ndarray, img: np.ndarray) -> np.ndarray:
    # through the wire codec (raw frames) so the test sees what the server decodes
    obs = decode_observation(encode_observation(ObservationMsg({"observation.state": state}, {CAM: img}, task="t"), 0))
    return backend.infer(backend.new_session_state(), obs, None)[1]


@pytest.mark.parametrize("camera", [(480, 640), (480, 720)], ids=["4:3", "3:2-aspect-differs"])
def test_robot_side_resize_matches_server_side_resize(backend, camera):
    sizes = {k: (int(v[-2]), int(v[-1])) for k, v in backend.caps.image_shapes.items()}
    assert sizes == {CAM: (120, 160)}
    rng = np.random.default_rng(1)
    worst, nearest_other = 0.0, np.inf
    for seed in range(3):
        state = rng.uniform(-40, 40, 6).astype(np.float32)
        frame = scene(*camera, seed)
        small = resize_for_model({CAM: frame}, sizes)[CAM]
        assert small.shape == (120, 160, 3) and small.dtype == np.uint8
        assert small.nbytes * 16 <= frame.nbytes * (1.5 if camera[1] == 720 else 1.0)  # 16x fewer pixels for 480x640
        server_side, robot_side = _chunk(backend, state, frame), _chunk(backend, state, small)
        worst = max(worst, float(np.abs(server_side - robot_side).max()))
        nearest_other = min(
            nearest_other, float(np.abs(server_side - _chunk(backend, state, scene(*camera, seed + 100))).max())
        )
    assert worst <= PARITY_ATOL, f"robot-side resize differs from the server's by {worst:.3f} (tolerance {PARITY_ATOL})"
    assert nearest_other > 3 * PARITY_ATOL, (
        f"the model barely sees the image ({nearest_other:.3f}): the parity check would prove nothing"
    )


def test_resize_only_shrinks_and_leaves_other_cameras():
    big, tiny, other = (
        np.zeros((480, 640, 3), np.uint8),
        np.zeros((60, 80, 3), np.uint8),
        np.zeros((480, 640, 3), np.uint8),
    )
    out = resize_for_model(
        {CAM: big, "observation.images.wrist": other, "observation.images.low": tiny},
        {CAM: (120, 160), "observation.images.low": (120, 160)},
    )
    assert out[CAM].shape == (120, 160, 3)
    assert out["observation.images.wrist"] is other  # the model told us nothing about it
    assert out["observation.images.low"] is tiny  # already smaller than trained: the server upsamples, fewer bytes sent


def test_flags_parse_like_lerobots():
    import draccus

    from lerobot_policy_remote.engine.config import RemoteInferenceConfig

    default = draccus.parse(RemoteInferenceConfig, args=[])
    assert (default.resize_on_robot, default.reply_dtype, default.reply_max_error) == (True, "float16", 0.05)
    cfg = draccus.parse(RemoteInferenceConfig, args=["--resize_on_robot=false", "--reply_dtype=float32"])
    assert cfg.resize_on_robot is False and cfg.reply_dtype == "float32"
    assert cfg.zenoh_settings().block_wait_before_close_ms == int(cfg.request_timeout_s * 1000)
    with pytest.raises(ValueError, match="reply_dtype"):
        RemoteInferenceConfig(reply_dtype="bfloat16")
