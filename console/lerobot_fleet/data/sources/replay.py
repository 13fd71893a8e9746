"""Record and replay a fleet as JSONL (demos, bug reports, tests). A replay is read-only: it cannot act.

One event per line::

    {"t": 0.0, "kind": "alive", "key": "@lerobot/m/main/task/robot/r1/alive", "alive": true}
    {"t": 0.1, "kind": "telemetry", "key": "@lerobot/m/main/task/robot/r1/telemetry", "data": {...RobotTelemetry}}
    {"t": 0.2, "kind": "audit", "key": "@lerobot/m/main/task/server/gpu-0/audit", "data": {...AuditLine}}
    {"t": 0.3, "kind": "status", "key": "@lerobot/m/main/task/server/gpu-0/status", "data": {...ServerStatus}}
    {"t": 0.4, "kind": "metrics", "replica": "gpu-0", "data": {"requests_total": 12.0}}
    {"t": 0.5, "kind": "link", "state": "disconnected"}

`t` is seconds from the start of the recording. `data` uses the wire field names (the same schema
checks as live traffic apply, so a hostile file gets a clear error, never a crash).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from lerobot_policy_remote.wire.codec import decode, decode_json, from_dict, split_audit_payload, to_dict
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import Namespace, parse_key
from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry, ServerStatus

from ..sanitize import clean, clean_namespace
from ..store import FleetStore
from .base import ActionResult


class Recorder:
    """Writes what the source saw as replay JSONL (`--record`), for demos and bug reports."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def event(self, ev: dict[str, Any]) -> None:
        ev = {"t": round(time.monotonic() - self._t0, 3), **ev}
        with self._lock:
            if not self._f.closed:
                self._f.write(json.dumps(ev, separators=(",", ":")) + "\n")

    def raw(self, kind: str, key: str, payload: bytes | None) -> None:
        """Decoded again here (only when recording) so the file holds plain JSON, never msgpack."""
        try:
            if kind in ("alive+", "alive-"):
                self.event({"kind": "alive", "key": key, "alive": kind == "alive+"})
            elif kind == "telemetry":
                self.event({"kind": "telemetry", "key": key, "data": to_dict(decode(RobotTelemetry, payload))})
            elif kind == "audit":  # a publication holds one or more lines: one event per line, malformed ones left out
                for piece in split_audit_payload(payload):
                    try:
                        self.event({"kind": "audit", "key": key, "data": to_dict(decode_json(AuditLine, piece))})
                    except WireError:
                        continue
        except WireError:
            pass

    def close(self) -> None:
        with self._lock:
            self._f.close()


def load_events(path: str | Path) -> list[dict[str, Any]]:
    events = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
        if not isinstance(ev, dict) or "kind" not in ev:
            raise ValueError(f"{path}:{n}: expected an object with a 'kind'")
        events.append(ev)
    return sorted(events, key=lambda e: float(e.get("t", 0.0)))


def apply_event(store: FleetStore, ev: dict[str, Any]) -> None:
    """Feed one recorded event into the store (raises WireError/ValueError for a malformed one)."""
    kind = ev["kind"]
    if kind == "link":
        store.set_connection(str(ev.get("state", "disconnected")))
        return
    if kind == "metrics":
        store.on_metrics(str(ev["replica"]), {str(k): float(v) for k, v in dict(ev.get("data", {})).items()})
        return
    p = parse_key(str(ev["key"]))
    ns = clean_namespace(p.namespace)  # a recording holds what the fleet sent: cleaned as live samples are
    if kind == "alive":
        alive = bool(ev.get("alive", True))
        if p.role == "server":
            store.on_server_alive(p.ident, alive, ns)
        else:
            store.on_robot_alive(p.ident, alive, ns)
    elif kind == "telemetry":
        store.on_telemetry(clean(from_dict(RobotTelemetry, ev["data"], "RobotTelemetry")), ns)
    elif kind == "audit":
        store.on_audit(clean(from_dict(AuditLine, ev["data"], "AuditLine")), p.ident, ns)
    elif kind == "status":
        store.on_status(clean(from_dict(ServerStatus, ev["data"], "ServerStatus")), ns)
    else:
        raise ValueError(f"unknown replay event kind {kind!r}")


class ReplaySource:
    """Plays events at their recorded pace (`speed` x); `speed=0` loads everything at once (tests)."""

    can_act = False

    def __init__(self, path: str | Path, speed: float = 1.0) -> None:
        self.path = Path(path)
        self.label = f"replay {self.path.name}"
        self.speed = speed
        self.events = load_events(self.path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, store: FleetStore) -> None:
        store.router = self.label
        store.set_connection("replay")
        if self.speed <= 0:
            for ev in self.events:
                self._apply(store, ev)
            return
        self._thread = threading.Thread(target=self._play, args=(store,), name="fleet-replay", daemon=True)
        self._thread.start()

    def _apply(self, store: FleetStore, ev: dict[str, Any]) -> None:
        try:
            apply_event(store, ev)
        except (WireError, ValueError, KeyError, TypeError) as exc:
            store.note(f"replay: skipped a bad {ev.get('kind')!r} event: {exc}"[:200])

    def _play(self, store: FleetStore) -> None:
        start = time.monotonic()
        for ev in self.events:
            delay = float(ev.get("t", 0.0)) / self.speed - (time.monotonic() - start)
            if delay > 0 and self._stop.wait(delay):
                return
            self._apply(store, ev)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def drain(self, replica: str, reason: str, requested_by: str) -> ActionResult:
        return ActionResult(False, replica, "drain", "a replay cannot act")

    def cordon(self, replica: str, on: bool, reason: str, requested_by: str) -> ActionResult:
        return ActionResult(False, replica, "cordon" if on else "uncordon", "a replay cannot act")

    def reset_episode(self, robot_id: str, reason: str, requested_by: str, ns: Namespace | None = None) -> ActionResult:
        return ActionResult(False, robot_id, "reset", "a replay cannot act")
