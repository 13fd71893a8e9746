"""Screens: the fleet overview, one detail base for robots and servers, alerts, events, help, confirmation.

Screens render the frozen view the app hands down (`apply_view`) with the pure functions of `render`, and post
messages up (`messages`) for everything the app owns: actions, other screens, pause, the result line.
"""

from .base import ACTIONS, COMMON, LiveScreen
from .detail import DetailScreen, RobotDetailScreen, ServerDetailScreen
from .fleet import FleetScreen
from .logs import AlertsScreen, EventsScreen
from .modals import ConfirmScreen, HelpScreen
from .models import ModelsScreen

__all__ = [
    "ACTIONS",
    "COMMON",
    "AlertsScreen",
    "ConfirmScreen",
    "DetailScreen",
    "EventsScreen",
    "FleetScreen",
    "HelpScreen",
    "LiveScreen",
    "ModelsScreen",
    "RobotDetailScreen",
    "ServerDetailScreen",
]
