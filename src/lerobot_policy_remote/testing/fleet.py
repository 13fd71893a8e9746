r"""A synthetic fleet for console load tests: N robots and M replicas on one Zenoh client session.

Robots are :class:`FakeRobot` s without an action subscriber (token + telemetry); replicas are
:class:`FakeServer` s without an observation subscriber (token, status/drain queryables, audit lines),
each with a Prometheus-style `/metrics` endpoint on its own local port (the console scrapes only
`http://host:port/metrics`, one host:port per replica). Telemetry `seq` carries
the publisher's CLOCK_MONOTONIC in ms, so a console on the same host can measure delivery lag.

Run as a process (what `bench/console.py` does)::

    python -m lerobot_policy_remote.testing.fleet --endpoint tcp/127.0.0.1:7447 \
        --robots 500 --servers 20 --hz 10 --seconds 60

It prints `PUBLISHER READY` once everything is declared and `PUBLISHER DONE rounds=.. achieved_hz=..` at the end.
"""

from __future__ import annotations

import argparse
import http.server
import threading
import time
from typing import Any

from ..wire.codec import pack, to_dict
from ..wire.keys import ServiceKeys
from ..wire.messages import RobotTelemetry
from ..zenoh_config import ZenohSettings, open_session
from .fake_robot import FakeRobot
from .fake_server import FakeServer

# 17 of 20 robots stream; the rest show each fault state, rotating every 50 rounds.
STATES = ["STREAMING"] * 17 + ["DEGRADED", "STALLED", "RECONNECTING"]


class FleetPublisher:
    """`robots` robots spread round-robin over `servers` replicas of one service, published round by round."""

    def __init__(
        self,
        endpoint: str,
        robots: int,
        servers: int,
        *,
        model: str = "bench/act",
        revision: str = "main",
        service: str = "bench task",
        max_sessions: int = 32,
        chunk: int = 50,
        first: int = 0,
        server_prefix: str = "bench-gpu",
    ) -> None:
        """`first`, `server_prefix`: where this publisher's robot ids start and how its replicas are named, so several
        publisher processes together make one fleet (`bench/console.py --publishers`)."""
        self.keys = ServiceKeys.for_service(model, revision, service)
        self.session = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint]))
        self.replicas = [f"{server_prefix}-{i:02d}" for i in range(servers)]
        self.robot_ids = [f"bench-robot-{i:04d}" for i in range(first, first + robots)]
        self.owner = {rid: self.replicas[i % servers] for i, rid in enumerate(self.robot_ids)}
        self.requests = dict.fromkeys(self.replicas, 0)  # what each replica's /metrics reports
        self._httpds = {rep: _metrics_server(self.requests, rep) for rep in self.replicas}
        self.servers = {
            rep: FakeServer(
                self.session,
                self.keys,
                replica=rep,
                chunk=chunk,
                max_sessions=max_sessions,
                inference_ms=20.0,
                metrics_url=f"http://127.0.0.1:{self._httpds[rep].server_address[1]}/metrics",
                serve_obs=False,
            )
            for rep in self.replicas
        }
        for rid in self.robot_ids:
            self.servers[self.owner[rid]].add_session(rid, f"s-{rid}")
        self.robots = {rid: FakeRobot(self.session, self.keys, rid, listen=False) for rid in self.robot_ids}
        self.rounds = 0
        self._maps: list[dict[str, object]] | None = None  # each robot's telemetry fields, packed as they are
        self._pubs: list[Any] = []

    def telemetry(self, i: int, rid: str, n: int) -> RobotTelemetry:
        """Robot `i`'s sample for round `n`: states rotate, RTTs wander, `seq` is the monotonic send time in ms."""
        return RobotTelemetry(
            client_uuid=rid,
            state=STATES[(i + n // 50) % len(STATES)],
            replica=self.owner[rid],
            session_id=f"s-{rid}",
            episode_id=n // 100,
            rtt_p50_ms=25.0 + (i * 7 + n) % 30,
            rtt_p95_ms=60.0 + (i + n) % 40,
            queue_s=0.8,
            delay_steps=1 + (n + i) % 3,
            requests=n,
            superseded=n // 20,
            seq=time.monotonic_ns() // 1_000_000,
        )

    def publish_round(self) -> None:
        """One round: a telemetry sample per robot, an audit line and request-counter step per replica.

        Each robot's sample is its `telemetry(i, rid, n)` encoded with the product's packer, built from a per-robot
        field map updated in place (the same bytes `encode()` makes, without walking the dataclass each time:
        the publisher must reach 20,000 samples/s); `test_testing_kit` decodes them."""
        self.rounds += 1
        n = self.rounds
        if self._maps is None:
            self._maps = [to_dict(self.telemetry(i, rid, 0)) for i, rid in enumerate(self.robot_ids)]
            self._pubs = [self.session.declare_publisher(self.keys.robot(rid, "telemetry")) for rid in self.robot_ids]
        now_ms = time.monotonic_ns() // 1_000_000
        n_states = len(STATES)
        for i, (d, pub) in enumerate(zip(self._maps, self._pubs, strict=True)):
            d["state"] = STATES[(i + n // 50) % n_states]
            d["episode_id"] = n // 100
            d["rtt_p50_ms"] = 25.0 + (i * 7 + n) % 30
            d["rtt_p95_ms"] = 60.0 + (i + n) % 40
            d["delay_steps"] = 1 + (n + i) % 3
            d["requests"] = n
            d["superseded"] = n // 20
            d["seq"] = now_ms
            pub.put(pack(d))
        per_replica = len(self.robot_ids) // max(1, len(self.replicas))
        for rep, server in self.servers.items():
            self.requests[rep] += per_replica
            server.audit(self.robot_ids[n % len(self.robot_ids)], seq_id=n, inference_ms=20.0)

    def run(self, hz: float, seconds: float, stop: threading.Event | None = None) -> float:
        """Publish rounds at `hz` for `seconds` (or until `stop`); returns the achieved rate."""
        period, start = 1.0 / hz, time.monotonic()
        first = self.rounds
        next_note = start
        while time.monotonic() - start < seconds and not (stop is not None and stop.is_set()):
            self.publish_round()
            if time.monotonic() >= next_note:  # what was sent, for the bench to prove its load (CLOCK_MONOTONIC)
                next_note += 1.0
                print(
                    f"PUBLISHER PROGRESS rounds={self.rounds} samples={self.rounds * len(self.robot_ids)} "
                    f"mono={time.monotonic():.3f}",
                    flush=True,
                )
            delay = start + (self.rounds - first) * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing, not synchronisation
        return (self.rounds - first) / max(1e-9, time.monotonic() - start)

    def close(self) -> None:
        for pub in self._pubs:
            pub.undeclare()
        for robot in self.robots.values():
            robot.close()
        for server in self.servers.values():
            server.close()
        for httpd in self._httpds.values():
            httpd.shutdown()
            httpd.server_close()
        self.session.close()


def _metrics_server(requests: dict[str, int], rep: str) -> http.server.ThreadingHTTPServer:
    """`GET /metrics` -> replica `rep`'s request counter in Prometheus text format, on a free port."""

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
            body = (
                "# TYPE lerobot_policy_server_requests_total counter\n"
                f"lerobot_policy_server_requests_total {requests.get(rep, 0)}\n"
                "# TYPE lerobot_policy_server_errors_total counter\nlerobot_policy_server_errors_total 0\n"
            ).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=httpd.serve_forever, name="fleet-metrics", daemon=True).start()
    return httpd


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Publish a synthetic fleet (robots + replicas) through a Zenoh router.")
    p.add_argument("--endpoint", required=True, help="router endpoint, e.g. tcp/127.0.0.1:7447")
    p.add_argument("--robots", type=int, default=500)
    p.add_argument("--servers", type=int, default=20)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--first", type=int, default=0, help="index of this publisher's first robot id")
    p.add_argument(
        "--server-prefix", default="bench-gpu", help="this publisher's replica names: PREFIX-00, PREFIX-01, ..."
    )
    args = p.parse_args(argv)
    fleet = FleetPublisher(args.endpoint, args.robots, args.servers, first=args.first, server_prefix=args.server_prefix)
    try:
        print("PUBLISHER READY", flush=True)
        rate = fleet.run(args.hz, args.seconds)
        print(
            f"PUBLISHER DONE rounds={fleet.rounds} achieved_hz={rate:.2f} samples_per_s={rate * args.robots:.0f}",
            flush=True,
        )
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
