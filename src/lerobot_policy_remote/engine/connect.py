"""The engine's side of the handshake: the first connection (fail fast, one-line advice), re-handshakes after a lost
link, and what counts as a lost link. A mixin of `RemoteInferenceEngine` (engine/remote.py keeps the worker loop);
the protocol steps themselves (discovery, pick, session open) are `engine/handshake.py`.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from ..wire.codes import Refusal
from ..wire.messages import SessionOpen
from ..wire.text import printable
from . import request, startup
from .handshake import HandshakeError, OpenedSession, reconnect_failure

if TYPE_CHECKING:
    from .parts import EngineParts

# the engine's log lines keep one logger name wherever the code lives (users and tests filter on it)
logger = logging.getLogger(__package__ + ".remote")
TIMEOUT_STREAK = 2  # consecutive request timeouts that mean "link lost"


class Connecting:
    """Handshake, reconnect and link-loss methods of `RemoteInferenceEngine`."""

    def _first_handshake(self: EngineParts) -> None:
        """Until the first session opens, or a failure no wait can fix (then the one-line `RemoteStartupError`)."""
        scope = startup.certificate_scope(self.cfg.tls_cert, self.client_uuid)
        deadline = time.monotonic() + self.cfg.connect_timeout_s
        while True:
            try:
                self._handshake()
                break
            except HandshakeError as exc:
                # a router that lists other services has answered: the namespace is wrong, waiting will not fix it
                others = startup.services_if_wrong_namespace(self.transport.services, exc)
                # nor will it when the router answers this certificate nothing in the namespace asked for
                refused = (
                    exc.code == Refusal.NO_SERVER and scope is not None and scope.refuses(self.session_open_request())
                )
                if exc.fatal or others or refused or time.monotonic() >= deadline:
                    err = startup.handshake_failed(
                        self.transport.services,
                        self.session_open_request(),
                        exc,
                        others,
                        bool(self.cfg.tls_cert),
                        scope,
                    )
                    self.transport.close()
                    self._never_moved()
                    raise err from None
                time.sleep(0.2)

    def session_open_request(self: EngineParts) -> SessionOpen:
        """What this robot asks a server for (also what `lerobot-fleet doctor` dry-runs)."""
        return request.session_open(
            client_uuid=self.client_uuid,
            action_names=self.action_names,
            hw_features=self._hw_features,
            model_id=self.namespace.model_id,  # the namespace it runs in now: the CLI's, or a move's target
            revision=self.namespace.revision,
            service=self.namespace.service,
            policy_type=self._policy_type,
            fps=self.fps,
            task=self._task,
            rtc=self.cfg.rtc,
            tags=self.cfg.tags,
            expect_fingerprint=self.fingerprint,
            rename_map=self.rename_map,
            reply_dtype=self.cfg.reply_dtype,
            reply_max_error=self.cfg.reply_max_error,
        )

    def _handshake(self: EngineParts) -> None:
        if self.cfg.handshake_jitter_s > 0:  # see RemoteInferenceConfig.handshake_jitter_s
            time.sleep(random.uniform(0.0, self.cfg.handshake_jitter_s))
        req = self.session_open_request()
        # The worker sends nothing while it blocks on the handshake's queries (seconds when every replica is busy
        # with a drain's herd): report now, so the console's data is as old as the handshake, not also the wait
        # that came before it.
        self.report_telemetry(force=True)
        avoid, self._drained_from = self._drained_from, ""  # one try on the last discovery's replicas, then discover
        opened = self.transport.handshake(req, min(self.cfg.request_timeout_s, 5.0), self.fingerprint, avoid=avoid)
        self.session.accept(opened, self.action_names, bool(self.cfg.rtc.enabled))
        self._session_opened(opened)

    def _session_opened(self: EngineParts, opened: OpenedSession) -> None:
        """Start streaming on the session `self.session` just accepted (a handshake's, or a move's)."""
        self.transport.bind(self.replica)
        self.requests.new_session()
        self.latency.reset()  # a new path may have a new latency; the old window must not linger
        if self.cfg.rtc.enabled and not self.rtc_active:  # expected for a policy without RTC (ACT): not a warning
            logger.info(
                "RTC: the server's policy has no RTC, chunks are appended (expected for ACT; nothing to change)"
            )
        self.queue.cfg.enabled = self.rtc_active
        for w in opened.ack.warnings:
            if not (self.session.action_order_checked is False and "could not be verified" in w):
                logger.warning("Server: %s", printable(w, 500))
        if self.session.action_order_checked is False:
            logger.warning(
                "Action order NOT checked: the server's policy names no actions, so only the action dimension (%d) "
                "was compared. Chunk columns drive the motors in this robot's order %s; if the policy was trained with "
                "another order the robot will move the wrong joints. Fix: set action_feature_names in the server "
                "manifest (the training dataset's meta/info.json features.action.names), or strict_action_names to "
                "refuse such robots",
                len(self.action_names),
                self.action_names,
            )
        self.reconnect.succeeded()
        self._episode_start = True
        self.states.on_handshake_ok(time.monotonic())
        self._ready.set()  # first-chunk gating is implicit: get_action returns None until a merge
        logger.info(
            "Session %s opened on replica %s (epoch %d, rtc=%s, chunk_size=%d, frames %s, %s)",
            printable(self.session_id, 80),
            self.replica,
            self.session_epoch,
            self.rtc_active,
            self.session.chunk_size,
            "raw over shared memory (same host)"
            if self.frame_quality == 0 and self.session.same_host
            else ("raw" if self.frame_quality == 0 else f"JPEG q{self.frame_quality}"),
            "direct link" if self.transport.direct else "via the router",
        )

    def _try_reconnect(self: EngineParts, now: float) -> None:
        if not self.reconnect.due(now):
            return
        try:
            self._handshake()
        except HandshakeError as exc:
            if exc.fatal:
                self.states.on_fatal(now, str(exc))
                return
            wait = self.reconnect.failed(time.monotonic())
            logger.warning("Reconnect failed (%s); next try in %.1fs", reconnect_failure(exc, self.replica), wait)

    def _lose_link(self: EngineParts, now: float, why: str) -> None:
        if self.states.on_link_lost(now, why):
            logger.warning("Link lost (%s): reconnecting", why)
        self.requests.drop()
        self.reconnect.lost(now)

    def _check_link(self: EngineParts, now: float) -> None:
        if self.transport.server_lost() and not self.reconnect.needed:
            self.counters["server_token_lost"] += 1
            self.reconnect.token_lost(now)
            self.requests.fail("server_lost")  # leaves STREAMING at once; the buffer keeps playing
        if self.reconnect.token_expired(now):
            self._lose_link(now, f"server liveliness lost (replica {self.replica})")
            return
        out = self.requests.expire(now, self.cfg.request_timeout_s)
        if out is not None:
            n = self.requests.timeouts
            self.counters["timeouts"] += 1
            logger.warning(
                "Request seq=%d timed out after %.1fs (%d in a row)", out.seq_id, self.cfg.request_timeout_s, n
            )
            if n >= TIMEOUT_STREAK:
                self._lose_link(now, f"{n} request timeouts in a row")
