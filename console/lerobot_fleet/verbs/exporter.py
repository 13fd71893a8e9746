"""`lerobot-fleet exporter`: the fleet's robot telemetry as Prometheus metrics, so Grafana shows robots too.

Robots publish `RobotTelemetry` on Zenoh (~1 Hz and on every state change); they have no /metrics of their
own (a robot behind NAT cannot be scraped). The exporter subscribes `@lerobot/*/*/*/robot/*/telemetry`
through a router and serves the latest sample of each robot on GET /metrics, with the server's conventions:
the `lerobot_` prefix (`lerobot_robot_...`), seconds for durations, `_total` for counters, the robot in a
`client` label (as the server's per-client metrics), plus `model`, `revision` and `service`.

Threads: zenoh's callback only deposits the raw sample (bounded, latest per key); decoding happens at
scrape time under a lock. A robot not heard from for `forget_s` is dropped, so label sets stay bounded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from lerobot_policy_remote.wire.codec import decode
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import ServiceKeys, parse_key
from lerobot_policy_remote.wire.messages import RobotTelemetry

if TYPE_CHECKING:
    from lerobot_policy_remote.zenoh_config import ZenohSettings

PREFIX = "lerobot_robot_"
STATES = ("CONNECTING", "STREAMING", "DEGRADED", "STALLED", "RECONNECTING", "DEAD")
MAX_ROBOTS = 10_000  # a bound on what a misbehaving publisher can make us hold


class RobotTelemetryCollector:
    """A prometheus_client collector over the latest telemetry of each robot (pure: fed by `add`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, forget_s: float = 300.0) -> None:
        self.clock = clock
        self.forget_s = forget_s
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[float, bytes]] = {}  # key -> (received at, raw payload)
        self.decode_errors = 0
        self.samples = 0

    def add(self, key: str, payload: bytes) -> None:
        """Zenoh's thread: keep the newest raw sample of this robot (no decoding here)."""
        with self._lock:
            if key in self._latest or len(self._latest) < MAX_ROBOTS:
                self._latest[key] = (self.clock(), payload)
            self.samples += 1

    def robots(self) -> list[tuple[dict[str, str], float, RobotTelemetry]]:
        """(labels, seconds since heard, telemetry) of every robot heard within forget_s; bad samples counted."""
        now = self.clock()
        out = []
        with self._lock:
            for key, (t, payload) in list(self._latest.items()):
                if now - t > self.forget_s:
                    del self._latest[key]
                    continue
                try:
                    p = parse_key(key)
                    tel = decode(RobotTelemetry, payload)
                except WireError:
                    self.decode_errors += 1
                    del self._latest[key]  # counted once; the next good sample brings the robot back
                    continue
                labels = {
                    "client": p.robot or tel.client_uuid,
                    "model": p.model_id,
                    "revision": p.revision,
                    "service": p.service,
                }
                out.append((labels, now - t, tel))
        return out

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        names = ["client", "model", "revision", "service"]

        def gauge(name: str, doc: str, extra: list[str] | None = None) -> Any:
            return GaugeMetricFamily(PREFIX + name, doc, labels=names + (extra or []))

        def counter(name: str, doc: str) -> Any:
            return CounterMetricFamily(PREFIX + name, doc, labels=names)

        fams = {
            "staleness": gauge(
                "staleness_seconds",
                "Age of the source observation of the action the robot executes next "
                "(the design's session staleness; spikes = server side, flat = robot/network)",
            ),
            "heard": gauge("telemetry_age_seconds", "Seconds since this robot's last telemetry reached the exporter"),
            "state": gauge("state", "1 for the robot's current link state, 0 for the others", ["state"]),
            "state_age": gauge("state_age_seconds", "Seconds the robot has been in its current state"),
            "queue": gauge("queue_seconds", "Playback time of fresh actions queued on the robot"),
            "rtt": gauge(
                "rtt_seconds", "Round trip observation -> chunk measured on the robot, by quantile", ["quantile"]
            ),
            "network": gauge("network_seconds", "Median network time per chunk: RTT - server queue wait - inference"),
            "queue_wait": gauge(
                "server_queue_wait_seconds", "Median server queue wait of this robot's chunks (server-reported)"
            ),
            "inference": gauge(
                "server_inference_seconds", "Median inference time of this robot's chunks (server-reported)"
            ),
            "delay": gauge("delay_steps", "RTC delay hint the robot sends (control steps)"),
            "order": gauge(
                "action_order_checked",
                "1 when the server checked this robot's action names and order, 0 when only the dimension was checked",
            ),
            "episode": gauge("episode", "Current episode id"),
            "requests": counter("requests", "Observations the robot sent"),
            "errors": counter("errors", "Failed requests (timeouts, refused chunks)"),
            "fallbacks": counter("fallbacks", "Ticks that executed the fallback instead of a policy action"),
            "superseded": counter("superseded", "Observations the server replaced before serving (server-reported)"),
        }
        robots = self.robots()
        for labels, heard, t in robots:
            lv = [labels[n] for n in names]
            fams["staleness"].add_metric(lv, t.staleness_s)
            fams["heard"].add_metric(lv, heard)
            for st in STATES:
                fams["state"].add_metric(lv + [st], 1.0 if t.state == st else 0.0)
            fams["state_age"].add_metric(lv, t.state_age_s)
            fams["queue"].add_metric(lv, t.queue_s)
            fams["rtt"].add_metric(lv + ["0.5"], t.rtt_p50_ms / 1e3)
            fams["rtt"].add_metric(lv + ["0.95"], t.rtt_p95_ms / 1e3)
            fams["network"].add_metric(lv, t.network_ms_p50 / 1e3)
            fams["queue_wait"].add_metric(lv, t.queue_wait_ms_p50 / 1e3)
            fams["inference"].add_metric(lv, t.inference_ms_p50 / 1e3)
            fams["delay"].add_metric(lv, t.delay_steps)
            if t.action_order:
                fams["order"].add_metric(lv, 1.0 if t.action_order == "checked" else 0.0)
            fams["episode"].add_metric(lv, t.episode_id)
            fams["requests"].add_metric(lv, t.requests)
            fams["errors"].add_metric(lv, t.errors)
            fams["fallbacks"].add_metric(lv, t.fallback_count)
            fams["superseded"].add_metric(lv, t.superseded)
        yield from fams.values()
        robots_g = GaugeMetricFamily("lerobot_exporter_robots", "Robots whose telemetry the exporter holds")
        robots_g.add_metric([], len(robots))
        yield robots_g
        bad = CounterMetricFamily(
            "lerobot_exporter_decode_errors", "Telemetry samples that could not be decoded (dropped)"
        )
        bad.add_metric([], self.decode_errors)
        yield bad


class ExporterMetrics:
    """What `HealthServer` serves: the collector in its own registry."""

    def __init__(self, collector: RobotTelemetryCollector) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry()
        self.registry.register(collector)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` or `:PORT` (all interfaces) -> (host, port); a ValueError that says the form otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, e.g. 0.0.0.0:9200 or 127.0.0.1:9200")
    return (host.strip("[]") or "0.0.0.0"), int(port)


def run_exporter(
    settings: ZenohSettings,
    listen: str,
    forget_s: float,
    ready: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> int:
    """Subscribe to every robot's telemetry through the router and serve /metrics until stopped (SIGTERM/Ctrl-C)."""
    import signal

    from lerobot_policy_remote.server.metrics import HealthServer
    from lerobot_policy_remote.zenoh_config import open_session

    host, port = parse_listen(listen)
    collector = RobotTelemetryCollector(forget_s=forget_s)
    stop = stop or threading.Event()

    def health() -> tuple[bool, str]:
        return True, f"ok: {len(collector.robots())} robots"

    session = open_session(settings)
    try:
        session.declare_subscriber(
            ServiceKeys.any().robot("*", "telemetry"), lambda s: collector.add(str(s.key_expr), s.payload.to_bytes())
        )
        http = HealthServer(host, port, ExporterMetrics(collector), health).start()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        ready(
            f"Robot telemetry exporter up: metrics=http://{host}:{http.port}/metrics "
            f"healthz=http://{host}:{http.port}/healthz "
            f"via {', '.join(settings.connect_endpoints)} (robots forgotten after {forget_s:g}s without telemetry)"
        )
        try:
            while not stop.wait(0.5):
                pass
        finally:
            http.stop()
    finally:
        session.close()
    return 0
