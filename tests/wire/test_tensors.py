import numpy as np
import pytest

from lerobot_policy_remote.wire import WireError
from lerobot_policy_remote.wire.codec import pack, unpack_map
from lerobot_policy_remote.wire.limits import DEFAULT_LIMITS
from lerobot_policy_remote.wire.tensors import DTYPES, decode_tensor, encode_tensor

SHAPES = [(), (0,), (3,), (2, 0, 4), (4, 5), (2, 3, 4)]


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
def test_exact_round_trip_for_every_allowed_dtype(name, shape):
    rng = np.random.default_rng(0)
    dt = DTYPES[name]
    if dt.kind == "f":
        arr = rng.standard_normal(shape).astype(dt)
        if arr.size:
            arr.flat[0] = np.finfo(dt).max
    elif dt.kind == "b":
        arr = rng.integers(0, 2, shape).astype(bool)
    else:
        info = np.iinfo(dt)
        arr = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    wire = unpack_map(pack({"t": encode_tensor(arr)}), "t", DEFAULT_LIMITS, 1 << 20)["t"]
    out = decode_tensor(wire, "t")
    assert out.dtype == dt and out.shape == arr.shape
    assert out.tobytes() == arr.tobytes()


def test_big_endian_input_is_stored_little_endian():
    arr = np.arange(4, dtype=">f4")
    wire = encode_tensor(arr)
    assert wire["dtype"] == "float32" and wire["data"] == np.arange(4, dtype="<f4").tobytes()


@pytest.mark.parametrize("arr", [np.zeros(2, dtype=np.complex64), np.array(["a"]), np.zeros(2, dtype=object)])
def test_disallowed_dtypes_refused_on_encode(arr):
    with pytest.raises(WireError, match="not allowed"):
        encode_tensor(arr)


@pytest.mark.parametrize(
    "wire,match",
    [
        ({"dtype": "complex64", "shape": [1], "data": b"\x00" * 8}, "dtype"),
        ({"dtype": "float32", "shape": [3], "data": b"\x00" * 8}, "needs 12 bytes"),
        ({"dtype": "float32", "shape": [-1], "data": b""}, "non-negative"),
        ({"dtype": "float32", "shape": [1 << 40], "data": b""}, "exceeds"),
        ({"dtype": "float32", "shape": [1] * 9, "data": b"\x00" * 4}, "at most"),
        ({"dtype": "float32", "shape": [1], "data": "text"}, "bytes"),
        ({"dtype": "float32", "shape": [True], "data": b"\x00" * 4}, "non-negative ints"),
        ([1, 2], "tensor map"),
    ],
)
def test_hostile_tensors_are_refused_with_the_field_named(wire, match):
    with pytest.raises(WireError, match=match) as err:
        decode_tensor(wire, "state.x")
    assert err.value.field.startswith("state.x")


def test_nan_and_inf_flagged_when_finite_required():
    for bad in (np.nan, np.inf, -np.inf):
        wire = encode_tensor(np.array([1.0, bad], dtype=np.float32))
        with pytest.raises(WireError, match="NaN or Inf"):
            decode_tensor(wire, "chunk", finite=True)
        decode_tensor(wire, "chunk")  # allowed where not required
