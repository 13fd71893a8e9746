"""The wire protocol: keys, attachment header, message bodies, codecs. No torch here."""

from .errors import Reason, SchemaVersionError, WireError
from .header import HEADER_SIZE, Header, MsgType
from .keys import Namespace, ParsedKey, ServiceKeys, check_id, encode_segment, parse_key, slug_task
from .limits import DEFAULT_LIMITS, WireLimits

__all__ = [
    "DEFAULT_LIMITS",
    "HEADER_SIZE",
    "Header",
    "MsgType",
    "Namespace",
    "ParsedKey",
    "Reason",
    "SchemaVersionError",
    "ServiceKeys",
    "WireError",
    "WireLimits",
    "check_id",
    "encode_segment",
    "parse_key",
    "slug_task",
]
