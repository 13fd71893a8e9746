"""The fleet's models side by side: one `ModelFigures` per model a service's robots run (pure: no lock, no Textual).

A rollout's guard (`lerobot-fleet router`) reads `ModelFigures` by field name, and the console and `lerobot-fleet
rollout status` show them, so all three compute them here, from the store's capture. What a figure needs beyond one
capture (counter increases over a window, a model's round trip per tick for its sparkline) is kept by a
`ModelWindow` that the console's tick (or the verb's listen) advances: the tick is the only place that derives.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from .capture import Capture, RobotRecord
from .derive_servers import token_gone
from .model import ROBOT_STALE_S, RobotState

__all__ = [
    "FIGURE_HEADS",
    "FAULT_STATES",
    "ModelFigures",
    "ModelWindow",
    "WINDOW_S",
    "compare_models",
    "figure_texts",
    "model_key",
]

WINDOW_S = 30.0  # the recent window of the counter figures (fallback rate, errors)
TREND_POINTS = 120  # a model's round trip p50s kept for its sparkline: one per tick, about 2 minutes at 1 Hz
FAULT_STATES = frozenset({"DEGRADED", "STALLED", "RECONNECTING", "DEAD"})  # live, but not streaming well
_CHUNK_STATES = frozenset({"STREAMING", "DEGRADED"})  # robots executing a model's chunks now

Counters = tuple[float, int, int]  # (when the store received it, fallback_count, errors) of one telemetry sample


@dataclass(frozen=True)
class ModelFigures:
    """One model's robots as the console sees them now. Field names are read by the rollout guard: keep them.

    Aggregation over the model's live robots (token not gone, telemetry younger than `ROBOT_STALE_S`):
    - `rtt_p50_ms`: the median of the robots' own round-trip p50s, so one odd robot does not move it;
    - `rtt_p95_ms`: the 95th percentile (nearest rank) of the robots' own p95s: the tail of the worse robots,
      which is what a canary must not make worse (quantiles of quantiles: the robots send no histograms);
    - `degraded_rate`: the share of live robots DEGRADED, STALLED, RECONNECTING or DEAD now;
    - `fallback_rate`: fallback ticks per robot-second over the last `WINDOW_S` (increases of each robot's
      `fallback_count` between its samples, a counter reset counted from zero, over the seconds they span);
    - `chunk_age_s`: the median staleness of the actions the robots execute (STREAMING or DEGRADED robots);
    - `errors`: request errors over the last `WINDOW_S` (increases of each robot's `errors`).
    Both quantiles are None when no robot reports a round trip; `chunk_age_s` when none executes chunks.
    """

    model_id: str
    revision: str
    fingerprint: str
    service: str
    robots: int
    streaming: int
    rtt_p50_ms: float | None
    rtt_p95_ms: float | None
    degraded_rate: float
    fallback_rate: float
    chunk_age_s: float | None
    errors: int

    @property
    def key(self) -> str:
        """The model's identity in a service: what its trend and the view's rows are keyed by."""
        return model_key(self.service, self.model_id, self.revision, self.fingerprint)

    @property
    def label(self) -> str:
        """`model@revision fingerprint[:12]`, as the rollout names a model."""
        fp = f" {self.fingerprint[:12]}" if self.fingerprint else ""
        return f"{self.model_id}@{self.revision}{fp}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def model_key(service: str, model_id: str, revision: str, fingerprint: str) -> str:
    return "\x1f".join((service, model_id, revision, fingerprint))


def _identity(rec: RobotRecord) -> tuple[str, str, str, str]:
    """(service, model id, revision, fingerprint) of the model a robot runs now. The namespace it reports in names
    the model as the fleet does; a robot that reports no fingerprint yet (an older one) is grouped by namespace."""
    t = rec.telemetry
    model, rev, service = rec.ns
    if t is None:
        return service, model, rev, ""
    return service or t.service, model or t.model_id, t.revision or rev, t.fingerprint


def _live(rec: RobotRecord, cap: Capture) -> bool:
    if rec.telemetry is None or rec.seen_at is None or cap.now - rec.seen_at >= ROBOT_STALE_S:
        return False
    return not token_gone(cap.link, rec.alive, rec.gone_at, cap.now)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]  # nearest rank: the ceil(0.95 n)-th value


def _increase(values: Iterable[int]) -> int:
    """A counter's increase over its samples; a drop is a restarted robot, counted from zero."""
    total, last = 0, None
    for value in values:
        if last is not None:
            total += value - last if value >= last else value
        last = value
    return total


def compare_models(
    cap: Capture, counters: Mapping[str, Iterable[Counters]] | None = None, service: str | None = None
) -> tuple[ModelFigures, ...]:
    """One `ModelFigures` per model the live robots of `service` (None: every service) run, ordered by service,
    then most robots first. `counters`: each robot's (row key) recent counter samples (`ModelWindow.counters`);
    without them the window figures are 0."""
    groups: dict[tuple[str, str, str, str], list[RobotRecord]] = {}
    for rec in cap.robots:
        if not _live(rec, cap):
            continue
        ident = _identity(rec)
        if service is None or ident[0] == service:
            groups.setdefault(ident, []).append(rec)
    out = []
    for (svc, model, rev, fp), members in groups.items():
        states = [RobotState.parse(r.telemetry.state).name for r in members if r.telemetry is not None]
        tele = [r.telemetry for r in members if r.telemetry is not None]
        p50s = [t.rtt_p50_ms for t in tele if t.rtt_p50_ms > 0]
        p95s = [t.rtt_p95_ms for t in tele if t.rtt_p95_ms > 0]
        ages = [t.staleness_s for t, s in zip(tele, states, strict=True) if s in _CHUNK_STATES]
        fallbacks = errors = 0
        span = 0.0
        for r in members:
            samples = list((counters or {}).get(r.key, ()))
            fallbacks += _increase(s[1] for s in samples)
            errors += _increase(s[2] for s in samples)
            if len(samples) > 1:
                span += samples[-1][0] - samples[0][0]
        out.append(
            ModelFigures(
                model_id=model,
                revision=rev,
                fingerprint=fp,
                service=svc,
                robots=len(members),
                streaming=sum(1 for s in states if s == "STREAMING"),
                rtt_p50_ms=statistics.median(p50s) if p50s else None,
                rtt_p95_ms=_p95(p95s) if p95s else None,
                degraded_rate=sum(1 for s in states if s in FAULT_STATES) / len(members),
                fallback_rate=fallbacks / span if span > 0 else 0.0,
                chunk_age_s=statistics.median(ages) if ages else None,
                errors=errors,
            )
        )
    return tuple(sorted(out, key=lambda m: (m.service, -m.robots, m.model_id, m.revision, m.fingerprint)))


class ModelWindow:
    """What the model figures need beyond one capture: each robot's counters over the last `WINDOW_S` and each
    model's round trip p50 per advance. Advanced by the console's tick (and the verb's listen), never by a reader."""

    def __init__(self, window_s: float = WINDOW_S, points: int = TREND_POINTS) -> None:
        self.window_s = window_s
        self._counters: dict[str, deque[Counters]] = {}
        self._trends: dict[str, deque[float]] = {}
        self._points = points

    def observe(self, cap: Capture) -> set[str]:
        """Take each robot's new telemetry sample (one per receipt) and forget what left the window; returns the keys
        of the models that got a new sample."""
        horizon = cap.now - self.window_s
        keep: dict[str, deque[Counters]] = {}
        fresh: set[str] = set()
        for rec in cap.robots:
            t = rec.telemetry
            if t is None or rec.seen_at is None:
                continue
            samples = self._counters.get(rec.key) or deque()
            if not samples or samples[-1][0] != rec.seen_at:
                samples.append((rec.seen_at, t.fallback_count, t.errors))
                fresh.add(model_key(*_identity(rec)))
            while len(samples) > 1 and samples[0][0] < horizon:
                samples.popleft()
            keep[rec.key] = samples
        self._counters = keep  # robots the store no longer holds leave with it
        return fresh

    @property
    def counters(self) -> Mapping[str, Iterable[Counters]]:
        return self._counters

    def figures(self, cap: Capture, service: str | None = None) -> tuple[ModelFigures, ...]:
        return compare_models(cap, self._counters, service)

    def advance(self, cap: Capture) -> tuple[tuple[ModelFigures, ...], dict[str, tuple[float, ...]]]:
        """One tick: observe `cap`, compute every model's figures and add the round trip p50 of each model that got
        new telemetry to its trend (a tick with nothing new adds no point: the trend moves with the data, not the
        timer). Returns the figures and the trends (model key -> p50s, oldest first) of the models shown now."""
        fresh = self.observe(cap)
        models = self.figures(cap)
        shown = {m.key for m in models}
        for m in models:
            if m.rtt_p50_ms is not None and m.key in fresh:
                self._trends.setdefault(m.key, deque(maxlen=self._points)).append(m.rtt_p50_ms)
        if len(self._trends) > 2 * len(shown) + 16:  # models no robot runs any more
            self._trends = {k: v for k, v in self._trends.items() if k in shown}
        return models, {k: tuple(v) for k, v in self._trends.items() if k in shown}


FIGURE_HEADS = ("robots", "stream", "rtt p50/p95", "degr%", "fallback/s", "chunk s", "errors")


def figure_texts(m: ModelFigures) -> tuple[str, ...]:
    """A model's figures as the console and `lerobot-fleet rollout status` write them (`FIGURE_HEADS` order)."""
    p50 = "—" if m.rtt_p50_ms is None else f"{m.rtt_p50_ms:.0f}"
    p95 = "—" if m.rtt_p95_ms is None else f"{m.rtt_p95_ms:.0f}"
    return (
        str(m.robots),
        str(m.streaming),
        f"{p50}/{p95}",
        f"{100 * m.degraded_rate:.0f}",
        f"{m.fallback_rate:.2f}",
        "—" if m.chunk_age_s is None else f"{m.chunk_age_s:.2f}",
        str(m.errors),
    )
