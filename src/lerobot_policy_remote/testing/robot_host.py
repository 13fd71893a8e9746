"""The fleet simulator's robot host: `count` robots, each the product's `RemoteInferenceEngine` over its own `ZenohLink`
(own liveliness token, keys, session id, state machine, telemetry), all declared on ONE Zenoh session of the process
(multiplexing: what is shared is the TCP connection, never a robot's keys or state). `simfleet.py` runs it as the
`robots` process of `lerobot-fleet simulate`, and writes the `HostReport` it takes.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import math
import resource
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

from .fake_robot import SIM_ARM_ACTION_NAMES

MODEL = "sim/stub"
TASK = "simulated fleet"
FPS = 30.0
CHUNK = 30  # one observation per chunk: 1 s of actions at 30 fps, sent when 0.5 s are left
# A robot host's one link carries up to 250 robots' observations (and its router's link back, their chunks):
# bursts a robot's own link never sees. Deeper TX queues for the priorities the protocol uses keep those
# multiplexing bursts from being dropped (robots' publishers use CongestionControl.DROP); `lerobot-fleet simulate`
# gives its routers the same (docs/decisions.md, "A drain of hundreds of robots at once").
MUX_QUEUES_JSON5 = "{transport: {link: {tx: {queue: {size: {interactive_high: 16, data: 16}}}}}}"
# The link's lease: zenoh runs every robot's callbacks on the link's one RX task, under this process's one GIL (shared
# with 250 robots' control loops and up to 32 handshakes after a drain). A callback that waited over a second for the
# GIL let the 1 s lease of a single robot's link expire: all 250 robots lost every replica's token at once and
# re-handshook (seen twice in 1,000-robot runs). A robot's own process never has that contention.
MUX_LEASE_MS = 3000


class RobotReport(TypedDict):
    """One robot's figures in its host's JSON report."""

    robot: str
    state: str
    replica: str
    chunks: int
    chunks_per_s: float
    executed: int
    holds: int
    stale_actions: int
    nan_actions: int
    max_action_age_s: float
    staleness_mean_s: float
    # the models its executed actions came from, in the order they first drove it, the number of times that model
    # changed between two executed actions, the moves the engine completed, and the longest run of control ticks
    # without a fresh action (a hold, or an action older than its bound)
    fingerprints: list[str]
    switches: int
    moves: int
    max_gap_s: float
    history: list[tuple[float, str, str]]  # (monotonic time, state, why): the last 200 transitions
    replicas: list[str]


class HostReport(TypedDict):
    """A robot host's JSON report: its window, its CPU and every robot's figures."""

    wall_s: float
    cpu_s: float
    robots: list[RobotReport]


def _hw_features() -> dict[str, dict[str, object]]:
    return {
        "observation.state": {
            "dtype": "float32",
            "shape": (len(SIM_ARM_ACTION_NAMES),),
            "names": list(SIM_ARM_ACTION_NAMES),
        }
    }


def _move(e: Any) -> None:
    """A re-handshake on a pool thread, then at once the first request (the engine's own worker steps again within
    5 ms; waiting for the host's next idle pass added up to `idle_s` to every move)."""
    if e.step() and not e.handshake_due:
        e.step()


class _HostWake(threading.Event):
    """A robot engine's wake event that also queues the robot's index for its host: the host's pass steps the robots
    woken or due, never scanning all of them (a scan of 250 robots every 20 ms was a tenth of a host's CPU)."""

    def __init__(self, woken: collections.deque[int], index: int) -> None:
        super().__init__()
        self._woken, self._index = woken, index

    def set(self) -> None:
        super().set()
        self._woken.append(self._index)


class SimRobot:
    """One robot: the product engine (worker stepped by the host) and what its control loop saw."""

    def __init__(self, engine: Any, index: int) -> None:
        self.e, self.index = engine, index
        self.obs = {n: float(index % 7) for n in SIM_ARM_ACTION_NAMES}
        self.executed = self.stale = self.nan = self.holds = 0
        self.fingerprints: list[str] = []
        self.switches = self.gap = self.max_gap = 0
        self.max_exec_age = 0.0
        self.staleness_sum = 0.0
        self.staleness_n = 0


class RobotHost:
    """`count` robots on one Zenoh session; `loop` runs both halves of every robot."""

    def __init__(
        self,
        endpoints: list[str],
        first: int,
        count: int,
        *,
        prefix: str = "sim-arm",
        revision: str = "main",
        telemetry_period_s: float = 1.0,
        telemetry_max_period_s: float = 1.0,
    ) -> None:
        from lerobot.policies.rtc.configuration_rtc import RTCConfig

        from ..engine.config import RemoteInferenceConfig
        from ..engine.remote import RemoteInferenceEngine
        from ..engine.zenoh_link import ZenohLink
        from ..wire.keys import ServiceKeys
        from ..zenoh_config import open_session

        self.robots: list[SimRobot] = []
        self._woken: collections.deque[int] = collections.deque()  # robots whose engine was woken, for the next pass
        cfg0 = RemoteInferenceConfig(connect_endpoints=list(endpoints))
        self.session = open_session(
            dataclasses.replace(cfg0.zenoh_settings(), extra_json5=MUX_QUEUES_JSON5, lease_ms=MUX_LEASE_MS)
        )
        keys = ServiceKeys.for_service(MODEL, revision, TASK)
        for i in range(first, first + count):
            cfg = RemoteInferenceConfig(
                connect_endpoints=list(endpoints),
                client_uuid=f"{prefix}-{i:04d}",
                service_revision=revision,
                rtc=RTCConfig(enabled=False),
                buffer_time_s=0.5,
                max_action_age_s=3.0,
                request_timeout_s=3.0,
                reconnect_initial_backoff_s=0.2,
                reconnect_max_backoff_s=1.0,
                handshake_jitter_s=0.05,
                max_offline_s=3600.0,
                connect_timeout_s=30.0,
                telemetry_period_s=telemetry_period_s,
                telemetry_max_period_s=telemetry_max_period_s,
                # the simulated robots stand for arms on machines of their own: their frames go as across a network
                raw_frames_on_same_host=False,
            )
            link = ZenohLink(cfg.zenoh_settings(), keys, cfg.client_uuid, session=self.session)
            e = RemoteInferenceEngine(
                cfg,
                hw_features=_hw_features(),
                ordered_action_keys=list(SIM_ARM_ACTION_NAMES),
                task=TASK,
                fps=FPS,
                model_id=MODEL,
                transport=link,
            )
            e._wake = _HostWake(self._woken, len(self.robots))  # before start: the link's notify is this event's set
            self.robots.append(SimRobot(e, i))
        self._halt = threading.Event()

    def start(self, parallel: int = 8) -> None:
        """Every robot's first handshake (a few at a time), then its loop is active."""

        def one(r: SimRobot) -> None:
            r.e.start(worker=False)
            r.e.resume()

        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(one, self.robots))

    def loop(self, period_s: float = 0.02, idle_s: float = 0.25, tick_s: float = 0.1, parallel: int = 32) -> None:
        """Both halves of every robot on ONE thread: network passes every `period_s`, control ticks every `tick_s`.

        Two threads (one per half, as a robot's own process has) cost the host about 7 % more CPU: every torch call
        and zenoh put of one handed the GIL to the other. Neither half blocks (an inline step never handshakes, puts
        drop when congested), so a control tick waits at most for the pass in progress, as a tick of a real robot
        waits for its OS scheduler; the control side stays as it is in the product (`get_action` reads memory only).
        """
        due = [0.0] * len(self.robots)
        heap = [(0.0, i) for i in range(len(self.robots))]  # (when a robot is next due, robot): stale entries skipped
        busy: dict[int, Any] = {}
        frames = [0, time.monotonic()]  # frames executed, when the control loops began
        next_tick = time.monotonic() + tick_s
        with ThreadPoolExecutor(parallel, thread_name_prefix="sim-handshake") as pool:
            while not self._halt.is_set():
                t0 = time.monotonic()
                self._step_pass(t0, due, heap, busy, pool, idle_s)
                if time.monotonic() >= next_tick:
                    next_tick = max(next_tick + tick_s, time.monotonic())
                    self._control_tick(frames)
                self._halt.wait(max(0.0, min(period_s - (time.monotonic() - t0), next_tick - time.monotonic())))

    def _step_pass(
        self,
        t0: float,
        due: list[float],
        heap: list[tuple[float, int]],
        busy: dict[int, Any],
        pool: ThreadPoolExecutor,
        idle_s: float,
    ) -> None:
        """The network workers: a robot is stepped when its link woke it (a chunk, an event, a token), when the engine
        says a quiet robot is next due (`quiet_until`: its request, its telemetry), else every `idle_s` (timeouts and
        resends of a request in flight, handshakes); the engine's own worker would poll every 5 ms, which for hundreds
        of robots per process would spend the CPU on idle passes (a streaming robot is stepped about 3 times a second
        instead of 4.6 every `idle_s`, and sends when due, not up to `idle_s` late). A robot that must re-handshake is
        stepped on a pool thread (the handshake blocks on its query, as in the engine's own worker); an inline step
        never handshakes (`step(handshake=False)`), so the robots a drain notice moves all go to the pool instead of
        handshaking one after another on this thread (2 s for 60 robots before). The pass hands them to the pool only
        once it has stepped every robot: each pool thread it woke mid-pass competed for the GIL with the pass, and a
        host took ~1 s to see the notices of its 60 drained robots. A robot back from the pool is stepped at once.
        A DEAD robot stays put."""
        ready: set[int] = set()
        woken = self._woken
        while woken:
            ready.add(woken.popleft())
        while heap and heap[0][0] <= t0:
            at, i = heapq.heappop(heap)
            if at == due[i]:  # else a later step replaced this entry
                ready.add(i)
        for i in [i for i, f in busy.items() if f.done()]:
            del busy[i]
            ready.add(i)
        moves: list[int] = []
        for i in ready:
            e = self.robots[i].e
            if i in busy or e.failed:
                continue
            if e._wake.is_set():  # `clear` takes the event's lock: most robots due are not woken
                e._wake.clear()
            if not e.handshake_due:
                e.step(handshake=False)  # a drain notice, a lost link or a move found here makes one due
            if e.handshake_due:
                moves.append(i)
            now = time.monotonic()
            quiet = e.quiet_until(now)
            due[i] = now + idle_s if quiet is None else quiet
            heapq.heappush(heap, (due[i], i))
        for i in moves:  # after the pass: a handshake started mid-pass took the GIL from the robots still to step
            busy[i] = pool.submit(_move, self.robots[i].e)

    def _control_tick(self, frames: list[Any]) -> None:
        """The control loops: each robot executes the actions of the 30 fps frames that elapsed since the last tick
        (notify the latest observation, `get_action` once per frame), counting stale/NaN actions like `ControlLoop`.
        Counted in locals and written back once per robot: this loop runs 30 times per robot-second."""
        from ..engine.provenance import latest_age, latest_fingerprint

        due = int((time.monotonic() - frames[1]) * FPS)
        n, frames[0] = due - frames[0], due
        isfinite, inf, monotonic = math.isfinite, math.inf, time.monotonic
        for r in self.robots:
            e = r.e
            e.notify_observation(r.obs)
            get, bound = e.get_action, e.cfg.max_action_age_s
            executed = stale = nan = 0
            oldest = r.max_exec_age
            for _ in range(n):
                act = get(None)
                if act is None:
                    r.holds += 1
                    if r.fingerprints:  # a gap counts once the robot has moved at all (not its first handshake)
                        r.gap += 1
                        r.max_gap = max(r.max_gap, r.gap)
                    continue
                age = latest_age()
                if age is None:
                    age = inf
                executed += 1
                if age > oldest:
                    oldest = age
                if age > bound:
                    stale += 1
                    r.gap += 1
                    r.max_gap = max(r.max_gap, r.gap)
                else:
                    r.gap = 0
                fp = latest_fingerprint()
                if fp and (not r.fingerprints or fp != r.fingerprints[-1]):
                    r.switches += bool(r.fingerprints)
                    r.fingerprints.append(fp)
                if not isfinite(sum(act.tolist())):  # a NaN or inf anywhere makes the sum so
                    nan += 1
            r.executed += executed
            r.stale += stale
            r.nan += nan
            r.max_exec_age = oldest
            r.staleness_sum += e.queue.head_age(monotonic())
            r.staleness_n += 1

    def run(
        self,
        seconds: float,
        ready: str = "ROBOTS READY",
        on_report: Callable[[HostReport], None] | None = None,
        linger: Callable[[], bool] | None = None,
        report_now: Callable[[], bool] | None = None,
    ) -> HostReport:
        """Run the loops for `seconds`, take the report (`on_report(report)`), then keep the robots running while
        `linger()` is true: a host that tears its robots down while another host still measures would load the
        routers with hundreds of undeclarations inside the other's window (robots that stall together at the end)."""
        threads = [threading.Thread(target=self.loop, daemon=True, name="sim-robots")]
        for t in threads:
            t.start()
        print(ready, flush=True)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self._cpu0 = ru.ru_utime + ru.ru_stime
        t0 = time.monotonic()
        end = t0 + seconds
        while not self._halt.wait(min(0.2, max(0.0, end - time.monotonic()))) and time.monotonic() < end:
            if report_now is not None and report_now():
                break
        report = self.report(time.monotonic() - t0)
        if on_report is not None:
            on_report(report)
        deadline = time.monotonic() + 300
        while linger is not None and linger() and time.monotonic() < deadline and not self._halt.is_set():
            self._halt.wait(0.2)
        self._halt.set()
        for t in threads:
            t.join(5)
        return report

    def stop(self) -> None:
        self._halt.set()
        for r in self.robots:
            r.e.stop()
        try:
            self.session.close()
        except Exception as exc:  # the router may be gone already
            print(f"closing the session: {exc}", file=sys.stderr)

    def report(self, wall_s: float) -> HostReport:
        robots: list[RobotReport] = []
        for r in self.robots:
            e = r.e
            robots.append(
                {
                    "robot": e.client_uuid,
                    "state": e.state.value,
                    "replica": e.replica,
                    "chunks": e.counters["chunks"],
                    "chunks_per_s": round(e.counters["chunks"] / wall_s, 3),
                    "executed": r.executed,
                    "holds": r.holds,
                    "stale_actions": r.stale,
                    "nan_actions": r.nan,
                    "max_action_age_s": round(r.max_exec_age, 3),
                    "staleness_mean_s": round(r.staleness_sum / max(1, r.staleness_n), 3),
                    "fingerprints": r.fingerprints[-20:],
                    "switches": r.switches,
                    "moves": e.counters["moves"],
                    "max_gap_s": round(r.max_gap / FPS, 3),
                    "history": [(round(t, 4), s.value, why) for t, s, why in e.states.history[-200:]],
                    "replicas": sorted({p for p in [e.replica] if p}),
                }
            )
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {"wall_s": round(wall_s, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime - self._cpu0, 2), "robots": robots}
