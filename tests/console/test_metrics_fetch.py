"""Which `/metrics` URLs the console fetches, and that no server can stall or flood its scrapes.

Real local HTTP servers on 127.0.0.1: a healthy one, one that trickles its answer a byte at a time, one
that streams without end, one on a wrong path; and the console's real Zenoh source scraping them as
announced by replicas' status replies through the router.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from lerobot_fleet.data.metrics_fetch import MetricsTargets, Scraper, check_metrics_url, fetch_metrics
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings

BODY = b"# TYPE lerobot_policy_server_requests_total counter\nlerobot_policy_server_requests_total 42\n"


@contextmanager
def http_server(kind: str) -> Iterator[tuple[str, list[float]]]:
    """A real server on a free 127.0.0.1 port; yields its base URL and the times of the requests it got."""
    hits: list[float] = []
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits.append(time.monotonic())
            self.send_response(200)
            self.end_headers()
            try:
                if kind == "healthy":
                    self.wfile.write(BODY)
                elif kind == "trickle":  # a valid answer, one byte every 0.2 s: about 16 s in all
                    for b in BODY:
                        if stop.wait(0.2):
                            return
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                elif kind == "huge":  # a comment line without end, as fast as the socket takes it
                    self.wfile.write(b"# ")
                    chunk = b"x" * 65536
                    while not stop.is_set():
                        self.wfile.write(chunk)
            except OSError:  # the console hung up: what it should do
                pass

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}", hits
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    "url, ok",
    [
        ("http://10.0.0.5:9100/metrics", True),
        ("https://gpu-3.lab:8443/metrics", True),
        ("http://10.0.0.5/metrics", False),  # no port
        ("http://10.0.0.5:9100/admin", False),
        ("http://10.0.0.5:9100/metrics/", False),
        ("http://10.0.0.5:9100/metrics?x=1", False),
        ("http://10.0.0.5:9100/metrics#f", False),
        ("http://user:pw@10.0.0.5:9100/metrics", False),
        ("file:///etc/passwd", False),
        ("gopher://10.0.0.5:70/metrics", False),
        ("http://10.0.0.5:99999/metrics", False),
        ("", False),
    ],
)
def test_metrics_url_shape(url, ok):
    host, port, why = check_metrics_url(url)
    assert (why == "") is ok, why
    if ok:
        assert host and port


def test_a_replica_keeps_its_advertised_host_and_cannot_take_anothers():
    t = MetricsTargets()
    assert t.offer("a", "http://10.0.0.5:9100/metrics") == ""
    assert "advertised host" in t.offer("a", "http://169.254.169.254:80/metrics")  # moved elsewhere: refused
    assert t.offer("a", "http://10.0.0.5:9101/metrics") == ""  # same host, new port (a restart): fine
    assert "another replica" in t.offer("b", "http://10.0.0.5:9101/metrics")
    assert t.urls() == {"a": "http://10.0.0.5:9101/metrics"}
    t.forget("a")  # its token went: the next announcement is pinned afresh
    assert t.offer("a", "http://10.0.0.6:9100/metrics") == ""


def test_fetch_is_bounded_in_bytes_and_time():
    with (
        httpx.Client() as client,
        http_server("healthy") as (ok_url, _),
        http_server("trickle") as (slow_url, _),
        http_server("huge") as (huge_url, _),
    ):
        values, err = fetch_metrics(client, ok_url + "/metrics")
        assert err == "" and values == {"requests_total": 42.0}
        t0 = time.monotonic()
        values, err = fetch_metrics(client, slow_url + "/metrics", deadline_s=1.0)
        took = time.monotonic() - t0
        assert values is None and "too slow" in err and took < 1.6, (err, took)
        t0 = time.monotonic()
        values, err = fetch_metrics(client, huge_url + "/metrics", max_bytes=1_000_000, deadline_s=5.0)
        assert values is None and "too large" in err and time.monotonic() - t0 < 5.0, err


def test_one_slow_server_never_delays_anothers_scrape():
    """Rounds every 0.25 s while a trickling server holds its fetch for the whole deadline: the healthy
    server is scraped every round, on time. A scrape queued behind the slow one would leave a gap of a whole
    deadline (3 s); the bound, half of it, leaves room for a loaded box's scheduling."""
    got: dict[str, list[tuple[float, str]]] = {"ok": [], "slow": [], "huge": []}
    targets = MetricsTargets()
    with (
        http_server("healthy") as (ok_url, ok_hits),
        http_server("trickle") as (slow_url, _),
        http_server("huge") as (huge_url, _),
    ):
        for name, base in (("slow", slow_url), ("huge", huge_url), ("ok", ok_url)):
            assert targets.offer(name, base + "/metrics") == ""
        scraper = Scraper(
            targets, lambda r, v, e: got[r].append((time.monotonic(), e)), deadline_s=3.0, max_bytes=500_000
        )
        try:
            start = time.monotonic()
            rounds = 0
            while time.monotonic() - start < 2.0:
                scraper.round()
                rounds += 1
                time.sleep(0.25)
            wait_until(lambda: got["slow"], timeout=5, message="the slow scrape's verdict")
        finally:
            scraper.close()
    oks = [t for t, e in got["ok"] if e == ""]
    assert len(oks) >= rounds - 2, (len(oks), rounds)  # every round but the last, whatever the others do
    gaps = [b - a for a, b in zip(oks, oks[1:], strict=False)]
    assert max(gaps) < 1.5, gaps
    assert len(ok_hits) >= rounds - 2
    assert "too slow" in got["slow"][0][1]
    assert len(got["slow"]) <= 2  # never two fetches of one replica in flight: at most one per deadline
    assert got["huge"] and "too large" in got["huge"][0][1]


@pytest.mark.slow
def test_console_source_scrapes_healthy_servers_and_refuses_bad_urls(router, zenoh_client):
    keys = ServiceKeys.for_service("org/metrics-rules", "main", "scrape")
    s = zenoh_client()
    with (
        http_server("healthy") as (ok_url, ok_hits),
        http_server("trickle") as (slow_url, _),
        http_server("healthy") as (other_url, other_hits),
    ):
        servers = [
            FakeServer(s, keys, replica="m-ok", serve_obs=False, metrics_url=ok_url + "/metrics"),
            FakeServer(s, keys, replica="m-slow", serve_obs=False, metrics_url=slow_url + "/metrics"),
            FakeServer(s, keys, replica="m-path", serve_obs=False, metrics_url=other_url + "/admin/shutdown"),
            FakeServer(s, keys, replica="m-moves", serve_obs=False, metrics_url=other_url + "/metrics"),
        ]
        store = FleetStore()
        source = ZenohSource(
            ZenohSettings(mode="client", connect_endpoints=[router.endpoint], connect_timeout_ms=1000),
            status_period_s=0.3,
            scrape_period_s=0.3,
        )
        source.start(store)
        try:
            wait_until(
                lambda: (r := store.snapshot().server("m-ok")) and r.requests_per_s is not None,
                timeout=15,
                message="m-ok scraped twice",
            )
            moved_hits = wait_until(lambda: len(other_hits), timeout=10, message="m-moves scraped at its first host")
            # m-moves now names another host (same port): refused, and no longer fetched
            servers[3].metrics_url = other_url.replace("127.0.0.1", "localhost") + "/metrics"
            wait_until(
                lambda: "advertised host" in store.snapshot().server("m-moves").metrics_error,
                timeout=10,
                message="the moved URL refused",
            )
            n_ok = len(ok_hits)
            time.sleep(1.5)  # a fixed window to count m-ok's scrapes in (a rate, not a condition)
            assert len(ok_hits) >= n_ok + 3  # on time (every 0.3 s) while m-slow trickles
            snap = store.snapshot()
            assert "path must be exactly /metrics" in snap.server("m-path").metrics_error
            assert len(other_hits) <= moved_hits + 1 + 1  # at most the fetches already started before the refusal
            assert snap.server("m-ok").metrics_error == ""
        finally:
            source.stop()
            for srv in servers:
                srv.close()
