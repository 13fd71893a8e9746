"""The live source: one zenoh connection feeding the store, and the operator actions sent through it.

Threads: the session thread opens the connection (retrying), checks the router link and polls status
(`zenoh_poll`); zenoh's own threads deposit liveliness and fill the telemetry and audit rings
(`zenoh_intake`); one decoder thread turns what arrived into store updates (`zenoh_decode`); one scraper
reads `/metrics`. Nothing here imports Textual.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutReply
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

from ..admission import Admission
from ..metrics_fetch import MetricsTargets
from ..ops import operator_name, query_statuses, send_cordon, send_drain, send_episode_reset, send_rollout
from ..store import FleetStore
from ..ui_gate import UiGate
from .base import ActionResult
from .replay import Recorder
from .rollout import rollout_loop
from .zenoh_decode import Decoder
from .zenoh_intake import Intake
from .zenoh_poll import poll_status, scrape_loop

log = logging.getLogger(__name__)

__all__ = ["ZenohSource", "operator_name", "query_statuses", "send_drain", "send_episode_reset"]

STOP_JOIN_S = 6.0  # longer than one connection attempt (connect_timeout) plus one status query


class ZenohSource:
    """Live fleet data through a Zenoh router (client mode)."""

    can_act = True

    def __init__(
        self,
        settings: ZenohSettings,
        status_period_s: float = 2.0,
        scrape_period_s: float = 2.0,
        record_path: str | None = None,
    ) -> None:
        self.settings = settings
        self.label = ", ".join(settings.connect_endpoints)
        self.status_period_s = status_period_s
        self.scrape_period_s = scrape_period_s
        self.session: Any = None
        self._live_session: Any = None  # liveliness subscribers only (Intake.declare)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._store: FleetStore | None = None
        self._recorder = Recorder(record_path) if record_path else None
        self.ui_gate = UiGate()  # ingest threads yield to a UI refresh; the app closes it for each frame (ui_gate.py)
        self.intake = Intake()
        self.decoder = Decoder(MetricsTargets(), self._linked, self._recorder)

    @property
    def admission(self) -> Admission:
        return self.decoder.admission

    @property
    def received(self) -> int:
        """Samples taken from the inbox so far."""
        return self.decoder.received

    @property
    def coalesced(self) -> int:
        """Telemetry samples skipped for a newer one of the same robot in the same batch."""
        return self.decoder.coalesced

    @property
    def mismatched(self) -> int:
        return self.decoder.mismatched

    # ------------------------------------------------------------ lifecycle

    def start(self, store: FleetStore) -> None:
        self._store = store
        store.router = self.label
        store.set_connection("connecting")
        threads = (
            ("fleet-zenoh", self._run, ()),
            ("fleet-decode", self.decoder.run, (store, self.intake, self.ui_gate, self._stop)),
            (
                "fleet-scrape",
                scrape_loop,
                (store, self.decoder.targets, self.ui_gate, self.scrape_period_s, self._stop, self._recorder),
            ),
            ("fleet-rollout", rollout_loop, (store, self._linked_session, self.ui_gate, self._stop)),
        )
        for name, target, args in threads:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> bool:
        """Stop the threads; the session thread closes its own session. True when every thread ended.

        The session is opened, used and closed by the one thread that owns it, so a connection attempt
        that completes after `stop()` still closes what it opened. A zenoh session left open at
        interpreter exit is dropped during finalization, where zenoh can panic and abort the process
        (the `Aborted` of `lerobot-fleet status` while a fleet was starting; docs/decisions.md).
        """
        self._stop.set()
        deadline = time.monotonic() + STOP_JOIN_S
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._recorder is not None:
            self._recorder.close()
        return not any(t.is_alive() for t in self._threads)

    def _run(self) -> None:
        """Open the session (retrying: the console starts even when the router is down), poll, close."""
        store = self._store
        assert store is not None
        session = live = None
        try:
            while not self._stop.is_set() and session is None:
                try:
                    session = open_session(self.settings)
                    live = open_session(self.settings)
                except Exception as exc:
                    self._close(session)
                    session = None
                    store.set_connection("disconnected")
                    store.note(str(exc).split(". ")[0][:160])
                    self._stop.wait(1.0)
            if session is None or self._stop.is_set():
                return
            self.session, self._live_session = session, live
            self.intake.declare(session, live)
            self.intake.ask_telemetry(session)
            next_status = 0.0
            while not self._stop.is_set():
                linked = self._linked()
                store.set_connection("connected" if linked else "disconnected")
                now = time.monotonic()
                if linked and now >= next_status:
                    next_status = now + self.status_period_s
                    poll_status(session, store, self.decoder, self.ui_gate, self.status_period_s, self._recorder)
                self._stop.wait(0.25)
        except Exception as exc:  # a zenoh error mid-run (router killed, session closed under us)
            store.set_connection("disconnected")
            store.note(f"zenoh session failed: {exc}"[:200])
        finally:
            self.session = self._live_session = None
            self._close(session, live)

    def _close(self, *sessions: Any) -> None:
        self.intake.undeclare()
        for session in sessions:
            if session is None:
                continue
            try:
                session.close()
            except Exception:
                log.debug("session close failed during stop", exc_info=True)

    def _linked_session(self) -> object | None:
        """The data session while both sessions are linked (the rollout poller reads through it)."""
        session = self.session
        return session if session is not None and self._linked() else None

    def _linked(self) -> bool:
        try:
            return all(z is not None and bool(z.info.routers_zid()) for z in (self.session, self._live_session))
        except Exception:
            return False

    # ------------------------------------------------------------ actions (called from a worker thread)

    def drain(self, replica: str, reason: str, requested_by: str) -> ActionResult:
        if self.session is None:
            return ActionResult(False, replica, "drain", "not connected to the router")
        return send_drain(self.session, replica, self.decoder.namespaces.get(("server", replica)), reason, requested_by)

    def cordon(self, replica: str, on: bool, reason: str, requested_by: str) -> ActionResult:
        if self.session is None:
            return ActionResult(False, replica, "cordon" if on else "uncordon", "not connected to the router")
        return send_cordon(
            self.session, replica, self.decoder.namespaces.get(("server", replica)), on, reason, requested_by
        )

    def reset_episode(self, robot_id: str, reason: str, requested_by: str, ns: Namespace | None = None) -> ActionResult:
        if self.session is None:
            return ActionResult(False, robot_id, "reset", "not connected to the router")
        return send_episode_reset(
            self.session, robot_id, ns or self.decoder.namespaces.get(("robot", robot_id)), reason, requested_by
        )

    def rollout(self, command: RolloutCommand, timeout: float = 5.0) -> RolloutReply:
        """A rollout command to the fleet router (`ops.send_rollout`)."""
        if self.session is None:
            return RolloutReply(False, "not connected to the router")
        return send_rollout(self.session, command, timeout)
