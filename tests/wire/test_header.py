import pytest

from lerobot_policy_remote.wire import HEADER_SIZE, Header, MsgType, WireError
from lerobot_policy_remote.wire.header import I64_MAX, I64_MIN, U16_MAX, U32_MAX, U64_MAX


@pytest.mark.parametrize(
    "values",
    [
        (0, MsgType.OBS, 0, 0, 0, 0),
        (U16_MAX, MsgType.CHUNK, U64_MAX, U32_MAX, I64_MAX, U32_MAX),
        (1, MsgType.EVENT, 1, 2, I64_MIN, 3),
    ],
)
def test_round_trip_of_extreme_values(values):
    h = Header(*values)
    raw = h.pack()
    assert len(raw) == HEADER_SIZE == 27
    assert Header.unpack(raw) == h


def test_layout_is_little_endian_and_fixed():
    raw = Header(0x0102, MsgType.CHUNK, 0x0A, 0x0B, -1, 0x0C).pack()
    assert raw[:2] == b"\x02\x01" and raw[2] == 2 and raw[3] == 0x0A and raw[11] == 0x0B and raw[15:23] == b"\xff" * 8


def test_msg_type_is_checked_on_receipt():
    raw = Header(1, MsgType.CHUNK, 1, 0, 0, 0).pack()
    with pytest.raises(WireError, match="expected OBS"):
        Header.unpack(raw, expect=MsgType.OBS)
    bad = bytearray(raw)
    bad[2] = 99
    with pytest.raises(WireError, match="unknown message type"):
        Header.unpack(bytes(bad))


@pytest.mark.parametrize("data", [None, b"", b"\x00" * 26, b"\x00" * 28])
def test_wrong_sizes_are_refused(data):
    with pytest.raises(WireError, match="header"):
        Header.unpack(data)


def test_out_of_range_values_are_refused_on_pack():
    with pytest.raises(WireError):
        Header(U16_MAX + 1, MsgType.OBS, 0, 0, 0, 0).pack()
