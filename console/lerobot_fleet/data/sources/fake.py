"""A deterministic fake fleet for snapshot tests and offline demos (`lerobot-fleet console --fake`)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import replace

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import AuditLine, ModelInfo, RobotTelemetry, ServerStatus, SessionInfo

from ..store import FleetStore
from .base import ActionResult


class ManualClock:
    """A monotonic clock that only moves when told to (frozen in tests)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


ACT = Namespace("lerobot/act_pick_place", "main", "pick up the cube")
PI0 = Namespace("lerobot/pi0_towel", "v1.2", "fold the towel")

# robot id, namespace, state, replica, episode, rtt p50/p95, queue s, staleness s, delay, requests, superseded, errors,
# outcome
FakeRobot = tuple[str, Namespace, str, str, int, float, float, float, float, int, int, int, int, str]
ROBOTS: list[FakeRobot] = [
    ("arm-01", ACT, "STREAMING", "gpu-a-0", 12, 31.0, 44.0, 1.20, 0.08, 1, 1200, 6, 0, "ok"),
    ("arm-02", ACT, "STREAMING", "gpu-a-0", 7, 29.0, 40.0, 1.10, 0.07, 1, 980, 2, 0, "ok"),
    ("arm-03", ACT, "DEGRADED", "gpu-a-1", 4, 180.0, 420.0, 0.40, 1.30, 6, 700, 35, 3, "timeout"),
    (
        "arm-04",
        ACT,
        "STALLED",
        "gpu-a-1",
        9,
        650.0,
        1400.0,
        0.0,
        3.40,
        20,
        455,
        12,
        17,
        "[bold]bad_request[/bold]: state nan",
    ),
    ("arm-05", ACT, "RECONNECTING", "", 3, 0.0, 0.0, 0.0, 0.0, 0, 120, 0, 4, "unknown_session"),
    ("arm-06", ACT, "STREAMING", "gpu-a-1", 21, 35.0, 52.0, 1.30, 0.09, 2, 2100, 40, 1, "ok"),
    ("arm-07", ACT, "DEAD", "", 2, 0.0, 0.0, 0.0, 0.0, 0, 40, 0, 9, "model_mismatch"),
    ("arm-08", ACT, "CONNECTING", "", 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, ""),
    ("towel-1", PI0, "STREAMING", "gpu-p-0", 5, 160.0, 210.0, 0.90, 0.20, 5, 300, 3, 0, "ok"),
    ("towel-2", PI0, "STREAMING", "gpu-p-0", 6, 170.0, 230.0, 0.80, 0.22, 6, 310, 4, 0, "ok"),
    ("towel-3", PI0, "STREAMING", "gpu-p-0", 1, 165.0, 220.0, 0.85, 0.21, 5, 90, 1, 0, "ok"),
    ("towel-4", PI0, "STREAMING", "gpu-p-0", 2, 175.0, 240.0, 0.70, 0.25, 6, 95, 0, 0, "ok"),
]
# The fake arms run with a tight bound on action age, so their staleness alert opens at 1.0 s (2/3 of it).
FAKE_MAX_ACTION_AGE_S = 1.5
GONE_ROBOT: FakeRobot = ("arm-09", ACT, "STREAMING", "gpu-a-0", 3, 33.0, 47.0, 1.0, 0.1, 1, 400, 1, 0, "ok")
SILENT_ROBOT = "arm-10"  # token alive, never sent telemetry -> UNKNOWN

SERVERS = [
    ("gpu-a-0", ACT, 8, 20.0, 50, 30.0, False, True, 0.35),
    ("gpu-a-1", ACT, 8, 24.0, 50, 30.0, False, True, 0.60),
    ("gpu-a-2", ACT, 8, 22.0, 50, 30.0, True, True, 0.0),
    ("gpu-p-0", PI0, 4, 150.0, 50, 30.0, False, True, 0.95),
]


class FakeSource:
    """Writes a fixed, mixed-state fleet into the store; actions change it the way the real ones would."""

    label = "fake"
    can_act = True

    def __init__(self, clock: Callable[[], float] | None = None, live: bool = False, seed: int = 7) -> None:
        self.clock = clock or ManualClock()
        self.live = live
        self._rng = random.Random(seed)
        self._store: FleetStore | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._telemetry: dict[str, tuple[RobotTelemetry, Namespace]] = {}
        self._status: dict[str, tuple[ServerStatus, Namespace]] = {}
        self.actions: list[tuple[str, str]] = []

    def start(self, store: FleetStore) -> None:
        self._store = store
        store.set_connection("fake")
        self._populate(store)
        if self.live:
            self._thread = threading.Thread(target=self._run, name="fake-source", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _step(self, seconds: float) -> None:
        if isinstance(self.clock, ManualClock):
            self.clock.advance(seconds)

    def _populate(self, store: FleetStore) -> None:
        for replica, ns, *_ in SERVERS:
            store.on_server_alive(replica, True, ns)
        # Robots go through a short state history so the detail screen has something to show.
        for row in [*ROBOTS, GONE_ROBOT]:
            robot_id, ns = row[0], row[1]
            store.on_robot_alive(robot_id, True, ns)
            store.on_telemetry(
                RobotTelemetry(client_uuid=robot_id, state="CONNECTING", model_id=ns.model_id, service=ns.service), ns
            )
        self._step(2.0)
        for i, rtt in enumerate((28.0, 30.0, 33.0, 31.0, 45.0, 90.0, 180.0, 260.0, 180.0, 120.0)):
            for row in [*ROBOTS, GONE_ROBOT]:
                tel = self._telemetry_for(
                    row, rtt_scale=rtt / 31.0 if row[0] in ("arm-03", "arm-01", "arm-04") else 1.0, seq=i
                )
                if i < 5 and row[2] in ("DEGRADED", "STALLED", "RECONNECTING", "DEAD"):
                    tel = replace(tel, state="STREAMING")
                store.on_telemetry(tel, row[1])
            self._step(1.0)
        for row in [*ROBOTS, GONE_ROBOT]:
            tel = self._telemetry_for(row, 1.0, seq=99)
            self._telemetry[row[0]] = (tel, row[1])
            store.on_telemetry(tel, row[1])
        store.on_robot_alive(GONE_ROBOT[0], False, GONE_ROBOT[1])
        store.on_robot_alive(SILENT_ROBOT, True, ACT)
        self._step(1.0)
        for replica, ns, max_s, inf_ms, chunk, fps, draining, warm, load in SERVERS:
            sessions = [
                SessionInfo(
                    session_id=f"s-{t.client_uuid}",
                    client_uuid=t.client_uuid,
                    episode_id=t.episode_id,
                    requests=t.requests,
                    superseded=t.superseded,
                    errors=t.errors,
                )
                for t, _ in self._telemetry.values()
                if t.replica == replica
            ]
            status = ServerStatus(
                replica=replica,
                model=ModelInfo(
                    repo_or_path=ns.model_id,
                    revision=ns.revision,
                    policy_type="act" if ns is ACT else "pi0",
                    fingerprint="f" * 12,
                ),
                service=ns.service,
                default_task=ns.service,
                serving_mode="shared",
                max_sessions=max_s,
                active_sessions=len(sessions),
                load=load,
                chunk_size=chunk,
                trained_fps=fps,
                inference_ms_p50=inf_ms,
                metrics_url=f"http://127.0.0.1:9100/{replica}/metrics",
                draining=draining,
                warmed_up=warm,
                sessions=sessions,
            )
            self._status[replica] = (status, ns)
            store.on_status(status, ns)
            base = {
                "requests_total": 1000.0,
                "errors_total": 3.0,
                "superseded_total": 12.0,
                "active_sessions": float(len(sessions)),
            }
            store.on_metrics(replica, base)
            for j, (t, _) in enumerate(self._telemetry.values()):
                if t.replica != replica:
                    continue
                store.on_audit(
                    AuditLine(
                        ts="2026-01-01T00:00:00+00:00",
                        session_id=f"s-{t.client_uuid}",
                        client_uuid=t.client_uuid,
                        seq_id=t.requests - 1,
                        episode_id=t.episode_id,
                        queue_wait_ms=2.0 + j,
                        inference_ms=inf_ms,
                        chunk_range=[0, chunk],
                        superseded=0,
                        outcome="ok" if t.errors == 0 else "[red]error[/red]",
                        replica=replica,
                        error="" if t.errors == 0 else "chunk had NaN [x]",
                    ),
                    replica,
                    ns,
                )
        self._step(2.0)
        self._requests = {replica: 1000.0 for replica, *_ in SERVERS}
        if isinstance(self.clock, ManualClock):  # a second scrape 2 s later gives a request rate
            self._scrape(store, 2.0)
        self._step(0.5)

    def _scrape(self, store: FleetStore, seconds: float) -> None:
        for replica, *_ in SERVERS:
            status, _ = self._status[replica]
            self._requests[replica] += 0.0 if status.draining else 5.0 * status.active_sessions * seconds / 3.0
            store.on_metrics(
                replica, {"requests_total": self._requests[replica], "errors_total": 3.0, "superseded_total": 12.0}
            )

    @staticmethod
    def _telemetry_for(row: FakeRobot, rtt_scale: float, seq: int) -> RobotTelemetry:
        robot_id, ns, state, replica, ep, p50, p95, queue, stale, delay, req, sup, err, outcome = row
        return RobotTelemetry(
            client_uuid=robot_id,
            state=state,
            model_id=ns.model_id,
            service=ns.service,
            session_id=f"s-{robot_id}" if replica else "",
            replica=replica,
            episode_id=ep,
            staleness_s=stale,
            queue_s=queue,
            rtt_p50_ms=p50 * rtt_scale,
            rtt_p95_ms=p95 * rtt_scale,
            delay_steps=delay,
            requests=req,
            superseded=sup,
            errors=err,
            last_outcome=outcome,
            fps=30.0,
            seq=seq,
            max_action_age_s=FAKE_MAX_ACTION_AGE_S,
            rtc=("on" if ns is PI0 else "off") if replica else "",  # pi0 runs real-time chunking; ACT appends chunks
        )

    def _run(self) -> None:
        """Live demo mode: small random walks once a second."""
        while not self._stop.wait(1.0):
            store = self._store
            if store is None:
                return
            for robot_id, (tel, ns) in list(self._telemetry.items()):
                if tel.state != "STREAMING":
                    continue
                jitter = self._rng.uniform(0.85, 1.2)
                tel = replace(tel, rtt_p50_ms=tel.rtt_p50_ms * jitter, requests=tel.requests + 3, seq=tel.seq + 1)
                self._telemetry[robot_id] = (tel, ns)
                store.on_telemetry(tel, ns)
            self._scrape(store, 1.0)

    def telemetry(self, robot_id: str) -> tuple[RobotTelemetry, tuple[str, str, str]]:
        """The last telemetry this fake sent for a robot, with its namespace (tests change it and send it again)."""
        return self._telemetry[robot_id]

    # ------------------------------------------------------------ actions

    def drain(self, replica: str, reason: str, requested_by: str) -> ActionResult:
        self.actions.append(("drain", replica))
        entry = self._status.get(replica)
        if entry is None:
            return ActionResult(False, replica, "drain", f"no server {replica!r}")
        status, ns = entry
        status = replace(status, draining=True)
        self._status[replica] = (status, ns)
        if self._store is not None:
            self._store.on_status(status, ns)
        sessions = tuple(s.session_id for s in status.sessions)
        return ActionResult(True, replica, "drain", "draining", sessions=sessions)

    def cordon(self, replica: str, on: bool, reason: str, requested_by: str) -> ActionResult:
        action = "cordon" if on else "uncordon"
        self.actions.append((action, replica))
        entry = self._status.get(replica)
        if entry is None:
            return ActionResult(False, replica, action, f"no server {replica!r}")
        status, ns = entry
        status = replace(status, cordoned=on)
        self._status[replica] = (status, ns)
        if self._store is not None:
            self._store.on_status(status, ns)
        return ActionResult(True, replica, action, "cordoned" if on else "uncordoned", details={"cordoned": on})

    def reset_episode(self, robot_id: str, reason: str, requested_by: str, ns: Namespace | None = None) -> ActionResult:
        self.actions.append(("reset", robot_id))
        entry = self._telemetry.get(robot_id)
        if entry is None:
            return ActionResult(False, robot_id, "reset", f"no robot {robot_id!r}")
        tel, ns = entry
        tel = replace(tel, episode_id=tel.episode_id + 1, seq=tel.seq + 1)
        self._telemetry[robot_id] = (tel, ns)
        if self._store is not None:
            self._store.on_telemetry(tel, ns)
        return ActionResult(True, robot_id, "reset", "episode reset", episode_id=tel.episode_id)
