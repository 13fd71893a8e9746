"""Prometheus metrics (own registry per server) and the tiny /healthz + /metrics HTTP endpoint."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from .compiled import EngineStats

PREFIX = "lerobot_policy_server_"
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
_LAT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServerMetrics:
    """Per-client labels only for live sessions (removed on close), so cardinality stays <= max_sessions."""

    def __init__(self, replica: str) -> None:
        r = self.registry = CollectorRegistry()
        self.replica = replica
        self.requests = Counter(
            PREFIX + "requests_total", "Inference requests served (chunks sent)", ["client"], registry=r
        )
        self.errors = Counter(PREFIX + "errors_total", "Refused or failed requests by reason", ["reason"], registry=r)
        self.superseded = Counter(
            PREFIX + "superseded_total", "Observations replaced in a mailbox before inference", ["client"], registry=r
        )
        self.unknown = Counter(
            PREFIX + "dropped_unknown_client_total", "Observations from robots without a session here", registry=r
        )
        self.opened = Counter(PREFIX + "sessions_opened_total", "Sessions opened", registry=r)
        self.closed = Counter(PREFIX + "sessions_closed_total", "Sessions closed by reason", ["reason"], registry=r)
        self.rejected = Counter(
            PREFIX + "sessions_rejected_total", "Session opens refused by code", ["code"], registry=r
        )
        self.active = Gauge(PREFIX + "active_sessions", "Sessions currently open", registry=r)
        self.max_sessions = Gauge(PREFIX + "max_sessions", "Session capacity of this replica", registry=r)
        self.load = Gauge(PREFIX + "server_load", "Fraction of recent wall time the worker spent inferring", registry=r)
        self.draining = Gauge(PREFIX + "draining", "1 while draining", registry=r)
        self.cordoned = Gauge(PREFIX + "cordoned", "1 while cordoned (no new sessions)", registry=r)
        self.worker_alive = Gauge(PREFIX + "worker_alive", "1 while the inference worker thread runs", registry=r)
        self.queue_wait = Histogram(
            PREFIX + "queue_wait_seconds", "Observation arrival to inference start", buckets=_LAT_BUCKETS, registry=r
        )
        self.inference = Histogram(
            PREFIX + "inference_seconds", "Preprocess + model + postprocess time", buckets=_LAT_BUCKETS, registry=r
        )
        self.batch_size = Histogram(
            PREFIX + "batch_size", "Robots per forward pass", buckets=_BATCH_BUCKETS, registry=r
        )
        self.batch_inference = Histogram(
            PREFIX + "batch_inference_seconds",
            "Time of one forward pass (pre + model + post, whole batch)",
            buckets=_LAT_BUCKETS,
            registry=r,
        )
        self.info = Gauge(
            PREFIX + "info",
            "Static server facts",
            ["replica", "policy_type", "fingerprint", "serving_mode"],
            registry=r,
        )
        self._engine: Callable[[], EngineStats] | None = None
        r.register(_EngineCollector(self))
        self._served = 0  # every chunk counted since start (requests_served), closed sessions' included
        # client -> its `requests_total` child: `labels()` per chunk hashed and locked each time
        # (forget_client drops it)
        self._request_children: dict[str, Any] = {}

    def watch_engine(self, stats: Callable[[], EngineStats]) -> None:
        """Read the serving path's counters at each scrape (the worker updates them; nothing is copied per pass)."""
        self._engine = stats

    def count_request(self, client: str) -> None:
        """One chunk served to `client` (the worker, per chunk)."""
        child = self._request_children.get(client)
        if child is None:
            child = self._request_children[client] = self.requests.labels(client)
        child.inc()
        self._served += 1

    @staticmethod
    def observe_n(histogram: Histogram, amount: float, n: int) -> None:
        """`n` observations of the same `amount` (a batch's pass time): one bucket lookup, as `observe` does it."""
        buckets, bounds, total = (getattr(histogram, a, None) for a in ("_buckets", "_upper_bounds", "_sum"))
        if n == 1 or buckets is None or bounds is None or total is None:
            for _ in range(n):
                histogram.observe(amount)
            return
        total.inc(amount * n)
        for i, bound in enumerate(bounds):
            if amount <= bound:
                buckets[i].inc(n)
                break

    def forget_client(self, client: str) -> None:
        self._request_children.pop(client, None)
        for metric in (self.requests, self.superseded):
            try:
                metric.remove(client)
            except KeyError:
                pass

    def requests_served(self) -> float:
        """Every request served since start, closed sessions included (`requests_total` drops a client's label
        set when its session closes, so its sum can go down; this never does). A running count: summing the
        label sets walked every live client's sample each second."""
        return float(self._served)

    def value(self, sample: str, **labels: str) -> float:
        """The current value of one sample, named without the prefix as /metrics shows it
        (`value("dropped_unknown_client_total")`, `value("errors_total", reason="oversize")`);
        0.0 when that sample does not exist yet (a label never seen)."""
        got = self.registry.get_sample_value(PREFIX + sample, labels or None)
        return 0.0 if got is None else got

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector(Collector):
    """`engine_*`: which pass serves and what the compiled path did (server/compiled.py), read at scrape time."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        read = self._metrics._engine
        if read is None:
            return
        stats = read()
        info = GaugeMetricFamily(PREFIX + "engine", "1 for the pass that serves: compiled or eager", labels=["path"])
        info.add_metric([stats.path], 1.0)
        yield info
        for name, text, value in (
            ("engine_compiles", "Graphs compiled for the model (warm-up's included; none after it)", stats.compiles),
            ("engine_graph_replays", "Passes served by a compiled graph (a CUDA graph on a GPU)", stats.replays),
            ("engine_eager_fallbacks", "Passes served eagerly while the compiled path serves", stats.fallbacks),
        ):
            family = CounterMetricFamily(PREFIX + name, text)
            family.add_metric([], float(value))
            yield family


class Renders(Protocol):
    """What /metrics serves: the server's metrics, or the fleet exporter's."""

    def render(self) -> bytes: ...


class HealthServer:
    """GET /healthz (200 ok / 503 reason) and GET /metrics on a daemon thread."""

    def __init__(self, host: str, port: int, metrics: Renders, health: Callable[[], tuple[bool, str]]) -> None:
        outer_metrics, outer_health = metrics, health

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                if self.path.startswith("/healthz"):
                    ok, why = outer_health()
                    body, code, ctype = (why + "\n").encode(), (200 if ok else 503), "text/plain; charset=utf-8"
                elif self.path.startswith("/metrics"):
                    body, code, ctype = outer_metrics.render(), 200, CONTENT_TYPE_LATEST
                else:
                    body, code, ctype = b"not found: use /healthz or /metrics\n", 404, "text/plain"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # keep scrapes out of the server log
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="health-http", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
