"""The wire protocol: keys, attachment header, message bodies, codecs, refusal and event codes. No torch here."""

from .codes import CONTRACT_REFUSALS, EventKind, Refusal
from .errors import Reason, SchemaVersionError, WireError
from .header import HEADER_SIZE, Header, MsgType
from .keys import Namespace, ParsedKey, ServiceKeys, check_id, encode_segment, parse_key, slug_task
from .limits import DEFAULT_LIMITS, WireLimits

__all__ = [
    "CONTRACT_REFUSALS",
    "DEFAULT_LIMITS",
    "EventKind",
    "HEADER_SIZE",
    "Header",
    "MsgType",
    "Namespace",
    "ParsedKey",
    "Reason",
    "Refusal",
    "SchemaVersionError",
    "ServiceKeys",
    "WireError",
    "WireLimits",
    "check_id",
    "encode_segment",
    "parse_key",
    "slug_task",
]
