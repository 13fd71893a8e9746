"""Every piece of console text, built by pure functions from the view's rows (no Textual, no store, no clock).

One module per screen (`fleet`, `detail`, `confirm`, `logs`) and what they share (`common`: styles,
cells, titles, key names). tests/console/test_render.py checks these on fixtures, without an app.
"""

from .common import (
    AGE_STYLES,
    CONNECTION_STYLE,
    OLD,
    ROBOT_SORT_LABELS,
    SERVER_HEALTH_STYLE,
    SERVER_SORT_LABELS,
    SEVERITY_STYLE,
    STATE_STYLE,
    Cell,
    age_style,
    help_text,
    key_label,
    result_text,
    section_title,
    sort_label,
)
from .confirm import ACTION_LABELS, confirm_body, confirm_title, cordon_body, drain_body, reset_body, results_text
from .detail import (
    audit_text,
    history_text,
    metrics_text,
    pairs_text,
    robot_summary_text,
    robot_trends_text,
    server_summary_text,
    sessions_text,
    trend_text,
)
from .fleet import (
    ALERT,
    GROUP_PREFIX,
    MARK,
    NO_MARK,
    ROBOT_COLUMNS,
    SERVER_COLUMNS,
    UNCHECKED_ORDER_MARK,
    group_cells,
    group_name,
    grouped,
    header_text,
    robot_cells,
    robot_id_width,
    room_text,
    rtc_cell,
    rtc_text,
    server_cells,
)
from .logs import alerts_text, events_text

__all__ = [
    "ACTION_LABELS", "AGE_STYLES", "ALERT", "CONNECTION_STYLE", "GROUP_PREFIX", "MARK", "NO_MARK", "OLD", "ROBOT_COLUMNS",
    "ROBOT_SORT_LABELS", "SERVER_COLUMNS", "SERVER_HEALTH_STYLE", "SERVER_SORT_LABELS", "SEVERITY_STYLE", "STATE_STYLE",
    "UNCHECKED_ORDER_MARK", "Cell", "age_style", "alerts_text", "audit_text", "confirm_body", "confirm_title", "cordon_body",
    "drain_body", "events_text", "group_cells", "group_name", "grouped", "header_text", "help_text", "history_text",
    "key_label", "metrics_text", "pairs_text", "reset_body", "result_text", "results_text", "robot_cells",
    "robot_id_width", "robot_summary_text", "robot_trends_text", "room_text", "rtc_cell", "rtc_text", "section_title",
    "server_cells", "server_summary_text", "sessions_text", "sort_label", "trend_text",
]
