"""The cameras of one observation are coded at the same time when large: same bytes, same pixels, same errors."""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_policy_remote.wire import images
from lerobot_policy_remote.wire.data import ObservationMsg, decode_observation, encode_observation
from lerobot_policy_remote.wire.errors import WireError


def _frame(seed: int, h: int = 480, w: int = 640) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 127 // (w + h))], axis=-1).astype(np.int16)
    return np.clip(img + rng.integers(-3, 4, img.shape), 0, 255).astype(np.uint8)


def test_large_cameras_code_in_parallel_to_the_same_bytes_and_pixels(monkeypatch):
    cams = {"front": _frame(1), "wrist": _frame(2), "top": _frame(3)}
    used: list[bool] = []
    each = images.each_frame

    def spy(items, fn, parallel):
        used.append(parallel)
        return each(items, fn, parallel)

    monkeypatch.setattr(images, "each_frame", spy)
    parallel = images.encode_images(cams, 90)
    sequential = {k: images.encode_image(v, 90) for k, v in cams.items()}
    assert list(parallel) == list(cams) and parallel == sequential
    decoded = images.decode_images(parallel, targets={"wrist": (120, 160)})
    assert list(decoded) == list(cams)
    for k in cams:
        assert np.array_equal(
            decoded[k], images.decode_image(parallel[k], f"images.{k}", target=(120, 160) if k == "wrist" else None)
        )
    assert used == [True, True]
    msg = decode_observation(encode_observation(ObservationMsg(state={}, images=cams)))
    assert {k: v.shape for k, v in msg.images.items()} == {k: (480, 640, 3) for k in cams}


def test_small_or_single_frames_stay_on_the_calling_thread(monkeypatch):
    used: list[bool] = []
    each = images.each_frame
    monkeypatch.setattr(
        images, "each_frame", lambda items, fn, parallel: used.append(parallel) or each(items, fn, parallel)
    )
    images.encode_images({"a": _frame(1, 96, 128), "b": _frame(2, 96, 128)}, 90)
    images.encode_images({"a": _frame(1)}, 90)
    images.encode_images({"a": _frame(1), "b": _frame(2)}, 0)  # raw: nothing to compress
    assert used == [False, False, False]


def test_a_bad_camera_fails_the_observation_with_its_own_name_in_parallel_too():
    good = images.encode_image(_frame(1), 90)
    bad = dict(images.encode_image(_frame(2), 90), data=b"\xff\xd8" + b"\x00" * 2000)
    with pytest.raises(WireError) as info:
        images.decode_images({"front": good, "wrist": bad})
    assert "images.wrist" in str(info.value)
