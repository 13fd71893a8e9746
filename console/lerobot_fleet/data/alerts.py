"""Alert rules and the alert book: thresholds over snapshots, with when each alert opened and cleared.

Pure (no Textual, no clock reads): `AlertBook.update(snapshot, now)` is called by the console on every
tick and by `lerobot-fleet status --watch` on every line, so both see the same alerts. `AlertBook.snapshot()`
freezes the book for one tick's view (what the console's screens render and export).
"""

from __future__ import annotations

import json
import tomllib
from collections import deque
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path

from .fmt import fmt_age
from .model import FleetSnapshot, RobotRow

NAMESPACE_SPILL_RECENT_S = (
    30.0  # a namespaces alert stays open while the id's extra samples keep coming, this long after
)

__all__ = ["DEFAULT_RULES", "AlertRules", "Alert", "AlertBook", "AlertSnapshot", "evaluate"]


@dataclass(frozen=True)
class AlertRules:
    """Thresholds; a value <= 0 turns that rule off.

    Staleness is judged against each robot's own hard bound (`max_action_age_s`, reported in its telemetry):
    a robot alerts when its staleness reaches `staleness_of_bound` of that bound (2/3: 2 s at the default
    3 s), or `staleness_default_s` when the robot does not report its bound. A healthy robot's staleness
    swings with its buffer and chunk cadence (0.8-1.15 s with a 0.5 s buffer and 20-step chunks at 30 fps),
    so a fixed 1 s threshold opened and cleared every few seconds. `staleness_s` > 0 replaces
    the derived threshold with one fixed value for every robot. The breach must hold for
    `staleness_samples` telemetry samples in a row (about one a second), so one sample never opens it.
    """

    staleness_s: float = -1.0  # fixed staleness threshold for every robot; < 0: derive it per robot; 0: rule off
    staleness_of_bound: float = 2 / 3  # fraction of the robot's max_action_age_s that alerts
    staleness_default_s: float = 2.0  # threshold for a robot that does not report its max_action_age_s
    staleness_samples: float = 3  # consecutive telemetry samples at or over the threshold before it opens
    fault_s: float = 10.0  # a robot in a fault state (DEGRADED, STALLED, RECONNECTING, DEAD, GONE) this long
    error_rate: float = 0.05  # robot errors / requests
    rtt_p95_ms: float = 500.0  # robot round trip p95 (already a percentile over recent requests)
    server_load: float = 0.9  # a replica's load (0..1)
    # samples of one robot (or replica) id dropped because it is in more namespaces than the console admits per id
    # (admission.MAX_NAMESPACES_PER_ID); open while it goes on (a drop in the last NAMESPACE_SPILL_RECENT_S)
    namespace_drops: float = 1

    def staleness_threshold(self, max_action_age_s: float | None) -> float:
        """The staleness threshold for a robot with this hard bound (None: not reported); 0: rule off."""
        if self.staleness_s >= 0:
            return self.staleness_s
        if max_action_age_s and max_action_age_s > 0 and self.staleness_of_bound > 0:
            return round(max_action_age_s * self.staleness_of_bound, 2)
        return self.staleness_default_s

    def staleness_text(self) -> str:
        """The staleness rule in a few words (the alerts screen's thresholds line)."""
        if self.staleness_s >= 0:
            return f"staleness ≥ {self.staleness_s:g} s"
        n = int(self.staleness_samples)
        return (
            f"staleness ≥ {self.staleness_of_bound:.2g}×max age ({self.staleness_default_s:g} s unknown) "
            f"for {n} samples"
        )

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: float | None) -> AlertRules:
        """Defaults, then a small TOML or JSON file (same keys, optionally under [alerts]), then flags."""
        rules = cls()
        if path:
            text = Path(path).read_text()
            try:
                data = tomllib.loads(text) if not text.lstrip().startswith("{") else json.loads(text)
            except (tomllib.TOMLDecodeError, ValueError) as exc:
                raise ValueError(f"alerts config {path}: not TOML or JSON ({exc})") from None
            data = data.get("alerts", data)
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(data) - known)
            if unknown:
                raise ValueError(f"alerts config {path}: unknown keys {unknown}; known: {sorted(known)}")
            rules = replace(rules, **{k: float(v) for k, v in data.items()})
        return replace(rules, **{k: float(v) for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class Alert:
    rule: str  # staleness | fault | error_rate | rtt_p95 | server_load | namespaces
    target: str  # robot row key or server replica
    name: str  # what the operator reads (robot id or replica)
    role: str  # robot | server
    message: str
    started_s: float  # monotonic
    cleared_s: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.target)

    def as_dict(self, now: float) -> dict[str, object]:
        return {
            "rule": self.rule,
            "role": self.role,
            "target": self.name,
            "message": self.message,
            "open": self.cleared_s is None,
            "age_s": round(now - self.started_s, 1),
            "cleared_age_s": None if self.cleared_s is None else round(now - self.cleared_s, 1),
        }


def evaluate(snap: FleetSnapshot, rules: AlertRules) -> dict[tuple[str, str], tuple[str, str, str, float]]:
    """Breaches now: (rule, target) -> (name, role, message, seconds it has lasted already, when known)."""
    out: dict[tuple[str, str], tuple[str, str, str, float]] = {}
    for r in snap.robots:
        if rules.fault_s > 0 and r.state.is_fault and r.state_age_s is not None and r.state_age_s >= rules.fault_s:
            out[("fault", r.key)] = (r.robot_id, "robot", f"{r.state.name} for {fmt_age(r.state_age_s)}", r.state_age_s)
        if r.is_stale:
            continue  # old figures do not raise figure alerts (the fault rule covers a gone robot)
        limit = rules.staleness_threshold(r.max_action_age_s)
        if limit > 0 and r.staleness_s is not None and _persists(r, limit, rules.staleness_samples):
            out[("staleness", r.key)] = (r.robot_id, "robot", f"staleness {r.staleness_s:.2f} s ≥ {limit:g} s", 0.0)
        if rules.error_rate > 0 and r.requests > 0 and r.errors / r.requests >= rules.error_rate:
            out[("error_rate", r.key)] = (
                r.robot_id,
                "robot",
                f"errors {100 * r.errors / r.requests:.1f}% ≥ {100 * rules.error_rate:g}%",
                0.0,
            )
        if rules.rtt_p95_ms > 0 and r.rtt_p95_ms is not None and r.rtt_p95_ms >= rules.rtt_p95_ms:
            out[("rtt_p95", r.key)] = (
                r.robot_id,
                "robot",
                f"rtt p95 {r.rtt_p95_ms:.0f} ms ≥ {rules.rtt_p95_ms:g} ms",
                0.0,
            )
    for s in snap.servers:
        if rules.server_load > 0 and not s.is_stale and s.load >= rules.server_load:
            out[("server_load", s.replica)] = (s.replica, "server", f"load {s.load:.2f} ≥ {rules.server_load:g}", 0.0)
    for sp in snap.spills:
        if rules.namespace_drops > 0 and sp.dropped >= rules.namespace_drops and sp.age_s < NAMESPACE_SPILL_RECENT_S:
            out[("namespaces", f"{sp.role}:{sp.ident}")] = (
                sp.ident,
                sp.role,
                f"publishes in more than {sp.limit} namespaces: {sp.dropped} sample(s) there dropped "
                "(one certificate may not crowd the others out of the console)",
                0.0,
            )
    return out


def _persists(r: RobotRow, limit: float, samples: float) -> bool:
    """The robot's staleness is at or over `limit` now and in its last `samples` telemetry samples."""
    if r.staleness_s is None or r.staleness_s < limit:
        return False
    n = max(1, int(samples))
    recent = r.recent_staleness[-n:]
    return len(recent) >= n and all(v >= limit for v in recent)


@dataclass(frozen=True)
class AlertSnapshot:
    """The alert book at one tick, frozen: what the screens show and export (the book itself moves on).

    An open alert's message changes while it lasts (`DEAD for 12 s`); the latest messages are applied
    only when listed, since most ticks show just the count and the marks.
    """

    rules: AlertRules = AlertRules()
    opened: tuple[Alert, ...] = ()  # the open alerts, as they opened
    messages: tuple[str, ...] = ()  # the latest message of each open alert (same order)
    cleared: tuple[Alert, ...] = ()  # most recently cleared first

    @property
    def open_count(self) -> int:
        return len(self.opened)

    @cached_property
    def targets(self) -> frozenset[str]:
        """Robot row keys and replicas with an open alert (the fleet screen marks their rows)."""
        return frozenset(a.target for a in self.opened)

    @cached_property
    def listing(self) -> tuple[Alert, ...]:
        """Open alerts (newest first), then cleared ones (most recently cleared first)."""
        current = [replace(a, message=m or a.message) for a, m in zip(self.opened, self.messages, strict=True)]
        return tuple(sorted(current, key=lambda a: (-a.started_s, a.rule, a.name))) + self.cleared


class AlertBook:
    """Open alerts plus a bounded history of cleared ones (newest first when listed)."""

    def __init__(self, rules: AlertRules | None = None, history: int = 500) -> None:
        self.rules = rules or AlertRules()
        self._open: dict[tuple[str, str], Alert] = {}
        self._message: dict[tuple[str, str], str] = {}  # latest message of each open alert (applied when listed)
        self._closed: deque[Alert] = deque(maxlen=history)

    def update(self, snap: FleetSnapshot, now: float) -> tuple[list[Alert], list[Alert]]:
        """Apply one snapshot; returns (opened, cleared) so callers can log them as events."""
        now_breaching = evaluate(snap, self.rules)
        opened, cleared = [], []
        for key, (name, role, message, lasted) in now_breaching.items():
            if key not in self._open:
                a = self._open[key] = Alert(key[0], key[1], name, role, message, now - lasted)
                opened.append(a)
            self._message[key] = message
        for key in [k for k in self._open if k not in now_breaching]:
            a = replace(self._open.pop(key), message=self._message.pop(key), cleared_s=now)
            self._closed.appendleft(a)
            cleared.append(a)
        return opened, cleared

    @property
    def open_count(self) -> int:
        return len(self._open)

    def is_alerting(self, target: str) -> bool:
        return any(t == target for _, t in self._open)

    def targets(self) -> set[str]:
        return {t for _, t in self._open}

    def listing(self) -> list[Alert]:
        """Open alerts (newest first), then cleared ones (most recently cleared first)."""
        return list(self.snapshot().listing)

    def snapshot(self) -> AlertSnapshot:
        """The book frozen now (copies; no alert is evaluated, opened or cleared)."""
        return AlertSnapshot(
            self.rules,
            tuple(self._open.values()),
            tuple(self._message.get(k, "") for k in self._open),
            tuple(self._closed),
        )


DEFAULT_RULES = AlertRules()
