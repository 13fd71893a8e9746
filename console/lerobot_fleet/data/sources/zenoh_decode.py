"""The decoder: inbox entries -> store updates. The key is the authority; each id gets a namespace budget.

One thread drains the inbox in batches, at most every DECODE_WINDOW_S. Telemetry is state, not events:
only the newest sample per robot key in a batch is decoded (counted in `coalesced`), so at 10 Hz per
robot the decoder does about half the work and leaves the GIL to the UI thread in long idle stretches.
It yields to a UI refresh between small units of work (`UiGate`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lerobot_policy_remote.wire.codec import decode, decode_json, split_audit_payload
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import Namespace, ParsedKey, parse_key
from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry

from ..admission import Admission
from ..metrics_fetch import MetricsTargets
from ..sanitize import clean, clean_namespace
from ..store import FleetStore
from ..ui_gate import UiGate
from .replay import Recorder
from .zenoh_intake import GATE_EVERY, Intake

DECODE_WINDOW_S = 0.2  # the decoder drains the inbox at most this often: a robot's samples in one window decode once
KEY_CACHE_MAX = 20_000  # parsed key expressions kept (cleared when full)


class Decoder:
    """Applies inbox entries to the store; remembers each id's namespace for the operator actions."""

    def __init__(self, targets: MetricsTargets, linked: Callable[[], bool], recorder: Recorder | None = None) -> None:
        self.targets = targets  # replicas' metrics endpoints: a server whose token goes is forgotten there
        self.linked = linked  # whether the router link is up now (a token deletion may be the link's)
        self.recorder = recorder
        self.admission = Admission()
        self.namespaces: dict[tuple[str, str], Namespace] = {}  # (role, id) -> exact namespace, for actions
        self.received = 0
        self.coalesced = 0
        self.mismatched = 0  # samples whose payload names another robot or replica than their key: dropped
        self._keys: dict[str, ParsedKey] = {}
        self._lock = threading.Lock()  # guards admission (decoder thread and status poller)

    def run(self, store: FleetStore, intake: Intake, gate: UiGate, stop: threading.Event) -> None:
        """The decoder thread: pull, coalesce telemetry per key, apply; until `stop`."""
        inbox = intake.inbox
        started = 0.0
        while not stop.is_set():
            rest = started + DECODE_WINDOW_S - time.monotonic()
            if rest > 0:
                stop.wait(rest)
                continue
            started = time.monotonic()
            gate.wait()
            dropped = intake.pull(gate)
            if dropped:
                store.count_dropped(dropped)
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
                if kind == "audit":
                    gate.wait()  # one publication is up to 64 lines: about GATE_EVERY samples of decoding
                self.safe_apply(store, kind, key, payload)
            for i, (key, payload) in enumerate(latest.items()):
                if not i % GATE_EVERY:
                    gate.wait()
                self.safe_apply(store, "telemetry", key, payload)

    def safe_apply(self, store: FleetStore, kind: str, key: str, payload: bytes | None) -> None:
        """`apply`, with a malformed sample shown as a note instead of raised."""
        try:
            self.apply(store, kind, key, payload)
        except WireError as exc:
            store.note(f"bad {kind} on {key}: {exc}"[:200])

    def admit(self, store: FleetStore, role: str, ident: str, ns: Namespace) -> bool:
        """Whether a sample of `ident` in `ns` fits its namespace budget; a refusal is a note, a spill an alert."""
        with self._lock:
            why = self.admission.admit(role, ident, ns)
            spilled = self.admission.spilled.get((role, ident), 0) if why else 0
        if why:
            store.note(f"{why} ({self.admission.refused} dropped)")
        if spilled:  # one id in too many namespaces: the console raises an alert naming it
            store.on_namespace_spill(role, ident, spilled, self.admission.max_per_id)
        return not why

    def apply(self, store: FleetStore, kind: str, key: str, payload: bytes | None) -> None:
        p = self._parse(key)
        ns = p.namespace
        if self.recorder is not None:
            self.recorder.raw(kind, key, payload)
        if not self.admit(store, p.role, p.ident, ns):
            return
        shown = clean_namespace(ns)  # what the store shows; `ns` stays exact for the keys of actions
        if kind in ("alive+", "alive-"):
            alive = kind == "alive+"
            if not alive and not self.linked():
                # The router went away: zenoh reports every token deleted. Record the link loss first so
                # these robots are shown as unseen, not GONE (the poller may notice a moment later).
                store.set_connection("disconnected")
            if p.role == "server":
                self.namespaces[("server", p.ident)] = ns
                if not alive:
                    self.targets.forget(p.ident)
                store.on_server_alive(p.ident, alive, shown)
            else:
                self.namespaces[("robot", p.ident)] = ns
                store.on_robot_alive(p.ident, alive, shown)
        elif kind == "telemetry":
            tel = decode(RobotTelemetry, payload)
            if tel.client_uuid != p.ident:  # the key is authoritative: a robot cannot speak for another
                self._mismatch(store, kind, key, f"robot {tel.client_uuid}")
                return
            self.namespaces[("robot", p.ident)] = ns
            store.on_telemetry(clean(tel), shown)
        elif kind == "audit":
            self._audit(store, key, p.ident, shown, payload)

    def _audit(self, store: FleetStore, key: str, replica: str, shown: Namespace, payload: bytes | None) -> None:
        """One audit publication: a replica's batch of lines (one or more). Each line is decoded and checked alone: a
        malformed one or one naming another replica is dropped and noted, the others of the batch are kept."""
        bad: list[str] = []
        for piece in split_audit_payload(payload):  # raises WireError for a missing or oversize payload (a note)
            try:
                line = decode_json(AuditLine, piece)
            except WireError as exc:
                bad.append(str(exc))
                continue
            if line.replica and line.replica != replica:  # a server's audit speaks for its own replica only
                self._mismatch(store, "audit", key, f"replica {line.replica}")
                continue
            store.on_audit(clean(line), replica, shown)
        if bad:  # one note per publication, however many of its lines were malformed
            more = f" (and {len(bad) - 1} more line(s))" if len(bad) > 1 else ""
            store.note(f"bad audit on {key}: {bad[0]}{more}"[:200])

    def _parse(self, key: str) -> ParsedKey:
        p = self._keys.get(key)
        if p is None:
            p = parse_key(key)  # raises WireError for a key outside our tree; not cached
            if len(self._keys) > KEY_CACHE_MAX:
                self._keys.clear()
            self._keys[key] = p
        return p

    def _mismatch(self, store: FleetStore, kind: str, key: str, claimed: str) -> None:
        """A payload that names someone other than its key: dropped, counted, shown (the ACL checked the key)."""
        self.mismatched += 1
        store.note(clean(f"dropped {kind} on {key}: it names {claimed} ({self.mismatched} dropped)")[:200])
