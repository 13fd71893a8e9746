import io

import numpy as np
import pytest
from PIL import Image

from lerobot_policy_remote.wire import WireError
from lerobot_policy_remote.wire.images import decode_image, encode_image
from lerobot_policy_remote.wire.limits import WireLimits


def red(h=48, w=64):
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[..., 0] = 255
    return img


@pytest.mark.parametrize("quality", [0, 90, 50])
def test_pure_red_stays_red(quality):
    out = decode_image(encode_image(red(), quality), "images.front")
    assert out.shape == (48, 64, 3) and out.dtype == np.uint8
    r, g, b = (out[..., i].astype(int).mean() for i in range(3))
    assert r > 240 and g < 15 and b < 15, (r, g, b)


def test_raw_round_trip_is_exact():
    img = np.random.default_rng(1).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    assert np.array_equal(decode_image(encode_image(img, 0), "i"), img)


@pytest.mark.parametrize("quality", [0, 95])
def test_single_channel(quality):
    img = np.tile(np.arange(40, dtype=np.uint8) * 6, (30, 1))
    out = decode_image(encode_image(img, quality), "i")
    assert out.shape == (30, 40, 1)
    assert np.abs(out[..., 0].astype(int) - img).max() <= 6


def test_jpeg_header_must_match_declared_shape():
    wire = encode_image(red(), 90)
    wire["shape"] = [96, 64, 3]
    with pytest.raises(WireError, match="JPEG header says 48x64x3"):
        decode_image(wire, "images.front")


def test_decompression_bomb_refused_before_decoding():
    # A tiny JPEG whose header claims 60000x60000: refused by the declared-shape limit or the header check.
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (255, 0, 0)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2
    assert len(data) < 1000
    for shape in ([60000, 60000, 3], [8, 8, 3]):
        with pytest.raises(WireError):
            decode_image({"codec": "jpeg", "shape": shape, "data": bytes(data)}, "images.front")


@pytest.mark.parametrize(
    "wire,match",
    [
        ({"codec": "png", "shape": [1, 1, 3], "data": b""}, "codec"),
        ({"codec": "raw", "shape": [2, 2, 3], "data": b"\x00" * 11}, "needs 12 bytes"),
        ({"codec": "raw", "shape": [2, 2, 4], "data": b"\x00" * 16}, "channels"),
        ({"codec": "raw", "shape": [0, 2, 3], "data": b""}, "outside the limits"),
        ({"codec": "jpeg", "shape": [2, 2, 3], "data": b"\xff\xd8garbage"}, "not a readable JPEG"),
        ({"codec": "raw", "shape": [2, 2], "data": b""}, "height, width"),
    ],
)
def test_hostile_images_are_refused(wire, match):
    with pytest.raises(WireError, match=match):
        decode_image(wire, "images.front")


def test_limits_are_configurable():
    with pytest.raises(WireError, match="outside the limits"):
        decode_image(encode_image(red(48, 64), 0), "i", WireLimits(max_image_side=32))


def test_dct_downscale_to_a_much_smaller_target_and_full_size_otherwise():
    """A 480x640 JPEG for a 96x128 model is decoded at 1/4 scale (120x160, still >= the target); a target
    less than half the frame per side, or none, gets the full frame; the result is close to an area resize."""
    import cv2

    y, x = np.mgrid[0:480, 0:640]
    img = np.stack([x * 255 / 640, y * 255 / 480, (x + y) * 255 / 1120], axis=-1).astype(np.uint8)
    wire = encode_image(img, 95)
    small = decode_image(wire, "f", target=(96, 128))
    assert small.shape == (120, 160, 3) and small.dtype == np.uint8
    area = cv2.resize(img, (160, 120), interpolation=cv2.INTER_AREA)
    assert np.abs(small.astype(int) - area.astype(int)).mean() < 3.0  # same picture, at the smaller scale
    assert decode_image(wire, "f", target=(300, 400)).shape == (480, 640, 3)
    assert decode_image(wire, "f").shape == (480, 640, 3)
    raw = encode_image(img, 0)
    assert decode_image(raw, "f", target=(96, 128)).shape == (480, 640, 3)  # raw frames are never rescaled here
