"""When an observation is re-sent, and which ones may not be dropped on the way (pure).

Small observations go with `CongestionControl.DROP` (a stale frame is worth less than a fresh one): one
dropped in a full tx queue is re-sent, identical (same seq id and clock), once the request has been
outstanding `max(RESEND_K * RTT p50, RESEND_FLOOR_S)`, so the retry follows the measured round trip
instead of waiting for the request timeout. Large observations (raw frames) go with BLOCK: zenoh waits
for room in the queue instead of dropping them (the robot's network worker blocks, never the control
thread; bounded by `transport/link/tx/queue/congestion_control/block/wait_before_close`, which the robot
sets to its request timeout), and they are never re-sent, since a second copy on a slow link would only
queue behind the first.
"""

from __future__ import annotations

# Observations above this many bytes are published with BLOCK and never re-sent.
LARGE_OBS_BYTES = 256 * 1024
RESEND_K = 3.0
RESEND_FLOOR_S = 0.1
RESEND_FIRST_S = 0.5  # before any round trip was measured on this path


def is_large(body_bytes: int) -> bool:
    return body_bytes > LARGE_OBS_BYTES


def resend_after_s(rtt_p50_s: float | None) -> float:
    """How long a small request may be outstanding before it is re-sent (None: no round trip measured yet)."""
    if rtt_p50_s is None or rtt_p50_s <= 0:
        return RESEND_FIRST_S
    return max(RESEND_K * rtt_p50_s, RESEND_FLOOR_S)


def resend_due(*, body_bytes: int, age_s: float | None, since_last_send_s: float, rtt_p50_s: float | None) -> bool:
    """True when the request in flight (small, outstanding for `age_s`) should go again now."""
    if age_s is None or is_large(body_bytes):
        return False
    return since_last_send_s >= resend_after_s(rtt_p50_s)
