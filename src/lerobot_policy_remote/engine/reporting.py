"""The engine's observability: counters and timings (`stats`), the link's state (`snapshot`) and the telemetry
report, paced so that what the console alerts on goes at once. A mixin of `RemoteInferenceEngine` (engine/remote.py
keeps the worker loop, which reports on every pass); the report itself is `telemetry.robot_telemetry`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..wire.messages import RobotTelemetry
from .telemetry import EngineSnapshot, EngineStats, robot_telemetry

if TYPE_CHECKING:
    from .parts import EngineParts

# the engine's log lines keep one logger name wherever the code lives (users and tests filter on it)
logger = logging.getLogger(__package__ + ".remote")
STALENESS_REPORT_FRACTION = (
    2 / 3
)  # staleness at this fraction of max_action_age_s is reported at once (console alert default)


class Reporting:
    """Stats, snapshot and telemetry methods of `RemoteInferenceEngine`."""

    def stats(self: EngineParts) -> EngineStats:
        c = self.counters
        return EngineStats(
            requests=c["requests"],
            superseded=c["superseded"],
            errors=c["bad_chunk"] + c["timeouts"],
            fallback_count=self.fallback_count,
            rtt_p50_ms=self.rtt.percentile(0.5),
            rtt_p95_ms=self.rtt.percentile(0.95),
            delay_steps=self.delay_steps(),
            queue_wait_ms_p50=self.timings.queue_wait.percentile(0.5),
            inference_ms_p50=self.timings.inference.percentile(0.5),
            network_ms_p50=self.timings.network.percentile(0.5),
        )

    def snapshot(self: EngineParts, now: float) -> EngineSnapshot:
        state, since, _ = self.states.snapshot()
        return EngineSnapshot(
            client_uuid=self.client_uuid,
            state=state,
            state_age_s=now - since,
            model_id=self.model_id,
            service=self.keys.service,
            session_id=self.session_id,
            replica=self.replica,
            episode_id=self.episode_id,
            staleness_s=self.queue.head_age(now),
            queue_s=self.queue.fresh_count(now, self.cfg.max_action_age_s) / self.fps,
            last_outcome=self.last_outcome,
            dead_reason=self.states.dead_reason,
            fps=self.fps,
            seq=self.telemetry_seq,
            action_order={None: "", True: "checked", False: "unchecked"}[self.session.action_order_checked],
            max_action_age_s=self.cfg.max_action_age_s,
            rtc=("on" if self.session.rtc_active else "off") if self.session.epoch else "",
            revision=self.namespace.revision,
            fingerprint=self.fingerprint,
            moves=self.counters["moves"],
        )

    def telemetry(self: EngineParts) -> RobotTelemetry:
        return robot_telemetry(self.stats(), self.snapshot(time.monotonic()))

    def report_telemetry(self: EngineParts, force: bool = False) -> None:
        """Publish the telemetry report when the pacer says it is due (`force`: now), and answer the telemetry
        queries waiting. The worker calls it on every pass; public so a caller driving the engine itself, and the
        tests, can run the pacing without a network pass."""
        now = time.monotonic()
        state_version = self.states.snapshot()[2]
        # What the console alerts on goes at once even when telemetry has slowed down (adaptive pacing): a state
        # change, and staleness crossing 2/3 of the robot's bound (the console's default staleness threshold).
        high = self.queue.head_age(now) >= STALENESS_REPORT_FRACTION * self.cfg.max_action_age_s
        send, _ = self._pacer.due(state_version * 2 + high, now, force)
        if state_version != self._logged_state_version:
            self._logged_state_version = state_version
            logger.info("Link state: %s", self.state.value)
        merged, first = self._summary.due(now, self.counters["chunks"], self.session_id)
        if merged:
            stats = self.stats()
            logger.info(
                "Streaming from replica %s: %s, round trip p50 %.0f ms%s, %d fallback ticks",
                self.replica,
                "first chunk merged" if first else f"{merged} chunks in the last {self._summary.period_s:.0f} s",
                stats.rtt_p50_ms,
                f", RTC delay {stats.delay_steps} steps" if self.rtc_active else "",
                stats.fallback_count,
            )
        if send:
            self.transport.publish_telemetry(self.telemetry())
        asked = self.transport.telemetry_queries()
        if asked:  # a reader asking now (a console that just connected) gets the report as of this pass
            report = self.telemetry()
            for query in asked:
                query.answer(report)
