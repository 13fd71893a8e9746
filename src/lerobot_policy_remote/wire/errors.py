"""The one error type every wire decoder raises, and the typed reason codes used for metrics and refusals."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a request was refused or failed: the bounded label set of `errors_total{reason}`.

    Carried as a value (never parsed back out of a message), so a reworded error cannot move a metric.
    """

    MALFORMED = "malformed"  # not a valid body (msgpack, missing/mistyped field)
    BAD_HEADER = "bad_header"
    OVERSIZE = "oversize"
    NON_FINITE = "non_finite"
    BAD_DTYPE = "bad_dtype"
    BAD_SHAPE = "bad_shape"
    SCHEMA_MISMATCH = "schema_mismatch"
    CONTRACT = "contract"  # decodes, but does not fit the policy (missing camera, wrong state size)
    INFERENCE_ERROR = "inference_error"
    PUBLISH_FAILED = "publish_failed"
    BAD_SESSION_OPEN = "bad_session_open"
    BAD_RESET = "bad_reset"
    IDENTITY_MISMATCH = "identity_mismatch"  # a body names another robot than the key it arrived on


class WireError(ValueError):
    """Bad bytes on the wire: names the offending field so the sender can be told what to fix."""

    def __init__(self, field: str, problem: str, reason: Reason = Reason.MALFORMED) -> None:
        self.field = field
        self.problem = problem
        self.reason = reason
        super().__init__(f"{field}: {problem}")


class SchemaVersionError(WireError):
    """The two sides share no schema version."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem, Reason.SCHEMA_MISMATCH)
