"""One capacity truth: a replica's request rate, N_max and room, for the console, `status` and `doctor`.

All three build their server rows in `FleetStore` and the store computes every figure here, from the same
inputs: the replica's status reply, the request rate (the server's own count first), and the round trips its
robots report. Pure: no clock reads, no I/O.

- **req/s**: `ServerStatus.requests_per_s`, the requests the replica served over its last 10 s. A server that
  does not report it (an older release): the change in `requests_total` between two `/metrics` scrapes, else
  audit lines over the part of the last 10 s the console has heard (`status` listens 2.5 s: dividing by 10 s
  there showed 0.2 req/s where the console showed 1.5-2.0).
- **N_max** = min(0.8 / (r·t), (H·dt/2 − RTT) / t), 0 when one pass does not fit H·dt/2 − RTT.
- **room** = min(floor(N_max), max_sessions) − active: what limits it is `cap`, `N_max`, `drain` or `cordon`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from lerobot_policy_remote.wire.messages import ServerStatus

__all__ = [
    "AUDIT_RATE_WINDOW_S",
    "DEFAULT_REQUEST_HZ",
    "Rate",
    "Capacity",
    "request_rate",
    "n_max",
    "room",
    "room_text",
    "capacity",
]

AUDIT_RATE_WINDOW_S = 10.0  # audit lines are counted over this much of the recent past
MIN_HEARD_S = 1.0  # ... or over what the console heard of it, but never less than this (one line is not a rate)
DEFAULT_REQUEST_HZ = 1.0  # N_max's r when no request rate is observed yet

RATE_SOURCES = {
    "server": "the server's count over its last 10 s",
    "metrics": "requests_total between /metrics scrapes",
    "audit": "audit lines",
}


@dataclass(frozen=True)
class Rate:
    """Requests per second of one replica and where the number comes from ("" with no number)."""

    value: float | None = None
    source: str = ""  # server | metrics | audit | ""


def request_rate(reported: float | None, scraped: float | None, audit_lines: int | None, heard_s: float | None) -> Rate:
    """The best request rate there is: the server's own (`ServerStatus.requests_per_s`), else the scraped counter's
    rate, else `audit_lines` (those of the last AUDIT_RATE_WINDOW_S; None when none was ever received) divided by
    the part of that window the console has listened (`heard_s`; None: the whole window)."""
    if reported is not None and reported >= 0:
        return Rate(reported, "server")
    if scraped is not None:
        return Rate(scraped, "metrics")
    if audit_lines is None:
        return Rate()
    span = AUDIT_RATE_WINDOW_S if heard_s is None else min(AUDIT_RATE_WINDOW_S, max(MIN_HEARD_S, heard_s))
    return Rate(audit_lines / span, "audit")


def n_max(t_s: float, r_hz: float, horizon_steps: float, dt_s: float, rtt_s: float) -> float | None:
    """N_max = min(0.8 / (r*t), (H*dt/2 - RTT) / t). None when an input is unknown (<= 0).

    t = server time per request, r = per-client request rate, H = execution horizon (steps),
    dt = control period, RTT = network round trip. A negative latency bound clamps to 0.
    """
    if t_s <= 0 or r_hz <= 0 or horizon_steps <= 0 or dt_s <= 0:
        return None
    util = 0.8 / (r_hz * t_s)
    latency = max(0.0, (horizon_steps * dt_s / 2.0 - max(rtt_s, 0.0)) / t_s)
    return min(util, latency)


def room(
    n_max_value: float | None, max_sessions: int, active: int, draining: bool, cordoned: bool = False
) -> tuple[int | None, str]:
    """How many more robots this replica takes: min(N_max, session cap) - active, and what limits it.

    An operator reads "room" as "how many more robots can I send here", so the session cap counts as
    much as the latency model; a draining or cordoned replica takes none.
    """
    if draining:
        return 0, "draining"
    if cordoned:
        return 0, "cordon"
    bounds: list[tuple[float, str]] = []
    if n_max_value is not None:
        bounds.append((math.floor(n_max_value), "N_max"))
    if max_sessions > 0:
        bounds.append((float(max_sessions), "cap"))
    if not bounds:
        return None, ""
    value, limit = min(bounds, key=lambda b: (b[0], b[1] != "cap"))
    return int(value) - active, limit


def room_text(value: int | None, limit: str) -> str:
    """`+2 cap` / `+87 N_max` / `-1 N_max` / `0 drain` / `0 cordon`; the word names what limits the room."""
    if value is None:
        return "—"
    if limit == "draining":
        return "0 drain"
    if limit == "cordon":
        return "0 cordon"
    return f"{value:+d} {limit}"


@dataclass(frozen=True)
class Capacity:
    """A replica's capacity figures and (when explained) the inputs behind them, for the server detail."""

    requests_per_s: float | None = None
    rate_source: str = ""
    n_max: float | None = None
    room: int | None = None
    room_limit: str = ""
    inputs: tuple[tuple[str, str], ...] = ()


def median_network_rtt_ms(robot_rtts_ms: Iterable[float], inference_ms_p50: float) -> tuple[float, int]:
    """RTT input: the median over the replica's robots of (their rtt p50 - the pass time), floored at 0; and how
    many robots reported."""
    rtts = sorted(max(0.0, x - inference_ms_p50) for x in robot_rtts_ms)
    return (rtts[len(rtts) // 2] if rtts else 0.0), len(rtts)


def capacity(
    st: ServerStatus | None, rate: Rate, robot_rtts_ms: Iterable[float] = (), explain: bool = False
) -> Capacity:
    """Every capacity figure of one replica from its status, its request rate and its robots' round trips."""
    if st is None:
        return Capacity(rate.value, rate.source, inputs=(("status", "not received yet"),) if explain else ())
    t_s = st.inference_ms_p50 / 1000.0
    active = st.active_sessions
    if rate.value is not None and rate.value > 0 and active > 0:
        r_hz = rate.value / active
        r_src = (
            "the server's requests/s (its last 10 s)" if rate.source == "server" else "observed requests/s"
        ) + " ÷ active sessions"
    else:
        r_hz, r_src = DEFAULT_REQUEST_HZ, "default (no traffic observed)"
    horizon = float(st.chunk_size)
    dt = 1.0 / st.trained_fps if st.trained_fps > 0 else 0.0
    rtt_ms, reporting = median_network_rtt_ms(robot_rtts_ms, st.inference_ms_p50)
    # A batching server reports chunks per second of model time at its recent batch sizes: 1/that is
    # the model time one robot's chunk costs, the `t` of the capacity formula. One pass must still fit.
    t_eff = 1.0 / st.chunks_per_s if st.chunks_per_s > 0 else t_s
    value = n_max(t_eff, r_hz, horizon, dt, rtt_ms / 1000.0)
    if value is not None and horizon * dt / 2.0 - rtt_ms / 1000.0 < t_s:
        value = 0.0
    room_left, limit = room(value, st.max_sessions, active, st.draining, st.cordoned)
    if not explain:
        return Capacity(rate.value, rate.source, value, room_left, limit)
    t_row = (
        (
            f"{t_eff * 1000:.1f} ms per chunk (measured: {st.chunks_per_s:.1f} chunks/s of model time, "
            f"mean batch {st.batch_size_mean:.1f}; one pass {st.inference_ms_p50:.1f} ms)"
        )
        if st.chunks_per_s > 0
        else f"{st.inference_ms_p50:.1f} ms (inference p50, one robot per pass)"
    )
    inputs = (
        ("t (model time per chunk)", t_row),
        (
            "req/s (all its robots)",
            "none observed"
            if rate.value is None
            else f"{rate.value:.2f} — {RATE_SOURCES.get(rate.source, rate.source)}",
        ),
        ("r (per-client rate)", f"{r_hz:.2f} Hz — {r_src}"),
        ("H (chunk size)", f"{st.chunk_size} steps"),
        ("dt (1/trained fps)", f"{dt * 1000:.1f} ms" if dt else "unknown"),
        ("RTT (robot rtt p50 − t, median)", f"{rtt_ms:.1f} ms" + ("" if reporting else " (no robots reporting)")),
        ("N_max", "unknown" if value is None else f"{value:.1f}"),
    )
    return Capacity(rate.value, rate.source, value, room_left, limit, inputs)
