"""Fixed-layout attachment header: routing and correlation without touching the body."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .errors import Reason, WireError

_LAYOUT = struct.Struct("<HBQIqI")  # schema_version, msg_type, seq_id, episode_id, client_mono_ns, session_epoch
HEADER_SIZE = _LAYOUT.size

U16_MAX = 0xFFFF
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


class MsgType(IntEnum):
    OBS = 1
    CHUNK = 2
    EVENT = 3


@dataclass(frozen=True)
class Header:
    schema_version: int
    msg_type: MsgType
    seq_id: int
    episode_id: int
    client_mono_ns: int
    session_epoch: int

    def pack(self) -> bytes:
        try:
            return _LAYOUT.pack(
                self.schema_version,
                int(self.msg_type),
                self.seq_id,
                self.episode_id,
                self.client_mono_ns,
                self.session_epoch,
            )
        except struct.error as exc:
            raise WireError("header", f"value out of range: {exc}", Reason.BAD_HEADER) from exc

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview | None, expect: MsgType | None = None) -> Header:
        """Parse and check; `expect` guards against a message of the wrong kind on a key."""
        if data is None:
            raise WireError("header", "missing attachment header", Reason.BAD_HEADER)
        if len(data) != HEADER_SIZE:
            raise WireError("header", f"expected {HEADER_SIZE} bytes, got {len(data)}", Reason.BAD_HEADER)
        version, raw_type, seq, episode, mono, epoch = _LAYOUT.unpack(data)
        try:
            msg_type = MsgType(raw_type)
        except ValueError:
            raise WireError("header.msg_type", f"unknown message type {raw_type}", Reason.BAD_HEADER) from None
        if expect is not None and msg_type is not expect:
            raise WireError("header.msg_type", f"expected {expect.name}, got {msg_type.name}", Reason.BAD_HEADER)
        return cls(version, msg_type, seq, episode, mono, epoch)


def peek_epoch(attachment: object) -> int:
    """The session epoch of a zenoh attachment, 0 when it is missing or malformed (a cheap read for callbacks)."""
    if attachment is None or len(attachment) != HEADER_SIZE:  # type: ignore[arg-type]  # sized before any copy
        return 0
    data = attachment.to_bytes() if hasattr(attachment, "to_bytes") else attachment
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) != HEADER_SIZE:
        return 0
    return int(_LAYOUT.unpack(data)[5])
