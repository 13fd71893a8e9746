"""Prometheus parsing/scraping (real prometheus_client output, a real local HTTP server) and JSONL replay."""

from __future__ import annotations

import http.server
import json
import threading

import httpx
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.prometheus import parse_metrics, scrape
from lerobot_fleet.data.sources.replay import ReplaySource
from lerobot_fleet.data.store import FleetStore
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from lerobot_policy_remote.testing.procs import free_port


def _exposition() -> str:
    reg = CollectorRegistry()
    req = Counter("lerobot_policy_server_requests", "requests", ["session"], registry=reg)
    req.labels("a").inc(3)
    req.labels("b").inc(4)
    Gauge("lerobot_policy_server_active_sessions", "active", registry=reg).set(2)
    h = Histogram("lerobot_policy_server_inference_seconds", "inference", registry=reg)
    h.observe(0.02)
    Counter("other_total_things", "not ours", registry=reg).inc()
    return generate_latest(reg).decode()


def test_parse_metrics_sums_labels_and_skips_buckets():
    values = parse_metrics(_exposition())
    assert values["requests_total"] == 7.0
    assert values["active_sessions"] == 2.0
    assert values["inference_seconds_count"] == 1.0
    assert not any(k.endswith(("_bucket", "_created")) for k in values)
    assert not any("other" in k for k in values)


def test_scrape_real_http_and_failure():
    body = _exposition().encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with httpx.Client(timeout=2.0) as client:
            values, err = scrape(client, f"http://127.0.0.1:{srv.server_port}/metrics")
            assert err == "" and values["requests_total"] == 7.0
            values, err = scrape(client, f"http://127.0.0.1:{free_port()}/metrics")
            assert values is None and "ConnectError" in err
    finally:
        srv.shutdown()


def test_replay_jsonl(tmp_path):
    base = "@lerobot/m/main/t"
    events = [
        {"t": 0.0, "kind": "alive", "key": f"{base}/robot/r1/alive", "alive": True},
        {
            "t": 0.1,
            "kind": "telemetry",
            "key": f"{base}/robot/r1/telemetry",
            "data": {"client_uuid": "r1", "state": "DEGRADED", "episode_id": 3},
        },
        {
            "t": 0.2,
            "kind": "status",
            "key": f"{base}/server/gpu-0/status",
            "data": {"replica": "gpu-0", "max_sessions": 4, "active_sessions": 1, "warmed_up": True},
        },
        {"t": 0.3, "kind": "telemetry", "key": f"{base}/robot/r2/telemetry", "data": {"client_uuid": "r2", "state": 7}},
    ]
    path = tmp_path / "fleet.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    store = FleetStore()
    src = ReplaySource(path, speed=0)
    assert src.can_act is False
    src.start(store)
    snap = store.snapshot()
    assert snap.connection == "replay"
    assert snap.robot("r1").state is RobotState.DEGRADED and snap.robot("r1").episode_id == 3
    assert snap.server("gpu-0").max_sessions == 4
    assert snap.robot("r2") is None and any("RobotTelemetry.state" in n for n in snap.notes)


def test_parse_metrics_reads_a_real_server_exposition_as_prometheus_client_does():
    """The fast line reader and the library's parser agree on a real server's /metrics (340 robots' series)."""
    from lerobot_fleet.data.sources.prometheus import _parse_with_library
    from lerobot_fleet.data.store import METRIC_PREFIX

    from lerobot_policy_remote.server.metrics import ServerMetrics

    m = ServerMetrics("r0")
    for i in range(340):
        m.requests.labels(f"arm-{i:04d}").inc(i)
        m.superseded.labels(f"arm-{i:04d}").inc(1)
    text = m.render().decode()
    assert parse_metrics(text) == _parse_with_library(text, METRIC_PREFIX)
    assert parse_metrics(text)["requests_total"] == sum(range(340))


def test_parse_metrics_odd_label_values_and_unreadable_lines():
    text = (
        "# HELP lerobot_policy_server_requests_total x\n"
        'lerobot_policy_server_requests_total{client="a} b \\"q\\""} 2.0\n'
        'lerobot_policy_server_requests_total{client="c"} 3 1700000000000\n'
        "lerobot_policy_server_active_sessions 4\n"
    )
    assert parse_metrics(text) == {"requests_total": 5.0, "active_sessions": 4.0}
    import pytest

    with pytest.raises(ValueError):  # not a number: the library's parser has the last word, and refuses it
        parse_metrics("lerobot_policy_server_active_sessions many\n")
