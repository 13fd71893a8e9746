"""Fleet data sources: each feeds a FleetStore from its own threads and never touches widgets."""

from .base import ActionResult, FleetSource

__all__ = ["ActionResult", "FleetSource"]
