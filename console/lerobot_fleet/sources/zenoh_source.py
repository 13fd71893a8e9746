"""The live source: liveliness (with history), robot telemetry, audit lines, status polls, metrics scrapes.

Threads: zenoh's callback threads only append `(kind, key, bytes)` to a bounded deque and return; one
decoder thread turns those into store updates; one poller checks the router link and queries
`status`; one scraper reads `/metrics`. Nothing here imports Textual.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from lerobot_policy_remote.wire.codec import decode, decode_json, to_dict
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import Namespace, ParsedKey, parse_key
from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

from ..admission import Admission
from ..metrics_fetch import MetricsTargets, Scraper
from ..ops import ANY, operator_name, query_statuses, send_cordon, send_drain, send_episode_reset
from ..sanitize import clean, clean_namespace
from ..store import FleetStore
from ..ui_gate import UiGate
from .base import ActionResult
from .refused import query_refused
from .replay import Recorder
from .routers import query_routers

log = logging.getLogger(__name__)

__all__ = ["ZenohSource", "operator_name", "query_statuses", "send_drain", "send_episode_reset"]

INBOX_MAX = 50_000
RING_AUDIT = 4_096  # audit lines held between two decoder passes
GATE_EVERY = 64  # samples between two looks at the UI gate (~1 ms of decoding)
DECODE_WINDOW_S = 0.2  # the decoder drains the inbox at most this often: a robot's samples within one window decode once
STOP_JOIN_S = 6.0  # longer than one connection attempt (connect_timeout) plus one status query


class ZenohSource:
    """Live fleet data through a Zenoh router (client mode)."""

    can_act = True

    def __init__(
        self, settings: ZenohSettings, status_period_s: float = 2.0, scrape_period_s: float = 2.0, record_path: str | None = None
    ) -> None:
        self.settings = settings
        self.label = ", ".join(settings.connect_endpoints)
        self.status_period_s = status_period_s
        self.scrape_period_s = scrape_period_s
        self.session: Any = None
        self._live_session: Any = None  # liveliness subscribers only (see _declare)
        self._decls: list[Any] = []
        self._inbox: deque[tuple[str, str, bytes | None]] = deque(maxlen=INBOX_MAX)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._store: FleetStore | None = None
        self._ns: dict[tuple[str, str], Namespace] = {}  # (role, id) -> namespace, for actions
        self._targets = MetricsTargets()
        self._lock = threading.Lock()  # guards admission (decoder thread and poller)
        self.admission = Admission()
        self.received = 0
        self.coalesced = 0
        self.mismatched = 0  # samples whose payload names another robot or replica than their key: dropped
        self._recorder = Recorder(record_path) if record_path else None
        self._keys: dict[str, ParsedKey] = {}
        self._rings: list[tuple[str, Any]] = []  # (kind, ring-channel subscriber), read by the decoder thread
        self.ui_gate = UiGate()  # ingest threads yield to a UI refresh; the app closes it for each frame (ui_gate.py)

    # ------------------------------------------------------------ lifecycle

    def start(self, store: FleetStore) -> None:
        self._store = store
        store.router = self.label
        store.set_connection("connecting")
        for name, target in (("fleet-zenoh", self._run), ("fleet-decode", self._decode_loop), ("fleet-scrape", self._scrape_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
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
            self._declare()
            next_status = 0.0
            while not self._stop.is_set():
                linked = self._linked()
                store.set_connection("connected" if linked else "disconnected")
                now = time.monotonic()
                if linked and now >= next_status:
                    next_status = now + self.status_period_s
                    self._poll_status()
                self._stop.wait(0.25)
        except Exception as exc:  # a zenoh error mid-run (router killed, session closed under us)
            store.set_connection("disconnected")
            store.note(f"zenoh session failed: {exc}"[:200])
        finally:
            self.session = self._live_session = None
            self._close(session, live)

    def _close(self, *sessions: Any) -> None:
        for d in self._decls:
            try:
                d.undeclare()
            except Exception:  # teardown: the router may already be gone
                log.debug("undeclare failed during stop", exc_info=True)
        self._decls, self._rings = [], []
        for session in sessions:
            if session is None:
                continue
            try:
                session.close()
            except Exception:
                log.debug("session close failed during stop", exc_info=True)

    def _linked(self) -> bool:
        try:
            return all(z is not None and bool(z.info.routers_zid()) for z in (self.session, self._live_session))
        except Exception:
            return False

    def _declare(self) -> None:
        s = self.session
        # Liveliness on a session of its own: on the data session, a liveliness subscriber (2,000 robot tokens)
        # cut the telemetry that session received from ~19,700 to ~5,900 samples/s (history on) or ~10,200 (off);
        # on a second session the telemetry session gets ~19,600/s (issue 20, docs/decisions.md).
        live = self._live_session.liveliness()
        self._decls = [
            live.declare_subscriber(ANY.server("*", "alive"), lambda smp: self._deposit("alive", smp), history=True),
            live.declare_subscriber(ANY.robot("*", "alive"), lambda smp: self._deposit("alive", smp), history=True),
        ]
        # Telemetry and audit lines (the fleet's bulk: up to 20,000 samples/s) wait in zenoh's own bounded ring,
        # with no Python callback per sample: no GIL taken on zenoh's threads, so the UI thread keeps it; the
        # decoder pulls them in batches. A full ring drops its oldest samples (telemetry is state) (issue 20).
        import zenoh

        self._rings = [
            ("telemetry", s.declare_subscriber(ANY.robot("*", "telemetry"), zenoh.handlers.RingChannel(INBOX_MAX))),
            ("audit", s.declare_subscriber(ANY.server("*", "audit"), zenoh.handlers.RingChannel(RING_AUDIT))),
        ]
        self._decls += [sub for _, sub in self._rings]

    def _deposit(self, kind: str, sample: Any) -> None:
        """Zenoh callback: copy out and return (never decode, lock the store, or touch widgets here)."""
        import zenoh

        if kind == "alive":
            self._inbox.append(("alive+" if sample.kind == zenoh.SampleKind.PUT else "alive-", str(sample.key_expr), None))
        else:
            if len(self._inbox) >= INBOX_MAX and self._store is not None:
                self._store.count_dropped()
            self._inbox.append((kind, str(sample.key_expr), sample.payload.to_bytes()))

    # ------------------------------------------------------------ workers

    def _decode_loop(self) -> None:
        """Drain the inbox in batches, at most every DECODE_WINDOW_S. Telemetry is state, not events: only the
        newest sample per robot key in a batch is decoded (counted in `coalesced`), so at 10 Hz per robot the
        decoder does about half the work and hands the GIL to the UI thread in long idle stretches (issue 20)."""
        store = self._store
        assert store is not None
        inbox = self._inbox
        started = 0.0
        while not self._stop.is_set():
            rest = started + DECODE_WINDOW_S - time.monotonic()
            if rest > 0:
                self._stop.wait(rest)
                continue
            started = time.monotonic()
            gate = self.ui_gate
            gate.wait()
            self._pull_rings(gate)
            if not inbox:
                continue
            latest: dict[str, bytes | None] = {}
            for i in range(len(inbox)):
                if not i % GATE_EVERY:
                    gate.wait()
                kind, key, payload = inbox.popleft()
                self.received += 1
                if kind == "telemetry":
                    if key in latest:
                        self.coalesced += 1
                    latest[key] = payload
                    continue
                self._safe_apply(store, kind, key, payload)
            for i, (key, payload) in enumerate(latest.items()):
                if not i % GATE_EVERY:
                    gate.wait()
                self._safe_apply(store, "telemetry", key, payload)

    def _pull_rings(self, gate: UiGate) -> None:
        """Move what the ring subscribers hold into the inbox (decoder thread; bounded by each ring's size)."""
        inbox = self._inbox
        for kind, sub in self._rings:
            try:
                n = 0
                while (smp := sub.try_recv()) is not None:
                    n += 1
                    if not n % GATE_EVERY:
                        gate.wait()
                    if len(inbox) >= INBOX_MAX and self._store is not None:
                        self._store.count_dropped()
                    inbox.append((kind, str(smp.key_expr), smp.payload.to_bytes()))
            except Exception:  # the session closed under us (router gone, stop): the poller reports it
                log.debug("ring subscriber read failed", exc_info=True)

    def _safe_apply(self, store: FleetStore, kind: str, key: str, payload: bytes | None) -> None:
        try:
            self._apply(store, kind, key, payload)
        except WireError as exc:
            store.note(f"bad {kind} on {key}: {exc}"[:200])

    def _parse(self, key: str) -> ParsedKey:
        p = self._keys.get(key)
        if p is None:
            p = parse_key(key)  # raises WireError for a key outside our tree; not cached
            if len(self._keys) > 20_000:
                self._keys.clear()
            self._keys[key] = p
        return p

    def _admit(self, store: FleetStore, role: str, ident: str, ns: Namespace) -> bool:
        with self._lock:
            why = self.admission.admit(role, ident, ns)
            spilled = self.admission.spilled.get((role, ident), 0) if why else 0
        if why:
            store.note(f"{why} ({self.admission.refused} dropped)")
        if spilled:  # one id in too many namespaces: the console raises an alert naming it
            store.on_namespace_spill(role, ident, spilled, self.admission.max_per_id)
        return not why

    def _mismatch(self, store: FleetStore, kind: str, key: str, claimed: str) -> None:
        """A payload that names someone other than its key: dropped, counted, shown (the key is what the ACL checked)."""
        self.mismatched += 1
        store.note(clean(f"dropped {kind} on {key}: it names {claimed} ({self.mismatched} dropped)")[:200])

    def _apply(self, store: FleetStore, kind: str, key: str, payload: bytes | None) -> None:
        p = self._parse(key)
        ns = p.namespace
        if self._recorder is not None:
            self._recorder.raw(kind, key, payload)
        if not self._admit(store, p.role, p.ident, ns):
            return
        shown = clean_namespace(ns)  # what the store shows; `ns` stays exact for the keys of actions
        if kind in ("alive+", "alive-"):
            alive = kind == "alive+"
            if not alive and not self._linked():
                # The router went away: zenoh reports every token deleted. Record the link loss first so
                # these robots are shown as unseen, not GONE (the poller may notice a moment later).
                store.set_connection("disconnected")
            if p.role == "server":
                self._ns[("server", p.ident)] = ns
                if not alive:
                    self._targets.forget(p.ident)
                store.on_server_alive(p.ident, alive, shown)
            else:
                self._ns[("robot", p.ident)] = ns
                store.on_robot_alive(p.ident, alive, shown)
        elif kind == "telemetry":
            tel = decode(RobotTelemetry, payload)
            if tel.client_uuid != p.ident:  # the key is authoritative: a robot cannot speak for another
                self._mismatch(store, kind, key, f"robot {tel.client_uuid}")
                return
            self._ns[("robot", p.ident)] = ns
            store.on_telemetry(clean(tel), shown)
        elif kind == "audit":
            line = decode_json(AuditLine, payload)
            if line.replica and line.replica != p.ident:  # a server's audit speaks for its own replica only
                self._mismatch(store, kind, key, f"replica {line.replica}")
                return
            store.on_audit(clean(line), p.ident, shown)

    def _poll_status(self) -> None:
        store = self._store
        assert store is not None
        try:
            statuses = query_statuses(self.session, timeout=min(2.0, self.status_period_s))
        except Exception as exc:
            store.note(f"status query failed: {exc}"[:200])
            return
        for status, ns in statuses:  # only replies whose key names the replica they claim (discovery.key_vouches_for)
            self.ui_gate.wait()
            if self._recorder is not None:
                self._recorder.event({"kind": "status", "key": ns.keys.server(status.replica, "status"), "data": to_dict(status)})
            if not self._admit(store, "server", status.replica, ns):
                continue
            self._ns[("server", status.replica)] = ns
            status = clean(status)
            if status.metrics_url:
                refused = self._targets.offer(status.replica, status.metrics_url)
                if refused:
                    store.on_metrics(status.replica, None, refused)
            store.on_status(status, clean_namespace(ns))
        try:
            store.set_routers(query_routers(self.session, timeout=min(1.0, self.status_period_s)))
        except Exception as exc:  # the router list is informative; never let it stop the status poll
            store.note(f"router list query failed: {exc}"[:200])
        try:
            refused = query_refused(self.session, timeout=min(1.0, self.status_period_s))
            store.set_refused(tuple((r.cn, r.replica, r.notice()) for r in refused))
        except Exception as exc:  # as informative as the router list
            store.note(f"refused-server query failed: {exc}"[:200])

    def _scrape_loop(self) -> None:
        """Start a round of scrapes each period; each replica's fetch is bounded and runs on its own pool thread."""
        store = self._store
        assert store is not None

        def report(replica: str, values: dict[str, float] | None, error: str) -> None:
            self.ui_gate.wait()
            if self._recorder is not None and values is not None:
                self._recorder.event({"kind": "metrics", "replica": replica, "data": values})
            store.on_metrics(replica, values, clean(error))

        scraper = Scraper(self._targets, report)
        try:
            while not self._stop.wait(self.scrape_period_s):
                scraper.round()
        finally:
            scraper.close()

    # ------------------------------------------------------------ actions (called from a worker thread)

    def drain(self, replica: str, reason: str, requested_by: str) -> ActionResult:
        if self.session is None:
            return ActionResult(False, replica, "drain", "not connected to the router")
        return send_drain(self.session, replica, self._ns.get(("server", replica)), reason, requested_by)

    def cordon(self, replica: str, on: bool, reason: str, requested_by: str) -> ActionResult:
        if self.session is None:
            return ActionResult(False, replica, "cordon" if on else "uncordon", "not connected to the router")
        return send_cordon(self.session, replica, self._ns.get(("server", replica)), on, reason, requested_by)

    def reset_episode(self, robot_id: str, reason: str, requested_by: str, ns: Namespace | None = None) -> ActionResult:
        if self.session is None:
            return ActionResult(False, robot_id, "reset", "not connected to the router")
        return send_episode_reset(self.session, robot_id, ns or self._ns.get(("robot", robot_id)), reason, requested_by)
