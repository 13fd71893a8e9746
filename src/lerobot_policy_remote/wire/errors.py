"""The one error type every wire decoder raises."""

from __future__ import annotations


class WireError(ValueError):
    """Bad bytes on the wire: names the offending field so the sender can be told what to fix."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class SchemaVersionError(WireError):
    """The two sides share no schema version."""
